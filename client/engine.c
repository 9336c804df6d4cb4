/* engine: lfbench's per-thread event loops, connections and statistics.
 *
 * Each thread runs its own libev loop (epoll backend) over its share of the connections; nothing
 * is shared on the request path. libev's epoll backend is level-triggered: every epoll_wait
 * re-polls each socket it reported last time (tcp_poll), which at 1,000 connections cost a
 * quarter of the client's speed. So a thread's sockets live in its own edge-triggered epoll
 * set, each registered once (EPOLLIN|EPOLLOUT|EPOLLET, never modified: no epoll_ctl per
 * request), and libev watches that one descriptor; timers and the cross-thread stop stay libev's.
 * Edge-triggered rules: read until a short read (for TCP that means the queue is empty), write
 * until the socket refuses, and an EPOLLOUT edge arrives when it drains. A connection keeps its
 * in-flight requests in a FIFO (pipelining): requests are written in order, possibly several per
 * write(2), and each response is matched to the oldest one and verified byte by byte as it arrives
 * (verify.c). Closed loop: a response frees its connection for the next request. Open loop (-R):
 * requests are due on a fixed schedule (rate.c) and wait for a free connection; latency counts from
 * the intended send time, so a stalled server shows as latency, not as fewer samples, and a send
 * due before the end that never found a connection (the run drains for up to --timeout) is counted
 * unsent. Free connections are taken in FIFO order, the one idle longest first, so the load spreads
 * over all of them as over independent users (a LIFO stack would keep reusing two or three and
 * route around a stalled server thread that real clients would hit). The schedule is kept by a
 * timerfd with a 1 ns timer slack: libev's epoll backend sleeps in whole milliseconds, which made
 * every open-loop request up to 1 ms late and put a 0.8 ms floor under the p50 it reported. A 10 ms
 * tick handles timeouts, reconnects, --connect-rate and the end of the run; a periodic timer at
 * each whole second of the wall clock hands that second's counters to the main thread under a
 * lock taken once a second (whole wall-clock seconds, so that merge adds the same second of
 * every agent, whenever each started).
 */
#include "engine.h"

#include "bscript.h"
#include "rate.h"
#include "sysc.h"
#include "verify.h"

#include <errno.h>
#include <ev.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define BUFSZ (64 * 1024)
#define TICK 0.01 /* seconds */
#define TICK_NS 10000000ull
#define SCAN_NS (100 * 1000000ull)  /* timeouts are looked for at most this often */
#define RETRY_NS (100 * 1000000ull) /* a refused or failed connect retries after this */
#define BEHIND_NS 1000000ull        /* an open-loop send this late is behind schedule */

enum cstate { CS_CLOSED, CS_CONNECTING, CS_OPEN };

struct req {
    uint64_t t0;     /* latency counts from here: send time, or intended time (open loop) */
    uint64_t t_sent; /* when it was issued: the timeout counts from here */
    uint64_t seq;
    uint32_t len;
    int cls;
    const uint8_t *data; /* --script: the bytes (its slot's buffer, or the fixed request), NULL:
                          * the payload class cls makes them */
    bool head, close;    /* --script, HTTP: what the request asks (payload classes say it else) */
    int tag;             /* --script: request()'s tag for response() (LUA_NOREF: none) */
};

/* --script with response(): whether the response being read is kept for it, or why not. */
enum rkeep {
    RK_KEPT,
    RK_TOO_BIG, /* over SCRIPT_MAX_RESPONSE */
    RK_MEM,     /* its buffer would take the thread past its share of --script-buffers-mb */
    RK_NOMEM,   /* realloc failed */
};

/* A response buffer up to this size is kept for the connection's next responses; a larger one
 * is freed once its response is handed over, so that what one large answer took comes back to
 * the thread's share. */
#define RB_KEEP (64u << 10)

/* --script: a request slot's copy of its bytes (request() reuses its string's buffer). */
struct sbuf {
    uint8_t *p;
    size_t cap;
};

struct bconn {
    struct bthread *t;
    int fd; /* -1 when closed */
    enum cstate state;
    uint32_t gid;      /* global connection index */
    uint32_t gen;      /* reconnects: the stream id changes with each */
    uint64_t conn_t0;  /* connect() time */
    uint64_t txn_t0;   /* short mode: the transaction's latency counts from here */
    uint64_t retry_at; /* closed: reconnect not before */
    uint64_t seq;      /* next request's sequence number */
    struct req *q;     /* in-flight requests, a ring of t->ring */
    struct sbuf *sb;   /* --script with request(): each slot's bytes */
    unsigned head, qn; /* oldest, and how many */
    unsigned qw;       /* of those, fully written */
    size_t woff;       /* bytes written of request head+qw */
    bool in_free;      /* open loop: queued in freeq */
    bool salvage;      /* a write failed: do_read takes the responses already in, nothing more */
    uint64_t done;     /* requests completed after the warm-up */
    uint64_t nreq;     /* requests issued on this connection since it opened */
    struct verify v;   /* the response to q[head] */
    struct req q1;     /* q when the pipeline is 1: no second cache line to fetch */
    /* --script with response(): the response to q[head] as it came (rcap counted in the
     * thread's resp_held) */
    uint8_t *rb;
    size_t rlen, rcap;
    enum rkeep rkeep; /* whether it is kept, or why not */
    /* --script with delay(): the next request waits until delay_at */
    bool delayed;      /* delay() was asked for the next request, and its wait ran out */
    uint64_t delay_at; /* 0: no wait armed */
    ev_timer dt;
};

struct watchers {
    ev_io sockets; /* the thread's edge-triggered epoll set */
    ev_io send;    /* open loop: the timerfd of the next due send */
    ev_timer tick;
    ev_periodic sec; /* at each whole second of the wall clock: merge adds agents' seconds */
    ev_async stop, cmd;
};

uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t stream_of(const struct bconn *c)
{
    return (uint64_t)c->gen << 32 | c->gid;
}

/* Whether the closed loop may issue a request now: not past the step's end, which the 10 ms
 * tick would notice only later (requests issued meanwhile were counted, 7 of 190 at -d 0.2). */
static bool can_issue(const struct bthread *t, uint64_t now)
{
    return !t->stopping && now < t->t_end && (t->quota == 0 || t->issued < t->quota);
}

/* --reconnect-every: c has carried its share and takes no more requests; it is closed and
 * reopened once its last response is in. */
static bool spent(const struct bconn *c)
{
    return c->t->o->reconnect_every && c->nreq >= c->t->o->reconnect_every;
}

