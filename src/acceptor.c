/* acceptor: the accept threads; each drains its listen queues and hands connections to groups. */
#include "idle.h"
#include "log.h"
#include "net.h"
#include "pool.h"
#include "sysc.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

/* What the accept thread keeps across calls, on its own stack: when each kind of failure was
 * last logged (a flood logs one line a second per kind; the counters say how many there were),
 * and the listeners set aside. A listener that refuses accept4 itself (EINVAL: it does not
 * listen; EPERM, EBADF...) is taken out of the epoll set and tried alone every ACCEPT_RETRY_MS,
 * while the others are served as usual: what is wrong with one listener says nothing about the
 * others (out of descriptors or memory does, and pauses them all). */
enum { RL_EMFILE, RL_NOMEM, RL_LOST, RL_EPOLL, RL_ARM, RL_IPTABLE, RL_KINDS };
struct acc {
    struct server *s;
    struct acceptor *t; /* this thread's listeners, epoll set, counters */
    time_t logged[RL_KINDS];
    bool aside[OPT_MAX_LFDS];          /* refused accept4: out of t->epfd, retried alone */
    time_t aside_logged[OPT_MAX_LFDS]; /* one line a second per listener */
    int naside;
    long retry_ms; /* when the listeners set aside are tried next */
};

/* What accept_all ended with. */
enum drained { ACC_EMPTY, ACC_PAUSED, ACC_ASIDE };

static bool log_now(struct acc *a, int kind)
{
    time_t now = time(NULL);

    if (a->logged[kind] == now)
        return false;
    a->logged[kind] = now;
    return true;
}

static long mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
}

/* fd_hi is the sweep's end: the highest connection fd any accept thread has seen. */
static void raise_fd_hi(struct server *s, int fd)
{
    long hi = __atomic_load_n(&s->fd_hi, __ATOMIC_RELAXED);

    while (fd > hi && !__atomic_compare_exchange_n(&s->fd_hi, &hi, (long)fd, true, __ATOMIC_RELAXED,
                                                   __ATOMIC_RELAXED))
        ;
}

static long group_load(void *ctx, unsigned g)
{
    struct server *s = ctx;

    return __atomic_load_n(&s->groups[g].live, __ATOMIC_RELAXED);
}

/* Arms (EPOLLIN) or disarms every listener in the accept thread's epoll set. Returns 0, or the
 * -errno of the first listener whose EPOLL_CTL_MOD failed (counted in err_other and logged):
 * that listener keeps its previous state, the others are still set. */
static int set_listening(struct acc *a, bool on)
{
    struct server *s = a->s;
    int rc = 0;

    for (int k = 0; k < a->t->nl; k++) {
        int i = a->t->li[k];
        struct epoll_event ev = {.events = on ? EPOLLIN : 0, .data.u32 = (uint32_t)i};
        char name[80];
        int err;

        if (a->aside[i])
            continue; /* not in the set: retry_aside adds it back */
        if (epoll_ctl(a->t->epfd, EPOLL_CTL_MOD, s->lfds[i], &ev) == 0)
            continue;
        err = errno;
        rc = rc ? rc : -err;
        STAT_ADD(&a->t->st, err_other, 1);
        if (log_now(a, RL_ARM)) {
            net_local_name(s->lfds[i], name, sizeof(name));
            if (on)
                log_err("accept: cannot re-arm listener %s: epoll_ctl: %s; polling it every %d "
                        "ms until it can be",
                        name, strerror(err), ACCEPT_RETRY_MS);
            else
                log_err("accept: cannot disarm listener %s: epoll_ctl: %s; retrying accept "
                        "every %d ms",
                        name, strerror(err), ACCEPT_RETRY_MS);
        }
    }
    return rc;
}

/* Out of descriptors or memory, or a listener that refuses accept4: stop polling the listeners
 * instead of spinning on a queue we cannot drain (a level-triggered listener would report it
 * again at once). Connections wait in the kernel's backlog until a worker closes one (it kicks
 * the thread's wakefd) or ACCEPT_RETRY_MS pass (ENFILE and ENOMEM can be relieved by other
 * processes). The caller has logged why. */
static void set_paused(struct acc *a, bool on)
{
    if (a->t->paused == (int)on)
        return; /* only this thread writes it */
    /* The count first: a close that sees this thread paused finds the count raised too. */
    __atomic_add_fetch(&a->s->accept_paused, on ? 1 : -1, __ATOMIC_RELAXED);
    __atomic_store_n(&a->t->paused, (int)on, __ATOMIC_RELAXED);
}

