/* engine: lfbench's load threads: each one's loop, its timers and its steps.
 *
 * Each thread runs its own libev loop (epoll backend) over its share of the connections; nothing
 * is shared on the request path. libev's epoll backend is level-triggered: every epoll_wait
 * re-polls each socket it reported last time (tcp_poll), which with many connections cost much of
 * the client's speed (docs/bench.md, "lfbench against the independent generator"). So a thread's
 * sockets live in its own edge-triggered epoll set, each registered once (EPOLLIN|EPOLLOUT|EPOLLET,
 * never modified: no epoll_ctl per request), and libev watches that one descriptor; timers and the
 * cross-thread stop stay libev's. What a connection does with its events, and the request path from
 * there to the next write, is bconn.c's. The open loop's schedule is kept by a timerfd with a 1 ns
 * timer slack: libev's epoll backend sleeps in whole milliseconds, which made every open-loop
 * request up to 1 ms late and put a floor under the p50 it reported (docs/bench.md, "lfbench open
 * loop"). A 10 ms tick handles timeouts, reconnects, --connect-rate and the end of the run; a
 * periodic timer at each whole second of the wall clock hands that second's counters to the main
 * thread under a lock taken once a second (whole wall-clock seconds, so that merge adds the same
 * second of every agent, whenever each started). A run is one step or several (--rate-sweep,
 * --find-rate), each commanded by main (struct bcmd) and handed back through step_done.
 */
#include "engine.h"

#include "bconn.h"
#include "bscript.h"
#include "btls.h"
#include "rate.h"

#include <errno.h>
#include <ev.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define TICK 0.01 /* seconds */
#define TICK_NS 10000000ull
#define SCAN_NS (100 * 1000000ull) /* timeouts are looked for at most this often */

struct watchers {
    ev_io sockets; /* the thread's edge-triggered epoll set */
    ev_io send;    /* open loop: the timerfd of the next due send */
    ev_timer tick;
    ev_periodic sec; /* at each whole second of the wall clock: merge adds agents' seconds */
    ev_async stop, cmd;
};

/* Open loop, at the end of a step: its due sends that never went out, those of the measured
 * window only; one intended in the warm-up is not the window's, as its response would not be. */
static uint64_t unsent_of(const struct bthread *t, uint64_t now)
{
    uint64_t left = bconn_backlog(t, now), warm = rate_due(t->sch, t->t_warm - 1);

    return left > warm ? left - warm : 0;
}

/* libev says the thread's epoll set has events. */
static void on_sockets(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)loop;
    (void)revents;
    if (bconn_events(w->data) > 0)
        ((struct bthread *)w->data)->worked = true;
}

static bool any_in_flight(struct bthread *t)
{
    for (int i = 0; i < t->nconns; i++)
        if (t->conns[i].qn > 0)
            return true;
    return false;
}

static bool all_idle(struct bthread *t)
{
    for (int i = 0; i < t->nconns; i++)
        if (t->conns[i].state == CS_CONNECTING || t->conns[i].state == CS_HANDSHAKE ||
            t->conns[i].qn > 0)
            return false;
    return true;
}

/* Whether the step's work is all in: no request in flight (and, short mode, no connection
 * carrying a transaction still connecting). A long-mode connection reconnecting carries none. */
static bool step_idle(struct bthread *t)
{
    return t->o->mode == MODE_SHORT ? all_idle(t) : !any_in_flight(t);
}

/* The step is over: each request still in flight counts as timed out and lost, due sends that
 * never went out as unsent; the results are handed to main (step_done). */
static void end_step(struct bthread *t, uint64_t now)
{
    uint64_t left = t->open_loop ? unsent_of(t, now) : 0;

    t->unsent += left;
    t->sres.unsent = left;
    for (int i = 0; i < t->nconns; i++)
        bconn_end_step(&t->conns[i], now);
    t->phase = PH_IDLE;
    t->stopping = true;
    t->sched_end = 0;
    __atomic_store_n(&t->step_done, t->step, __ATOMIC_RELEASE);
}

