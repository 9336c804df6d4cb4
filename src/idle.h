/* idle: the idle timeout's protocol (--idle-timeout, Lua's lingering close, the PROXY header's
 * deadline): the per-fd idle words, their dates, the take by a worker and main's sweep. Used by
 * the pool (server.c, acceptor.c, worker.c); main's loop runs idle_sweep. It does not expose the
 * pool's structures (pool.h): main.c, which includes it, has <grp.h>'s struct group. */
#ifndef LFE_IDLE_H
#define LFE_IDLE_H

#include <stdbool.h>
#include <stdint.h>

struct server;

/* DESIGN
 *
 * --idle-timeout. Any connection that is armed in epoll belongs to no thread, so the sweeper
 * (main, each tick) cannot simply close it: a worker may be handed it at that moment, and the
 * fd number may be reused once it is closed. Instead each fd has one word, (ms << 2) | state:
 *   IDLE_OWNED    a thread owns the connection (or there is none): the sweeper skips it; ms is
 *                 the date it had when taken (a header's deadline is re-armed with it);
 *   IDLE_ARMED    registered and armed, last event at ms: the owner stores it just before the
 *                 re-arm (the accept thread before EPOLL_CTL_ADD);
 *   IDLE_CLAIMED  the sweeper found it idle and holds it for one shutdown(2);
 *   IDLE_EXPIRED  shut down by the sweeper (SHUT_RDWR: epoll reports EPOLLHUP whatever the
 *                 registration asks), handed back for a worker to close as "idle".
 * A thread handed the connection by epoll_wait takes it with a CAS ARMED|EXPIRED -> OWNED,
 * waiting out the few instructions of a CLAIMED (idle_take). Only an owner closes a connection,
 * and the sweeper never owns one, so a claimed fd cannot be closed and reused under it; an ABA
 * (a new connection on the fd armed with the very same word) would be harmless: the claim
 * compares the whole word, so the date it judged is the date of what it claims.
 * Idle means nothing moved: no byte read by the server (an event) and none taken by the peer
 * from what the kernel holds for it (SIOCOUTQ falling, which raises no event until a third of
 * the send buffer is free). So a claimed connection past its time is handed back, dated now,
 * when an event it is armed for waits for a worker (input only if it is armed for input:
 * CONN_NOREAD), or when its send queue is shorter than at the sweep's last look at the same
 * date (idle_outq; at a first look, a queue that is not empty gets one more period).
 * Without --idle-timeout only Lua's lingering connections (lconn.c), connections still
 * reading their PROXY header (--proxy-timeout) and those in their TLS handshake
 * (--tls-handshake-timeout) are armed with a date; in echo mode without any of those options
 * none of this runs: the words are not even allocated. A handshake's deadline, as a header's,
 * stands whatever comes: its date is its start, kept across its events (idle_rearm). */
#define LINGER_MS 5000        /* a lingering close ends this long after its FIN... */
#define LINGER_TOTAL_MS 30000 /* ...or after the peer last took some of the reply; at most this */
enum { IDLE_OWNED, IDLE_ARMED, IDLE_CLAIMED, IDLE_EXPIRED };

/* The ms of a word is CLOCK_MONOTONIC ms plus IDLE_BIAS (the longest --idle-timeout): a
 * lingering connection's date is set back by up to that much (idle_due_date), and must not
 * fall below zero on a machine up for less. */
#define IDLE_BIAS 86400000L

/* What the sweeper saw of one fd's send queue: main's only (no other thread touches it). */
struct idle_outq {
    uint64_t word; /* the idle word the sweeper stored when it looked */
    int outq;      /* SIOCOUTQ then */
};

static inline uint64_t idle_word(long ms, int state)
{
    return ((uint64_t)(ms + IDLE_BIAS) << 2) | (uint64_t)state;
}

/* Publishes fd as armed, last active at ms. Caller owns it, before the epoll_ctl that arms it. */
void idle_arm(struct server *s, int fd, long ms);

/* Publishes fd as armed with the date it had when the caller took it (idle_take keeps it): a
 * connection whose deadline runs from its accept (its PROXY header) is not dated by events. */
void idle_rearm(struct server *s, int fd);

/* The date a lingering connection whose window began at ms is armed with: it ends LINGER_MS
 * after ms, or --idle-timeout after if that is shorter. */
long idle_linger_date(const struct server *s, long ms);

/* How long after its accept a connection's PROXY header must be whole: --proxy-timeout, or
 * --idle-timeout if that is shorter. The bytes of the header do not move it. */
int idle_header_span(const struct server *s);

/* The date a connection accepted at ms is armed with while its PROXY header is still to come. */
long idle_header_date(const struct server *s, long ms);

/* How long after its start (its accept, or the end of its PROXY header) a TLS handshake must
 * be finished: --tls-handshake-timeout, or --idle-timeout if that is shorter. Its bytes do not
 * move it. */
int idle_handshake_span(const struct server *s);

/* The date a connection whose handshake starts at ms is armed with until it finishes. */
long idle_handshake_date(const struct server *s, long ms);

/* Dates fd, which the caller owns (taken: IDLE_OWNED), with ms: the next idle_rearm publishes
 * it. For a deadline that starts in the middle of a connection's life (its handshake after its
 * PROXY header). */
void idle_redate(struct server *s, int fd, long ms);

/* Takes fd, armed or expired, for the calling thread (which epoll_wait handed it, or whose
 * epoll_ctl failed after idle_arm). Returns true when the sweeper shut it down for idleness. */
bool idle_take(struct server *s, int fd);

/* --idle-timeout, from main's loop and its drain: shuts down (SHUT_RDWR) every connection that
 * has been armed without an event for the timeout at now_ms (CLOCK_MONOTONIC) and has none
 * waiting to be taken (poll); a worker then closes it as "idle". Runs at most every half tick
 * (a quarter of the timeout, 50 ms to 1 s); a no-op without the option. Returns how many it shut
 * down. Main thread only. */
long idle_sweep(struct server *s, long now_ms);

#endif /* LFE_IDLE_H */
