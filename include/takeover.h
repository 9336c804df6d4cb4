/* takeover: --takeover PATH, listening sockets handed from a running lfepolld to its successor
 * over a Unix socket (SCM_RIGHTS), so that a restart refuses no connection: both processes hold
 * the same sockets, and the kernel's accept queues outlive the old one. */
#ifndef LFE_TAKEOVER_H
#define LFE_TAKEOVER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define TAKEOVER_MAX_FDS 65 /* OPT_MAX_LFDS listeners (shards) and the --admin listener */

struct takeover;

/* At start, before --user: when an lfepolld serves path, asks it for its listeners. Only one
 * whose socket there listened as this process's uid or root is asked (SO_PEERCRED), and each
 * step has one deadline (5 s). Returns how many usable ones arrived (in fds: listening TCP
 * sockets, made non-blocking; any other descriptor is closed with a log line), with *conn the
 * connection to say ready on (takeover_ready); 0 with *conn -1 when nobody serves path (no file,
 * or a stale one); -1 with one line in err when the exchange fails, the process there is of
 * another uid, or path is there and not a socket (a file, a directory, a symbolic link: never
 * replaced; nothing was taken: the caller stops). */
int takeover_receive(const char *path, int *fds, int max, int *conn, char *err, size_t errlen);

/* Whether listening socket fd is bound where hostport (as --listen takes it) asks: the same
 * address, and the same port unless hostport's is 0. */
bool takeover_match(int fd, const char *hostport);

/* Tells the predecessor on conn that this instance serves: it stops accepting and drains.
 * Closes conn. */
void takeover_ready(int conn);

/* Before --user drops privileges: binds path's socket under a temporary name beside it (mode
 * 0600, then owned by owner:group; (uid_t)-1 and (gid_t)-1 leave it as it is) and listens on it,
 * so that a successor sees this process's uid (SO_PEERCRED reports the listener's credentials as
 * of listen()). Records geteuid(): that uid and root may take over. Returns the handle, or NULL
 * with one line in err. */
struct takeover *takeover_open(const char *path, uid_t owner, gid_t group, char *err,
                               size_t errlen);

/* Once this instance serves: serves t's socket for successors from a thread of its own and
 * renames it over path (atomically: path names the old instance until then; refused when path
 * has become something other than a socket). A successor of
 * another uid than takeover_open's (or root) is refused with a log line; up to 8 are served at
 * once, each step with one deadline (5 s for the request, 60 s for READY). A successor that
 * says READY gets lfds[0..n) (which the caller keeps open until takeover_free) and this process
 * sends itself SIGTERM. Returns 0, or -1 with one line in err (takeover_free still owed). */
int takeover_serve(struct takeover *t, const int *lfds, int n, char *err, size_t errlen);

/* True once a successor said READY and this process sent itself the SIGTERM that stops it. */
bool takeover_handed(const struct takeover *t);

/* Stops and joins the thread that serves successors (idempotent; NULL: false). Returns true when
 * a successor was handed the listeners and has not said READY: it may still serve them, so
 * this instance's stop must leave them as they are. Main thread. */
bool takeover_stop(struct takeover *t);

/* Stops and joins the thread (takeover_stop) and removes path if it is still this instance's socket
 * (a successor's is left alone), or the temporary name if it was never renamed. NULL is a no-op. */
void takeover_free(struct takeover *t);

#endif /* LFE_TAKEOVER_H */