/* Open loop: sends of this run that are due by now and not taken yet. The run's are those
 * intended before sched_end and, with -n, within the quota; the run being over does not cancel
 * them: each waits for a connection, and whatever is left at the very end is unsent. */
static uint64_t backlog(const struct bthread *t, uint64_t now)
{
    if (t->phase == PH_IDLE || t->sched_end == 0)
        return 0; /* no step runs */
    uint64_t due = rate_due(t->sch, now < t->sched_end ? now : t->sched_end - 1);
    uint64_t left = t->issued < t->quota ? t->quota - t->issued : 0;

    return t->quota && due > left ? left : due;
}

/* Open loop, at the end of a step: its due sends that never went out, those of the measured
 * window only; one intended in the warm-up is not the window's, as its response would not be. */
static uint64_t unsent_of(const struct bthread *t, uint64_t now)
{
    uint64_t left = backlog(t, now), warm = rate_due(t->sch, t->t_warm - 1);

    return left > warm ? left - warm : 0;
}

/* --connect-rate: takes a token for a new connection if the bucket has one. If not, and wait is
 * given, *wait is when the next one comes. */
static bool connect_token(struct bthread *t, uint64_t now, uint64_t *wait)
{
    double rate = t->o->connect_rate / t->o->threads;

    if (t->o->connect_rate <= 0)
        return true;
    t->tokens += rate * (double)(now - t->tokens_t) / 1e9;
    if (t->tokens > rate / 100 + 1)
        t->tokens = rate / 100 + 1; /* a burst of at most 10 ms worth */
    t->tokens_t = now;
    if (t->tokens < 1) {
        if (wait)
            *wait = now + (uint64_t)((1 - t->tokens) / rate * 1e9) + 1;
        return false;
    }
    t->tokens -= 1;
    return true;
}

/* n errors of kind e: one per request a failure ended, or one for a failure that ended none. */
static void count_errors(struct bthread *t, enum berr e, uint64_t n)
{
    t->total.errors[e] += n;
    t->cur.errors[e] += n;
    if (e == ERR_REFUSED)
        __atomic_store_n(&t->refused, t->refused + n, __ATOMIC_RELAXED);
    if (t->phase != PH_IDLE)
        t->sres.c.errors[e] += n;
}

/* A request of the step ended (answered or failed) now: with -n the measured window ends at the
 * last one (step_window in lfbench.c). */
static void step_mark(struct bthread *t, uint64_t now)
{
    if (t->phase != PH_IDLE)
        t->sres.t_to = now;
}

static void count_lost(struct bthread *t, uint64_t n)
{
    t->total.lost += n;
    t->cur.lost += n;
    t->sres.c.lost += n;
}

static enum berr errno_kind(int e)
{
    switch (e) {
    case ECONNREFUSED:
        return ERR_REFUSED;
    case ECONNRESET:
    case EPIPE:
        return ERR_RESET;
    case ETIMEDOUT:
        return ERR_TIMEOUT;
    case EADDRNOTAVAIL:
        return ERR_ADDRNOTAVAIL;
    case EMFILE:
    case ENFILE:
        return ERR_EMFILE;
    default:
        return ERR_OTHER;
    }
}

/* Open loop: queues c as able to take a request. At most one entry per connection, so freeq
 * (a ring of nconns) never overflows. */
static void push_free(struct bthread *t, struct bconn *c)
{
    if (t->open_loop && !c->in_free && c->state == CS_OPEN && c->qn + t->batch <= t->ring &&
        !spent(c)) {
        t->freeq[(t->fhead + t->nfree++) % t->nconns] = (int)(c - t->conns);
        c->in_free = true;
    }
}

/* Open loop: the connection idle longest, or NULL. */
static struct bconn *pop_free(struct bthread *t)
{
    while (t->nfree > 0) {
        struct bconn *f = &t->conns[t->freeq[t->fhead]];

        t->fhead = (t->fhead + 1) % t->nconns;
        t->nfree--;
        f->in_free = false;
        if (f->state == CS_OPEN && f->qn + t->batch <= t->ring && !spent(f))
            return f;
    }
    return NULL;
}

/* --script with response(): the bytes of the response being read, kept for it. Returns false
 * when they cannot be (c->rkeep says why): the response would pass SCRIPT_MAX_RESPONSE, or its
 * buffer would take the thread's response buffers past their share of --script-buffers-mb. */
static bool keep_response(struct bconn *c, const uint8_t *b, size_t n)
{
    struct bthread *t = c->t;

    if (n == 0)
        return true;
    if (c->rlen + n > SCRIPT_MAX_RESPONSE) {
        c->rkeep = RK_TOO_BIG;
        return false;
    }
    if (c->rlen + n > c->rcap) {
        size_t cap = c->rcap ? c->rcap : 4096;
        uint8_t *p;
        while (cap < c->rlen + n)
            cap *= 2;
        if (cap > SCRIPT_MAX_RESPONSE)
            cap = SCRIPT_MAX_RESPONSE;
        if (t->resp_held - c->rcap + cap > t->resp_share) {
            c->rkeep = RK_MEM;
            return false;
        }
        if (!(p = realloc(c->rb, cap))) {
            c->rkeep = RK_NOMEM;
            return false;
        }
        t->resp_held += cap - c->rcap;
        c->rb = p;
        c->rcap = cap;
    }
    memcpy(c->rb + c->rlen, b, n);
    c->rlen += n;
    return true;
}

/* The response is handed over, or its connection closed: its buffer is emptied, and freed (back
 * to the thread's share) when it is larger than RB_KEEP. */
static void release_response(struct bconn *c)
{
    c->rlen = 0;
    c->rkeep = RK_KEPT;
    if (c->rcap > RB_KEEP) {
        free(c->rb);
        c->rb = NULL;
        c->t->resp_held -= c->rcap;
        c->rcap = 0;
    }
}

/* Why the response was not kept, as its failed check says it (in buf), or NULL: it was. */
static const char *refused_why(const struct bconn *c, char *buf, size_t len)
{
    const struct bopt *o = c->t->o;

    switch (c->rkeep) {
    case RK_KEPT:
        return NULL;
    case RK_TOO_BIG:
        snprintf(buf, len, "a response over %u MiB, too big to hand to response()",
                 SCRIPT_MAX_RESPONSE >> 20);
        break;
    case RK_MEM:
        if (o->threads > 1)
            snprintf(buf, len,
                     "a response not kept for response(): the script's buffers would pass "
                     "--script-buffers-mb %u (%.1f MiB for each of the %d threads)",
                     o->script_buffers_mb, (double)o->script_buffers_mb / o->threads, o->threads);
        else
            snprintf(buf, len,
                     "a response not kept for response(): the script's buffers would pass "
                     "--script-buffers-mb %u",
                     o->script_buffers_mb);
        break;
    case RK_NOMEM:
        snprintf(buf, len, "a response not kept for response(): out of memory");
        break;
    }
    return buf;
}

