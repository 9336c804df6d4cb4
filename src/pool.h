/* pool: the structures shared by server.c, acceptor.c, worker.c and the idle sweep, and a
 * connection's entry into and exit from the pool (pool.c). Private to the pool. */
#ifndef LFE_POOL_H
#define LFE_POOL_H

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/epoll.h>

#include "conn.h"
#include "dispatch.h"
#include "iplimit.h"
#include "lconn.h"
#include "opt.h"
#include "script.h"
#include "stats.h"
#include "topo.h"

#define WORKER_BUF (64 * 1024) /* scratch read buffer per worker: one read per 64 KiB */
#define ACCEPT_WAKE UINT32_MAX /* epoll data of the accept thread's eventfd */
#define ACCEPT_RETRY_MS 100    /* paused accept thread re-tries at least this often */

struct server;
struct group;

/* One worker thread and everything it owns. Touched only by its thread, except st, svc, busy and
 * busy_since_ns, which others read. */
struct worker {
    struct worker_stats st;  /* counters, written by this thread only */
    struct svc_hist svc;     /* service times, written by this thread only */
    struct server *srv;      /* the pool */
    struct group *g;         /* the group whose epoll fd this thread waits on */
    int idx;                 /* index within the group */
    int busy;                /* atomic: 1 while handling a batch of events (drain reads it) */
    int drain;               /* atomic: a stop began (set by main; here, not in the server's
                              * hot line, so reading it each echo event costs no miss) */
    int64_t busy_since_ns;   /* atomic: CLOCK_MONOTONIC when the batch began (valid while busy) */
    bool started;            /* the thread exists (for join) */
    pthread_t tid;           /* the thread */
    char *buf;               /* WORKER_BUF bytes: where reads land */
    struct epoll_event *evs; /* opt->batch events per epoll_wait */
    struct script *script;   /* Lua mode: this thread's lua_State; NULL in echo mode */
    struct outbuf lout;      /* Lua mode: replies gathered during one event */
    int next, n;             /* the batch: evs[next..n) are taken but not yet handled */
    bool stop;               /* the stop eventfd was in a batch */
};

/* One epoll group: an epoll fd shared by nworkers threads pinned to cpus. */
struct group {
    long live __attribute__((aligned(64))); /* atomic: live connections (+1 accept, -1 close) */
    uint64_t accepted;                      /* connections dispatched here (accept thread) */
    int idx;                                /* group number */
    int epfd;                               /* the shared epoll fd */
    int stopfd;                             /* eventfd, level-triggered, data.ptr NULL: stop */
    int nworkers;                           /* W: threads waiting on epfd */
    cpu_set_t cpus;                         /* where its workers run */
    struct worker *workers;                 /* nworkers of them */
};

struct server {
    const struct opt *opt;                  /* immutable configuration */
    const struct plan *plan;                /* immutable CPU plan */
    int ngroups;                            /* G */
    struct group *groups;                   /* G groups */
    int lfds[OPT_MAX_LISTEN];               /* listening sockets, -1 once closed */
    int nlisten;                            /* how many */
    int acc_epfd;                           /* accept thread's epoll: listeners + acc_wakefd */
    int acc_wakefd;                         /* eventfd: stop, or a descriptor freed while paused */
    bool acc_started;                       /* the accept thread exists */
    pthread_t acc_tid;                      /* the accept thread */
    struct dispatch disp;                   /* group choice; accept thread only */
    struct accept_stats ast;                /* accept thread's counters */
    long max_conns;                         /* live connection cap */
    long live __attribute__((aligned(64))); /* atomic: live connections, all groups */
    long npending;                          /* atomic: connections with output pending */
    int draining;                           /* atomic: SIGTERM seen, stop accepting, finish up */
    bool handover;                          /* main: this stop is --takeover's (server_handover) */
    long nwrclosed;      /* atomic: connections we sent a FIN, not yet closed (echo at a hand-over,
                          * Lua lingering): the drain is not quiet while their clients may still
                          * send (what raced the FIN) or have replies to take */
    int accept_paused;   /* atomic: the accept thread polls every ACCEPT_RETRY_MS instead of
                          * waiting on the listeners (out of descriptors or memory, or a listener
                          * that could not be re-armed; one that refuses accept4 is set aside
                          * alone: acceptor.c) */
    size_t table_size;   /* RLIMIT_NOFILE: no fd reaches it */
    struct conn **table; /* fd -> connection; slots are atomic */
    cpu_set_t all_cpus;  /* union of the groups' CPUs: the accept thread's */
    struct script_env *lua;  /* Lua mode: the script's shared environment */
    int lua_connect_first;   /* atomic: register new connections for EPOLLOUT */
    uint64_t next_id;        /* accept thread: the last connection id given */
    struct iplimit *iplimit; /* --max-conns-per-ip: counts per address, or NULL */
    int32_t *ipslot;         /* fd -> its iplimit slot; atomic (written by the accept thread
                              * before the hand-off, read by the closing owner) */
    uint64_t *idle; /* --idle-timeout, Lua or --proxy-protocol: fd -> IDLE_* word (below) */
    struct idle_outq *idle_outq; /* --idle-timeout: fd -> its send queue at the sweep's look */
    long idle_limit_ms;          /* --idle-timeout, or LINGER_MS: what the sweeper expires */
    long fd_hi;                  /* atomic: the highest connection fd accepted (the sweep's end) */
    long next_sweep_ms;          /* main: when the idle sweep runs next */
    pthread_mutex_t iplock;      /* --proxy-protocol with --max-conns-per-ip: workers take slots */
};

