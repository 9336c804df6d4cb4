/* worker: a follower thread of one epoll group; takes events, runs the handler, re-arms. */
#include "idle.h"
#include "log.h"
#include "net.h"
#include "pool.h"
#include "proxy.h"
#include "sysc.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* At most one line a second per worker for a failure that could come in a flood (the counters
 * say how many). Thread-local rather than in struct worker: it is this file's business only. */
static bool log_now(void)
{
    static __thread time_t last;
    time_t now = time(NULL);

    if (now == last)
        return false;
    last = now;
    return true;
}

/* The client's address from the header: the per-address limit counts it (the accept thread could
 * not: it saw only the proxy), and a script's conn.peer shows it. Returns false when the limit
 * closes the connection. */
static bool proxy_admit(struct worker *w, struct conn *c, const struct proxy_hdr *h)
{
    struct server *s = w->srv;
    struct sockaddr_storage peer;
    socklen_t sl = sizeof(peer);
    char name[64];

    if (h->family != AF_UNSPEC)
        peer = h->src;
    else if (getpeername(c->fd, (struct sockaddr *)&peer, &sl) < 0) {
        STAT_ADD(&w->st, err_reset, 1); /* gone already */
        return false;
    }
    if (s->iplimit) {
        int32_t slot;

        /* Several workers take slots here, so they take turns: once per connection, never
         * per request, and only with both options set. */
        pthread_mutex_lock(&s->iplock);
        slot = iplimit_acquire(s->iplimit, (struct sockaddr *)&peer, s->opt->max_per_ip);
        pthread_mutex_unlock(&s->iplock);
        if (slot < 0) {
            STAT_ADD(&w->st, proxy_shed_per_ip, 1);
            return false;
        }
        __atomic_store_n(&s->ipslot[c->fd], slot, __ATOMIC_RELAXED);
    }
    if (s->lua && h->family != AF_UNSPEC) {
        net_addr_name(&peer, name, sizeof(name));
        lconn_of(c)->sc.peer = strdup(name); /* NULL (no memory): conn.peer shows the proxy */
    }
    return true;
}

/* --proxy-protocol: reads c's header, never a byte past it (those are the handler's). Peeks, so
 * that only the header's bytes are taken from the socket; a header cut across segments is kept
 * in c->out until it is whole. Returns 1 when the header is complete (the handler runs next),
 * 0 to wait for more of it, -1 to close (no header, a malformed one, EOF, an error). */
static int proxy_read(struct worker *w, struct conn *c, const struct conn_io *io)
{
    size_t have = obuf_len(&c->out), take;
    struct proxy_hdr h;
    const char *why;
    char name[64];
    ssize_t n;
    int len;

    if (have) /* the part an earlier event read */
        memcpy(io->buf, c->out.data + c->out.off, have);
    do
        n = recv(c->fd, io->buf + have, PROXY_MAX - have, MSG_PEEK);
    while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return 0;
    if (n < 0) {
        conn_count_error(errno, io);
        return -1;
    }
    if (n == 0)
        return -1; /* closed before its header ended: a health check that only connects */
    len = proxy_parse(io->buf, have + (size_t)n, &h, &why);
    if (len < 0) {
        STAT_ADD(&w->st, proxy_bad, 1);
        if (log_now()) {
            net_peer_name(c->fd, name, sizeof(name));
            log_warn("connection from %s: %s; closed (at most one such line a second per "
                     "worker: proxy_bad counts them)",
                     name, why);
        }
        return -1;
    }
    take = len ? (size_t)len - have : (size_t)n;
    /* The peeked bytes are queued: this read returns exactly take of them. */
    if (conn_read_some(c, io->buf + have, take) != (ssize_t)take) {
        STAT_ADD(&w->st, err_io, 1);
        return -1;
    }
    if (!len) {
        if (obuf_append(&c->out, io->buf + have, take) < 0) {
            STAT_ADD(&w->st, err_nomem, 1);
            return -1;
        }
        return 0;
    }
    obuf_free(&c->out);
    c->flags &= ~CONN_PROXY;
    return proxy_admit(w, c, &h) ? 1 : -1;
}

/* Echo during a hand-over (--takeover). A connection that has just been echoed to, whose every
 * byte has been echoed and whose socket holds no more input, is between requests as far as the
 * server can tell: it gets its FIN now, in the same segment as that echo (corked around the echo;
 * the shutdown sends both), so that a client reading the echo sees the end of the stream with it
 * and opens a new connection (to the successor) instead of sending on this one. An event that
 * echoed nothing (a PROXY header alone, a connection that has not sent its first request yet)
 * ends nothing: that client is about to send. Otherwise the cork comes off, which sends what it
 * held. Three syscalls more an event, only while handing over. */