static void pause_accepting(struct acc *a)
{
    set_paused(a, true);
    if (set_listening(a, false) < 0) {
        /* A listener still armed wakes epoll_wait at once, and each wake-up would end in the
         * same failure: sleep out the retry period instead (a close meanwhile waits for it). */
        struct timespec ts = {0, ACCEPT_RETRY_MS * 1000000L};

        nanosleep(&ts, NULL);
    }
}

/* Listener li refused accept4 with err: out of the epoll set (where a socket that does not
 * listen would report EPOLLHUP for ever, disarmed or not) until retry_aside finds it works. */
static void set_aside(struct acc *a, int li, int err)
{
    struct server *s = a->s;
    time_t now = time(NULL);
    char name[80];

    if (a->aside[li])
        return; /* a retry that failed again: it stays aside, said once */
    /* Cannot fail for a registered descriptor; if it did, the listener would wake the thread
     * for nothing until the retry that adds it back, never starve the others. */
    epoll_ctl(a->t->epfd, EPOLL_CTL_DEL, s->lfds[li], NULL);
    a->aside[li] = true;
    a->naside++;
    if (a->naside == 1)
        a->retry_ms = mono_ms() + ACCEPT_RETRY_MS;
    if (a->aside_logged[li] != now) {
        a->aside_logged[li] = now;
        net_local_name(s->lfds[li], name, sizeof(name));
        log_err("accept on %s: %s: this listener is set aside and retried every %d ms; the "
                "others are served as usual",
                name, strerror(err), ACCEPT_RETRY_MS);
    }
}

/* The errors accept(2) passes on from a new connection (man 2 accept, "Error handling"): the
 * kernel took it off the queue and it is lost; the rest of the queue is not. */
static bool lost_connection(int err)
{
    switch (err) {
    case ENETDOWN:
    case EPROTO:
    case ENOPROTOOPT:
    case EHOSTDOWN:
    case ENONET:
    case EHOSTUNREACH:
    case EOPNOTSUPP:
    case ENETUNREACH:
    case ETIMEDOUT:
    case ECONNRESET:
        return true;
    default:
        return false;
    }
}

/* accept4 on listener li failed with err (a -errno): what accept_all ends with. -EAGAIN is an
 * empty queue; any other is counted and logged (one line a second per kind). */
static enum drained accept_failed(struct acc *a, int li, int err)
{
    long live = __atomic_load_n(&a->s->live, __ATOMIC_RELAXED);

    switch (err) {
    case -EAGAIN:
        return ACC_EMPTY;
    case -EMFILE:
    case -ENFILE:
        STAT_ADD(&a->t->st, emfile, 1);
        if (log_now(a, RL_EMFILE))
            log_warn("accept: %s with %ld connections open: accepting paused until one "
                     "closes; raise ulimit -n (or fs.file-max) or lower --max-conns",
                     strerror(-err), live);
        pause_accepting(a);
        return ACC_PAUSED;
    case -ENOBUFS:
    case -ENOMEM:
        STAT_ADD(&a->t->st, enomem, 1);
        if (log_now(a, RL_NOMEM))
            log_warn("accept: %s with %ld connections open: accepting paused until one "
                     "closes (or %d ms pass); the kernel is short of memory",
                     strerror(-err), live, ACCEPT_RETRY_MS);
        pause_accepting(a);
        return ACC_PAUSED;
    default:
        STAT_ADD(&a->t->st, err_other, 1);
        if (lost_connection(-err)) {
            /* The listener stays level-triggered: epoll reports what is left. */
            if (log_now(a, RL_LOST))
                log_warn("accept: %s: a connection was lost before it was accepted",
                         strerror(-err));
            return ACC_EMPTY;
        }
        /* EPERM (a security module), EBADF, EINVAL (not listening), ENOTSOCK...: this
         * listener is refused, and would be again at once: retrying now would spin,
         * and pausing them all would starve the others. */
        set_aside(a, li, -err);
        return ACC_ASIDE;
    }
}

/* Over --max-conns (or an fd past the table): fd is closed at once. Returns true when it was. */
static bool shed_over_max(struct acc *a, int fd)
{
    struct server *s = a->s;

    if (__atomic_load_n(&s->live, __ATOMIC_RELAXED) >= s->max_conns ||
        (size_t)fd >= s->table_size) {
        STAT_ADD(&a->t->st, shed, 1); /* counted before the client can see the close */
        close(fd);                    /* over --max-conns: shed at once */
        return true;
    }
    return false;
}

