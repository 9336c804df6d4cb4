/* bthread: one load thread's state, shared by its loop (engine.c), its connections (bconn.c)
 * and the main thread (lfbench.c), which reads the fields marked for it. */
#ifndef LFE_BTHREAD_H
#define LFE_BTHREAD_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

#include "bcount.h"
#include "bopt.h"
#include "bscript.h"
#include "cphase.h"
#include "hist.h"
#include "payload.h"

struct bconn;
struct bscthread;
struct tls_ctx;

/* What the main thread asks of a load thread, one step at a time: a run is one step (after the
 * connections are open), --rate-sweep and --find-rate several on the same connections. Written
 * by main under pub_lock, then engine_command() wakes the thread. */
struct bcmd {
    int seq;         /* the step's number, from 1; a new one starts it */
    bool finish;     /* no more steps: close everything and return */
    double rate;     /* total requests/s over all threads, 0 = closed loop */
    double warmup;   /* seconds of the step that are not measured */
    double duration; /* seconds measured, 0 = until the quota */
    uint64_t quota;  /* this thread's -n share, 0 = none */
    uint64_t start;  /* CLOCK_MONOTONIC ns: the common start of every thread's schedule */
};

/* A thread's phase. */
enum bphase {
    PH_IDLE,  /* connections open (long mode), no requests: before the first step, between steps */
    PH_RUN,   /* a step: requests go out */
    PH_DRAIN, /* the step is over: in-flight requests get up to --timeout */
};

/* One step's results in one thread; main reads them once step_done says the step is over. */
struct bstepres {
    struct bcount c;
    struct hist lat;
    uint64_t intended, behind, unsent; /* open loop: sends due in the measured window */
    uint64_t t_from, t_to; /* CLOCK_MONOTONIC ns: the window's start (after the warm-up), and the
                            * end of the step's last request (response or failure), 0 if none */
    uint64_t over_bound;   /* --find-rate: latencies above its bound, counted exactly */
};

/* One load thread. Everything in it is touched by its thread only, except pub (under pub_lock,
 * once a second) and open (atomic), until the thread is joined. */