static uint32_t drain_echo(struct worker *w, struct conn *c, uint32_t events,
                           const struct conn_io *io)
{
    int on = 1, off = 0;
    uint64_t out = w->st.bytes_out;
    uint32_t want;
    char b;

    setsockopt(c->fd, IPPROTO_TCP, TCP_CORK, &on, sizeof(on));
    want = conn_echo(c, events, io);
    if (want == (EPOLLIN | EPOLLRDHUP) && w->st.bytes_out != out &&
        recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) < 0 && errno == EAGAIN &&
        shutdown(c->fd, SHUT_WR) == 0) {
        c->flags |= CONN_WRCLOSED;
        __atomic_add_fetch(&w->srv->nwrclosed, 1, __ATOMIC_RELAXED);
        STAT_ADD(&w->st, drain_closed, 1);
    } else if (want) {
        setsockopt(c->fd, IPPROTO_TCP, TCP_CORK, &off, sizeof(off));
    }
    return want;
}

/* After drain_between. A client that had sent more before it saw the FIN raced it: those bytes
 * cannot be answered; they are read and dropped (counted once a connection, drain_raced), so
 * that the close that follows is a FIN, not a reset. Its end of input, or an error, closes it.
 * Returns the events to re-arm for, 0 to close. */
static uint32_t drain_discard(struct worker *w, struct conn *c, uint32_t events,
                              const struct conn_io *io)
{
    if (events & EPOLLERR)
        return 0;
    for (int i = 0; i < CONN_READS_PER_EVENT; i++) {
        ssize_t n = conn_read_some(c, io->buf, io->bufsize);

        if (n < 0 || (c->flags & CONN_RDCLOSED))
            return 0;
        if (n == 0)
            break;
        STAT_ADD(&w->st, bytes_in, (uint64_t)n);
        if (!(c->flags & CONN_RACED)) {
            c->flags |= CONN_RACED;
            STAT_ADD(&w->st, drain_raced, 1);
        }
    }
    return EPOLLIN | EPOLLRDHUP;
}

/* Handles one event of c, owned by w. Returns CLOCK_MONOTONIC ns just before the re-arm (the
 * end of the event's service time, and the time --idle-timeout counts from), or 0 when the
 * connection was closed (the caller reads the clock). */
