/* pidfile: --pid-file, the file that names the running lfepolld for kill(1) and scripts. */
#ifndef LFE_PIDFILE_H
#define LFE_PIDFILE_H

#include <stddef.h>

/* Whether a start may (re)write path: 0 when it is absent, or names a process that is gone or
 * is not an lfepolld (a stale file, left by a kill -9 or a crash). -EEXIST with one line in err
 * when it names a live lfepolld, -EINVAL when it holds something else than a pid (a typo for
 * another file: never overwritten), -ENOENT when its directory is absent or not one (the line
 * says which, and how systemd makes one under /run), or -errno when it cannot be read. Main
 * thread, at start. */
int pidfile_check(const char *path, char *err, size_t errlen);

/* Writes this process's pid and a newline to path, whole or not at all (a temporary file in
 * the same directory, renamed over it), mode 0644, as the caller's uid. 0, or -errno with one
 * line in err. */
int pidfile_write(const char *path, char *err, size_t errlen);

/* Removes path if it still names this process (a successor of --takeover may have replaced
 * it). Errors are ignored: the exit goes on. */
void pidfile_remove(const char *path);

#endif /* LFE_PIDFILE_H */
