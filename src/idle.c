/* idle: the idle timeout's protocol: a worker's take of a connection and main's sweep, which
 * claims what has been idle too long, judges it and shuts it down (DESIGN in idle.h). */
#include "idle.h"

#include "pool.h"

#include <linux/sockios.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

void idle_arm(struct server *s, int fd, long ms)
{
    __atomic_store_n(&s->idle[fd], idle_word(ms, IDLE_ARMED), __ATOMIC_RELEASE);
}

void idle_rearm(struct server *s, int fd)
{
    uint64_t v = __atomic_load_n(&s->idle[fd], __ATOMIC_RELAXED); /* our own OWNED word */

    __atomic_store_n(&s->idle[fd], (v & ~(uint64_t)3) | IDLE_ARMED, __ATOMIC_RELEASE);
}

/* The date that makes the sweeper end a connection span ms after from. The sweeper has one
 * limit (--idle-timeout, or LINGER_MS without it), so the date is earlier than from by the
 * difference, or later when span is the longer (the sweeper skips a date in the future). */
static long idle_due_date(const struct server *s, long from, long span)
{
    return from + span - s->idle_limit_ms;
}

long idle_linger_date(const struct server *s, long ms)
{
    return idle_due_date(s, ms, s->idle_limit_ms < LINGER_MS ? s->idle_limit_ms : LINGER_MS);
}

int idle_header_span(const struct server *s)
{
    const struct opt *o = s->opt;

    return o->idle_ms && o->idle_ms < o->proxy_ms ? o->idle_ms : o->proxy_ms;
}

long idle_header_date(const struct server *s, long ms)
{
    return idle_due_date(s, ms, idle_header_span(s));
}

int idle_handshake_span(const struct server *s)
{
    const struct opt *o = s->opt;

    return o->idle_ms && o->idle_ms < o->tls_hs_ms ? o->idle_ms : o->tls_hs_ms;
}

long idle_handshake_date(const struct server *s, long ms)
{
    return idle_due_date(s, ms, idle_handshake_span(s));
}

void idle_redate(struct server *s, int fd, long ms)
{
    __atomic_store_n(&s->idle[fd], idle_word(ms, IDLE_OWNED), __ATOMIC_RELAXED);
}

bool idle_take(struct server *s, int fd)
{
    uint64_t v = __atomic_load_n(&s->idle[fd], __ATOMIC_ACQUIRE);

    for (;;) {
        if ((v & 3) == IDLE_CLAIMED) { /* the sweeper is inside one shutdown(2): wait it out */
            sched_yield();
            v = __atomic_load_n(&s->idle[fd], __ATOMIC_ACQUIRE);
            continue;
        }
        /* the date stays: a connection re-armed with it (idle_rearm) keeps its deadline */
        if (__atomic_compare_exchange_n(&s->idle[fd], &v, (v & ~(uint64_t)3) | IDLE_OWNED, false,
                                        __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE))
            return (v & 3) == IDLE_EXPIRED;
    }
}

/* The word a claimed connection past its time (expired), or one a drain looks at, is handed
 * back with; 0: it is idle, shut it down. The caller holds the claim on fd, word v: no thread
 * owns the connection, none can until it is handed back, so fd is still its, and so is c (only
 * an owner frees one); its fields are those its last owner wrote before the arm. */