/* --max-conns-per-ip: fd's slot in the table of client addresses, in s->ipslot[fd]. Returns
 * false when the address is over its limit (or the table full, or the client gone): fd was
 * closed. */
static bool take_ip_slot(struct acc *a, int fd)
{
    struct server *s = a->s;

    if (s->iplimit && s->opt->proxy) {
        /* the client's address comes in its PROXY header: the worker that reads it counts
         * it (proxy_admit); until then the connection holds no slot */
        __atomic_store_n(&s->ipslot[fd], -1, __ATOMIC_RELAXED);
    } else if (s->iplimit) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        int32_t slot = IPLIMIT_OVER; /* gone already */

        if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0) {
            /* The other accept threads take slots too: unlocked, two could claim one free
             * slot for one address at once and both be served under a limit of 1. */
            pthread_mutex_lock(&s->iplock);
            slot = iplimit_acquire(s->iplimit, (struct sockaddr *)&ss, s->opt->max_per_ip);
            pthread_mutex_unlock(&s->iplock);
        }

        if (slot < 0) {
            STAT_ADD(&a->t->st, shed_per_ip, 1); /* counted before the client sees the close */
            close(fd);
            if (slot == IPLIMIT_FULL && log_now(a, RL_IPTABLE))
                log_warn("accept: no room for one more client address in the "
                         "--max-conns-per-ip table (%d others on its chain): connection "
                         "closed",
                         IPLIMIT_PROBES);
            return false;
        }
        /* atomic: the fd number's previous owner read its slot just before closing */
        __atomic_store_n(&s->ipslot[fd], slot, __ATOMIC_RELAXED);
    }
    return true;
}

/* conn_new found no memory for fd: fd is closed, its address slot given back. */
static void no_memory_for(struct acc *a, int fd)
{
    struct server *s = a->s;

    if (s->iplimit)
        iplimit_release(s->iplimit, __atomic_load_n(&s->ipslot[fd], __ATOMIC_RELAXED));
    /* The client sees the close; the queue goes on (each connection retries calloc). */
    STAT_ADD(&a->t->st, enomem, 1); /* before the client can see the close */
    close(fd);
    if (log_now(a, RL_NOMEM))
        log_warn("accept: out of memory for a new connection (%ld open): connection "
                 "closed",
                 __atomic_load_n(&s->live, __ATOMIC_RELAXED));
}

/* Gives c to a group: counted live, in the fd table, its idle word armed, registered in the
 * group's epoll set. From the EPOLL_CTL_ADD on a worker may own, close and free c. */