static int64_t handle(struct worker *w, struct conn *c, uint32_t events, const struct conn_io *io)
{
    struct server *s = w->srv;
    bool had, has, armed;
    enum conn_why why = CONN_WHY_EOF;
    uint32_t want;
    struct epoll_event ev;
    struct timespec t;
    int64_t end;
    int fd = c->fd, pr; /* after the re-arm, c belongs to whichever worker epoll hands it to */

    STAT_ADD(&w->st, events, 1);
    if (!(c->flags & CONN_SEEN)) {
        c->flags |= CONN_SEEN;
        STAT_ADD(&w->st, accepted, 1);
    }
    if ((c->flags & CONN_PROXY) && (pr = proxy_read(w, c, io)) <= 0) {
        /* Its header is not whole yet (nothing is pending output), or it ends here. */
        if (pr < 0) {
            obuf_free(&c->out);
            conn_close(s, w->g, c, CONN_WHY_IO_ERROR, w);
            return 0;
        }
        had = has = false;
        want = EPOLLIN | EPOLLRDHUP;
        goto rearm;
    }
    had = obuf_len(&c->out) != 0;
    if (s->lua) {
        uint32_t was = c->flags;

        want = lconn_event(lconn_of(c), events, io, w->script, &w->lout, &why);
        if (c->flags & ~was & CONN_LINGER) /* its FIN went: the drain waits for its end too */
            __atomic_add_fetch(&s->nwrclosed, 1, __ATOMIC_RELAXED);
    } else if (c->flags & CONN_WRCLOSED)
        want = drain_discard(w, c, events, io);
    else if (__atomic_load_n(&w->drain, __ATOMIC_RELAXED))
        want = drain_echo(w, c, events, io);
    else
        want = conn_echo(c, events, io);
    has = obuf_len(&c->out) != 0;
    if (!want) {
        if (had)
            __atomic_sub_fetch(&s->npending, 1, __ATOMIC_RELAXED);
        conn_close(s, w->g, c, why, w);
        return 0;
    }
    if (had != has)
        __atomic_add_fetch(&s->npending, has ? 1 : -1, __ATOMIC_RELAXED);
rearm:
    /* for the idle sweep: input it will not read is no event of its (published by the arm) */
    c->flags = (c->flags & ~CONN_NOREAD) | (want & EPOLLIN ? 0 : CONN_NOREAD);
    /* What the registration will ask, in c->flags (CONN_REG_*) too: written before the idle
     * word publishes c as armed, after which the sweeper may read c->flags (idle.c, judge) */
    armed = pool_armed_for(w->g, c, want);
    if (!armed)
        ev.events = pool_arm_events(w->g, c, want);
    clock_gettime(CLOCK_MONOTONIC, &t); /* one vDSO read an event, for both uses */
    end = t.tv_sec * 1000000000LL + t.tv_nsec;
    if (c->flags & CONN_LINGER) /* dated by its window's start, not by this event: what the
                                 * peer keeps sending cannot stretch it (lconn.c) */
        idle_arm(s, fd, idle_linger_date(s, lconn_of(c)->linger_ms));
    else if (c->flags & CONN_PROXY) /* its header's deadline runs from the accept: a header
                                     * trickled a byte at a time cannot stretch it */
        idle_rearm(s, fd);
    else if (s->opt->idle_ms)
        idle_arm(s, fd, (long)(end / 1000000));
    if (armed)
        return end; /* level-triggered and already waiting for want: no re-arm */
    ev.data.ptr = c;
    HANDOFF_RELEASE(c);
    if (epoll_ctl(w->g->epfd, EPOLL_CTL_MOD, fd, &ev) < 0) {
        /* Failed: the registration is unchanged (still disarmed, or in a solo group still
         * this worker's alone), so c is still ours. Its pending output is lost: the client
         * sees the close; the script hears io_error. */
        STAT_ADD(&w->st, err_epoll, 1);
        if (log_now())
            log_warn("worker %d.%d: epoll_ctl(MOD) on fd %d: %s; connection closed", w->g->idx,
                     w->idx, fd, strerror(errno));
        if (has)
            __atomic_sub_fetch(&s->npending, 1, __ATOMIC_RELAXED);
        if (s->idle)
            idle_take(s, fd); /* published as armed: the sweeper may hold it this instant */
        if (c->flags & CONN_PROXY)
            obuf_free(&c->out);
        conn_close(s, w->g, c, CONN_WHY_IO_ERROR, w);
        return 0;
    }
    STAT_ADD(&w->st, rearms, 1);
    return end;
}

/* A connection the sweeper shut down for --idle-timeout: whatever it still had pending goes (its
 * client read nothing for that long, or sent nothing). One still waiting for its PROXY header
 * had none whole by its deadline: counted as a bad header. */
static void close_idle(struct worker *w, struct conn *c)
{
    char name[64];

    if (obuf_len(&c->out) && !(c->flags & CONN_PROXY))
        __atomic_sub_fetch(&w->srv->npending, 1, __ATOMIC_RELAXED);
    obuf_free(&c->out);
    STAT_ADD(&w->st, events, 1);
    if (!(c->flags & CONN_SEEN))
        STAT_ADD(&w->st, accepted, 1);
    if (c->flags & CONN_PROXY) {
        STAT_ADD(&w->st, proxy_bad, 1);
        if (log_now()) {
            net_peer_name(c->fd, name, sizeof(name));
            log_warn("connection from %s: no whole PROXY header within %d ms of its accept; "
                     "closed (at most one such line a second per worker: proxy_bad counts them)",
                     name, idle_header_span(w->srv));
        }
    } else if (!(c->flags & CONN_LINGER)) {
        STAT_ADD(&w->st, idle_closed, 1);
    }
    /* A lingering one was the script's close; its end comes late, not for idleness. */
    conn_close(w->srv, w->g, c, c->flags & CONN_LINGER ? CONN_WHY_CLOSED : CONN_WHY_IDLE, w);
}

/* Before a Lua callback waits (lfe.sleep, a socket): the events this worker took in the same
 * epoll_wait but has not handled yet go back to the group, re-armed, so that the group's other
 * workers serve them meanwhile instead of leaving them behind a wait. A connection re-armed
 * for input and output reports what it has at once; one that expired for --idle-timeout, or
 * whose re-arm fails, stays in the batch (closing it here would run on_close inside the
 * waiting callback). A solo group has no other worker: its events stay in the batch, dated. */
