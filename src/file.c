/* file: a whole file read into memory, for lfepolld and lfbench alike. */
#include "file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SIZE_HINT 4096 /* first buffer when fstat gives no size (/proc, a pipe) */

/* read(2) with EINTR retried: a signal (SIGHUP's reload, the watchdog's) is not a failure. */
static ssize_t read_some(int fd, void *buf, size_t n)
{
    ssize_t r;

    while ((r = read(fd, buf, n)) < 0 && errno == EINTR)
        ;
    return r;
}

char *file_read(const char *path, size_t max, size_t *len, char *err, size_t errlen)
{
    struct stat st;
    char *buf = NULL, *grown, c;
    size_t cap, n = 0;
    ssize_t r;
    int fd, e;

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        e = errno;
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(e));
        errno = e;
        return NULL;
    }
    if (fstat(fd, &st) < 0) {
        e = errno;
        goto out_close;
    }
    if (S_ISDIR(st.st_mode)) {
        e = EISDIR;
        goto out_close;
    }
    if (S_ISREG(st.st_mode) && (unsigned long long)st.st_size > max) {
        e = EFBIG; /* refused before a gigabyte is read only to be thrown away */
        goto out_close;
    }
    cap = st.st_size > 0 ? (size_t)st.st_size : SIZE_HINT;
    cap = (cap < max ? cap : max) + 1; /* + the NUL */
    if (!(buf = malloc(cap))) {
        e = ENOMEM;
        goto out_close;
    }
    for (;;) {
        if (n + 1 < cap) {
            if ((r = read_some(fd, buf + n, cap - 1 - n)) < 0) {
                e = errno;
                goto out_free;
            }
            if (r == 0)
                break;
            n += (size_t)r;
            continue;
        }
        /* Full: one byte more says whether that was the end (the size hint was right, as it is
         * for a regular file: no second buffer), or the file goes past max, or it grew. */
        if ((r = read_some(fd, &c, 1)) < 0) {
            e = errno;
            goto out_free;
        }
        if (r == 0)
            break;
        if (n == max) {
            e = EFBIG;
            goto out_free;
        }
        cap += cap < max - n ? cap : max - n;
        if (!(grown = realloc(buf, cap))) {
            e = ENOMEM;
            goto out_free;
        }
        buf = grown;
        buf[n++] = c;
    }
    close(fd);
    buf[n] = '\0';
    *len = n;
    return buf;

out_free:
    free(buf);
out_close:
    close(fd);
    if (e == EFBIG)
        snprintf(err, errlen, "cannot read %s: over %zu bytes", path, max);
    else
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(e));
    errno = e;
    return NULL;
}