static void on_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct bthread *t = w->data;
    uint64_t now = now_ns(), limit = (uint64_t)t->o->timeout_ms * 1000000ull;
    uint64_t every = limit / 8 < SCAN_NS ? limit / 8 : SCAN_NS;

    t->worked = true; /* --busy-poll: timeouts, reconnects, the end of a step */
    /* Each tick looks at a slice of the connections for timeouts, so that each is looked at
     * once per `every` (a few times per --timeout): walking all 15,000 at once cost a cache
     * miss or two each, during which due sends waited, every 100 ms: an open loop's p99
     * (docs/bench.md, "lfbench with many connections"). */
    int slice = every <= TICK_NS ? t->nconns : (int)((uint64_t)t->nconns * TICK_NS / every) + 1;
    bool reopen;

    (void)loop;
    (void)revents;
    if (t->phase == PH_RUN &&
        (t->stopping || now >= t->t_end || (t->quota && t->issued >= t->quota))) {
        t->phase = PH_DRAIN;
        t->stopping = true;
        t->drain_t0 = now; /* in-flight requests get --timeout from here */
    }
    /* Events already waiting are taken first: a timer that fired while this thread was busy
     * (opening thousands of connections, each connect() searching a crowded port range) must
     * not fail connections whose handshake completed meanwhile, nor requests whose response is
     * in the socket. That turned a slow client into 14,498 "timeouts" of connections the
     * server had accepted. */
    for (int batches = t->nconns / 256 + 1; batches > 0 && bconn_events(t) == 256; batches--)
        ; /* bounded: under load new events never stop coming, and the tick must go on */
    now = now_ns();
    for (int k = 0; k < slice; k++) {
        struct bconn *c = &t->conns[t->scan_pos];

        if (++t->scan_pos == t->nconns)
            t->scan_pos = 0;
        bconn_timeout(c, now, limit);
    }
    /* Closed connections reopen: long mode, whenever the step is not draining (between steps
     * too: the connections are the run's), or while due sends wait for them; short mode's closed
     * loop, while it issues (each open counts against -n); short mode's open loop connects per
     * send. */
    if (t->o->mode == MODE_LONG)
        reopen = t->phase != PH_DRAIN || (t->open_loop && bconn_backlog(t, now) > 0);
    else
        reopen = !t->open_loop; /* and bconn_can_issue(), asked per connection: each open counts */
    for (int i = 0; t->nclosed > 0 && i < t->nconns; i++) {
        struct bconn *c = &t->conns[i];

        if (c->state == CS_CLOSED && c->retry_at <= now && reopen &&
            (t->o->mode == MODE_LONG || bconn_can_issue(t, now)) &&
            bconn_connect_token(t, now, NULL))
            bconn_open(c, now, now);
    }
    if (t->open_loop)
        bconn_dispatch_due(t, now);
    if (t->phase == PH_DRAIN) {
        /* The step is over: in-flight requests, and due sends still waiting for a connection,
         * get up to --timeout; then the first count as timed out and lost, the others as
         * unsent. */
        uint64_t left = t->open_loop ? bconn_backlog(t, now) : 0;

        if ((step_idle(t) && left == 0) || now > t->drain_t0 + limit)
            end_step(t, now);
    }
}

static void publish(struct bthread *t)
{
    pthread_mutex_lock(&t->pub_lock);
    bcount_add(&t->pub, &t->cur);
    hist_merge(&t->pub_lat, &t->cur_lat);
    if (t->hdr)
        hist_merge(&t->pub_mlat, &t->cur_mlat);
    for (int p = 0; p < CP_N; p++)
        if (t->cur_ph[p].count)
            hist_merge(&t->pub_ph[p], &t->cur_ph[p]);
    pthread_mutex_unlock(&t->pub_lock);
    memset(&t->cur, 0, sizeof(t->cur));
    hist_init(&t->cur_lat);
    for (int p = 0; p < CP_N; p++)
        if (t->cur_ph[p].count)
            hist_init(&t->cur_ph[p]);
    if (t->hdr)
        hist_init(&t->cur_mlat);
}

static void on_sec(struct ev_loop *loop, ev_periodic *w, int revents)
{
    struct bthread *t = w->data;
    uint64_t now = now_ns();

    (void)loop;
    (void)revents;
    /* --script: a whole second inside the measured window is a sample of done()'s rate */
    if (t->sc && t->phase == PH_RUN && t->last_sec >= t->t_warm && now <= t->t_end)
        bscript_rate_sample(t->sc, t->cur.requests);
    t->last_sec = now;
    publish(t);
}

static void on_stop(struct ev_loop *loop, ev_async *w, int revents)
{
    (void)loop;
    (void)revents;
    bconn_stop_issuing(w->data);
}

/* A step begins: its window, its rate, and the requests it starts with. The closed loop's
 * window starts now, with its first requests. The open loop's starts at the common start main
 * set, with its schedule: from now, it began up to 1 ms before the first send was due, and held
 * that many fewer (4,991 of -R 10000 -d 0.5). */
