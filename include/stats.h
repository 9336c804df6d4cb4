/* stats: per-thread counters, written by their owner only and summed when read. */
#ifndef LFE_STATS_H
#define LFE_STATS_H

#include <stdint.h>
#include <stdio.h>

/* One worker's counters (memcached's per-thread stats): X(name, help); the help text is what
 * /metrics says of each. */
#define WORKER_STATS(X)                                                                            \
    X(accepted, "connections whose first event this worker took")                                  \
    X(events, "events handled")                                                                    \
    X(closed, "connections closed")                                                                \
    X(reads, "read(2) calls that returned data")                                                   \
    X(bytes_in, "bytes read")                                                                      \
    X(bytes_out, "bytes written")                                                                  \
    X(rearms, "EPOLL_CTL_MOD calls")                                                               \
    X(short_writes, "writes the socket did not take whole: output went pending")                   \
    X(paused, "events after which reading paused at --max-pending")                                \
    X(err_reset, "connections lost to ECONNRESET/EPIPE/ETIMEDOUT")                                 \
    X(err_io, "other read/write errors and EPOLLERR")                                              \
    X(err_nomem, "output that could not be buffered: connection closed")                           \
    X(err_epoll, "epoll_ctl failures: connection closed")                                          \
    X(lua_calls, "Lua callbacks run")                                                              \
    X(lua_errors, "callbacks that raised an error: connection closed")                             \
    X(lua_timeouts, "callbacks aborted by --lua-timeout-ms: connection closed")                    \
    X(lua_nomem, "callbacks over --lua-mem-mb: connection closed")                                 \
    X(frames_big, "frames over max_frame: connection closed")                                      \
    X(lua_reloads,                                                                                 \
      "script generations this worker switched to (at its first event after a reload)")            \
    X(lua_wall_timeouts, "callbacks ended by --lua-wall-timeout-ms: connection closed")            \
    X(idle_closed, "connections closed by --idle-timeout")                                         \
    X(given_back, "events re-armed for other workers before a Lua callback waited")                \
    X(proxy_bad, "closed without a valid PROXY header (a bad one, or none by --proxy-timeout)")    \
    X(proxy_shed_per_ip, "closed after its PROXY header: that client had --max-conns-per-ip")      \
    X(drain_closed, "echo connections a stop ended between requests (FIN after the last echo)")    \
    X(drain_raced, "of those, connections whose client sent more after that FIN (bytes dropped)")  \
    X(lingered, "Lua: closes that lingered (peer still sending or reply unacked): FIN, then drop") \
    X(tls_full, "TLS handshakes finished in full (no session resumed)")                            \
    X(tls_resumed, "TLS handshakes finished resuming a session (a ticket or the session cache)")   \
    X(tls_fail_timeout, "TLS handshakes not finished by --tls-handshake-timeout: closed")          \
    X(tls_fail_protocol, "TLS handshakes failed on bytes that are not TLS or cannot be agreed")    \
    X(tls_fail_http, "TLS handshakes failed on a plain HTTP request sent to a TLS port")           \
    X(tls_fail_reset, "TLS handshakes the peer reset or closed in the middle")                     \
    X(tls_fail_client_cert, "TLS handshakes failed on a client certificate missing or refused")

/* The accept thread's counters; per-group "accepted" lives beside them. */
#define ACCEPT_STATS(X)                                                                            \
    X(accepted, "connections handed to a group")                                                   \
    X(shed, "accepted over --max-conns and closed at once")                                        \
    X(emfile, "accept4 EMFILE/ENFILE: accepting paused")                                           \
    X(enomem, "accept4 ENOBUFS/ENOMEM, or no memory for a connection")                             \
    X(err_other, "other accept4 or epoll_ctl errors")                                              \
    X(shed_per_ip, "closed at once: its address had --max-conns-per-ip connections already")

#define STATS_FIELD(name, help) uint64_t name;

struct worker_stats {
    WORKER_STATS(STATS_FIELD)
} __attribute__((aligned(64)));

struct accept_stats {
    ACCEPT_STATS(STATS_FIELD)
} __attribute__((aligned(64)));

/* Service time of one event: from the return of the epoll_wait that took it to its re-arm (or
 * close). Fixed buckets, upper bounds in ns from 1 us to 10 s (1, 2.5, 5 per decade), the last
 * one +Inf; written by the owning worker only, summed per group when read. */
#define SVC_BUCKETS 23
extern const uint64_t svc_bounds_ns[SVC_BUCKETS - 1];

struct svc_hist {
    uint64_t count[SVC_BUCKETS]; /* events per bucket, not cumulative */
    uint64_t sum_ns;             /* their total service time */
} __attribute__((aligned(64)));

/* Owner-only increment. Relaxed atomic load and store compile to a plain add (no lock prefix),
 * and a reader in another thread sees a torn-free value. */
#define STAT_ADD(s, field, n)                                                                      \
    __atomic_store_n(&(s)->field, __atomic_load_n(&(s)->field, __ATOMIC_RELAXED) + (n),            \
                     __ATOMIC_RELAXED)

/* Counts one event of ns nanoseconds in h: a few compares (most events fall in the first
 * buckets), two plain adds. Owner only. */
static inline void svc_record(struct svc_hist *h, uint64_t ns)
{
    int i = 0;

    while (i < SVC_BUCKETS - 1 && ns > svc_bounds_ns[i])
        i++;
    STAT_ADD(h, count[i], 1);
    STAT_ADD(h, sum_ns, ns);
}

/* Adds a snapshot of src into dst (dst is private to the caller). */
void stats_add_worker(struct worker_stats *dst, const struct worker_stats *src);
void stats_snap_accept(struct accept_stats *dst, const struct accept_stats *src);
void stats_add_svc(struct svc_hist *dst, const struct svc_hist *src);

/* Prints "name=value" pairs on one line after prefix. */
void stats_print_worker(FILE *f, const char *prefix, const struct worker_stats *s);
void stats_print_accept(FILE *f, const char *prefix, const struct accept_stats *s);

#endif /* LFE_STATS_H */