static void close_conn(struct bconn *c)
{
    struct bthread *t = c->t;

    if (c->fd < 0)
        return;
    if (t->o->linger0) {
        struct linger lg = {1, 0}; /* RST instead of FIN: no TIME_WAIT on this side */
        setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    }
    sysc_close(c->fd);
    c->fd = -1;
    if (c->state == CS_OPEN)
        __atomic_store_n(&t->open, t->open - 1, __ATOMIC_RELAXED);
    c->state = CS_CLOSED;
    for (unsigned k = 0; t->sc && k < c->qn; k++) { /* tags of requests never answered */
        struct req *r = &c->q[(c->head + k) % t->ring];
        if (r->tag != -2)
            bscript_untag(t->sc, r->tag);
        r->tag = -2;
    }
    c->head = c->qn = c->qw = 0;
    c->woff = 0;
    release_response(c);
    if (c->delay_at) {
        ev_timer_stop(t->loop, &c->dt);
        c->delay_at = 0;
    }
    /* in_free stays as it is: it means "an entry of c is in freeq", and that entry is still
     * there; the pop checks the state. Clearing it here could queue c twice. */
    c->gen++;
    t->nclosed++;
}

/* Keeps the thread's first mismatch: the bytes from where verification met them (at most
 * sizeof(t->bad)) and their offset in their response. */
static void note_mismatch(struct bthread *t, const uint8_t *p, size_t n, uint64_t at)
{
    if (t->bad_seen)
        return;
    t->bad_seen = true;
    t->bad_len = n < sizeof(t->bad) ? n : sizeof(t->bad);
    memcpy(t->bad, p, t->bad_len);
    t->bad_at = at;
}

/* A failure on c: count it, drop what was in flight, reconnect later. Every request in flight
 * fails with it, an error of its kind each (a failure that ended none, a refused connect or an
 * idle connection reset, is one error): with --pipeline 8 a close ends up to 8 requests, and
 * counted once the other 7 were in no counter at all (157 of 3,999 against a server closing at
 * each connection's 50th request). A response that had begun to arrive is lost as well,
 * whatever cut it short (a timeout, a close, a reset): its request was answered, but never
 * whole. A mismatch is its own failure. */
static void fail(struct bconn *c, enum berr e)
{
    uint64_t now = now_ns();

    if (c->qn && c->v.got > 0 && e != ERR_MISMATCH)
        count_lost(c->t, 1);
    count_errors(c->t, e, c->qn ? c->qn : 1);
    if (c->qn || c->t->o->mode == MODE_SHORT)
        step_mark(c->t, now); /* short mode: an attempt ended */
    close_conn(c);
    c->retry_at =
        now + (e == ERR_REFUSED || e == ERR_ADDRNOTAVAIL || e == ERR_EMFILE ? RETRY_NS : 0);
}

/* The thread issues nothing more: Ctrl-C, thread:stop(), a script error. Requests in flight
 * finish, and the step ends. */
static void stop_issuing(struct bthread *t)
{
    if (t->phase != PH_RUN)
        return;
    t->stopping = true;
    if (t->t_end > now_ns())
        t->t_end = now_ns();
    if (t->sched_end > t->t_end)
        t->sched_end = t->t_end; /* sends due so far still go out */
}

/* After a call into the script: wrk.thread:stop() stops this thread; a script error stops it
 * and tells main (which stops the others and fails the run). Returns false on an error. */
static bool script_after(struct bthread *t, bool failed)
{
    if (failed) {
        __atomic_store_n(&t->script_failed, true, __ATOMIC_RELEASE);
        stop_issuing(t);
        t->stopping = true;
        return false;
    }
    if (bscript_stop_asked(t->sc) && !t->script_stopped) {
        __atomic_store_n(&t->script_stopped, true, __ATOMIC_RELAXED); /* main reads it */
        stop_issuing(t);
        t->stopping = true;
    }
    return true;
}

/* The response to q[head] begins: what it must be. */
static void start_verify(struct bconn *c)
{
    struct bthread *t = c->t;
    const struct req *r = &c->q[c->head];

    verify_start(&c->v, t->o->expect, t->o->expect_bytes, t->p, r->cls, stream_of(c), r->seq,
                 r->len);
    if (r->data)
        verify_bytes(&c->v, r->data, r->head, r->close);
    c->rlen = 0;
    c->rkeep = RK_KEPT;
}

/* Takes one request slot at the ring's tail. */
static struct req *slot(struct bconn *c, uint64_t t0, uint64_t now)
{
    struct bthread *t = c->t;
    struct req *r = &c->q[(c->head + c->qn) % t->ring];

    r->seq = c->seq++;
    r->t0 = t0;
    r->t_sent = now;
    r->data = NULL;
    r->tag = -2; /* LUA_NOREF */
    c->nreq++;
    if (t->o->mode == MODE_LONG)
        t->issued++; /* short mode counts the connection attempt instead (open_conn) */
    return r;
}