static void start_step(struct bthread *t, const struct bcmd *cmd)
{
    uint64_t now = now_ns(), start = t->open_loop ? cmd->start : now;

    t->step = cmd->seq;
    memset(&t->sres.c, 0, sizeof(t->sres.c));
    hist_init(&t->sres.lat);
    t->sres.intended = t->sres.behind = t->sres.unsent = t->sres.over_bound = 0;
    t->t_warm = start + (uint64_t)(cmd->warmup * 1e9);
    t->sres.t_from = t->t_warm;
    t->sres.t_to = 0;
    t->t_end = cmd->duration > 0 ? t->t_warm + (uint64_t)(cmd->duration * 1e9) : UINT64_MAX;
    t->sched_end = t->t_end;
    t->quota = cmd->quota ? t->issued + cmd->quota : 0;
    t->stopping = false;
    t->phase = PH_RUN;
    if (t->open_loop) {
        /* threads interleave their schedules from the common start */
        rate_init(t->sch, cmd->rate / t->o->threads,
                  cmd->start + (uint64_t)(1e9 / cmd->rate * t->idx));
        bconn_dispatch_due(t, now);
        return;
    }
    for (int i = 0; i < t->nconns && bconn_can_issue(t, now); i++) {
        struct bconn *c = &t->conns[i];

        if (t->o->mode == MODE_SHORT) {
            if (c->state == CS_CLOSED && bconn_connect_token(t, now, NULL)) /* others: the tick */
                bconn_open(c, now, now);
            continue;
        }
        if (c->state != CS_OPEN)
            continue; /* connected() starts it when it opens */
        bconn_fill(c, now);
    }
}

static void on_cmd(struct ev_loop *loop, ev_async *w, int revents)
{
    struct bthread *t = w->data;
    struct bcmd cmd;

    (void)revents;
    t->worked = true;
    pthread_mutex_lock(&t->pub_lock);
    cmd = t->cmd;
    pthread_mutex_unlock(&t->pub_lock);
    if (cmd.finish) {
        for (int i = 0; i < t->nconns; i++)
            bconn_close(&t->conns[i]);
        ev_break(loop, EVBREAK_ALL);
        t->quit = true;
    } else if (cmd.seq != t->step && t->phase == PH_IDLE) {
        start_step(t, &cmd);
    }
}

static void on_send(struct ev_loop *loop, ev_io *w, int revents)
{
    struct bthread *t = w->data;
    uint64_t expirations, now = now_ns();

    (void)loop;
    (void)revents;
    if (read(t->sendfd, &expirations, sizeof(expirations)) < 0 && errno != EAGAIN)
        return;
    t->send_at = 0; /* it fired: the kernel disarmed it */
    bconn_dispatch_due(t, now);
}

/* --script: what the thread's script does to the engine. Returns 0 or -1 (out of memory, or
 * the fixed request's script error). */
static int script_setup(struct bthread *t, struct bscthread *sc)
{
    const struct scwants *w;

    t->ring = (unsigned)t->o->pipeline;
    t->batch = 1;
    t->addr = (const struct sockaddr *)&t->o->addr;
    t->addrlen = t->o->addrlen;
    if (!(t->sc = sc))
        return 0;
    w = bscript_wants(sc);
    t->addr = bscript_addr(sc, &t->addrlen);
    t->script_req = w->request;
    t->script_resp = w->response;
    /* --script-buffers-mb in all, split evenly: each thread's buffers are its own */
    t->resp_share = ((size_t)t->o->script_buffers_mb << 20) / (size_t)t->o->threads;
    t->bscript_delay = w->delay;
    if (w->request) {
        t->batch = (unsigned)w->batch;
        t->ring = (unsigned)t->o->pipeline * t->batch;
    }
    if (w->request && w->fixed) { /* one string, made once: wrk.request() */
        const uint8_t *data;
        int tag, n = bscript_request(sc, &data, t->fixed.pc, SCRIPT_MAX_BATCH, &tag);
        size_t len = 0;

        bscript_untag(sc, tag);
        if (n < 1)
            return -1;
        for (int k = 0; k < n; k++)
            len = t->fixed.pc[k].off + t->fixed.pc[k].len;
        if (!(t->fixed.data = malloc(len)))
            return -1;
        memcpy(t->fixed.data, data, len);
        t->fixed.n = n;
    }
    return 0;
}

