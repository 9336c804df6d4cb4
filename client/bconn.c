/* bconn: one connection of a load thread, and the thread's request path around it.
 *
 * A connection keeps its in-flight requests in a FIFO (pipelining): requests are written in
 * order, possibly several per write(2), and each response is matched to the oldest one and
 * verified byte by byte as it arrives (verify.c). Closed loop: a response frees its connection for
 * the next request. Open loop (-R): requests are due on a fixed schedule (rate.c) and wait for a
 * free connection; latency counts from the intended send time, so a stalled server shows as
 * latency, not as fewer samples, and a send due before the end that never found a connection (the
 * run drains for up to --timeout) is counted unsent. Free connections are taken in FIFO order, the
 * one idle longest first, so the load spreads over all of them as over independent users (a LIFO
 * stack would keep reusing two or three and route around a stalled server thread that real
 * clients would hit). The sockets are edge-triggered (engine.c says why): read until a short read
 * (for TCP that means the queue is empty), write until the socket refuses, and an EPOLLOUT edge
 * arrives when it drains.
 *
 * The whole request path is in this file, from the event to the next request's write, so that it
 * is one unit for the compiler; engine.c, the loop, calls into it and it never calls back.
 */
#include "bconn.h"

#include "bscript.h"
#include "btls.h"
#include "rate.h"
#include "sysc.h"
#include "verify.h"

#include <errno.h>
#include <ev.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#define RETRY_NS (100 * 1000000ull) /* a refused or failed connect retries after this */
#define BEHIND_NS 1000000ull        /* an open-loop send this late is behind schedule */

/* A response buffer up to this size is kept for the connection's next responses; a larger one
 * is freed once its response is handed over, so that what one large answer took comes back to
 * the thread's share. */
#define RB_KEEP (64u << 10)

static void do_write(struct bconn *c, uint64_t now);

static void arm_send(struct bthread *t, uint64_t now, uint64_t token_at);

static uint64_t stream_of(const struct bconn *c)
{
    return (uint64_t)c->gen << 32 | c->gid;
}

/* Whether the closed loop may issue a request now: not past the step's end, which the 10 ms
 * tick would notice only later (requests issued meanwhile were counted, 7 of 190 at -d 0.2). */
bool bconn_can_issue(const struct bthread *t, uint64_t now)
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
uint64_t bconn_backlog(const struct bthread *t, uint64_t now)
{
    if (t->phase == PH_IDLE || t->sched_end == 0)
        return 0; /* no step runs */
    uint64_t due = rate_due(t->sch, now < t->sched_end ? now : t->sched_end - 1);
    uint64_t left = t->issued < t->quota ? t->quota - t->issued : 0;

    return t->quota && due > left ? left : due;
}

/* --connect-rate: takes a token for a new connection if the bucket has one. If not, and wait is
 * given, *wait is when the next one comes. */
bool bconn_connect_token(struct bthread *t, uint64_t now, uint64_t *wait)
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

/* --tls: the thread's first TLS failure, in words (the summary's "tls error" line). */
static void tls_note(struct bthread *t, const char *why)
{
    if (!t->tls_why[0])
        snprintf(t->tls_why, sizeof(t->tls_why), "%s", why);
}