struct bthread {
    int idx;
    pthread_t tid;
    const struct bopt *o;
    const struct payloads *p;
    struct ev_loop *loop;
    int epfd;            /* edge-triggered epoll set of this thread's sockets */
    struct bconn *conns; /* this thread's connections */
    int nconns;
    uint32_t conn_base;              /* global index of conns[0] */
    uint8_t *buf;                    /* scratch for reads and writes */
    uint64_t rng;                    /* class draws */
    uint64_t t_start, t_warm, t_end; /* CLOCK_MONOTONIC ns: opening starts; the step's stats
                                      * start; it stops issuing */
    enum bphase phase;
    struct bcmd cmd;   /* main's latest, under pub_lock */
    int step;          /* the step this thread runs or ran last */
    int step_done;     /* atomic (release): the last step whose results are in sres */
    uint64_t drain_t0; /* when the step stopped issuing: in-flight requests time out from here */
    struct bstepres sres;
    /* connect() itself (the kernel's search of a crowded port range): the time spent inside
     * it and its calls, over the whole run and over the opening alone (before the first step:
     * the reconnects of a server that closes, or of --reconnect-every, come later) */
    uint64_t connect_ns, connect_calls;
    uint64_t open_connect_ns, open_connect_calls;
    uint64_t connect_max_ns; /* the longest connect() call */
    /* atomic (relaxed), read by main each tick to tell that nothing listens: connections ever
     * established, and connects refused (ECONNREFUSED), since the run began */
    uint64_t established, refused;
    bool hdr;                 /* --hdr-log: keep cur_mlat */
    bool steps;               /* --rate-sweep or --find-rate: each step keeps its own histogram */
    uint64_t sched_end;       /* open loop: sends intended from here on are not the run's */
    uint64_t quota;           /* -n share of this thread, 0 = none */
    uint64_t issued;          /* requests issued */
    bool stopping;            /* no new requests */
    bool open_loop;           /* -R */
    bool nodelay;             /* TCP_NODELAY on each socket */
    struct rate *sch;         /* -R schedule */
    int *freeq, fhead, nfree; /* open loop: a FIFO ring of connections that can take a request */
    int sendfd;               /* open loop: timerfd of the next due send */
    uint64_t send_at;         /* when it is armed for, 0 = off */
    bool quit;                /* --busy-poll: the loop ends (on_cmd's finish) */
    bool worked;              /* --busy-poll: this turn handled something */
    uint64_t work_ns;         /* --busy-poll: time in turns that handled something (main reads) */
    int nclosed;              /* connections closed (waiting to (re)connect) */
    unsigned next_source;     /* --source: the address the next connection binds to */
    int scan_pos;             /* the next connection the tick looks at for a timeout */
    double tokens;            /* --connect-rate bucket */
    uint64_t tokens_t;
    /* results (after warm-up) */
    struct bcount total;
    struct hist lat;      /* request latency, ns */
    struct hist ph[CP_N]; /* the timed connections' phases, ns (cphase.h): connect, handshake,
                           * first byte */
    uint64_t resumed;     /* of the timed ones (ph[CP_HANDSHAKE]), those that resumed a session */
    struct hist cls_lat[BOPT_MAX_CLASSES];
    /* open loop, the sends intended in the measured window (not the warm-up's) */
    uint64_t behind;             /* sent later than 1 ms after their intended time */
    uint64_t intended;           /* taken from the schedule (and sent) */
    uint64_t unsent;             /* due but never sent (every connection busy, or no
                                  * --connect-rate token, until the end) */
    uint64_t conn_min, conn_max; /* fewest and most requests one connection completed */
    /* The first mismatch this thread met: up to sizeof(bad) of the bytes there, from where the
     * read handed to verification began, and their offset in their response (the summary's
     * "mismatch" line: a server that is not what --expect says shows itself) */
    uint8_t bad[48];
    size_t bad_len;
    uint64_t bad_at;
    bool bad_seen;
    /* the per-second series */
    struct bcount cur;
    struct hist cur_lat;
    struct hist cur_mlat;     /* --hdr-log: this second's latencies in a measured window */
    struct hist cur_ph[CP_N]; /* this second's phases (--json-stream, --hdr-log) */
    pthread_mutex_t pub_lock;
    struct bcount pub; /* handed to main once a second */
    struct hist pub_lat, pub_mlat;
    struct hist pub_ph[CP_N];
    int open;       /* atomic: open connections */
    void *watchers; /* engine.c's */
    /* --script (sc NULL without): the thread's Lua state and what it asks of the engine */
    struct bscthread *sc;
    const struct sockaddr *addr; /* where connections go: the target, or setup()'s thread.addr */
    socklen_t addrlen;
    unsigned ring;  /* request slots per connection: --pipeline x batch */
    unsigned batch; /* requests per string request() returns (its first said how many) */
    bool script_req, script_resp, bscript_delay;
    struct {
        uint8_t *data; /* no request() function: wrk.request()'s string, made once (owned) */
        struct scpiece pc[SCRIPT_MAX_BATCH];
        int n; /* 0: request() is called for each */
    } fixed;
    bool script_failed;  /* atomic: a script error stopped this thread (main reads it) */
    bool script_stopped; /* atomic: wrk.thread:stop() did (main reads it) */
    uint64_t last_sec;   /* the previous whole-second tick (done()'s rate samples) */
    size_t resp_held;    /* --script: bytes of its connections' response buffers (response())
                          * and request slots' copies (request()) */
    size_t resp_share;   /* ... at most: its share of --script-buffers-mb */
    /* --tls (tls NULL without): the thread's own context (tls.h: never shared), and its
     * handshakes over the whole run, as the library counted them (main reads them joined) */
    struct tls_ctx *tls;
    double tls_credit; /* --tls-resume: the share owed, one offer per whole unit */
    uint64_t tls_full, tls_resumed, tls_offered;
    const char *tls_protocol, *tls_cipher; /* the first completed handshake's (static) */
    char tls_why[256];                     /* the first TLS failure's words, "" none */
};

/* CLOCK_MONOTONIC in ns: every time point of a thread and of main. */
static inline uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif /* LFE_BTHREAD_H */