int engine_init(struct bthread *t, int idx, const struct bopt *o, const struct payloads *p,
                struct bscthread *sc, uint32_t base, int n, uint64_t t_start)
{
    memset(t, 0, sizeof(*t));
    t->epfd = -1;
    t->idx = idx;
    t->o = o;
    t->p = p;
    t->conn_base = base;
    t->nconns = n;
    t->rng = 0x853c49e6748fea9bull ^ ((uint64_t)idx + 1) * 0x9e3779b97f4a7c15ull;
    t->t_start = t_start;
    t->t_warm = t->t_end = UINT64_MAX; /* no step yet */
    t->phase = PH_IDLE;
    t->stopping = true;
    t->hdr = o->hdr_log != NULL;
    t->steps = o->sweep_step > 0 || o->find_pct > 0;
    t->open_loop = o->rate > 0 || o->sweep_step > 0 || o->find_pct > 0;
    if (script_setup(t, sc) < 0)
        return -1;
    if (o->tls) { /* its own context: OpenSSL 3.0 locks a shared one (tls.h) */
        char err[512];
        if (!(t->tls = btls_ctx_new(o, err, sizeof(err))))
            return -1;
    }
    /* Nagle (with Minshall's rule) never holds back the only write of a short connection's
     * request; it does hold a pipelined or long connection's next small request, and pieces of
     * a big one. So TCP_NODELAY, a syscall per connection, only where it can matter. With TLS
     * the request is never the only write: it follows the handshake's last flight (our
     * Finished), which the server need not answer (a TLS 1.2 resumption; a TLS 1.3 server that
     * sends no ticket), so Nagle would hold it until the server's delayed ACK. */
    t->nodelay = o->mode == MODE_LONG || o->tls;
    for (int k = 0; k < p->n; k++)
        t->nodelay |= p->cls[k].len > 16384;
    t->nodelay |= t->script_req; /* a script's requests may be of any size */
    t->tokens = 1;
    t->tokens_t = t_start;
    t->conns = calloc((size_t)n, sizeof(*t->conns));
    t->nclosed = n; /* every connection starts closed */
    t->buf = malloc(BCONN_BUFSZ);
    t->freeq = calloc((size_t)n, sizeof(*t->freeq));
    t->sendfd = -1;
    t->watchers = calloc(1, sizeof(struct watchers));
    if (t->open_loop)
        t->sch = calloc(1, sizeof(*t->sch)); /* each step sets it up */
    if (!t->conns || !t->buf || !t->freeq || !t->watchers || (t->open_loop && !t->sch))
        return -1;
    for (int i = 0; i < n; i++)
        if (bconn_init(&t->conns[i], t, base + (uint32_t)i) < 0)
            return -1;
    hist_init(&t->lat);
    for (int k = 0; k < CP_N; k++) {
        hist_init(&t->ph[k]);
        hist_init(&t->cur_ph[k]);
        hist_init(&t->pub_ph[k]);
    }
    hist_init(&t->cur_lat);
    hist_init(&t->pub_lat);
    hist_init(&t->cur_mlat);
    hist_init(&t->pub_mlat);
    hist_init(&t->sres.lat);
    for (int k = 0; k < BOPT_MAX_CLASSES; k++)
        hist_init(&t->cls_lat[k]);
    pthread_mutex_init(&t->pub_lock, NULL);
    t->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (t->open_loop && !o->busy_poll &&
        (t->sendfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)) < 0)
        return -1;
    t->loop = ev_loop_new(EVBACKEND_EPOLL | EVFLAG_NOENV);
    if (!t->loop || t->epfd < 0)
        return -1;
    /* Started here, before the thread runs: ev_async_start clears a send that came before it,
     * and main may command the first step (short mode) before the thread's loop is up. */
    {
        struct watchers *w = t->watchers;
        ev_async_init(&w->stop, on_stop);
        w->stop.data = t;
        ev_async_start(t->loop, &w->stop);
        ev_async_init(&w->cmd, on_cmd);
        w->cmd.data = t;
        ev_async_start(t->loop, &w->cmd);
    }
    return 0;
}

/* --busy-poll: the thread never sleeps. Each turn handles what is ready without waiting (one
 * epoll_wait with a zero timeout, libev's timers) and, in an open-loop step, sends what the
 * schedule has made due, which arm_send would otherwise have left to a timerfd: a clock read a
 * turn instead of a timer syscall, a timer interrupt and a wakeup per request. */