/* --script: request()'s string, its requests each in a slot of its own. false: a script error. */
static bool issue_script(struct bconn *c, uint64_t t0, uint64_t now)
{
    struct bthread *t = c->t;
    struct scpiece pc[SCRIPT_MAX_BATCH];
    const uint8_t *data;
    int n, tag, left = SCRIPT_MAX_BATCH;

    /* -n counts requests, not strings: the last string goes out cut to the requests left (a
     * string of 3 with -n 10 sent 12) */
    if (t->quota && t->o->mode == MODE_LONG && t->quota - t->issued < (uint64_t)left)
        left = t->issued < t->quota ? (int)(t->quota - t->issued) : 1;
    if (t->fixed.n) { /* no request(): one string, made once */
        for (int k = 0; k < t->fixed.n && k < left; k++) {
            struct req *r = slot(c, t0, now);
            r->data = t->fixed.data + t->fixed.pc[k].off;
            r->len = (uint32_t)t->fixed.pc[k].len;
            r->head = t->fixed.pc[k].head;
            r->close = t->fixed.pc[k].close;
            r->cls = 0;
            if (c->qn++ == 0)
                start_verify(c);
        }
        return true;
    }
    /* at most the first string's count (the batch): the rule does not depend on how many are
     * in flight at the moment (the ring has room for a batch whenever this is called) */
    n = bscript_request(t->sc, &data, pc, (int)t->batch, &tag);
    if (!script_after(t, n < 0))
        return false;
    if (n > left)
        n = left; /* a tag comes with one request only: none is dropped here */
    for (int k = 0; k < n; k++) {
        unsigned at = (c->head + c->qn) % t->ring;
        struct sbuf *b = &c->sb[at];
        struct req *r;

        if (pc[k].len > b->cap) {
            uint8_t *p = NULL;
            char why[256];

            /* every slot of every connection may come to hold a copy: the copies count with
             * the responses held, against the thread's share of --script-buffers-mb */
            if (t->resp_held - b->cap + pc[k].len > t->resp_share)
                snprintf(why, sizeof(why),
                         "a request() string of %zu bytes: its copies in flight (one per "
                         "connection and pipeline slot) would pass --script-buffers-mb %u%s: "
                         "return shorter strings, use fewer connections, or raise it",
                         pc[k].len, t->o->script_buffers_mb,
                         t->o->threads > 1 ? " (split between the threads)" : "");
            else if (!(p = realloc(b->p, pc[k].len)))
                snprintf(why, sizeof(why), "out of memory for a request's bytes");
            if (!p) { /* said as the script's failure: the run cannot go on as asked */
                bscript_untag(t->sc, tag);
                bscript_fail(t->sc, why);
                return script_after(t, true);
            }
            t->resp_held += pc[k].len - b->cap;
            b->p = p;
            b->cap = pc[k].len;
        }
        memcpy(b->p, data + pc[k].off, pc[k].len);
        r = slot(c, t0, now);
        r->data = b->p;
        r->len = (uint32_t)pc[k].len;
        r->head = pc[k].head;
        r->close = pc[k].close;
        r->cls = 0;
        r->tag = tag; /* one request when there is a tag */
        if (c->qn++ == 0)
            start_verify(c);
    }
    return true;
}

/* Issues the next request (--script: the next string's, one or more) on c; the caller writes
 * it (do_write). false: a script error stopped the thread. */
static bool issue(struct bconn *c, uint64_t t0, uint64_t now)
{
    struct bthread *t = c->t;
    struct req *r;

    if (t->script_req)
        return issue_script(c, t0, now);
    r = slot(c, t0, now);
    r->cls = payload_pick(t->p, &t->rng);
    r->len = (uint32_t)t->p->cls[r->cls].len;
    if (c->qn++ == 0)
        start_verify(c);
    return true;
}

static void do_write(struct bconn *c, uint64_t now);

static void open_conn(struct bconn *c, uint64_t now, uint64_t t0);

static void arm_send(struct bthread *t, uint64_t now, uint64_t token_at);

/* Open loop: hands due sends to free connections (or, short mode, to new connections). A send
 * is taken from the schedule only once it has its connection (and, short mode, its
 * --connect-rate token): until then it waits, and its latency keeps counting. */
static void dispatch_due(struct bthread *t, uint64_t now)
{
    uint64_t due = backlog(t, now), token_at = 0;
    bool first = true;

    while (due > 0) {
        struct bconn *c = NULL;
        uint64_t when;

        if (t->o->mode == MODE_SHORT) {
            for (int i = 0; i < t->nconns && !c; i++)
                if (t->conns[i].state == CS_CLOSED && t->conns[i].retry_at <= now)
                    c = &t->conns[i];
            if (c && !connect_token(t, now, &token_at))
                break; /* the timer wakes us when the next token comes */
        } else {
            c = pop_free(t);
        }
        if (!c)
            break; /* all busy: a connection that frees takes it */
        if (!first)
            now = now_ns(); /* the sends before this one took time */
        first = false;
        when = rate_take(t->sch);
        due--;
        /* The schedule's counters are the measured window's, as the responses are: with a
         * warm-up they counted its sends too (3,000 intended beside 1,000 requests). */
        if (when >= t->t_warm) {
            t->intended++;
            t->sres.intended++;
            if (now - when > BEHIND_NS) {
                t->behind++;
                t->sres.behind++;
            }
        }
        if (t->o->mode == MODE_SHORT) {
            open_conn(c, now, when); /* the transaction counts from when it was due */
        } else {
            if (!issue(c, when, now))
                break;
            do_write(c, now);
            if (c->fd >= 0)
                push_free(t, c);
        }
    }
    arm_send(t, now, token_at);
}

static void on_delay(struct ev_loop *loop, ev_timer *w, int revents);

/* Closed loop, long mode: c takes as many requests as its pipeline has room for. With the
 * script's delay(), a connection with nothing in flight first waits what delay() says (wrk: a
 * delay before each request; here before each request that finds the connection idle). */
static void fill(struct bconn *c, uint64_t now)
{
    struct bthread *t = c->t;

    if (t->bscript_delay && c->qn == 0 && can_issue(t, now) && !spent(c)) {
        if (c->delay_at && now < c->delay_at)
            return; /* on_delay comes */
        if (!c->delay_at) {
            int64_t ns = bscript_delay(t->sc);
            if (!script_after(t, ns < 0))
                return;
            if (ns > 0) {
                c->delay_at = now + (uint64_t)ns;
                ev_timer_set(&c->dt, (double)ns / 1e9, 0.);
                ev_timer_start(t->loop, &c->dt);
                return;
            }
        }
        c->delay_at = 0;
    }
    while (c->qn + t->batch <= t->ring && can_issue(t, now) && !spent(c))
        if (!issue(c, now, now))
            return;
}

static void on_delay(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct bconn *c = w->data;
    uint64_t now = now_ns();

    (void)loop;
    (void)revents;
    if (c->fd < 0 || c->state != CS_OPEN || c->t->phase != PH_RUN || c->t->open_loop) {
        c->delay_at = 0;
        return;
    }
    c->delay_at = 1; /* waited: fill issues without asking delay() again */
    fill(c, now);
    c->delay_at = 0;
    if (c->qw < c->qn)
        do_write(c, now);
}

static void connected(struct bconn *c, uint64_t now)
{
    struct bthread *t = c->t;

    c->state = CS_OPEN;
    __atomic_store_n(&t->open, t->open + 1, __ATOMIC_RELAXED);
    __atomic_store_n(&t->established, t->established + 1, __ATOMIC_RELAXED);
    t->cur.connects++;
    c->nreq = 0;
    if (t->phase != PH_IDLE && now >= t->t_warm) {
        t->total.connects++;
        t->sres.c.connects++;
        hist_record(&t->clat, now - c->conn_t0);
    }
    if (t->o->mode == MODE_SHORT) {
        if (!issue(c, c->txn_t0, now)) /* short: the request's latency includes the connect */
            return;
        do_write(c, now);
    } else if (t->open_loop) {
        push_free(t, c);
        dispatch_due(t, now);
    } else if (t->phase == PH_RUN) {
        fill(c, now);
        do_write(c, now);
    }
}

