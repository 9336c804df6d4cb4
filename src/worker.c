/* worker: a follower thread of one epoll group; takes events, runs the handler, re-arms. */
#include "idle.h"
#include "log.h"
#include "net.h"
#include "pool.h"
#include "proxy.h"
#include "sysc.h"
#include "tls.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Whether c's deadline runs from a date of its own, not from its last event: a lingering one's
 * from its window's start, a PROXY header's from its accept (idle.c). */
static inline bool conn_dated(const struct conn *c)
{
    return c->phase == CONN_PH_LINGER || c->phase == CONN_PH_PROXY || c->phase == CONN_PH_HANDSHAKE;
}

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
    if (c->flags & CONN_TLS) { /* its handshake's deadline runs from here */
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
        c->phase = CONN_PH_HANDSHAKE;
        idle_redate(w->srv, c->fd,
                    idle_handshake_date(w->srv, t.tv_sec * 1000L + t.tv_nsec / 1000000));
    } else {
        c->phase = conn_first_phase(w->srv->lua ? CONN_LUA : CONN_ECHO);
    }
    return proxy_admit(w, c, &h) ? 1 : -1;
}

/* Words for a failed handshake's log line. */
static const char *fail_words(enum tls_fail why)
{
    switch (why) {
    case TLS_FAIL_HTTP:
        return "a plain HTTP request on a TLS port";
    case TLS_FAIL_CLIENT_CERT:
        return "its client certificate is missing or refused";
    case TLS_FAIL_NOMEM:
        return "out of memory";
    default:
        return "not TLS, or nothing the server can agree to";
    }
}

/* Counts a failed handshake by its reason; a reset is churn, the others get a line (at most a
 * second per worker). */
static void count_failed(struct worker *w, struct conn *c, enum tls_fail why)
{
    char name[64];

    switch (why) {
    case TLS_FAIL_RESET:
        STAT_ADD(&w->st, tls_fail_reset, 1);
        return;
    case TLS_FAIL_HTTP:
        STAT_ADD(&w->st, tls_fail_http, 1);
        break;
    case TLS_FAIL_CLIENT_CERT:
        STAT_ADD(&w->st, tls_fail_client_cert, 1);
        break;
    case TLS_FAIL_NOMEM:
        STAT_ADD(&w->st, err_nomem, 1);
        break;
    default:
        STAT_ADD(&w->st, tls_fail_protocol, 1);
    }
    if (log_now()) {
        net_peer_name(c->fd, name, sizeof(name));
        log_warn("connection from %s: TLS handshake failed: %s; closed (at most one such line "
                 "a second per worker: the tls_fail_* counters count them)",
                 name, fail_words(why));
    }
}

/* TLS: one step of c's handshake, its state made at the first. Returns the events to wait for
 * (the library's want-read or want-write), or 0 to close it (counted). Finished, c serves:
 * phase SERVING (Lua: NEW, on_connect next), and the return is EPOLLIN (what came with the
 * client's last flight is read in the same event). */
