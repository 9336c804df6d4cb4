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
#include "opt.h"
#include "script.h"
#include "stats.h"
#include "tls_conf.h"
#include "topo.h"

#define WORKER_BUF (64 * 1024) /* scratch read buffer per worker: one read per 64 KiB */
#define ACCEPT_WAKE UINT32_MAX /* epoll data of the accept thread's eventfd */
#define ACCEPT_RETRY_MS 100    /* paused accept thread re-tries at least this often */
#define DRAIN_SETTLE_MS 100    /* a stop accepts until its queues were empty this long */
#define DRAIN_ACCEPT_MS 1000   /* ...and for at most this long (or the drain timeout) */
#define DRAIN_DEFER_MS 1300    /* with TCP_DEFER_ACCEPT: at least this long (see drain_queues) */

struct server;
struct group;

/* One worker thread and everything it owns. Touched only by its thread, except st, svc, hs, busy
 * and busy_since_ns, which others read. */
struct worker {
    struct worker_stats st;  /* counters, written by this thread only */
    struct svc_hist svc;     /* service times, written by this thread only */
    struct svc_hist hs;      /* TLS handshakes' times, first step to finish (this thread's) */
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
    struct script *script;   /* Lua mode (srv->lua): this thread's lua_State; NULL in echo mode */
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
    bool solo;      /* one worker and --oneshot auto: connections are registered level-triggered,
                     * without EPOLLONESHOT (worker.c, rearm) */
    cpu_set_t cpus; /* where its workers run */
    struct worker *workers; /* nworkers of them */
};

/* One accept thread: the listeners it polls (its shard of each --listen address), its epoll set
 * and eventfd, its group choice and its counters. Touched by its thread only, except st and
 * paused, which others read, and wakefd, which a closing worker writes. */
struct acceptor {
    struct accept_stats st; /* counters, written by this thread only */
    struct server *srv;     /* the pool */
    struct dispatch disp;   /* group choice: this thread's own round-robin */
    int idx;                /* its number */
    int epfd;               /* epoll: its listeners (data: index in lfds) + wakefd */
    int wakefd;             /* eventfd: stop, or a descriptor freed while paused */
    int paused;             /* atomic: 1 while it polls instead of waiting (server's
                             * accept_paused counts these) */
    bool started;           /* the thread exists (for join) */
    pthread_t tid;          /* the thread */
    int nl;                 /* li[0..nl): the listeners it polls, as indexes into srv->lfds */
    int li[OPT_MAX_LFDS];
};

struct server {
    const struct opt *opt;                  /* immutable configuration */
    const struct plan *plan;                /* immutable CPU plan */
    int ngroups;                            /* G */
    struct group *groups;                   /* G groups */
    int lfds[OPT_MAX_LFDS];                 /* listening sockets, -1 once closed */
    int nlisten;                            /* how many (addresses x shards) */
    int nacc;                               /* accept threads */
    struct acceptor *acc;                   /* nacc of them */
    long max_conns;                         /* live connection cap */
    long live __attribute__((aligned(64))); /* atomic: live connections, all groups */
    long npending;                          /* atomic: connections with output pending */
    int draining;                           /* atomic: SIGTERM seen, stop accepting, finish up */
    long drain_accept_ms; /* set before draining: how long the accept threads may take to
                           * accept what waits in the queues (0: a hand-over, none) */
    long drain_min_ms;    /* ...and how long they accept at least (TCP_DEFER_ACCEPT) */
    bool handover;        /* main: this stop is --takeover's (server_handover) */
    bool shared;          /* main: a successor not yet ready holds the listeners too */
    bool kept;            /* main: systemd keeps the listeners (socket activation) */
    long nwrclosed;       /* atomic: connections we sent a FIN, not yet closed (echo at a hand-over,
                           * Lua lingering): the drain is not quiet while their clients may still
                           * send (what raced the FIN) or have replies to take */
    int accept_paused;    /* atomic: how many accept threads poll every ACCEPT_RETRY_MS instead
                           * of waiting on their listeners (out of descriptors or memory, or a
                           * listener that could not be re-armed; one that refuses accept4 is set
                           * aside alone: acceptor.c); a close kicks them (pool_kick_paused) */
    size_t table_size;    /* RLIMIT_NOFILE: no fd reaches it */
    struct conn **table;  /* fd -> connection; slots are atomic */
    cpu_set_t all_cpus;   /* union of the groups' CPUs: the accept threads' */
    struct script_env *lua;  /* the script's shared environment; "Lua mode?" is asked one way,
                              * s->lua != NULL (a connection's kind follows it: conn_new) */
    int lua_connect_first;   /* atomic: register new connections for EPOLLOUT */
    uint64_t next_id;        /* atomic: the last connection id given (accept threads) */
    struct iplimit *iplimit; /* --max-conns-per-ip: counts per address, or NULL */
    int32_t *ipslot;         /* fd -> its iplimit slot; atomic (written by the accept thread
                              * before the hand-off, read by the closing owner) */
    uint64_t *idle; /* --idle-timeout, Lua or --proxy-protocol: fd -> IDLE_* word (below) */
    struct idle_outq *idle_outq; /* --idle-timeout: fd -> its send queue at the sweep's look */
    long idle_limit_ms;          /* --idle-timeout, or LINGER_MS: what the sweeper expires */
    long fd_hi;                  /* atomic: the highest connection fd accepted (the sweep's end) */
    long next_sweep_ms;          /* main: when the idle sweep runs next */
    pthread_mutex_t iplock;      /* --max-conns-per-ip: held by whoever takes a slot (the
                                  * accept threads, or the workers with --proxy-protocol) */
    int lflags[OPT_MAX_LFDS];    /* kept: each listener's file status flags as systemd passed
                                  * it (O_NONBLOCK is the socket's: put back before the close) */
    struct tls_conf *tls;        /* the TLS listeners' configuration (main's), or NULL */
    bool ltls[OPT_MAX_LFDS];     /* lfds[i] speaks TLS: its connections handshake first */
};