static void open_conn(struct bconn *c, uint64_t now, uint64_t t0)
{
    struct bthread *t = c->t;
    const struct bopt *o = t->o;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.ptr = c};
    int one = 1, err;

    if (o->mode == MODE_SHORT)
        t->issued++; /* one connection, one request: -n counts attempts */
    c->fd = socket(t->addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        goto out_error;
    if (t->nodelay)
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    /* With the server's cookie cached, connect() returns at once and the first write goes out
     * in the SYN; without one, the SYN asks for a cookie and the connect goes on as usual. */
    if (o->fastopen && setsockopt(c->fd, IPPROTO_TCP, TCP_FASTOPEN_CONNECT, &one, sizeof(one)) < 0)
        goto out_close;
    if (o->nsources) {
        struct sockaddr_in src = {.sin_family = AF_INET,
                                  .sin_addr = o->sources[t->next_source++ % (unsigned)o->nsources]};
        /* The port is chosen at connect() time, per destination: one source address is not
         * limited to the ephemeral range once for all its destinations. Each new connection
         * takes the next address, so all of them share the load even with fewer connections
         * than addresses: TIME_WAIT then fills each one's port range less, and connect()
         * searches it faster. */
        setsockopt(c->fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
        if (bind(c->fd, (struct sockaddr *)&src, sizeof(src)) < 0)
            goto out_close;
    }
    c->txn_t0 = t0;
    c->head = c->qn = c->qw = 0;
    c->woff = 0;
    /* Registered once for both directions; edges say when to read, when a full socket drained,
     * and when the connect completed. */
    if (epoll_ctl(t->epfd, EPOLL_CTL_ADD, c->fd, &ev) < 0)
        goto out_close;
    c->conn_t0 = now_ns(); /* not the caller's: socket, bind and epoll_ctl came between */
    err = sysc_connect(c->fd, t->addr, t->addrlen) == 0 ? 0 : errno;
    {
        /* The time connect() itself took: the kernel's search of the ephemeral port range,
         * slow when TIME_WAIT crowds it. The client's, not the server's. */
        uint64_t spent_ns = now_ns() - c->conn_t0;
        t->connect_ns += spent_ns;
        t->connect_calls++;
        if (t->step == 0) { /* the opening: no step commanded yet */
            t->open_connect_ns += spent_ns;
            t->open_connect_calls++;
        }
        if (spent_ns > t->connect_max_ns)
            t->connect_max_ns = spent_ns;
    }
    if (err == 0) {
        t->nclosed--;
        connected(c, now_ns());
        return;
    }
    errno = err;
    if (errno != EINPROGRESS)
        goto out_close;
    c->state = CS_CONNECTING;
    t->nclosed--;
    return;

out_close:
    err = errno;
    close(c->fd);
    c->fd = -1;
    errno = err;
out_error:
    count_errors(t, errno_kind(errno), 1);
    if (o->mode == MODE_SHORT)
        step_mark(t, now); /* an attempt ended */
    c->retry_at = now + RETRY_NS;
}

/* --script: a check's verdict in the counters (the measured window's too where it is one). */
static void count_check(struct bthread *t, bool failed, bool measured)
{
    t->cur.checks++;
    t->cur.check_failed += failed;
    if (measured) {
        t->total.checks++;
        t->sres.c.checks++;
        t->total.check_failed += failed;
        t->sres.c.check_failed += failed;
    }
}

/* --script: response() judges the whole response. A failed check is counted here, as a
 * mismatch too; the response is counted by the caller like any other (its connection stays
 * open: its framing held): the rate is the server's, as wrk counts a non-2xx response. */
static void script_check(struct bconn *c, uint64_t now, bool measured)
{
    struct bthread *t = c->t;
    struct req *r = &c->q[c->head];
    int rc = bscript_response(t->sc, c->v.status, c->rb, c->rlen, (size_t)c->v.http.head_bytes,
                              c->v.http.te_chunked, NULL, r->tag);
    bool failed;

    r->tag = -2; /* consumed */
    release_response(c);
    failed = script_after(t, rc < 0) && rc != 0; /* a script error is said as one, not as a
                                                  * failed check */
    count_check(t, failed, measured);
    if (!failed)
        return;
    count_errors(t, ERR_MISMATCH, 1);
    step_mark(t, now);
}

/* --script with response(): the response to q[head] cannot be kept (keep_response). Its check
 * fails at once, with the reason, and its connection fails: the rest of the response would be
 * read for nothing (an endless body never ends). It and the requests behind it on the connection
 * are mismatches, as behind any response that is not what it must be. */
static void refuse_response(struct bconn *c)
{
    struct bthread *t = c->t;
    struct req *r = &c->q[c->head];
    char why[256];

    bool measured = r->t0 >= t->t_warm && t->phase != PH_IDLE;

    bscript_response(t->sc, 0, NULL, 0, 0, false, refused_why(c, why, sizeof(why)), r->tag);
    r->tag = -2; /* consumed */
    count_check(t, true, measured);
    /* a failed check, but not a response: the requests line counts it apart */
    t->cur.check_unkept++;
    if (measured) {
        t->total.check_unkept++;
        t->sres.c.check_unkept++;
    }
    fail(c, ERR_MISMATCH);
}

static void finish_request(struct bconn *c, uint64_t now)
{
    struct bthread *t = c->t;
    struct req *r = &c->q[c->head];
    bool non2xx = t->o->expect == EXPECT_HTTP && !bopt_status_ok(t->o, c->v.status);
    bool measured = r->t0 >= t->t_warm && t->phase != PH_IDLE;

    if (t->script_resp)
        script_check(c, now, measured);
    t->cur.requests++;
    t->cur.http_non2xx += non2xx; /* a status counted, not a failure: the response was whole */
    step_mark(t, now);
    hist_record(&t->cur_lat, now - r->t0);
    if (measured) {
        t->total.http_non2xx += non2xx;
        t->sres.c.http_non2xx += non2xx;
        c->done++;
        t->total.requests++;
        t->total.bytes_in += c->v.got;
        t->sres.c.requests++;
        t->sres.c.bytes_in += c->v.got;
        hist_record(&t->lat, now - r->t0);
        if (t->steps) { /* a single step's is the total's */
            hist_record(&t->sres.lat, now - r->t0);
            /* exact, where the histogram's percentile is within 0.4%: the bound's verdict */
            t->sres.over_bound += (double)(now - r->t0) > t->o->find_bound_us * 1e3;
        }
        if (t->hdr)
            hist_record(&t->cur_mlat, now - r->t0);
        if (t->p->n > 1 && !r->data)
            hist_record(&t->cls_lat[r->cls], now - r->t0);
    }
    c->head = (c->head + 1) % t->ring;
    c->qn--;
    c->qw--;
    if (c->qn)
        start_verify(c);
}

static void do_read(struct bconn *c, uint64_t now, bool ended);

/* A write on c failed: the server reset the connection (a write fails only once its reset came).
 * It may have answered first, and the responses are in the socket, delivered: the open loop
 * writes a due send when its time comes, before it reads what the same connection has, and
 * counted those as resets. So what is there is read first, as any response is (do_read, which
 * issues and writes nothing more meanwhile), and the requests left fail. Short mode has nothing
 * to take: its request was not all written, so no response can be its own. */
static void write_failed(struct bconn *c, enum berr e, uint64_t now)
{
    uint32_t gen = c->gen;

    if (c->t->o->mode == MODE_LONG) {
        c->salvage = true;
        do_read(c, now, true);
        c->salvage = false;
    }
    if (c->gen == gen) /* else do_read closed it already: a mismatch, a Connection: close */
        fail(c, e);
}

static void do_write(struct bconn *c, uint64_t now)
{
    struct bthread *t = c->t;
    unsigned P = t->ring;

    while (c->qw < c->qn) {
        size_t fill = 0, off = c->woff;
        ssize_t w;

        /* Coalesce the unwritten requests into one write. */
        for (unsigned k = c->qw; k < c->qn && fill < BUFSZ; k++) {
            struct req *r = &c->q[(c->head + k) % P];
            size_t n = r->len - off < BUFSZ - fill ? r->len - off : BUFSZ - fill;
            if (r->data)
                memcpy(t->buf + fill, r->data + off, n);
            else
                payload_bytes(t->p, r->cls, stream_of(c), r->seq, off, t->buf + fill, n);
            fill += n;
            off = 0;
        }
        w = sysc_write(c->fd, t->buf, fill);
        if (w < 0) {
            if (errno == EAGAIN || errno == EINTR)
                return; /* an EPOLLOUT edge comes when it drains */
            write_failed(c, errno_kind(errno), now);
            return;
        }
        bool all = (size_t)w == fill;
        t->cur.bytes_out += (uint64_t)w;
        if (now >= t->t_warm && t->phase != PH_IDLE) {
            t->total.bytes_out += (uint64_t)w;
            t->sres.c.bytes_out += (uint64_t)w;
        }
        while (w > 0) {
            struct req *r = &c->q[(c->head + c->qw) % P];
            size_t left = r->len - c->woff;
            if ((size_t)w >= left) {
                w -= (ssize_t)left;
                c->qw++;
                c->woff = 0;
            } else {
                c->woff += (size_t)w;
                w = 0;
            }
        }
        if (!all)
            return; /* the socket is full: an EPOLLOUT edge comes when it drains */
    }
}

/* Short mode: the transaction is over, its response whole and nothing behind it. */
static void short_done(struct bconn *c, uint64_t now)
{
    struct bthread *t = c->t;

    finish_request(c, now);
    close_conn(c);
    c->retry_at = 0;
    if (!t->open_loop && can_issue(t, now) && connect_token(t, now, NULL))
        open_conn(c, now, now); /* without a token the tick opens it */
    else if (t->open_loop)
        dispatch_due(t, now);
}

/* Long mode: the server ended the connection cleanly between requests, and a new one replaces it,
 * counted in reconnects, not an error. --expect http: after the response just finished
 * (Connection: close, HTTP/1.0, a close-delimited body) or idle. Other framings (a stopping
 * lfepolld ends echo connections so, and so does a server's idle timeout): with nothing in
 * flight, or with requests issued but not one byte of them written yet (the end of the stream
 * came in the same read as the last response), once the connection has completed a request: one
 * closed before its first is a server shedding connections, the error "closed", as is a
 * request the server was sent and never answered (do_read). HTTP: requests pipelined
 * behind that response are never answered; HTTP has the client send them again (RFC 9112
 * §9.3.2). The closed loop does: they go back to the issuer (-n still completes its count) and
 * the new connection sends them as new requests, their latency counted from that resend. The
 * open loop cannot send them again at their intended times, so there they count as what they
 * are, requests lost to a close: a "closed" error each, and lost. at_once: open the new connection
 * now; else the tick does (an idle connection closed: a server that closes every connection
 * at once would otherwise keep this thread reconnecting in a loop). */
static void reopen_clean(struct bconn *c, uint64_t now, bool at_once)
{
    struct bthread *t = c->t;

    if (c->qn && t->open_loop) {
        count_errors(t, ERR_CLOSED, c->qn);
        count_lost(t, c->qn);
        step_mark(t, now);
    } else if (c->qn) {
        t->issued -= c->qn;
        /* -n reached may have ended the step already: these were never answered, so it goes
         * on until they are (else they vanished: 1,998 of -n 2,000 against nginx, no error) */
        if (t->phase == PH_DRAIN && t->quota && t->issued < t->quota && now < t->t_end) {
            t->phase = PH_RUN;
            t->stopping = false;
        }
    }
    t->total.reconnects++;
    t->cur.reconnects++;
    t->sres.c.reconnects++;
    close_conn(c);
    c->retry_at = 0;
    if (!at_once)
        return;
    open_conn(c, now, now);
    if (t->open_loop)
        dispatch_due(t, now);
}

/* Reads what c has. ended: the event said the peer closed or reset, so a short read does not
 * mean drained: the end of file or the error behind the data is read too (no edge will come for
 * it, and the connection would wait for --timeout). now: the batch's time, taken again after
 * each read: a response ends, and the request that follows it starts, when that read returned,
 * not when the batch of up to 256 events began (the events before this one took time). */
static void do_read(struct bconn *c, uint64_t now, bool ended)
{
    struct bthread *t = c->t;
    /* Short mode: when the response was whole. It counts only once the socket is seen empty
     * behind it: a byte after it is a response longer than asked for. A close or a reset after
     * it is the server's business (many close once they have answered). */
    uint64_t whole_at = 0;

    for (;;) {
        ssize_t n = sysc_read(c->fd, t->buf, BUFSZ), pos = 0;

        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                break;
            if (whole_at)
                break;
            if (!c->salvage) /* else write_failed fails it, with the write's error */
                fail(c, errno_kind(errno));
            return;
        }
        if (n == 0) {
            if (whole_at)
                break;
            if (c->salvage) {
                /* The end of a reset: a close-delimited HTTP body may end here too. The rest
                 * fails in write_failed, which the closes below would have called clean. */
                if (c->qn && c->qw && verify_eof(&c->v) == VERIFY_DONE)
                    finish_request(c, now_ns());
                return;
            }
            if (t->o->expect == EXPECT_HTTP && t->o->mode == MODE_LONG && c->qn == 0) {
                reopen_clean(c, now, false); /* an idle keep-alive connection closed */
                return;
            }
            if (t->o->expect != EXPECT_HTTP && t->o->mode == MODE_LONG && c->nreq > c->qn &&
                (c->qn == 0 || (c->qw == 0 && c->woff == 0))) {
                reopen_clean(c, now, c->qn > 0); /* closed between requests */
                return;
            }
            if (c->qn && c->qw && verify_eof(&c->v) == VERIFY_DONE) {
                now = now_ns(); /* a close-delimited HTTP body: the EOF is its end */
                if (t->o->mode == MODE_SHORT) {
                    short_done(c, now);
                } else {
                    finish_request(c, now);
                    reopen_clean(c, now, true);
                }
                return;
            }
            fail(c, ERR_CLOSED);
            return;
        }
        now = now_ns();
        t->cur.bytes_in += (uint64_t)n;
        if (whole_at) {
            fail(c, ERR_MISMATCH);
            return;
        }
        while (pos < n) {
            size_t used;
            uint64_t got;
            enum verify_status st;
            bool kept;

            /* An echo may start before its request is all written; bytes with no request in
             * flight, though, are bytes nobody asked for. */
            if (c->qn == 0) {
                note_mismatch(t, t->buf + pos, (size_t)(n - pos), 0);
                fail(c, ERR_MISMATCH);
                return;
            }
            got = c->v.got;
            st = verify_feed(&c->v, t->buf + pos, (size_t)(n - pos), &used);
            kept = !t->script_resp || keep_response(c, t->buf + pos, used);
            if (st == VERIFY_BAD) {
                note_mismatch(t, t->buf + pos, (size_t)(n - pos), got);
                fail(c, ERR_MISMATCH);
                return;
            }
            pos += (ssize_t)used;
            if (!kept) {
                refuse_response(c);
                return;
            }
            if (st != VERIFY_DONE)
                continue;
            if (c->qw == 0) { /* answered before it was all sent: not its response */
                fail(c, ERR_MISMATCH);
                return;
            }
            if (t->o->mode == MODE_SHORT) {
                if (pos < n) {
                    fail(c, ERR_MISMATCH);
                    return;
                }
                whole_at = now; /* and read on, past a full buffer, to see what follows */
                break;
            }
            if (c->v.close_after) { /* HTTP: the server closes after it */
                finish_request(c, now);
                reopen_clean(c, now, !c->salvage);
                return;
            }
            finish_request(c, now);
            if (c->salvage)
                continue; /* the connection is failing: it takes no more */
            if (t->open_loop)
                push_free(t, c);
            else
                fill(c, now); /* written below, with any others, in one write */
        }
        if (n < BUFSZ && !ended)
            break; /* a short read drained the socket */
    }
    if (c->salvage)
        return;
    if (whole_at) {
        short_done(c, whole_at);
        return;
    }
    if (c->qn == 0 && spent(c)) {
        /* --reconnect-every: a clean close between requests, and a new connection */
        t->total.reconnects++;
        t->cur.reconnects++;
        t->sres.c.reconnects++;
        close_conn(c);
        c->retry_at = 0;
        open_conn(c, now, now);
        if (t->open_loop)
            dispatch_due(t, now);
        return;
    }
    if (c->qw < c->qn)
        do_write(c, now);
    if (t->open_loop)
        dispatch_due(t, now);
}