static void give_back_rest(void *arg)
{
    struct worker *w = arg;
    struct server *s = w->srv;
    int keep = w->next, fd;

    for (int i = w->next; i < w->n; i++) {
        struct conn *c = w->evs[i].data.ptr;
        struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLOUT | EPOLLONESHOT};

        if (!c) {
            w->stop = true; /* the stop eventfd: remembered, nothing to give back */
            continue;
        }
        HANDOFF_ACQUIRE(c);
        if (s->idle) {
            uint64_t v = __atomic_load_n(&s->idle[c->fd], __ATOMIC_ACQUIRE);
            struct timespec now;

            if ((v & 3) == IDLE_ARMED && (c->flags & (CONN_LINGER | CONN_PROXY))) {
                /* lingering, or reading its header: dated by its window or its accept, not by
                 * its events (handle) */
            } else if ((v & 3) == IDLE_ARMED) {
                clock_gettime(CLOCK_MONOTONIC_COARSE, &now); /* it had an event: it is active */
                __atomic_compare_exchange_n(
                    &s->idle[c->fd], &v,
                    idle_word(now.tv_sec * 1000L + now.tv_nsec / 1000000, IDLE_ARMED), false,
                    __ATOMIC_RELEASE, __ATOMIC_RELAXED);
            } else if (s->opt->idle_ms || (v & 3) != IDLE_OWNED) {
                /* claimed or expired: handled in the batch (without --idle-timeout only a
                 * lingering connection is ever armed: an OWNED one is simply not watched) */
                w->evs[keep++] = w->evs[i];
                continue;
            }
        }
        if (w->g->solo) { /* no other worker to serve it: it stays in the batch */
            w->evs[keep++] = w->evs[i];
            continue;
        }
        ev.data.ptr = c;
        fd = c->fd; /* after the re-arm, c is another worker's */
        HANDOFF_RELEASE(c);
        if (epoll_ctl(w->g->epfd, EPOLL_CTL_MOD, fd, &ev) < 0) {
            w->evs[keep++] = w->evs[i]; /* still ours: handled after the wait */
            continue;
        }
        STAT_ADD(&w->st, given_back, 1);
    }
    w->n = keep;
}

void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct server *s = w->srv;
    struct conn_io io = {
        .buf = w->buf, .bufsize = WORKER_BUF, .max_pending = s->opt->max_pending, .st = &w->st};
    struct timespec t0, t1;
    int64_t start, last, end;

    if (s->lua) {
        script_env_bind(w->script);
        script_set_wait_hook(w->script, give_back_rest, w);
    }
    while (!w->stop) {
        int n = sysc_epoll_wait(w->g->epfd, w->evs, s->opt->batch, -1);

        if (n < 0) {
            if (errno == EINTR)
                continue;
            log_err("worker %d.%d: epoll_wait: %s; worker stops", w->g->idx, w->idx,
                    strerror(errno));
            break;
        }
        clock_gettime(CLOCK_MONOTONIC, &t0);
        start = last = t0.tv_sec * 1000000000LL + t0.tv_nsec;
        __atomic_store_n(&w->busy_since_ns, start, __ATOMIC_RELAXED);
        __atomic_store_n(&w->busy, 1, __ATOMIC_RELEASE);
        if (s->lua)
            script_refresh(w->script); /* between requests: a reloaded script starts here */
        w->n = n;
        for (w->next = 0; w->next < w->n;) {
            struct epoll_event *e = &w->evs[w->next++];
            struct conn *c = e->data.ptr;

            if (!c) {
                /* The stop eventfd. It is level-triggered and never read, so it stays ready and
                 * every worker of the group sees it. The rest of the batch is still ours. */
                w->stop = true;
                continue;
            }
            HANDOFF_ACQUIRE(c);
            /* stall detection counts from this event (a batch of callbacks that wait may be
             * long in all): a plain store, read by main and the admin thread */
            __atomic_store_n(&w->busy_since_ns, last, __ATOMIC_RELAXED);
            /* Without --idle-timeout only a lingering connection and a PROXY header are
             * watched (and armed) */
            end = s->idle && (s->opt->idle_ms || (c->flags & (CONN_LINGER | CONN_PROXY))) &&
                          idle_take(s, c->fd)
                      ? (close_idle(w, c), 0)
                      : handle(w, c, e->events, &io);
            if (!end) { /* closed: no re-arm read the clock */
                clock_gettime(CLOCK_MONOTONIC, &t1);
                end = t1.tv_sec * 1000000000LL + t1.tv_nsec;
            }
            /* Service time, epoll_wait's return to the re-arm */
            last = end;
            svc_record(&w->svc, (uint64_t)(last - start));
        }
        __atomic_store_n(&w->busy, 0, __ATOMIC_RELEASE);
    }
    return NULL;
}