/* The phase a connection of kind serves from, after its header if it has one. */
static inline enum conn_phase conn_first_phase(enum conn_kind kind)
{
    return kind == CONN_LUA ? CONN_PH_NEW : CONN_PH_SERVING;
}

/* Whether the script saw c start (on_connect ran): it hears c's end (on_close). Lua mode. */
static inline bool conn_started(const struct conn *c)
{
    return c->phase == CONN_PH_SERVING || c->phase == CONN_PH_CLOSING || c->phase == CONN_PH_LINGER;
}

/* The registration of c in group g for events (EPOLLIN, EPOLLOUT, EPOLLRDHUP): in a solo group
 * level-triggered, remembered in c's CONN_REG_* bits (so a worker re-arms only when they
 * change); elsewhere EPOLLONESHOT. Caller owns c, before it publishes c as armed (idle_arm:
 * the sweeper may then read c->flags) and before the epoll_ctl that uses the result. */
static inline uint32_t pool_arm_events(const struct group *g, struct conn *c, uint32_t events)
{
    if (!g->solo)
        return events | EPOLLONESHOT;
    c->flags = (c->flags & ~CONN_REG_MASK) | (events & EPOLLIN ? CONN_REG_IN : 0) |
               (events & EPOLLOUT ? CONN_REG_OUT : 0) | (events & EPOLLRDHUP ? CONN_REG_RDHUP : 0);
    return events;
}

/* Whether c, in a solo group, is registered for exactly events: then it needs no re-arm. */
static inline bool pool_armed_for(const struct group *g, const struct conn *c, uint32_t events)
{
    return g->solo && !(events & ~(uint32_t)(EPOLLIN | EPOLLOUT | EPOLLRDHUP)) &&
           (c->flags & CONN_REG_MASK) ==
               ((events & EPOLLIN ? CONN_REG_IN : 0) | (events & EPOLLOUT ? CONN_REG_OUT : 0) |
                (events & EPOLLRDHUP ? CONN_REG_RDHUP : 0));
}

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

void *acceptor_main(void *arg); /* arg: its struct acceptor */

/* Kicks every accept thread that is paused: a descriptor came free. */
void pool_kick_paused(struct server *s);
void *worker_main(void *arg);

/* A new connection on fd, of kind's size, zeroed. NULL when memory runs out. Any thread. */
struct conn *conn_new(int fd, enum conn_kind kind);

/* Ends connection c, owned by the calling thread, for why: the script of w hears it
 * (on_close, if it saw the connection start), the counts it is in go down (npending,
 * nwrclosed, the live counts of the server and of g when given), the fd -> conn slot is
 * cleared, the descriptor closed, its buffers and memory freed, and w's closed counter (when
 * given) goes up. w: the owning worker, or the worker whose state main runs at stop; NULL in the
 * accept thread. After this neither c nor its fd number is touched; pending output is the
 * caller's to write first, or lost. */
void conn_close(struct server *s, struct group *g, struct conn *c, enum conn_why why,
                struct worker *w);

/* Writes 1 to an eventfd; the counter saturating is harmless, so errors are ignored. */
void pool_kick(int efd);

#endif /* LFE_POOL_H */