static void on_event(struct bconn *c, uint32_t events, uint64_t now)
{
    if (c->fd < 0)
        return; /* closed earlier in this batch */
    if (c->state == CS_CONNECTING) {
        int err = 0;
        socklen_t len = sizeof(err);

        if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
            return;
        /* Writable without an error or hangup is connected: SO_ERROR is asked only when the
         * connect failed (a syscall less per short connection). */
        if ((events & (EPOLLERR | EPOLLHUP)) &&
            getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err) {
            fail(c, errno_kind(err));
            return;
        } /* a hangup without an error: connected, and do_read sees the end */
        connected(c, now = now_ns()); /* its own time: the connect latency ends here */
        if (c->fd < 0)
            return;
    }
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP))
        do_read(c, now, events & (EPOLLRDHUP | EPOLLERR | EPOLLHUP));
    if ((events & EPOLLOUT) && c->fd >= 0 && c->state == CS_OPEN && c->qw < c->qn)
        do_write(c, now);
}

/* Takes a batch of up to 256 events, edge-triggered; returns how many. */
static int take_events(struct bthread *t)
{
    struct epoll_event evs[256];
    int n = sysc_epoll_wait(t->epfd, evs, 256, 0);
    uint64_t now = now_ns(); /* the batch's; what a sample needs is taken where it happens */

    for (int i = 0; i < n; i++)
        on_event(evs[i].data.ptr, evs[i].events, now);
    return n;
}

