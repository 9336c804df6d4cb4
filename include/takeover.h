/* takeover: --takeover PATH, listening sockets handed from a running lfepolld to its successor
 * over a Unix socket (SCM_RIGHTS), so that a restart refuses no connection: both processes hold
 * the same sockets, and the kernel's accept queues outlive the old one. */
#ifndef LFE_TAKEOVER_H
#define LFE_TAKEOVER_H

#include <stdbool.h>
#include <stddef.h>

#define TAKEOVER_MAX_FDS 17 /* OPT_MAX_LISTEN listeners and the --admin listener */

struct takeover;

/* At start: when an lfepolld serves path, asks it for its listeners. Returns how many arrived
 * (in fds), with *conn the connection to say ready on (takeover_ready); 0 with *conn -1 when
 * nobody serves path (no file, or a stale one); -1 with one line in err when the exchange fails
 * (nothing was taken: the caller stops). */
int takeover_receive(const char *path, int *fds, int max, int *conn, char *err, size_t errlen);

/* Whether listening socket fd is bound where hostport (as --listen takes it) asks: the same
 * address, and the same port unless hostport's is 0. */
bool takeover_match(int fd, const char *hostport);

/* Tells the predecessor on conn that this instance serves: it stops accepting and drains.
 * Closes conn. */
void takeover_ready(int conn);

/* Serves path for a successor from a thread of its own: hands it lfds[0..n) (which the caller
 * keeps open until takeover_free) and, once the successor says it is ready, sends SIGTERM to this
 * process. path is replaced atomically (a temporary name renamed over it). Returns the handle, or
 * NULL with one line in err. */
struct takeover *takeover_serve(const char *path, const int *lfds, int n, char *err, size_t errlen);

/* True once a successor said READY and this process sent itself the SIGTERM that stops it. */
bool takeover_handed(const struct takeover *t);

/* Stops and joins the thread and removes path if it is still this instance's socket (a
 * successor's is left alone). NULL is a no-op. */
void takeover_free(struct takeover *t);

#endif /* LFE_TAKEOVER_H */