static enum berr tls_kind(const struct tls_err *e)
{
    switch (e->kind) {
    case TLS_F_VERIFY:
        return ERR_TLS_VERIFY;
    case TLS_F_ALERT:
        return ERR_TLS_ALERT;
    case TLS_F_NOT_TLS:
        return ERR_TLS_NOT_TLS;
    case TLS_F_SYSCALL:
        return errno_kind(e->sys_errno);
    case TLS_F_TRUNCATED:
        return ERR_TLS_TRUNCATED;
    default:
        return ERR_TLS_OTHER;
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

/* --tls: c's half-closed socket (closing_fd): what the server sent is read and dropped (bounded:
 * 8 reads), and the socket closed once its end is there, or at once where force. */
static void settle_close(struct bconn *c, bool force)
{
    uint8_t junk[4096];
    ssize_t r = -1;

    if (c->closing_fd < 0)
        return;
    for (int k = 0; k < 8 && (r = recv(c->closing_fd, junk, sizeof(junk), MSG_DONTWAIT)) > 0; k++)
        ;
    if (!force && r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return; /* the server's close_notify and FIN are still on the way */
    sysc_close(c->closing_fd);
    c->closing_fd = -1;
}

/* --tls, a clean close: the close_notify and a FIN go out, and the socket stays open until the
 * server's answer (its close_notify, its FIN) has come and been read. Closing at once would
 * leave bytes the server sends after the handshake (a TLS 1.3 NewSessionTicket) or in answer
 * (its close_notify) unread, or make them arrive at a closed socket: the kernel answers either
 * with a RST, and every short-mode close would count at the server as a reset. Nothing waits:
 * what is there now is read; else the socket is looked at again when c's next handshake ends
 * (a round trip later), and closed, read or not, at c's next close or at the end. So a close
 * costs a shutdown and a recv or two, and c holds at most one such socket. */
static void close_tls_in_order(struct bconn *c)
{
    settle_close(c, true);
    shutdown(c->fd, SHUT_WR);
    c->closing_fd = c->fd;
    settle_close(c, false);
}

void bconn_close(struct bconn *c)
{
    struct bthread *t = c->t;
    bool in_order = c->tls && c->state == CS_OPEN && !t->o->linger0;

    if (c->fd < 0)
        return;
    if (c->tls) { /* a close_notify first, where the connection ends in order */
        btls_conn_free(c->tls, in_order);
        c->tls = NULL;
    }
    if (t->o->linger0) {
        struct linger lg = {1, 0}; /* RST instead of FIN: no TIME_WAIT on this side */
        setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    }
    if (in_order)
        close_tls_in_order(c);
    else
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
void bconn_fail(struct bconn *c, enum berr e)
{
    uint64_t now = now_ns();

    if (c->qn && c->v.got > 0 && e != ERR_MISMATCH)
        count_lost(c->t, 1);
    count_errors(c->t, e, c->qn ? c->qn : 1);
    if (c->qn || c->t->o->mode == MODE_SHORT)
        step_mark(c->t, now); /* short mode: an attempt ended */
    bconn_close(c);
    /* a refused handshake is refused again at once: its retries wait as a refused connect's */
    c->retry_at = now + (e == ERR_REFUSED || e == ERR_ADDRNOTAVAIL || e == ERR_EMFILE ||
                                 (e >= ERR_TLS_FIRST && e != ERR_TLS_TRUNCATED)
                             ? RETRY_NS
                             : 0);
}

/* --tls: c's handshake went on past --timeout: said (the first time). */
static void handshake_timed_out(struct bconn *c)
{
    char why[200];

    snprintf(why, sizeof(why),
             "a TLS handshake took longer than --timeout (%d ms): the server took the "
             "connection but did not finish the handshake",
             c->t->o->timeout_ms);
    tls_note(c->t, why);
}

void bconn_timeout(struct bconn *c, uint64_t now, uint64_t limit)
{
    if (c->state == CS_CONNECTING && now - c->conn_t0 > limit) {
        bconn_fail(c, ERR_TIMEOUT);
    } else if (c->state == CS_HANDSHAKE && now - c->hs_t0 > limit) {
        handshake_timed_out(c);
        bconn_fail(c, ERR_TLS_TIMEOUT);
    } else if (c->state == CS_OPEN && c->qn && now - c->q[c->head].t_sent > limit)
        bconn_fail(c, ERR_TIMEOUT);
}

void bconn_end_step(struct bconn *c, uint64_t now)
{
    struct bthread *t = c->t;

    if (c->qn ||
        (t->o->mode == MODE_SHORT && (c->state == CS_CONNECTING || c->state == CS_HANDSHAKE))) {
        /* short: the attempt; one still in its TLS handshake timed out in it (the drain gave
         * it --timeout, as bconn_timeout does: whichever looks first counts it) */
        if (c->state == CS_HANDSHAKE)
            handshake_timed_out(c);
        count_errors(t, c->state == CS_HANDSHAKE ? ERR_TLS_TIMEOUT : ERR_TIMEOUT,
                     c->qn ? c->qn : 1);
        count_lost(t, c->qn);
        bconn_close(c);
        c->retry_at = 0;
        step_mark(t, now);
    }
}

/* The thread issues nothing more: Ctrl-C, thread:stop(), a script error. Requests in flight
 * finish, and the step ends. */
void bconn_stop_issuing(struct bthread *t)
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
        bconn_stop_issuing(t);
        t->stopping = true;
        return false;
    }
    if (bscript_stop_asked(t->sc) && !t->script_stopped) {
        __atomic_store_n(&t->script_stopped, true, __ATOMIC_RELAXED); /* main reads it */
        bconn_stop_issuing(t);
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
        t->issued++; /* short mode counts the connection attempt instead (bconn_open) */
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

/* Open loop: hands due sends to free connections (or, short mode, to new connections). A send
 * is taken from the schedule only once it has its connection (and, short mode, its
 * --connect-rate token): until then it waits, and its latency keeps counting. */
void bconn_dispatch_due(struct bthread *t, uint64_t now)
{
    uint64_t due = bconn_backlog(t, now), token_at = 0;
    bool first = true;

    while (due > 0) {
        struct bconn *c = NULL;
        uint64_t when;

        if (t->o->mode == MODE_SHORT) {
            for (int i = 0; i < t->nconns && !c; i++)
                if (t->conns[i].state == CS_CLOSED && t->conns[i].retry_at <= now)
                    c = &t->conns[i];
            if (c && !bconn_connect_token(t, now, &token_at))
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
            bconn_open(c, now, when); /* the transaction counts from when it was due */
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

    if (t->bscript_delay && c->qn == 0 && bconn_can_issue(t, now) && !spent(c)) {
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
    while (c->qn + t->batch <= t->ring && bconn_can_issue(t, now) && !spent(c))
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

void bconn_fill(struct bconn *c, uint64_t now)
{
    fill(c, now);
    do_write(c, now);
}

/* c is open (its TCP connection, and with --tls its handshake): it takes requests. */
static void become_open(struct bconn *c, uint64_t now)
{
    struct bthread *t = c->t;

    c->state = CS_OPEN;
    __atomic_store_n(&t->open, t->open + 1, __ATOMIC_RELAXED);
    c->nreq = 0;
    if (t->o->mode == MODE_SHORT) {
        if (!issue(c, c->txn_t0, now)) /* short: the request's latency includes the connect */
            return;
        do_write(c, now);
    } else if (t->open_loop) {
        push_free(t, c);
        bconn_dispatch_due(t, now);
    } else if (t->phase == PH_RUN) {
        fill(c, now);
        do_write(c, now);
    }
}

/* --tls: drives c's handshake as far as its socket lets it. A handshake that waits returns:
 * the socket is registered for both directions, edge-triggered, and OpenSSL's WANT_READ and
 * WANT_WRITE both mean that its read or write met EAGAIN, so the edge of that direction comes
 * when there is something to read or room to write (on_event drives it again then; an edge of
 * the other direction costs one call that waits again). */
static void drive_handshake(struct bconn *c)
{
    struct tls_err e;

    switch (btls_handshake(c->tls, &e)) {
    case TLS_DONE:
        bconn_handshake_done(c, now_ns() - c->hs_t0, btls_resumed(c->tls));
        return;
    case TLS_WANT_READ:
    case TLS_WANT_WRITE:
        return;
    case TLS_FAILED:
        tls_note(c->t, e.why);
        bconn_fail(c, tls_kind(&e));
        return;
    }
}

/* --tls-resume F: whether this new connection is to offer a session. Each connection adds F
 * to the thread's credit, and one with a whole unit offers: F of them, evenly spread. One that
 * finds no session to offer (none saved yet) keeps its unit for the next. */
static bool take_offer(struct bthread *t)
{
    double f = t->o->tls_resume;

    if (f <= 0)
        return false;
    return t->tls_credit + f >= 1 - 1e-9;
}

static void settle_offer(struct bthread *t, bool offered)
{
    double f = t->o->tls_resume;

    if (offered)
        t->tls_credit += f - 1;
    else if (f > 0)
        t->tls_credit = fmin(t->tls_credit + f, 1);
}

/* --tls: c's TCP connection is up; its handshake starts now. */
static void start_handshake(struct bconn *c, uint64_t now)
{
    struct bthread *t = c->t;
    bool offer = take_offer(t), offered;

    c->tls = btls_conn_new(t->tls, c->fd, offer, &offered);
    if (!c->tls) {
        tls_note(t, "out of memory for a TLS connection");
        bconn_fail(c, ERR_OTHER);
        return;
    }
    settle_offer(t, offered);
    c->tls_offered = offered;
    c->state = CS_HANDSHAKE;
    c->hs_t0 = now;
    drive_handshake(c);
}

void bconn_handshake_done(struct bconn *c, uint64_t hs_ns, bool resumed)
{
    struct bthread *t = c->t;

    c->hs_ns = hs_ns;
    cphase_handshake(t, &c->ph, hs_ns, resumed);
    settle_close(c, false); /* the last connection's socket, a round trip on */
    if (resumed)
        t->tls_resumed++;
    else
        t->tls_full++;
    t->tls_offered += c->tls_offered;
    if (!t->tls_protocol) {
        t->tls_protocol = btls_protocol(c->tls);
        t->tls_cipher = btls_cipher(c->tls);
    }
    become_open(c, now_ns());
}

/* c's TCP connect completed now: counted, then its handshake (--tls), or it is open. */
static void connected(struct bconn *c, uint64_t now)
{
    struct bthread *t = c->t;

    __atomic_store_n(&t->established, t->established + 1, __ATOMIC_RELAXED);
    t->cur.connects++;
    if (t->phase != PH_IDLE && now >= t->t_warm) {
        t->total.connects++;
        t->sres.c.connects++;
    }
    cphase_connected(t, &c->ph, now - c->conn_t0, now);
    if (t->tls)
        start_handshake(c, now);
    else
        become_open(c, now);
}

/* A socket for t's next connection: non-blocking, with the options the run asks for, bound to
 * the next --source address. Returns it, or -1 with errno. */
static int new_socket(struct bthread *t)
{
    const struct bopt *o = t->o;
    int one = 1, err,
        fd = socket(t->addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -1;
    if (t->nodelay)
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    /* With the server's cookie cached, connect() returns at once and the first write goes out
     * in the SYN; without one, the SYN asks for a cookie and the connect goes on as usual. */
    if (o->fastopen && setsockopt(fd, IPPROTO_TCP, TCP_FASTOPEN_CONNECT, &one, sizeof(one)) < 0)
        goto out_close;
    if (o->nsources) {
        struct sockaddr_in src = {.sin_family = AF_INET,
                                  .sin_addr = o->sources[t->next_source++ % (unsigned)o->nsources]};
        /* The port is chosen at connect() time, per destination: one source address is not
         * limited to the ephemeral range once for all its destinations. Each new connection
         * takes the next address, so all of them share the load even with fewer connections
         * than addresses: TIME_WAIT then fills each one's port range less, and connect()
         * searches it faster. */
        setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
        if (bind(fd, (struct sockaddr *)&src, sizeof(src)) < 0)
            goto out_close;
    }
    return fd;

out_close:
    err = errno;
    close(fd);
    errno = err;
    return -1;
}

/* The time connect() itself took: the kernel's search of the ephemeral port range, slow when
 * TIME_WAIT crowds it. The client's, not the server's. */
static void count_connect(struct bthread *t, uint64_t ns)
{
    t->connect_ns += ns;
    t->connect_calls++;
    if (t->step == 0) { /* the opening: no step commanded yet */
        t->open_connect_ns += ns;
        t->open_connect_calls++;
    }
    if (ns > t->connect_max_ns)
        t->connect_max_ns = ns;
}

void bconn_open(struct bconn *c, uint64_t now, uint64_t t0)
{
    struct bthread *t = c->t;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.ptr = c};
    int err;

    if (t->o->mode == MODE_SHORT)
        t->issued++; /* one connection, one request: -n counts attempts */
    if ((c->fd = new_socket(t)) < 0)
        goto out_error;
    c->txn_t0 = t0;
    c->head = c->qn = c->qw = 0;
    c->woff = 0;
    /* Registered once for both directions; edges say when to read, when a full socket drained,
     * and when the connect completed. */
    if (epoll_ctl(t->epfd, EPOLL_CTL_ADD, c->fd, &ev) < 0)
        goto out_close;
    c->conn_t0 = now_ns(); /* not the caller's: socket, bind and epoll_ctl came between */
    err = sysc_connect(c->fd, t->addr, t->addrlen) == 0 ? 0 : errno;
    count_connect(t, now_ns() - c->conn_t0);
    if (err != 0 && err != EINPROGRESS) {
        errno = err;
        goto out_close;
    }
    t->nclosed--;
    if (err == 0)
        connected(c, now_ns());
    else
        c->state = CS_CONNECTING;
    return;

out_close:
    err = errno;
    close(c->fd);
    c->fd = -1;
    errno = err;
out_error:
    count_errors(t, errno_kind(errno), 1);
    if (t->o->mode == MODE_SHORT)
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
    bconn_fail(c, ERR_MISMATCH);
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
        bconn_fail(c, e);
}

static void do_write(struct bconn *c, uint64_t now)
{
    struct bthread *t = c->t;
    unsigned P = t->ring;

    while (c->qw < c->qn) {
        size_t fill = 0, off = c->woff;
        ssize_t w;

        /* Coalesce the unwritten requests into one write. */
        for (unsigned k = c->qw; k < c->qn && fill < BCONN_BUFSZ; k++) {
            struct req *r = &c->q[(c->head + k) % P];
            size_t n = r->len - off < BCONN_BUFSZ - fill ? r->len - off : BCONN_BUFSZ - fill;
            if (r->data)
                memcpy(t->buf + fill, r->data + off, n);
            else
                payload_bytes(t->p, r->cls, stream_of(c), r->seq, off, t->buf + fill, n);
            fill += n;
            off = 0;
        }
        w = c->tls ? btls_write(c->tls, t->buf, fill) : sysc_write(c->fd, t->buf, fill);
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
        if (c->ph.wait == CPW_SEND && c->qw)
            cphase_sent(&c->ph); /* the first request is written whole */
        if (!all)
            return; /* the socket is full: an EPOLLOUT edge comes when it drains */
    }
}

/* Short mode: the transaction is over, its response whole and nothing behind it. */
static void short_done(struct bconn *c, uint64_t now)
{
    struct bthread *t = c->t;

    finish_request(c, now);
    bconn_close(c);
    c->retry_at = 0;
    if (!t->open_loop && bconn_can_issue(t, now) && bconn_connect_token(t, now, NULL))
        bconn_open(c, now, now); /* without a token the tick opens it */
    else if (t->open_loop)
        bconn_dispatch_due(t, now);
}

/* Long mode: the server ended the connection cleanly between requests, and a new one replaces it,
 * counted in reconnects, not an error. --expect http: after the response just finished
 * (Connection: close, HTTP/1.0, a close-delimited body) or idle. Other framings (a stopping
 * lfepolld ends echo connections so, and so does a server's idle timeout): with nothing in
 * flight, or with requests issued but not one byte of them written yet (the end of the stream
 * came in the same read as the last response), once the connection has completed a request: one
 * closed before its first is a server shedding connections, the error "closed", as is a
 * request the server was sent and never answered (read_eof). --reconnect-every ends a connection
 * the same way, with nothing in flight (read_done). HTTP: requests pipelined
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
    bconn_close(c);
    c->retry_at = 0;
    if (!at_once)
        return;
    bconn_open(c, now, now);
    if (t->open_loop)
        bconn_dispatch_due(t, now);
}

/* The peer ended c (a read returned 0), and no whole short-mode response is behind: what that
 * means depends on what was in flight. */
static void read_eof(struct bconn *c, uint64_t now)
{
    struct bthread *t = c->t;
    bool http = t->o->expect == EXPECT_HTTP, lng = t->o->mode == MODE_LONG;

    if (c->salvage) {
        /* The end of a reset: a close-delimited HTTP body may end here too. The rest fails in
         * write_failed, which the closes below would have called clean. */
        if (c->qn && c->qw && verify_eof(&c->v) == VERIFY_DONE)
            finish_request(c, now_ns());
        return;
    }
    if (http && lng && c->qn == 0) {
        reopen_clean(c, now, false); /* an idle keep-alive connection closed */
        return;
    }
    if (!http && lng && c->nreq > c->qn && (c->qn == 0 || (c->qw == 0 && c->woff == 0))) {
        reopen_clean(c, now, c->qn > 0); /* closed between requests */
        return;
    }
    if (c->qn && c->qw && verify_eof(&c->v) == VERIFY_DONE) {
        if (c->tls && btls_truncated(c->tls)) {
            /* the end of a body read until the close, and no close_notify: a cut could have
             * made it (a body framed by its length or chunks needs none: its end is known) */
            tls_note(t, "a response body read until the close ended without the server's TLS "
                        "close_notify: it may have been cut short");
            bconn_fail(c, ERR_TLS_TRUNCATED);
            return;
        }
        now = now_ns(); /* a close-delimited HTTP body: the EOF is its end */
        if (t->o->mode == MODE_SHORT) {
            short_done(c, now);
        } else {
            finish_request(c, now);
            reopen_clean(c, now, true);
        }
        return;
    }
    bconn_fail(c, ERR_CLOSED);
}

/* Feeds the response to q[head] what b[0, n) holds of it (*used bytes; *whole: it is complete).
 * false: that failed c, on a byte that is not the response's, or a response that cannot be kept
 * for response(). */
static bool feed_response(struct bconn *c, const uint8_t *b, size_t n, size_t *used, bool *whole)
{
    struct bthread *t = c->t;
    uint64_t got = c->v.got;
    enum verify_status st = verify_feed(&c->v, b, n, used);
    bool kept = !t->script_resp || keep_response(c, b, *used);

    if (st == VERIFY_BAD) {
        note_mismatch(t, b, n, got);
        bconn_fail(c, ERR_MISMATCH);
        return false;
    }
    if (!kept) {
        refuse_response(c);
        return false;
    }
    *whole = st == VERIFY_DONE;
    return true;
}

/* The response to q[head] is whole; more: bytes follow it in this read. Long mode: its request
 * is done, and c takes the next. Short mode: *whole_at is when, and the read goes on to see
 * that nothing follows. false: c failed or closed. */
static bool response_whole(struct bconn *c, uint64_t now, bool more, uint64_t *whole_at)
{
    struct bthread *t = c->t;

    if (c->qw == 0) { /* answered before it was all sent: not its response */
        bconn_fail(c, ERR_MISMATCH);
        return false;
    }
    if (t->o->mode == MODE_SHORT) {
        if (more) {
            bconn_fail(c, ERR_MISMATCH);
            return false;
        }
        *whole_at = now; /* and read on, past a full buffer, to see what follows */
        return true;
    }
    if (c->v.close_after) { /* HTTP: the server closes after it */
        finish_request(c, now);
        reopen_clean(c, now, !c->salvage);
        return false;
    }
    finish_request(c, now);
    if (c->salvage)
        return true; /* the connection is failing: it takes no more */
    if (t->open_loop)
        push_free(t, c);
    else
        fill(c, now); /* written after the read, with any others, in one write */
    return true;
}

/* Hands the n bytes of one read to the responses in flight, oldest first. false: c failed or
 * closed on the way. */
static bool take_responses(struct bconn *c, size_t n, uint64_t now, uint64_t *whole_at)
{
    const uint8_t *buf = c->t->buf;
    size_t pos = 0;

    while (pos < n) {
        size_t used;
        bool whole;

        /* An echo may start before its request is all written; bytes with no request in
         * flight, though, are bytes nobody asked for. */
        if (c->qn == 0) {
            note_mismatch(c->t, buf + pos, n - pos, 0);
            bconn_fail(c, ERR_MISMATCH);
            return false;
        }
        if (!feed_response(c, buf + pos, n - pos, &used, &whole))
            return false;
        pos += used;
        if (whole && !response_whole(c, now, pos < n, whole_at))
            return false;
    }
    return true;
}

/* The read is over, c still open and not failing: what comes next on it. */
static void read_done(struct bconn *c, uint64_t now, uint64_t whole_at)
{
    struct bthread *t = c->t;

    if (whole_at) {
        short_done(c, whole_at);
        return;
    }
    if (c->qn == 0 && spent(c)) {
        reopen_clean(c, now, true); /* --reconnect-every: a clean close between requests */
        return;
    }
    if (c->qw < c->qn)
        do_write(c, now);
    if (t->open_loop)
        bconn_dispatch_due(t, now);
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
    struct tls_err te;
    ssize_t n;

    do {
        n = c->tls ? btls_read(c->tls, t->buf, BCONN_BUFSZ, &te)
                   : sysc_read(c->fd, t->buf, BCONN_BUFSZ);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            break;
        if (n <= 0 && whole_at)
            break;
        if (n < 0) {
            if (c->salvage) /* write_failed fails it, with the write's error */
                return;
            if (c->tls && errno == EPROTO) {
                tls_note(t, te.why);
                bconn_fail(c, tls_kind(&te));
            } else {
                bconn_fail(c, errno_kind(errno));
            }
            return;
        }
        if (n == 0) {
            read_eof(c, now);
            return;
        }
        now = now_ns();
        t->cur.bytes_in += (uint64_t)n;
        cphase_read(t, &c->ph, now);
        if (whole_at) {
            bconn_fail(c, ERR_MISMATCH);
            return;
        }
        if (!take_responses(c, (size_t)n, now, &whole_at))
            return;
        /* a short read drained the socket; TLS may hold more than the socket shows (the rest
         * of a record, or an end met behind the bytes), and no edge would come for it */
    } while (n == BCONN_BUFSZ || ended || (c->tls && btls_more(c->tls)));
    if (!c->salvage)
        read_done(c, now, whole_at);
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
            bconn_fail(c, errno_kind(err));
            return;
        } /* a hangup without an error: connected, and do_read sees the end */
        connected(c, now = now_ns()); /* its own time: the connect latency ends here */
        if (c->fd < 0 || c->state == CS_HANDSHAKE)
            return; /* the handshake began: its first flight is out, and it waits */
    } else if (c->state == CS_HANDSHAKE) {
        drive_handshake(c);
        if (c->fd < 0 || c->state != CS_OPEN)
            return;
        now = now_ns();
    }
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP))
        do_read(c, now, events & (EPOLLRDHUP | EPOLLERR | EPOLLHUP));
    if ((events & EPOLLOUT) && c->fd >= 0 && c->state == CS_OPEN && c->qw < c->qn)
        do_write(c, now);
}

/* Takes a batch of up to 256 events, edge-triggered; returns how many. */
int bconn_events(struct bthread *t)
{
    struct epoll_event evs[256];
    int n = sysc_epoll_wait(t->epfd, evs, 256, 0);
    uint64_t now = now_ns(); /* the batch's; what a sample needs is taken where it happens */

    for (int i = 0; i < n; i++)
        on_event(evs[i].data.ptr, evs[i].events, now);
    return n;
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

int bconn_init(struct bconn *c, struct bthread *t, uint32_t gid)
{
    c->t = t;
    c->fd = -1;
    c->closing_fd = -1;
    c->gid = gid;
    c->q = t->ring == 1 ? &c->q1 : calloc(t->ring, sizeof(*c->q));
    if (!c->q)
        return -ENOMEM;
    if (t->script_req && !t->fixed.n && !(c->sb = calloc(t->ring, sizeof(*c->sb))))
        return -ENOMEM;
    ev_timer_init(&c->dt, on_delay, 0., 0.);
    c->dt.data = c;
    return 0;
}

void bconn_settle_closes(struct bconn *conns, int n, int ms)
{
    uint64_t end = now_ns() + (uint64_t)ms * 1000000u;
    struct pollfd *p = n > 0 ? calloc((size_t)n, sizeof(*p)) : NULL;

    for (uint64_t now = now_ns(); p && now < end; now = now_ns()) {
        int k = 0;

        for (int i = 0; i < n; i++)
            if (conns[i].closing_fd >= 0)
                p[k++] = (struct pollfd){.fd = conns[i].closing_fd, .events = POLLIN};
        if (!k || poll(p, (nfds_t)k, (int)((end - now + 999999u) / 1000000u)) <= 0)
            break;
        for (int i = 0; i < n; i++)
            settle_close(&conns[i], false); /* what came is read; an end there closes it */
    }
    free(p);
}

void bconn_free(struct bconn *c)
{
    btls_conn_free(c->tls, false);
    if (c->fd >= 0)
        close(c->fd);
    settle_close(c, true);
    if (c->q != &c->q1)
        free(c->q);
    for (unsigned k = 0; c->sb && k < c->t->ring; k++)
        free(c->sb[k].p);
    free(c->sb);
    free(c->rb);
}