static uint64_t judge(struct server *s, long fd, uint64_t v, long now, bool expired)
{
    struct conn *c = __atomic_load_n(&s->table[fd], __ATOMIC_ACQUIRE);
    struct pollfd p = {.fd = (int)fd};
    bool linger = c && c->phase == CONN_PH_LINGER;
    /* a PROXY header and a TLS handshake: a deadline from their start */
    bool header = c && (c->phase == CONN_PH_PROXY || c->phase == CONN_PH_HANDSHAKE);
    int outq = 0;

    /* A lingering one's time runs from its window's start, whatever the peer sends (lconn.c):
     * its window starts again while the peer is still taking the reply (up to LINGER_TOTAL_MS
     * after its FIN), and during a stop it ends as soon as the peer has every byte of it. */
    if (linger) {
        struct lconn *lc = lconn_of(c);

        if (ioctl((int)fd, SIOCOUTQ, &outq) < 0)
            outq = 0; /* the socket failed: nothing more to deliver */
        if (!expired && outq)
            return v; /* not yet: as it was */
        if (outq > 0 && outq < lc->linger_outq && now - lc->linger_since < LINGER_TOTAL_MS) {
            lc->linger_outq = outq; /* it took some: a new window */
            lc->linger_ms = now;
            return idle_word(idle_linger_date(s, now), IDLE_ARMED);
        }
        return 0;
    }
    if (!expired)
        return v;
    /* An event waiting for a worker that has not taken it yet (a long batch, a ready list) is
     * not idleness; only what the connection is armed for is an event: input it stopped reading
     * (at --max-pending, or after its end) would wake no worker and would keep it for ever. A
     * header's deadline stands whatever comes: handed back as it was, looked at again. */
    if (c && !(c->flags & CONN_NOREAD))
        p.events |= POLLIN | POLLRDHUP;
    if (c && obuf_len(&c->out) && !header)
        p.events |= POLLOUT;
    if (poll(&p, 1, 0) > 0)
        return header ? v : idle_word(now, IDLE_ARMED);
    /* The peer taking what the kernel still holds for it moves nothing the server can see but
     * the send queue. A queue shorter than at the last look at this same date is progress; a
     * first look at a queue that is not empty cannot tell, and gives it one more period. */
    if (s->idle_outq && !header && ioctl((int)fd, SIOCOUTQ, &outq) == 0 && outq > 0) {
        struct idle_outq *seen = &s->idle_outq[fd];

        if (seen->word != v || outq < seen->outq) {
            seen->word = idle_word(now, IDLE_ARMED);
            seen->outq = outq;
            return seen->word;
        }
    }
    return 0;
}

long idle_sweep(struct server *s, long now)
{
    long hi = __atomic_load_n(&s->fd_hi, __ATOMIC_RELAXED), n = 0;
    uint64_t limit = (uint64_t)s->idle_limit_ms, bnow = (uint64_t)(now + IDLE_BIAS);
    long tick = s->idle_limit_ms / 4;
    bool draining = __atomic_load_n(&s->draining, __ATOMIC_ACQUIRE);

    /* without --idle-timeout only lingering connections, PROXY headers and TLS handshakes are
     * watched */
    if (!s->idle || now < s->next_sweep_ms ||
        (!s->opt->idle_ms && !s->opt->proxy && !s->tls &&
         !__atomic_load_n(&s->nwrclosed, __ATOMIC_RELAXED)))
        return 0;
    tick = tick < 50 ? 50 : tick > 1000 ? 1000 : tick;
    if (draining)
        tick = 50; /* a stop waits for lingering connections: look at them often */
    s->next_sweep_ms = now + tick / 2; /* main calls each tick; a drain every 10 ms */
    for (long fd = 0; fd <= hi && (size_t)fd < s->table_size; fd++) {
        uint64_t v = __atomic_load_n(&s->idle[fd], __ATOMIC_RELAXED), back;
        bool expired;

        if ((v & 3) != IDLE_ARMED || bnow < (v >> 2))
            continue;
        expired = bnow - (v >> 2) >= limit;
        if (!expired && !draining)
            continue;
        if (!__atomic_compare_exchange_n(&s->idle[fd], &v, (v & ~(uint64_t)3) | IDLE_CLAIMED, false,
                                         __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            continue; /* a worker took it meanwhile: it was not idle */
        if ((back = judge(s, fd, v, now, expired))) {
            __atomic_store_n(&s->idle[fd], back, __ATOMIC_RELEASE);
            continue;
        }
        shutdown((int)fd, SHUT_RDWR);
        __atomic_store_n(&s->idle[fd], (v & ~(uint64_t)3) | IDLE_EXPIRED, __ATOMIC_RELEASE);
        n++;
    }
    return n;
}
