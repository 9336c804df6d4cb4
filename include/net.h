/* net: listening sockets, the accept(2) wrapper and a socket's addresses as text; the edge cases
 * of each live here. */
#ifndef LFE_NET_H
#define LFE_NET_H

#include <stdbool.h>
#include <stddef.h>

/* Resolves hostport ("127.0.0.1:9876", "[::1]:0", "localhost:9876"), then socket, SO_REUSEADDR,
 * IPV6_V6ONLY for IPv6, TCP_NODELAY (Linux copies it to accepted sockets: no setsockopt per
 * connection), bind and listen(backlog). The socket is non-blocking and close-on-exec.
 * Returns the fd, or -errno with one line in err saying what failed and what to do
 * (EADDRINUSE: "port in use"; a failed setsockopt names its option: none is optional). */
int net_listen(const char *hostport, int backlog, char *err, size_t errlen);

/* The same, with SO_REUSEPORT when reuseport (--reuseport): several processes may then listen
 * on one port, the kernel spreading new connections between their sockets. */
int net_listen_reuseport(const char *hostport, int backlog, bool reuseport, char *err,
                         size_t errlen);

/* A socket bound to hostport as net_listen would bind it, but not listening and without
 * SO_REUSEPORT: it fails with "port in use" wherever a listener holds the port, a group of
 * SO_REUSEPORT listeners included, and while it stays open no listener without SO_REUSEADDR
 * can take the port. Shards are then bound to its address (net_listen_shard) and it is
 * closed: so several shards never join a group some other process already listens in.
 * Returns the fd, or -errno with one line in err. */
int net_claim(const char *hostport, char *err, size_t errlen);

/* Whether fd carries SO_REUSEPORT. */
bool net_reuseport(int fd);

/* Another listening socket at like's address and port (like: a listener with SO_REUSEPORT, or
 * a net_claim socket): the same options, SO_REUSEPORT, listen(backlog). The kernel spreads
 * new connections over the listeners of the group (a hash of the client's address and port).
 * Returns the fd, or -errno with one line in err ("port in use" for EADDRINUSE). */
int net_listen_shard(int like, int backlog, char *err, size_t errlen);

/* Makes listener lfd drop every new SYN (a classic BPF socket filter) while the handshakes
 * already under way complete into its accept queue: what a drain accepts before it closes the
 * listener, so that closing it resets nothing that was queued. Returns 0 or -errno. */
int net_refuse_syns(int lfd);

/* Whether this process may attach net_refuse_syns's filter: since Linux commit 5d39580f68e6 a
 * socket filter on a TCP socket needs CAP_NET_ADMIN (-EPERM without it: a process that dropped
 * to --user, or never was root). Tried on a socket of its own. Returns 0 or -errno. */
int net_can_refuse_syns(void);

/* Whether listener lfd carries exactly net_refuse_syns's filter: left on a socket that outlived
 * a stop (one from systemd's socket activation, before lfepolld left those as they came). */
bool net_refuses_syns(int lfd);

/* Takes lfd's socket filter off (net_refuses_syns's). Returns 0 or -errno. */
int net_accept_syns(int lfd);

/* Whether listener lfd defers accepting (TCP_DEFER_ACCEPT set). */
bool net_defers(int lfd);

/* accept4(SOCK_NONBLOCK|SOCK_CLOEXEC) on a non-blocking listener. Retries EINTR and
 * ECONNABORTED (the peer gave up while queued: nothing to report). Returns the new fd, or
 * -EAGAIN when the queue is empty, or another -errno (EMFILE/ENFILE/ENOBUFS/ENOMEM: out of
 * resources, the caller pauses; a network error of the new connection: it is lost, go on;
 * anything else: the listener is refused, the caller pauses). Thread-safe. */
int net_accept(int lfd);

/* Formats fd's local address as "ADDR:PORT" (IPv4) or "[ADDR]:PORT" (IPv6) into buf, cut to
 * len; "?" when getsockname fails or the address is of another family. Thread-safe. */
void net_local_name(int fd, char *buf, size_t len);

/* The same for the address of fd's peer (getpeername): "?" also for fd < 0 (no connection) and
 * for a peer that is gone (ENOTCONN). Thread-safe. */
void net_peer_name(int fd, char *buf, size_t len);

/* The client's address as text: given when not NULL (the address a PROXY header named), else
 * fd's peer as net_peer_name says it. */
void net_client_name(int fd, const char *given, char *buf, size_t len);

/* "ADDR:PORT" or "[ADDR]:PORT" for an IPv4 or IPv6 address, "?" for any other family. */
struct sockaddr_storage;
void net_addr_name(const struct sockaddr_storage *ss, char *buf, size_t len);

/* net.core.somaxconn, or -1 when it cannot be read. */
long net_somaxconn(void);

#endif /* LFE_NET_H */