/* libev says the thread's epoll set has events. */
static void on_sockets(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)loop;
    (void)revents;
    if (take_events(w->data) > 0)
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
        if (t->conns[i].state == CS_CONNECTING || t->conns[i].qn > 0)
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
    for (int i = 0; i < t->nconns; i++) {
        struct bconn *c = &t->conns[i];
        if (c->qn || (t->o->mode == MODE_SHORT && c->state == CS_CONNECTING)) {
            count_errors(t, ERR_TIMEOUT, c->qn ? c->qn : 1); /* short: the attempt */
            count_lost(t, c->qn);
            close_conn(c);
            c->retry_at = 0;
            step_mark(t, now);
        }
    }
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
     * miss or two each, 1.5 ms in which due sends waited, every 100 ms: the p99 of an open
     * loop at 1,000/s. */
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
    for (int batches = t->nconns / 256 + 1; batches > 0 && take_events(t) == 256; batches--)
        ; /* bounded: under load new events never stop coming, and the tick must go on */
    now = now_ns();
    for (int k = 0; k < slice; k++) {
        struct bconn *c = &t->conns[t->scan_pos];

        if (++t->scan_pos == t->nconns)
            t->scan_pos = 0;
        if (c->state == CS_CONNECTING && now - c->conn_t0 > limit)
            fail(c, ERR_TIMEOUT);
        else if (c->state == CS_OPEN && c->qn && now - c->q[c->head].t_sent > limit)
            fail(c, ERR_TIMEOUT);
    }
    /* Closed connections reopen: long mode, whenever the step is not draining (between steps
     * too: the connections are the run's), or while due sends wait for them; short mode's closed
     * loop, while it issues (each open counts against -n); short mode's open loop connects per
     * send. */
    if (t->o->mode == MODE_LONG)
        reopen = t->phase != PH_DRAIN || (t->open_loop && backlog(t, now) > 0);
    else
        reopen = !t->open_loop; /* and can_issue(), asked per connection: each open counts */
    for (int i = 0; t->nclosed > 0 && i < t->nconns; i++) {
        struct bconn *c = &t->conns[i];

        if (c->state == CS_CLOSED && c->retry_at <= now && reopen &&
            (t->o->mode == MODE_LONG || can_issue(t, now)) && connect_token(t, now, NULL))
            open_conn(c, now, now);
    }
    if (t->open_loop)
        dispatch_due(t, now);
    if (t->phase == PH_DRAIN) {
        /* The step is over: in-flight requests, and due sends still waiting for a connection,
         * get up to --timeout; then the first count as timed out and lost, the others as
         * unsent. */
        uint64_t left = t->open_loop ? backlog(t, now) : 0;

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
    pthread_mutex_unlock(&t->pub_lock);
    memset(&t->cur, 0, sizeof(t->cur));
    hist_init(&t->cur_lat);
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
    stop_issuing(w->data);
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
        dispatch_due(t, now);
        return;
    }
    for (int i = 0; i < t->nconns && can_issue(t, now); i++) {
        struct bconn *c = &t->conns[i];

        if (t->o->mode == MODE_SHORT) {
            if (c->state == CS_CLOSED && connect_token(t, now, NULL)) /* others: the tick */
                open_conn(c, now, now);
            continue;
        }
        if (c->state != CS_OPEN)
            continue; /* connected() starts it when it opens */
        fill(c, now);
        do_write(c, now);
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
            close_conn(&t->conns[i]);
        ev_break(loop, EVBREAK_ALL);
        t->quit = true;
    } else if (cmd.seq != t->step && t->phase == PH_IDLE) {
        start_step(t, &cmd);
    }
}