static void hand_off(struct acc *a, int fd, struct conn *c, bool tls)
{
    struct server *s = a->s;
    struct epoll_event ev;
    struct group *g;

    g = &s->groups[dispatch_pick(&a->t->disp, group_load, s)];
    __atomic_add_fetch(&g->live, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&s->live, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&s->table[fd], c, __ATOMIC_RELEASE);
    raise_fd_hi(s, fd);
    ev.events = EPOLLIN | EPOLLRDHUP;
    if (tls)
        c->flags |= CONN_TLS; /* a handshake before it serves (after its header, if any) */
    if (s->opt->proxy)
        c->phase = CONN_PH_PROXY; /* its first bytes are a PROXY header, for the worker */
    else if (tls)
        c->phase = CONN_PH_HANDSHAKE;
    else if (s->lua && __atomic_load_n(&s->lua_connect_first, __ATOMIC_RELAXED))
        ev.events |= EPOLLOUT; /* on_connect may speak first: run it now, not at input */
    if (s->lua)
        lconn_of(c)->sc.id = __atomic_add_fetch(&s->next_id, 1, __ATOMIC_RELAXED);
    ev.events = pool_arm_events(g, c, ev.events);
    ev.data.ptr = c;
    if (s->opt->proxy) /* its header has a deadline, --idle-timeout or not */
        idle_arm(s, fd, idle_header_date(s, mono_ms()));
    else if (tls) /* and so has its handshake */
        idle_arm(s, fd, idle_handshake_date(s, mono_ms()));
    else if (s->opt->idle_ms)
        idle_arm(s, fd, mono_ms());
    /* From here a worker may own, close and free c: do not touch it again. */
    HANDOFF_RELEASE(c);
    if (epoll_ctl(g->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        /* Not registered: no worker can have c, it is still ours. */
        if (log_now(a, RL_EPOLL))
            log_warn("accept: epoll_ctl(ADD) into group %d: %s; connection closed", g->idx,
                     strerror(errno));
        STAT_ADD(&a->t->st, err_other, 1); /* before the client can see the close */
        if (s->idle)
            idle_take(s, fd); /* the sweeper may have claimed it meanwhile */
        conn_close(s, g, c, CONN_WHY_IO_ERROR, NULL);
        return;
    }
    __atomic_add_fetch(&g->accepted, 1, __ATOMIC_RELAXED); /* every accept thread's */
    STAT_ADD(&a->t->st, accepted, 1);
}

/* Accepts what is queued on listener li: at most max connections (max < 0: until accept4
 * says EAGAIN). Returns ACC_EMPTY once its queue is empty or max were taken, ACC_PAUSED
 * when accepting paused (out of descriptors or memory: every listener), ACC_ASIDE when li
 * itself refused accept4 and was set aside. */
static enum drained accept_all(struct acc *a, int li, long max)
{
    struct server *s = a->s;

    for (; max != 0; max--) {
        int fd = net_accept(s->lfds[li]);
        struct conn *c;

        if (fd < 0)
            return accept_failed(a, li, fd);
        if (shed_over_max(a, fd) || !take_ip_slot(a, fd))
            continue;
        c = conn_new(fd, s->lua ? CONN_LUA : CONN_ECHO);
        if (!c) {
            no_memory_for(a, fd);
            continue;
        }
        hand_off(a, fd, c, s->ltls[li]);
    }
    return ACC_EMPTY;
}

/* How many connections wait in listener lfd's accept queue, or -1 when it cannot say (not a
 * listening TCP socket: then accept4 says what is wrong with it). Why ask: an accept4 that finds
 * the queue empty is no cheap "no": the kernel allocates the new socket, its inode and its file
 * before it looks at the queue, and frees them through RCU after, many times what this
 * getsockopt costs (a listener's TCP_INFO is read without its lock; tcpi_unacked is its accept
 * queue's length, tcp_get_info). Draining until EAGAIN paid that once per wake-up, which on a
 * loaded server is about once per connection; docs/bench.md ("The accept thread and the re-arm,
 * per call") has both calls' costs and what asking first saves. A connection queued after the
 * look is reported by the next epoll_wait (the listeners are level-triggered). */
static long queued(int lfd)
{
    struct tcp_info ti;
    socklen_t len = sizeof(ti);

    if (getsockopt(lfd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0 || ti.tcpi_state != TCP_LISTEN)
        return -1;
    return ti.tcpi_unacked;
}

/* Tries each listener set aside; one that accepts (or reports an empty queue) goes back into
 * the epoll set, armed unless accepting is paused (the paused loop arms it with the others). */
static void retry_aside(struct acc *a)
{
    struct server *s = a->s;

    a->retry_ms = mono_ms() + ACCEPT_RETRY_MS;
    for (int k = 0; k < a->t->nl && a->naside; k++) {
        int li = a->t->li[k];
        bool paused;
        struct epoll_event ev = {.data.u32 = (uint32_t)li};
        char name[80];
        enum drained r;

        if (!a->aside[li])
            continue;
        r = accept_all(a, li, -1);
        if (r == ACC_PAUSED)
            return; /* out of descriptors: no listener can be told apart now */
        if (r == ACC_ASIDE)
            continue;
        paused = a->t->paused;
        ev.events = paused ? 0 : EPOLLIN;
        net_local_name(s->lfds[li], name, sizeof(name));
        if (epoll_ctl(a->t->epfd, EPOLL_CTL_ADD, s->lfds[li], &ev) < 0) {
            STAT_ADD(&a->t->st, err_other, 1);
            if (log_now(a, RL_ARM))
                log_err("accept: cannot put listener %s back: epoll_ctl: %s; retrying every %d "
                        "ms",
                        name, strerror(errno), ACCEPT_RETRY_MS);
            continue;
        }
        a->aside[li] = false;
        a->naside--;
        log_info("accept on %s works again: served as usual", name);
    }
}

/* Accepts what every listener of this thread holds. Returns false when accepting paused. */
static bool accept_each(struct acc *a)
{
    for (int k = 0; k < a->t->nl; k++)
        if (!a->aside[a->t->li[k]] && accept_all(a, a->t->li[k], -1) == ACC_PAUSED)
            return false; /* one set aside does not stop the others */
    return true;
}

/* The end of a stop that is not a hand-over. Main has made every listener drop new SYNs
 * (net_refuse_syns); handshakes under way still complete into the queues. This accepts them
 * until none came for DRAIN_SETTLE_MS (a round trip, with room), for at most s->drain_accept_ms,
 * so that main's close of the listeners resets nothing that waited in them; what arrives later
 * finds the port closed (refused), never a reset after an accept queue took it. Under
 * TCP_DEFER_ACCEPT (1 s) a client that has sent nothing waits in the SYN queue, its handshake
 * complete on its side: the kernel resends its SYN-ACK 1 s after its SYN, and its ACK then
 * queues it for accept. Closing the listener before would reset it at its first bytes, so a
 * deferring stop accepts for at least s->drain_min_ms (DRAIN_DEFER_MS: that second, a round
 * trip and room). */
static void drain_queues(struct acc *a)
{
    struct epoll_event evs[OPT_MAX_LFDS + 1];
    long now = mono_ms(), end = now + a->s->drain_accept_ms, quiet_from = now;
    long min_end = now + a->s->drain_min_ms;

    for (;;) {
        uint64_t before = a->t->st.accepted;
        int n;

        accept_each(a);
        now = mono_ms();
        if (a->t->st.accepted != before)
            quiet_from = now;
        if (now >= end || (now - quiet_from >= DRAIN_SETTLE_MS && now >= min_end))
            return;
        n = sysc_epoll_wait(a->t->epfd, evs, OPT_MAX_LFDS + 1,
                            (int)(end - now < DRAIN_SETTLE_MS ? end - now : DRAIN_SETTLE_MS));
        for (int i = 0; i < n; i++) {
            eventfd_t v;

            if (evs[i].data.u32 == ACCEPT_WAKE)
                eventfd_read(a->t->wakefd, &v);
        }
    }
}

void *acceptor_main(void *arg)
{
    struct acc a = {.t = arg, .s = ((struct acceptor *)arg)->srv};
    struct server *s = a.s;
    struct acceptor *t = a.t;
    struct epoll_event evs[OPT_MAX_LFDS + 1];
    struct sched_param sp = {0};

    /* SCHED_BATCH: a new connection's wakeup does not preempt the worker running on the same
     * CPU; the accept thread runs when the worker blocks or its slice ends, and then accepts
     * every connection queued meanwhile in one go: short connections on a shared CPU cost the
     * server less CPU each (docs/bench.md, "Short connections", has how much). Nothing else
     * changes: on a CPU of its own it runs at once. */
    if (sched_setscheduler(0, SCHED_BATCH, &sp) < 0)
        log_debug("accept thread: SCHED_BATCH: %s; staying SCHED_OTHER", strerror(errno));
    for (;;) {
        bool paused = t->paused;
        int n = sysc_epoll_wait(t->epfd, evs, OPT_MAX_LFDS + 1,
                                paused || a.naside ? ACCEPT_RETRY_MS : -1);

        if (n < 0) {
            if (errno == EINTR)
                continue;
            log_err("accept thread %d: epoll_wait: %s; no longer accepting", t->idx,
                    strerror(errno));
            return NULL;
        }
        if (__atomic_load_n(&s->draining, __ATOMIC_ACQUIRE)) {
            if (s->drain_accept_ms > 0)
                drain_queues(&a);
            return NULL;
        }
        for (int i = 0; i < n; i++) {
            eventfd_t v;

            if (evs[i].data.u32 == ACCEPT_WAKE)
                eventfd_read(t->wakefd, &v); /* non-blocking: just clear it */
        }
        if (a.naside && mono_ms() >= a.retry_ms)
            retry_aside(&a);
        if (paused) {
            /* Retry every listener: the first EMFILE pauses again, without spinning. A listener
             * that cannot be re-armed would never be reported by epoll_wait again: the thread
             * stays paused instead, so every tick retries the re-arm and accepts what that
             * listener's queue holds meanwhile. Slower to notice, never deaf. */
            set_paused(&a, false);
            if (set_listening(&a, true) < 0)
                set_paused(&a, true);
            accept_each(&a);
            continue;
        }
        for (int i = 0; i < n; i++) {
            uint32_t li = evs[i].data.u32;

            if (li != ACCEPT_WAKE && !a.aside[li] &&
                accept_all(&a, (int)li, queued(s->lfds[li])) == ACC_PAUSED)
                break;
        }
    }
}