/* --idle-timeout. Any connection that is armed in epoll belongs to no thread, so the sweeper
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
 * Without --idle-timeout only Lua's lingering connections (lconn.c) and connections still
 * reading their PROXY header (--proxy-timeout) are armed with a date; in echo mode without
 * either of those options none of this runs: the words are not even allocated. */
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
static inline void idle_arm(struct server *s, int fd, long ms)
{
    __atomic_store_n(&s->idle[fd], idle_word(ms, IDLE_ARMED), __ATOMIC_RELEASE);
}

/* Publishes fd as armed with the date it had when the caller took it (idle_take keeps it): a
 * connection whose deadline runs from its accept (its PROXY header) is not dated by events. */
static inline void idle_rearm(struct server *s, int fd)
{
    uint64_t v = __atomic_load_n(&s->idle[fd], __ATOMIC_RELAXED); /* our own OWNED word */

    __atomic_store_n(&s->idle[fd], (v & ~(uint64_t)3) | IDLE_ARMED, __ATOMIC_RELEASE);
}

/* The date that makes the sweeper end a connection span ms after from. The sweeper has one
 * limit (--idle-timeout, or LINGER_MS without it), so the date is earlier than from by the
 * difference, or later when span is the longer (the sweeper skips a date in the future). */
static inline long idle_due_date(const struct server *s, long from, long span)
{
    return from + span - s->idle_limit_ms;
}

/* The date a lingering connection whose window began at ms is armed with: it ends LINGER_MS
 * after ms, or --idle-timeout after if that is shorter. */
static inline long idle_linger_date(const struct server *s, long ms)
{
    return idle_due_date(s, ms, s->idle_limit_ms < LINGER_MS ? s->idle_limit_ms : LINGER_MS);
}

/* How long after its accept a connection's PROXY header must be whole: --proxy-timeout, or
 * --idle-timeout if that is shorter. The bytes of the header do not move it. */
static inline int idle_header_span(const struct server *s)
{
    const struct opt *o = s->opt;

    return o->idle_ms && o->idle_ms < o->proxy_ms ? o->idle_ms : o->proxy_ms;
}

/* The date a connection accepted at ms is armed with while its PROXY header is still to come. */
static inline long idle_header_date(const struct server *s, long ms)
{
    return idle_due_date(s, ms, idle_header_span(s));
}

/* Takes fd, armed or expired, for the calling thread (which epoll_wait handed it, or whose
 * epoll_ctl failed after idle_arm). Returns true when the sweeper shut it down for idleness. */
bool idle_take(struct server *s, int fd);

/* Hand-off of a connection between threads. The kernel orders it: epoll_ctl (ADD by the accept
 * thread, MOD by a worker) happens before the epoll_wait that returns the connection to the
 * next owner. ThreadSanitizer models that edge for EPOLL_CTL_ADD only, so TSan builds state it;
 * other builds compile these to nothing. */
#if defined(__SANITIZE_THREAD__)
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define HANDOFF_RELEASE(c) __tsan_release(c)
#define HANDOFF_ACQUIRE(c) __tsan_acquire(c)
#else
#define HANDOFF_RELEASE(c) ((void)(c))
#define HANDOFF_ACQUIRE(c) ((void)(c))
#endif

void *acceptor_main(void *arg);
void *worker_main(void *arg);

/* A new connection on fd, of kind's size, zeroed. NULL when memory runs out. Any thread. */
struct conn *conn_new(int fd, enum conn_kind kind);

/* Ends connection c, owned by the calling thread, for why: the script of w hears it
 * (on_close, if it saw the connection start), the fd -> conn slot is cleared, the descriptor
 * closed, the memory freed, the live counts of the server and of g (when given) go down, and w's
 * closed counter (when given) goes up. w: the owning worker, or the worker whose state main
 * runs at stop; NULL in the accept thread. After this neither c nor its fd number is touched;
 * pending output is the caller's to write first. */
void conn_close(struct server *s, struct group *g, struct conn *c, enum conn_why why,
                struct worker *w);

/* Writes 1 to an eventfd; the counter saturating is harmless, so errors are ignored. */
void pool_kick(int efd);

#endif /* LFE_POOL_H */