/* Arms the send timerfd for the next send of the run: when it is due, or when a --connect-rate
 * token comes for one already due (token_at); a syscall only when that time changed. One due and
 * waiting for a connection to free is dispatched then (do_read, the tick), so the timer is left
 * off rather than firing in a loop. */
static void arm_send(struct bthread *t, uint64_t now, uint64_t token_at)
{
    uint64_t next = rate_next_time(t->sch), want;
    struct itimerspec its = {{0, 0}, {0, 0}};

    if (t->o->busy_poll)
        return; /* busy_loop looks at the schedule each turn */
    if (next >= t->sched_end || (t->quota && t->issued >= t->quota))
        want = 0; /* the run has no more */
    else
        want = next > now ? next : token_at;
    if (want == t->send_at)
        return;
    its.it_value.tv_sec = (time_t)(want / 1000000000ull);
    its.it_value.tv_nsec = (long)(want % 1000000000ull);
    timerfd_settime(t->sendfd, TFD_TIMER_ABSTIME, &its, NULL);
    t->send_at = want;
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
    dispatch_due(t, now);
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
    /* Nagle (with Minshall's rule) never holds back the only write of a short connection's
     * request; it does hold a pipelined or long connection's next small request, and pieces of
     * a big one. So TCP_NODELAY, a syscall per connection, only where it can matter. */
    t->nodelay = o->mode == MODE_LONG;
    for (int k = 0; k < p->n; k++)
        t->nodelay |= p->cls[k].len > 16384;
    t->nodelay |= t->script_req; /* a script's requests may be of any size */
    t->tokens = 1;
    t->tokens_t = t_start;
    t->conns = calloc((size_t)n, sizeof(*t->conns));
    t->nclosed = n; /* every connection starts closed */
    t->buf = malloc(BUFSZ);
    t->freeq = calloc((size_t)n, sizeof(*t->freeq));
    t->sendfd = -1;
    t->watchers = calloc(1, sizeof(struct watchers));
    if (t->open_loop)
        t->sch = calloc(1, sizeof(*t->sch)); /* each step sets it up */
    if (!t->conns || !t->buf || !t->freeq || !t->watchers || (t->open_loop && !t->sch))
        return -1;
    for (int i = 0; i < n; i++) {
        struct bconn *c = &t->conns[i];
        c->t = t;
        c->fd = -1;
        c->gid = base + (uint32_t)i;
        c->q = t->ring == 1 ? &c->q1 : calloc(t->ring, sizeof(*c->q));
        if (!c->q)
            return -1;
        if (t->script_req && !t->fixed.n && !(c->sb = calloc(t->ring, sizeof(*c->sb))))
            return -1;
        ev_timer_init(&c->dt, on_delay, 0., 0.);
        c->dt.data = c;
    }
    hist_init(&t->lat);
    hist_init(&t->clat);
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
        if (t->open_loop && backlog(t, now) > 0) { /* in a step, within its schedule and quota */
            uint64_t before = t->sch->next;

            /* Due, but every connection busy (the server is the limit) or no --connect-rate
             * token yet: a turn that sent nothing is polling, not work. */
            dispatch_due(t, now);
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
            if (connect_token(t, now, NULL)) /* the others: the tick, as tokens come */
                open_conn(&t->conns[i], now, now);
    if (t->o->busy_poll)
        busy_loop(t, now); /* the opening above is work too */
    else
        ev_run(t->loop, 0);
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
    for (int i = 0; t->conns && i < t->nconns; i++) {
        if (t->conns[i].fd >= 0)
            close(t->conns[i].fd);
        if (t->conns[i].q != &t->conns[i].q1)
            free(t->conns[i].q);
        for (unsigned k = 0; t->conns[i].sb && k < t->ring; k++)
            free(t->conns[i].sb[k].p);
        free(t->conns[i].sb);
        free(t->conns[i].rb);
    }
    if (t->loop)
        ev_loop_destroy(t->loop);
    if (t->epfd >= 0)
        close(t->epfd);
    if (t->sendfd >= 0)
        close(t->sendfd);
    pthread_mutex_destroy(&t->pub_lock);
    free(t->conns);
    free(t->fixed.data);
    free(t->buf);
    free(t->freeq);
    free(t->sch);
    free(t->watchers);
}
