/* bconn: one connection of a load thread (open, write, read, its FIFO of requests in flight,
 * close), and the thread's request path around it: issuing, the open loop's dispatch of due
 * sends, --connect-rate. Everything here is touched by the connection's thread only. */
#ifndef LFE_BCONN_H
#define LFE_BCONN_H

#include <ev.h>
#include <stdbool.h>
#include <stdint.h>

#include "bthread.h"
#include "verify.h"

#define BCONN_BUFSZ (64 * 1024) /* t->buf: one read, or one write of coalesced requests */

/* A connection's stage:
 *
 *   CLOSED --bconn_open--> CONNECTING --connected--> OPEN            (plain TCP)
 *                                     --connected--> HANDSHAKE --bconn_handshake_done--> OPEN
 *                                                                    (--tls)
 *   (a connect() that completes at once skips CONNECTING)
 *   any --bconn_close (a failure, a timeout, a clean reopen, the end)--> CLOSED
 *
 * HANDSHAKE has its own deadline, --timeout from its start (bconn_timeout). */
enum cstate { CS_CLOSED, CS_CONNECTING, CS_HANDSHAKE, CS_OPEN };

/* A request in flight: a slot of its connection's FIFO. */
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

/* --script: a request slot's copy of its bytes (request() reuses its string's buffer). */
struct sbuf {
    uint8_t *p;
    size_t cap;
};

/* One connection: an element of its thread's t->conns, touched by that thread only; its
 * buffers are freed by bconn_free. */
struct bconn {
    struct bthread *t;
    int fd;               /* -1 when closed */
    struct tls_conn *tls; /* --tls: its TLS client (owned), NULL while closed */
    int closing_fd;   /* --tls: the last connection's socket, half closed, or -1 (bconn_close) */
    uint64_t hs_t0;   /* --tls: the handshake's start (the TCP connect's end) */
    uint64_t hs_ns;   /* --tls: the last handshake's duration, ns */
    bool tls_offered; /* --tls: its handshake offered a saved session */
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
    /* --script with delay(): the next request waits until delay_at (0: no wait armed; 1: on_delay,
     * the wait ran out) */
    uint64_t delay_at;
    ev_timer dt;
    /* its phases timed (cphase.h): connect, handshake, first byte */
    struct cphase_conn ph;
};

/* Sets up c, connection gid of thread t, closed. Returns 0 or -ENOMEM; bconn_free frees what it
 * got either way. */
int bconn_init(struct bconn *c, struct bthread *t, uint32_t gid);

void bconn_free(struct bconn *c);

/* --tls, the run over: waits up to ms (in all) for the answers to the closes still on the way
 * (each socket a clean close left open until the server's close_notify and FIN: closed now, one
 * that comes later would be answered with a reset), closing each socket as its end comes. */
void bconn_settle_closes(struct bconn *conns, int n, int ms);

/* Opens c (closed) to the thread's address; the transaction of a short connection counts from
 * t0. A failure is counted, and c retries later (c->retry_at). */
void bconn_open(struct bconn *c, uint64_t now, uint64_t t0);

/* --tls: c's handshake completed now, in hs_ns (c->hs_ns too), resumed or in full (the
 * library's word): it is counted, and c is open. The one place a handshake ends. */
void bconn_handshake_done(struct bconn *c, uint64_t hs_ns, bool resumed);

/* Closes c: what was in flight is dropped uncounted (the caller counts it), its stream id
 * changes. Does nothing to a closed c. */
void bconn_close(struct bconn *c);

/* A failure of kind e on c: each request in flight is an error of that kind, and c closes. */
void bconn_fail(struct bconn *c, enum berr e);

/* Fails c with a timeout if its connect, or its oldest request, is older than limit ns. */
void bconn_timeout(struct bconn *c, uint64_t now, uint64_t limit);

/* The step is over: c's requests in flight (short mode: its connect) time out, lost, and c
 * closes. */
void bconn_end_step(struct bconn *c, uint64_t now);

/* Closed loop, long mode, c open: c takes the requests its pipeline has room for, and writes
 * them. */
void bconn_fill(struct bconn *c, uint64_t now);

/* Takes a batch of up to 256 events of the thread's epoll set; returns how many. */
int bconn_events(struct bthread *t);

/* Open loop: hands due sends to free connections (short mode: to new ones), and arms the send
 * timer for the next. */
void bconn_dispatch_due(struct bthread *t, uint64_t now);

/* Whether the closed loop may issue a request now. */
bool bconn_can_issue(const struct bthread *t, uint64_t now);

/* Open loop: sends of this step due by now and not taken yet. */
uint64_t bconn_backlog(const struct bthread *t, uint64_t now);

/* --connect-rate: takes a token for a new connection if the bucket has one. If not, and wait is
 * given, *wait is when the next one comes. */
bool bconn_connect_token(struct bthread *t, uint64_t now, uint64_t *wait);

/* The thread issues nothing more (Ctrl-C, thread:stop(), a script error); requests in flight
 * finish, and the step ends. */
void bconn_stop_issuing(struct bthread *t);

#endif /* LFE_BCONN_H */
