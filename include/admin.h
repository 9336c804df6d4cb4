/* admin: the --admin HTTP/1.1 listener (GET /metrics, /health, /stats), served by one thread
 * of its own with its own epoll: never on the request path, it only reads what workers publish. */
#ifndef LFE_ADMIN_H
#define LFE_ADMIN_H

#include <stddef.h>

struct admin;
struct server;

#define ADMIN_MAX_CONNS 32     /* admin connections at once; the oldest makes room */
#define ADMIN_MAX_REQUEST 8192 /* request line and headers; more is answered 431 */
#define ADMIN_TIMEOUT_MS 5000  /* to send a whole request, then to read the answer */
#define ADMIN_RETRY_MS 100     /* accept failed (EMFILE): the listener rests this long */
/* Descriptors the admin thread may hold: its connections, one more accepted to make room, the
 * listener, its epoll and two eventfds. main keeps them out of --max-conns. */
#define ADMIN_FDS (ADMIN_MAX_CONNS + 5)

/* Listens on hostport (as --listen takes it) for the admin thread of s, or on fd when it is not
 * -1 (a listening socket a --takeover predecessor handed over, bound there; taken over even on
 * failure). /health answers 503 while s drains or while a worker has been inside one batch
 * longer than stall_ms. Returns the admin, or NULL with one line in err (a port in use, an
 * address not of this machine). */
struct admin *admin_new(const char *hostport, int fd, struct server *s, long stall_ms, char *err,
                        size_t errlen);

/* The listening socket (for --takeover to hand over), -1 once released. */
int admin_listener(const struct admin *a);

/* A successor took the listener over: this instance stops accepting on it and closes its copy
 * (the admin thread does, after EPOLL_CTL_DEL: the socket lives on in the successor, so closing
 * the descriptor alone would leave it in this epoll set). Connections already accepted are
 * answered. NULL is a no-op. */
void admin_release(struct admin *a);

/* The address it listens on, "ADDR:PORT" (the port chosen when 0 was asked). */
void admin_name(const struct admin *a, char *buf, size_t len);

/* Creates the admin thread, pinned to cpus when not NULL (a cpu_set_t *). 0 or -errno. */
int admin_start(struct admin *a, const void *cpus);

/* Stops and joins the thread, closes every admin connection and the listener, frees a. NULL is
 * a no-op. */
void admin_free(struct admin *a);

#endif /* LFE_ADMIN_H */