static void busy_loop(struct bthread *t, uint64_t prev)
{
    while (!t->quit) {
        uint64_t now;

        t->worked = false;
        ev_run(t->loop, EVRUN_NOWAIT);
        now = now_ns();
        if (t->open_loop &&
            bconn_backlog(t, now) > 0) { /* in a step, within its schedule and quota */
            uint64_t before = t->sch->next;

            /* Due, but every connection busy (the server is the limit) or no --connect-rate
             * token yet: a turn that sent nothing is polling, not work. */
            bconn_dispatch_due(t, now);
            t->worked |= t->sch->next != before;
        }
        /* Only a turn that handled something is work; the rest is polling, left out of the CPU
         * reported so that the figure per request and "saturated" still say what the load
         * costs. Counted as the turns' elapsed time (a CPU clock read a turn would be a
         * syscall): a turn preempted half-way counts its wait too. */
        if (t->worked) {
            now = now_ns();
            __atomic_store_n(&t->work_ns, t->work_ns + (now - prev), __ATOMIC_RELAXED);
        }
        prev = now;
    }
}

void *engine_main(void *arg)
{
    struct bthread *t = arg;
    struct watchers *w = t->watchers;
    uint64_t now = now_ns();

    if (t->t_start > now) { /* all threads begin together */
        struct timespec ts = {(time_t)((t->t_start - now) / 1000000000ull),
                              (long)((t->t_start - now) % 1000000000ull)};
        nanosleep(&ts, NULL);
    }
    ev_now_update(t->loop);
    ev_io_init(&w->sockets, on_sockets, t->epfd, EV_READ);
    w->sockets.data = t;
    ev_io_start(t->loop, &w->sockets);
    ev_timer_init(&w->tick, on_tick, TICK, TICK);
    w->tick.data = t;
    ev_timer_start(t->loop, &w->tick);
    ev_periodic_init(&w->sec, on_sec, 0.0, 1.0, NULL);
    w->sec.data = t;
    ev_periodic_start(t->loop, &w->sec);
    if (t->open_loop && !t->o->busy_poll) {
        /* Sleeps end when asked, not up to 50 µs later (the default slack), for this thread. */
        prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
        ev_io_init(&w->send, on_send, t->sendfd, EV_READ);
        w->send.data = t;
        ev_io_start(t->loop, &w->send);
    }
    /* Long mode opens every connection first; requests wait for main's first step, which
     * comes when all are open (or --open-timeout passed). A command sent before this loop ran
     * is pending on the async watcher and runs in it. */
    now = now_ns();
    if (t->o->mode == MODE_LONG)
        for (int i = 0; i < t->nconns; i++)
            if (bconn_connect_token(t, now, NULL)) /* the others: the tick, as tokens come */
                bconn_open(&t->conns[i], now, now);
    if (t->o->busy_poll)
        busy_loop(t, now); /* the opening above is work too */
    else
        ev_run(t->loop, 0);
    if (t->tls) /* the last closes' answers: a socket closed under them would be reset */
        bconn_settle_closes(t->conns, t->nconns,
                            t->o->timeout_ms > 0 && t->o->timeout_ms < 1000 ? t->o->timeout_ms
                                                                            : 1000);
    t->conn_min = UINT64_MAX;
    for (int i = 0; i < t->nconns; i++) {
        if (t->conns[i].done < t->conn_min)
            t->conn_min = t->conns[i].done;
        if (t->conns[i].done > t->conn_max)
            t->conn_max = t->conns[i].done;
    }
    publish(t);
    return NULL;
}

void engine_stop(struct bthread *t)
{
    ev_async_send(t->loop, &((struct watchers *)t->watchers)->stop);
}

void engine_command(struct bthread *t, const struct bcmd *c)
{
    pthread_mutex_lock(&t->pub_lock);
    t->cmd = *c;
    pthread_mutex_unlock(&t->pub_lock);
    ev_async_send(t->loop, &((struct watchers *)t->watchers)->cmd);
}

int engine_step_done(struct bthread *t)
{
    return __atomic_load_n(&t->step_done, __ATOMIC_ACQUIRE);
}

void engine_free(struct bthread *t)
{
    for (int i = 0; t->conns && i < t->nconns; i++)
        bconn_free(&t->conns[i]);
    if (t->loop)
        ev_loop_destroy(t->loop);
    if (t->epfd >= 0)
        close(t->epfd);
    if (t->sendfd >= 0)
        close(t->sendfd);
    pthread_mutex_destroy(&t->pub_lock);
    btls_ctx_free(t->tls);
    free(t->conns);
    free(t->fixed.data);
    free(t->buf);
    free(t->freeq);
    free(t->sch);
    free(t->watchers);
}