static uint32_t handshake(struct worker *w, struct conn *c)
{
    enum tls_fail why = TLS_FAIL_PROTOCOL;
    struct timespec t;

    if (!c->ssl) {
        if (tls_attach(c, tls_conf_ctx(w->srv->tls)) < 0) {
            count_failed(w, c, TLS_FAIL_NOMEM);
            return 0;
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
        c->tls_start_ns = t.tv_sec * 1000000000LL + t.tv_nsec;
    }
    switch (tls_handshake(c, &why)) {
    case TLS_DONE:
        clock_gettime(CLOCK_MONOTONIC, &t);
        svc_record(&w->hs, (uint64_t)(t.tv_sec * 1000000000LL + t.tv_nsec - c->tls_start_ns));
        if (tls_resumed(c))
            STAT_ADD(&w->st, tls_resumed, 1);
        else
            STAT_ADD(&w->st, tls_full, 1);
        c->phase = conn_first_phase(w->srv->lua ? CONN_LUA : CONN_ECHO);
        return EPOLLIN;
    case TLS_WANT_READ:
        return EPOLLIN | EPOLLRDHUP;
    case TLS_WANT_WRITE:
        return EPOLLOUT;
    default:
        count_failed(w, c, why);
        return 0;
    }
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
    if (want == (EPOLLIN | EPOLLRDHUP) && w->st.bytes_out != out && !tls_has_input(c) &&
        recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) < 0 && errno == EAGAIN &&
        (tls_notify(c), shutdown(c->fd, SHUT_WR) == 0)) { /* TLS: its close_notify, then FIN */
        c->phase = CONN_PH_WRCLOSED;
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
        /* TLS too: what came after its close_notify is dropped unread */
        ssize_t n = conn_read_raw(c, io->buf, io->bufsize);

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

/* Re-arms c, owned by w, for want (not 0): its idle date first, then the registration; a
 * failed re-arm closes it. Returns CLOCK_MONOTONIC ns just before the re-arm (the end of the
 * event's service time, and the time --idle-timeout counts from), or 0 when c was closed. */
static int64_t rearm(struct worker *w, struct conn *c, uint32_t want)
{
    struct server *s = w->srv;
    struct epoll_event ev;
    struct timespec t;
    int64_t end;
    int fd = c->fd; /* after the re-arm, c belongs to whichever worker epoll hands it to */
    bool armed;

    /* for the idle sweep: input it will not read is no event of its (published by the arm) */
    c->flags = (c->flags & ~CONN_NOREAD) | (want & EPOLLIN ? 0 : CONN_NOREAD);
    /* What the registration will ask, in c->flags (CONN_REG_*) too: written before the idle
     * word publishes c as armed, after which the sweeper may read c->flags (idle.c, judge) */
    armed = pool_armed_for(w->g, c, want);
    if (!armed)
        ev.events = pool_arm_events(w->g, c, want);
    clock_gettime(CLOCK_MONOTONIC, &t); /* one vDSO read an event, for both uses */
    end = t.tv_sec * 1000000000LL + t.tv_nsec;
    switch (c->phase) {
    case CONN_PH_LINGER: /* dated by its window's start, not by this event: what the peer keeps
                          * sending cannot stretch it (lconn.c) */
        idle_arm(s, fd, idle_linger_date(s, lconn_of(c)->linger_ms));
        break;
    case CONN_PH_PROXY:     /* its header's deadline runs from the accept: a header trickled a byte
                             * at a time cannot stretch it */
    case CONN_PH_HANDSHAKE: /* nor can a handshake trickled so stretch its own */
        idle_rearm(s, fd);
        break;
    default:
        if (s->opt->idle_ms)
            idle_arm(s, fd, (long)(end / 1000000));
    }
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
        if (s->idle)
            idle_take(s, fd); /* published as armed: the sweeper may hold it this instant */
        conn_close(s, w->g, c, CONN_WHY_IO_ERROR, w);
        return 0;
    }
    STAT_ADD(&w->st, rearms, 1);
    return end;
}

/* After the handler: c is closed for why when it wants nothing more, otherwise the pending
 * count follows its output (CONN_PENDING; a PROXY header's part is none) and it is re-armed for
 * want. Returns as rearm. */
static int64_t settle(struct worker *w, struct conn *c, uint32_t want, enum conn_why why)
{
    bool has = obuf_len(&c->out) && c->phase != CONN_PH_PROXY;

    if (!want) {
        conn_close(w->srv, w->g, c, why, w);
        return 0;
    }
    if (has != !!(c->flags & CONN_PENDING)) {
        c->flags ^= CONN_PENDING;
        __atomic_add_fetch(&w->srv->npending, has ? 1 : -1, __ATOMIC_RELAXED);
    }
    return rearm(w, c, want);
}

/* A Lua connection's event. Returns the events to re-arm with, or 0 (*why set). */
static uint32_t lua_event(struct worker *w, struct conn *c, uint32_t events,
                          const struct conn_io *io, enum conn_why *why)
{
    enum conn_phase was = c->phase;
    uint32_t want = lconn_event(lconn_of(c), events, io, w->script, &w->lout, why);

    /* its FIN went: the drain waits for its end too */
    if (c->phase == CONN_PH_LINGER && was != CONN_PH_LINGER)
        __atomic_add_fetch(&w->srv->nwrclosed, 1, __ATOMIC_RELAXED);
    return want;
}

/* Handles one event of c, owned by w. Returns as rearm: 0 when the connection was closed (the
 * caller reads the clock). */
static int64_t handle(struct worker *w, struct conn *c, uint32_t events, const struct conn_io *io)
{
    enum conn_why why = CONN_WHY_EOF;
    uint32_t want;
    int pr;

    STAT_ADD(&w->st, events, 1);
    if (!(c->flags & CONN_SEEN)) {
        c->flags |= CONN_SEEN;
        STAT_ADD(&w->st, accepted, 1);
    }
    switch (c->phase) {
    case CONN_PH_PROXY:
        if ((pr = proxy_read(w, c, io)) < 0) {
            conn_close(w->srv, w->g, c, CONN_WHY_IO_ERROR, w);
            return 0;
        }
        if (pr == 0) { /* its header is not whole yet; once it is, what came after it is
                        * served in the same event */
            want = EPOLLIN | EPOLLRDHUP;
            break;
        }
        /* fall through */
    case CONN_PH_HANDSHAKE:
        if (c->phase == CONN_PH_HANDSHAKE) {
            want = handshake(w, c);
            if (!want || c->phase == CONN_PH_HANDSHAKE) {
                why = CONN_WHY_IO_ERROR; /* when it closes */
                break;
            }
            events = EPOLLIN; /* finished: serve what came with it */
        }
        /* fall through */
    case CONN_PH_NEW:
    case CONN_PH_SERVING:
    case CONN_PH_CLOSING:
    case CONN_PH_LINGER:
        if (w->srv->lua)
            want = lua_event(w, c, events, io, &why);
        else if (__atomic_load_n(&w->drain, __ATOMIC_RELAXED))
            want = drain_echo(w, c, events, io);
        else
            want = conn_echo(c, events, io);
        break;
    default: /* CONN_PH_WRCLOSED */
        want = drain_discard(w, c, events, io);
    }
    return settle(w, c, want, why);
}

/* A connection the sweeper shut down for --idle-timeout: whatever it still had pending goes (its
 * client read nothing for that long, or sent nothing). One still waiting for its PROXY header
 * had none whole by its deadline: counted as a bad header. A lingering one was the script's
 * close; its end comes late, not for idleness. */
static void close_idle(struct worker *w, struct conn *c)
{
    enum conn_why why = CONN_WHY_IDLE;
    char name[64];

    STAT_ADD(&w->st, events, 1);
    if (!(c->flags & CONN_SEEN))
        STAT_ADD(&w->st, accepted, 1);
    switch (c->phase) {
    case CONN_PH_PROXY:
        STAT_ADD(&w->st, proxy_bad, 1);
        if (log_now()) {
            net_peer_name(c->fd, name, sizeof(name));
            log_warn("connection from %s: no whole PROXY header within %d ms of its accept; "
                     "closed (at most one such line a second per worker: proxy_bad counts them)",
                     name, idle_header_span(w->srv));
        }
        break;
    case CONN_PH_LINGER:
        why = CONN_WHY_CLOSED;
        break;
    case CONN_PH_HANDSHAKE:
        STAT_ADD(&w->st, tls_fail_timeout, 1);
        if (log_now()) {
            net_peer_name(c->fd, name, sizeof(name));
            log_warn("connection from %s: no TLS handshake finished within %d ms of its start; "
                     "closed (at most one such line a second per worker: tls_fail_timeout "
                     "counts them)",
                     name, idle_handshake_span(w->srv));
        }
        break;
    default:
        STAT_ADD(&w->st, idle_closed, 1);
    }
    conn_close(w->srv, w->g, c, why, w);
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

            if ((v & 3) == IDLE_ARMED && conn_dated(c)) {
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
            end = s->idle && (s->opt->idle_ms || conn_dated(c)) && idle_take(s, c->fd)
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
