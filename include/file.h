/* file: a whole file read into memory (a Lua script, a sysctl.conf, a payload), for lfepolld and
 * lfbench alike. */
#ifndef LFE_FILE_H
#define LFE_FILE_H

#include <stddef.h>
#include <stdint.h>

/* For max: no limit but memory. */
#define FILE_ANY_SIZE (SIZE_MAX / 2)

/* Reads the file at path to its end, at most max bytes (max < SIZE_MAX: FILE_ANY_SIZE for no
 * limit). Returns a malloc'd buffer the caller frees, NUL-terminated after its *len bytes (which
 * may hold NULs of their own; an empty file is "" with *len 0). On failure returns NULL, *len
 * untouched, errno set and one line in err (NULL with errlen 0 for none): "cannot open PATH:
 * reason" when open(2) failed (ENOENT, EACCES...), else "cannot read PATH: reason" with errno
 * EISDIR for a directory, EFBIG for a file over max (a regular file is refused by its size
 * before a byte is read), ENOMEM, or read(2)'s. The size fstat(2) gives is only a hint: a /proc
 * file or a pipe is read to its end too. EINTR is retried. Thread-safe. */
char *file_read(const char *path, size_t max, size_t *len, char *err, size_t errlen);

#endif /* LFE_FILE_H */
