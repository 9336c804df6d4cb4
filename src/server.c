/* server: the accept thread, the epoll groups and their worker threads, as one pool.
 *
 * DESIGN
 *
 * Threads. main (signals, drain), one accept thread, and G groups of W workers. All are created
 * by server_start() and joined by server_stop(); none is created or destroyed while serving.
 * Workers are pinned to their group's CPU set, the accept thread to the union of them.
 *
 * Hand-off (leader-follower through the kernel). The accept thread accept4()s until EAGAIN and
 * registers each connection in one group's epoll fd with EPOLLIN|EPOLLRDHUP|EPOLLONESHOT;
 * epoll_data.ptr is the struct conn. The W workers of a group all block in epoll_wait on that
 * fd; the kernel wakes one (LIFO: the most recently idle, so hot threads stay hot). When
 * epoll_wait returns a connection, EPOLLONESHOT has disarmed it: this worker is its only owner
 * until it re-arms it with EPOLL_CTL_MOD (EPOLLIN, or EPOLLOUT while output is pending) or
 * closes it. MOD re-polls the socket, so data that arrived meanwhile is reported at once. A
 * worker may take up to --batch events per epoll_wait; each is owned the same way.
 *
 * Locks. None of ours on the request path: epoll_ctl and epoll_wait are thread-safe (the kernel
 * takes each group's ep->mtx, which is why there are several groups). Shared words are atomics:
 * live counts (accept +1, closing worker -1), npending, draining, accept_paused, and the
 * fd -> conn table (slot written by the accept thread before EPOLL_CTL_ADD, cleared by the
 * closing worker before close(); read by main only after every thread is joined). Counters are
 * per thread, written by their owner, summed on read.
 *
 * Idle timeout (--idle-timeout). An armed connection belongs to no thread, so main's sweep only
 * claims it (a CAS on a per-fd word), shuts it down (SHUT_RDWR: epoll reports EPOLLHUP) and hands
 * it back; the worker epoll hands it to closes it. Idle means nothing moved: no event it is armed
 * for, and no fall of its send queue (judge). The words and their states are in pool.h; the same
 * sweep ends lingering Lua closes and PROXY headers past --proxy-timeout, by their dates.
 *
 * Stop. SIGTERM: draining = 1, the accept thread exits and main closes the listeners; workers go
 * on serving. Main waits until the pool is quiet (no output pending, no worker inside a batch,
 * no event handled across two 10 ms looks) or the drain timeout passes, then makes each group's
 * stop eventfd readable (level-triggered, never read, so all W workers see it), joins them,
 * writes out any output still pending (within the timeout) and closes every connection. Echo
 * has no request boundary, so "in flight" means bytes moving; a client that never stops sending
 * holds the drain to its timeout. A hand-over (--takeover: a successor serves the listeners) does
 * not wait for clients to stop: an echo connection that has an event and is found between
 * requests (everything echoed, nothing more in its socket) gets its FIN at once, in the segment
 * of its last echo (worker.c, drain_echo), and ends when its client closes. Only a hand-over,
 * because "nothing in its socket" may also be the middle of a long request whose next bytes are
 * on their way: a client that has somewhere to reconnect loses at most that one request, while a
 * plain stop keeps its promise that what a client sends is echoed.
 */
#include "server.h"

#include "log.h"
#include "metrics.h"
#include "net.h"
#include "pool.h"

#include <errno.h>
#include <limits.h>
#include <linux/sockios.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define STOP_GRACE_MS 300 /* past the drain timeout: joining workers, the last writes */

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
    bool linger = c && (c->flags & CONN_LINGER), header = c && (c->flags & CONN_PROXY);
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

long server_sweep_idle(struct server *s, long now)
{
    long hi = __atomic_load_n(&s->fd_hi, __ATOMIC_RELAXED), n = 0;
    uint64_t limit = (uint64_t)s->idle_limit_ms, bnow = (uint64_t)(now + IDLE_BIAS);
    long tick = s->idle_limit_ms / 4;
    bool draining = __atomic_load_n(&s->draining, __ATOMIC_ACQUIRE);

    /* without --idle-timeout only lingering connections and PROXY headers are watched */
    if (!s->idle || now < s->next_sweep_ms ||
        (!s->opt->idle_ms && !s->opt->proxy && !__atomic_load_n(&s->nwrclosed, __ATOMIC_RELAXED)))
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

/* n zeroed elements of size, aligned to 64 bytes (struct server, group and worker hold
 * cache-line-aligned counters; calloc promises 16). NULL when memory runs out. */
static void *calloc64(size_t n, size_t size)
{
    void *p;

    if (n && size > SIZE_MAX / n)
        return NULL;
    if (posix_memalign(&p, 64, n * size > 0 ? n * size : 64))
        return NULL;
    memset(p, 0, n * size);
    return p;
}

static int add_fd(int epfd, int fd, uint32_t events, uint64_t data)
{
    struct epoll_event ev = {.events = events, .data.u64 = data};

    return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

struct server *server_new(const struct opt *o, const struct plan *p, const int *lfds, int nlisten,
                          long max_conns, struct script_env *lua, char *err, size_t errlen)
{
    struct server *s = calloc64(1, sizeof(*s));
    struct rlimit rl;

    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&s->iplock, NULL);
    s->opt = o;
    s->plan = p;
    s->ngroups = p->ngroups;
    s->max_conns = max_conns;
    s->lua = lua;
    if (lua)
        s->lua_connect_first = script_env_connect_first(lua);
    s->acc_epfd = s->acc_wakefd = -1;
    s->nlisten = nlisten;
    memcpy(s->lfds, lfds, sizeof(*lfds) * (size_t)nlisten);
    dispatch_init(&s->disp, o->dispatch, (unsigned)p->ngroups, (uint64_t)getpid() * 2654435761u);
    CPU_ZERO(&s->all_cpus);

    getrlimit(RLIMIT_NOFILE, &rl);
    s->table_size =
        rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (1u << 26) ? (1u << 26) : rl.rlim_cur;
    /* calloc of a large table is mmap'd zero pages: untouched slots cost no memory. */
    s->table = calloc(s->table_size, sizeof(*s->table));
    if (o->max_per_ip && (!(s->iplimit = iplimit_new(max_conns)) ||
                          !(s->ipslot = calloc(s->table_size, sizeof(*s->ipslot)))))
        goto out_nomem;
    /* Lua's lingering close needs the sweeper's clock even without --idle-timeout */
    s->idle_limit_ms = o->idle_ms ? o->idle_ms : LINGER_MS;
    if ((o->idle_ms || o->lua || o->proxy) && !(s->idle = calloc(s->table_size, sizeof(*s->idle))))
        goto out_nomem;
    /* written by the sweep only, for the few connections it finds past their time */
    if (o->idle_ms && !(s->idle_outq = calloc(s->table_size, sizeof(*s->idle_outq))))
        goto out_nomem;
    s->groups = calloc64((size_t)s->ngroups, sizeof(*s->groups));
    if (!s->table || !s->groups)
        goto out_nomem;
    for (int gi = 0; gi < s->ngroups; gi++)
        s->groups[gi].epfd = s->groups[gi].stopfd = -1; /* before anything can fail */
    for (int gi = 0; gi < s->ngroups; gi++) {
        struct group *g = &s->groups[gi];

        g->idx = gi;
        g->nworkers = p->nworkers[gi];
        g->cpus = p->cpus[gi];
        CPU_OR(&s->all_cpus, &s->all_cpus, &g->cpus);
        g->workers = calloc64((size_t)g->nworkers, sizeof(*g->workers));
        if (!g->workers)
            goto out_nomem;
        g->epfd = epoll_create1(EPOLL_CLOEXEC);
        g->stopfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (g->epfd < 0 || g->stopfd < 0 || add_fd(g->epfd, g->stopfd, EPOLLIN, 0) < 0) {
            snprintf(err, errlen, "group %d: epoll/eventfd: %s (raise ulimit -n?)", gi,
                     strerror(errno));
            goto out_free;
        }
        for (int wi = 0; wi < g->nworkers; wi++) {
            struct worker *w = &g->workers[wi];

            w->srv = s;
            w->g = g;
            w->idx = wi;
            w->buf = malloc(WORKER_BUF);
            w->evs = calloc((size_t)o->batch, sizeof(*w->evs));
            if (!w->buf || !w->evs)
                goto out_nomem;
            if (lua) {
                char name[24], why[512];

                snprintf(name, sizeof(name), "%d.%d", gi, wi);
                w->script = script_new(lua, name, &w->st, why, sizeof(why));
                if (!w->script) {
                    snprintf(err, errlen, "worker %s: %s", name, why);
                    goto out_free;
                }
            }
        }
    }
    s->acc_epfd = epoll_create1(EPOLL_CLOEXEC);
    s->acc_wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (s->acc_epfd < 0 || s->acc_wakefd < 0 ||
        add_fd(s->acc_epfd, s->acc_wakefd, EPOLLIN, ACCEPT_WAKE) < 0) {
        snprintf(err, errlen, "accept thread: epoll/eventfd: %s", strerror(errno));
        goto out_free;
    }
    for (int i = 0; i < nlisten; i++) {
        if (add_fd(s->acc_epfd, lfds[i], EPOLLIN, (uint64_t)i) < 0) {
            snprintf(err, errlen, "accept thread: epoll_ctl: %s", strerror(errno));
            goto out_free;
        }
    }
    return s;

out_nomem:
    snprintf(err, errlen, "out of memory");
out_free:
    server_free(s);
    return NULL;
}

static int start_thread(pthread_t *tid, void *(*fn)(void *), void *arg, const cpu_set_t *cpus,
                        const char *name)
{
    pthread_attr_t attr;
    int rc;

    pthread_attr_init(&attr);
    /* Pinned from its first instruction: the thread never runs outside its CPUs. */
    if (cpus)
        pthread_attr_setaffinity_np(&attr, sizeof(*cpus), cpus);
    rc = pthread_create(tid, &attr, fn, arg);
    pthread_attr_destroy(&attr);
    if (rc == 0) {
        char comm[16]; /* the kernel keeps 15 characters */
        snprintf(comm, sizeof(comm), "%s", name);
        pthread_setname_np(*tid, comm);
    }
    return -rc;
}

int server_start(struct server *s)
{
    char name[32];
    int rc;

    if (s->lua && (rc = script_env_start(s->lua)) < 0) {
        log_err("cannot start the Lua timeout watchdog: %s", strerror(-rc));
        return rc;
    }
    for (int gi = 0; gi < s->ngroups; gi++) {
        struct group *g = &s->groups[gi];

        for (int wi = 0; wi < g->nworkers; wi++) {
            struct worker *w = &g->workers[wi];

            snprintf(name, sizeof(name), "lfe-g%d-w%d", gi, wi);
            rc = start_thread(&w->tid, worker_main, w, s->plan->pin ? &g->cpus : NULL, name);
            if (rc < 0) {
                log_err("cannot create worker %d.%d: %s", gi, wi, strerror(-rc));
                goto out_stop;
            }
            w->started = true;
        }
    }
    rc = start_thread(&s->acc_tid, acceptor_main, s, s->plan->pin ? &s->all_cpus : NULL,
                      "lfe-accept");
    if (rc < 0) {
        log_err("cannot create the accept thread: %s", strerror(-rc));
        goto out_stop;
    }
    s->acc_started = true;
    return 0;

out_stop:
    server_stop(s, 0, NULL);
    return rc;
}

static long now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
}

/* Sum of events handled and whether any worker is inside a batch. */
static uint64_t activity(struct server *s, bool *busy)
{
    uint64_t ev = 0;

    *busy = false;
    for (int gi = 0; gi < s->ngroups; gi++)
        for (int wi = 0; wi < s->groups[gi].nworkers; wi++) {
            struct worker *w = &s->groups[gi].workers[wi];

            ev += __atomic_load_n(&w->st.events, __ATOMIC_RELAXED);
            if (__atomic_load_n(&w->busy, __ATOMIC_ACQUIRE))
                *busy = true;
        }
    return ev;
}

/* After every worker is joined: output still pending goes out while time is left, blocking;
 * then conn_close. In Lua mode the script of runner (a joined worker's state, now run by
 * main) hears "shutdown", if it saw the connection at all, unless the deadline had passed
 * before (each call could take --lua-timeout-ms). Returns false when on_close was skipped for
 * lack of time. */
static bool flush_and_close(struct server *s, struct conn *c, long deadline, struct worker *runner)
{
    bool ask = now_ms() < deadline, told = ask || !(c->flags & CONN_STARTED) || !runner;

    if (c->flags & CONN_PROXY)
        obuf_free(&c->out); /* part of a PROXY header, not output */
    while (obuf_len(&c->out)) {
        struct pollfd pfd = {.fd = c->fd, .events = POLLOUT};
        long left = deadline - now_ms();
        ssize_t w;

        if (left <= 0 || poll(&pfd, 1, (int)left) <= 0)
            break;
        w = send(c->fd, c->out.data + c->out.off, obuf_len(&c->out), MSG_NOSIGNAL);
        if (w < 0 && errno != EAGAIN && errno != EINTR)
            break;
        if (w > 0)
            obuf_consume(&c->out, (size_t)w);
    }
    /* a lingering one was the script's close: it only ends late */
    conn_close(s, NULL, c, c->flags & CONN_LINGER ? CONN_WHY_CLOSED : CONN_WHY_SHUTDOWN,
               ask ? runner : NULL);
    return told;
}

void server_handover(struct server *s)
{
    s->handover = true;
}

int server_stop(struct server *s, int timeout_ms, int (*abort_wait)(void))
{
    long deadline = now_ms() + timeout_ms;
    uint64_t prev = 0;
    int quiet = 0, wedged = 0;
    long left, unasked = 0;
    struct worker *runner = NULL; /* a joined worker whose Lua state main runs from here */
    struct timespec until;

    __atomic_store_n(&s->draining, 1, __ATOMIC_RELEASE);
    s->next_sweep_ms = 0; /* the drain's sweeps (lingering connections) start now */
    for (int gi = 0; s->handover && gi < s->ngroups; gi++) /* echo: end between requests */
        for (int wi = 0; wi < s->groups[gi].nworkers; wi++)
            __atomic_store_n(&s->groups[gi].workers[wi].drain, 1, __ATOMIC_RELAXED);
    script_env_stop(s->lua, deadline); /* Lua calls that wait end by the drain's deadline */
    if (s->acc_started) {
        pool_kick(s->acc_wakefd);
        pthread_join(s->acc_tid, NULL);
        s->acc_started = false;
    }
    for (int i = 0; i < s->nlisten; i++) {
        if (s->lfds[i] >= 0)
            close(s->lfds[i]); /* new connections are refused from here on */
        s->lfds[i] = -1;
    }
    log_info("draining %ld connections (%ld with output pending), up to %d ms",
             __atomic_load_n(&s->live, __ATOMIC_RELAXED),
             __atomic_load_n(&s->npending, __ATOMIC_RELAXED), timeout_ms);
    /* Quiet means: no connection left, or nothing pending, no worker busy, no connection a
     * hand-over sent its FIN still open (its client may yet send what raced the FIN: it is read
     * and counted, not reset by a close) and no event handled across two consecutive looks (an
     * idle connection is closed below, losing nothing). */
    while (abort_wait && now_ms() < deadline) {
        bool busy;
        uint64_t ev;

        if (abort_wait()) { /* waits up to 10 ms; non-zero: a second signal */
            log_warn("second stop signal: not waiting for in-flight work");
            deadline = now_ms();
            script_env_stop(s->lua, deadline); /* Lua calls waiting end now too */
            break;
        }
        ev = activity(s, &busy);
        if (__atomic_load_n(&s->live, __ATOMIC_RELAXED) == 0)
            break;
        if (!busy && ev == prev && __atomic_load_n(&s->npending, __ATOMIC_RELAXED) == 0 &&
            __atomic_load_n(&s->nwrclosed, __ATOMIC_RELAXED) == 0) {
            if (++quiet >= 2)
                break;
        } else {
            quiet = 0;
        }
        prev = ev;
    }
    for (int gi = 0; gi < s->ngroups; gi++)
        pool_kick(s->groups[gi].stopfd);
    /* A worker that does not come back (a callback stuck where the timeout cannot reach it:
     * a finalizer under --lua-unsafe) must not hold the process: wait for it until the
     * deadline plus STOP_GRACE_MS, then name it. */
    clock_gettime(CLOCK_REALTIME, &until);
    {
        long wait = (deadline > now_ms() ? deadline - now_ms() : 0) + STOP_GRACE_MS;
        until.tv_sec += wait / 1000;
        until.tv_nsec += (wait % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
    }
    for (int gi = 0; gi < s->ngroups; gi++)
        for (int wi = 0; wi < s->groups[gi].nworkers; wi++) {
            struct worker *w = &s->groups[gi].workers[wi];

            if (!w->started)
                continue;
            if (pthread_timedjoin_np(w->tid, NULL, &until) != 0) {
                log_err("worker %d.%d did not return within --drain-timeout + %d ms (stuck in "
                        "a callback); stopping without it",
                        gi, wi, STOP_GRACE_MS);
                wedged++;
                continue; /* stays started: nothing it may touch is freed */
            }
            w->started = false;
            if (!runner && w->script)
                runner = w;
        }
    if (wedged) /* its connections may be in its hands: leave them to the exit */
        return wedged;
    left = __atomic_load_n(&s->live, __ATOMIC_RELAXED);
    if (runner)
        script_bind(runner->script); /* main runs on_close from here; the watchdog signals it */
    for (size_t fd = 0; fd < s->table_size && left > 0; fd++) {
        struct conn *c = s->table[fd];

        if (c) {
            s->table[fd] = NULL;
            if (!flush_and_close(s, c, deadline + STOP_GRACE_MS, runner))
                unasked++;
            left--;
        }
    }
    if (unasked)
        log_warn("stop: %ld connections closed without on_close (\"shutdown\"): the drain "
                 "timeout had passed",
                 unasked);
    __atomic_store_n(&s->live, 0, __ATOMIC_RELAXED);
    return 0;
}

void server_print_stats(struct server *s, FILE *f)
{
    struct worker_stats total = {0};
    struct accept_stats acc = {0};
    char prefix[192], cpus[64];

    for (int gi = 0; gi < s->ngroups; gi++) {
        struct group *g = &s->groups[gi];
        struct worker_stats gs = {0};

        cpulist_format(&g->cpus, cpus, sizeof(cpus));
        for (int wi = 0; wi < g->nworkers; wi++) {
            struct worker_stats one = {0};

            stats_add_worker(&one, &g->workers[wi].st);
            stats_add_worker(&gs, &one);
            if (g->workers[wi].script)
                snprintf(prefix, sizeof(prefix), "stats: worker %d.%d cpus=%s lua_kb=%zu:", gi, wi,
                         s->plan->pin ? cpus : "any", script_mem(g->workers[wi].script) >> 10);
            else
                snprintf(prefix, sizeof(prefix), "stats: worker %d.%d cpus=%s:", gi, wi,
                         s->plan->pin ? cpus : "any");
            stats_print_worker(f, prefix, &one);
        }
        snprintf(prefix, sizeof(prefix), "stats: group %d live=%ld dispatched=%llu:", gi,
                 __atomic_load_n(&g->live, __ATOMIC_RELAXED),
                 (unsigned long long)__atomic_load_n(&g->accepted, __ATOMIC_RELAXED));
        stats_print_worker(f, prefix, &gs);
        stats_add_worker(&total, &gs);
    }
    snprintf(prefix, sizeof(prefix),
             "stats: total live=%ld:", __atomic_load_n(&s->live, __ATOMIC_RELAXED));
    stats_print_worker(f, prefix, &total);
    stats_snap_accept(&acc, &s->ast);
    stats_print_accept(f, "stats: accept:", &acc);
    if (s->lua)
        script_env_print(s->lua, f);
    fflush(f);
}

int server_stalled(struct server *s, long limit_ms)
{
    struct timespec ts;
    int64_t now;
    int n = 0;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    now = ts.tv_sec * 1000000000LL + ts.tv_nsec;
    for (int gi = 0; gi < s->ngroups; gi++)
        for (int wi = 0; wi < s->groups[gi].nworkers; wi++) {
            struct worker *w = &s->groups[gi].workers[wi];

            long lim = limit_ms;

            /* A callback waiting in lfe.sleep or on a socket is not stuck: it may wait up to
             * --lua-wall-timeout-ms in all (no bound without it) */
            if (w->script && script_waiting(w->script))
                lim = s->opt->lua_wall_ms > 0 ? s->opt->lua_wall_ms + limit_ms : LONG_MAX / 2000000;
            /* busy is stored after busy_since: a busy worker's start time is its own */
            if (__atomic_load_n(&w->busy, __ATOMIC_ACQUIRE) &&
                now - __atomic_load_n(&w->busy_since_ns, __ATOMIC_RELAXED) > lim * 1000000LL)
                n++;
        }
    return n;
}

long server_live(struct server *s)
{
    return __atomic_load_n(&s->live, __ATOMIC_RELAXED);
}

bool server_healthy(struct server *s, long stall_ms, char *why, size_t len)
{
    int n;

    if (__atomic_load_n(&s->draining, __ATOMIC_ACQUIRE)) {
        snprintf(why, len, "draining: stopping, not accepting");
        return false;
    }
    if ((n = server_stalled(s, stall_ms)) > 0) {
        snprintf(why, len, "%d worker%s inside one batch for more than %ld ms (a callback stuck?)",
                 n, n == 1 ? "" : "s", stall_ms);
        return false;
    }
    snprintf(why, len, "ok");
    return true;
}

#define W_FAMILY(name, help)                                                                       \
    metrics_family(f, "lfepolld_worker_" #name "_total", "counter", "Per worker: " help ".");      \
    for (int gi = 0; gi < s->ngroups; gi++)                                                        \
        for (int wi = 0; wi < s->groups[gi].nworkers; wi++) {                                      \
            snprintf(lab, sizeof(lab), "group=\"%d\",worker=\"%d\"", gi, wi);                      \
            metrics_u64(f, "lfepolld_worker_" #name "_total", lab,                                 \
                        __atomic_load_n(&s->groups[gi].workers[wi].st.name, __ATOMIC_RELAXED));    \
        }
#define A_FAMILY(name, help)                                                                       \
    metrics_family(f, "lfepolld_accept_" #name "_total", "counter", "Accept thread: " help ".");   \
    metrics_u64(f, "lfepolld_accept_" #name "_total", NULL,                                        \
                __atomic_load_n(&s->ast.name, __ATOMIC_RELAXED));

void server_write_metrics(struct server *s, FILE *f)
{
    char lab[64];

    metrics_family(f, "lfepolld_build_info", "gauge", "lfepolld's version; always 1.");
    fprintf(f, "lfepolld_build_info{version=\"%s\",mode=\"%s\"} 1\n", LFE_VERSION,
            s->lua ? "lua" : "echo");
    metrics_family(f, "lfepolld_connections", "gauge", "Live connections per epoll group.");
    for (int gi = 0; gi < s->ngroups; gi++) {
        snprintf(lab, sizeof(lab), "group=\"%d\"", gi);
        metrics_u64(f, "lfepolld_connections", lab,
                    (uint64_t)__atomic_load_n(&s->groups[gi].live, __ATOMIC_RELAXED));
    }
    metrics_family(f, "lfepolld_connections_max", "gauge",
                   "The live connection limit (--max-conns, or what RLIMIT_NOFILE leaves).");
    metrics_u64(f, "lfepolld_connections_max", NULL, (uint64_t)s->max_conns);
    metrics_family(f, "lfepolld_connections_pending_output", "gauge",
                   "Connections with output waiting for the client to read it.");
    metrics_u64(f, "lfepolld_connections_pending_output", NULL,
                (uint64_t)__atomic_load_n(&s->npending, __ATOMIC_RELAXED));
    metrics_family(f, "lfepolld_group_dispatched_total", "counter",
                   "Connections the accept thread handed to each epoll group.");
    for (int gi = 0; gi < s->ngroups; gi++) {
        snprintf(lab, sizeof(lab), "group=\"%d\"", gi);
        metrics_u64(f, "lfepolld_group_dispatched_total", lab,
                    __atomic_load_n(&s->groups[gi].accepted, __ATOMIC_RELAXED));
    }
    metrics_family(f, "lfepolld_draining", "gauge", "1 once a stop began (SIGTERM), else 0.");
    metrics_u64(f, "lfepolld_draining", NULL,
                (uint64_t)__atomic_load_n(&s->draining, __ATOMIC_RELAXED));
    metrics_family(f, "lfepolld_accept_paused", "gauge",
                   "1 while the accept thread has paused (out of descriptors or memory).");
    metrics_u64(f, "lfepolld_accept_paused", NULL,
                (uint64_t)__atomic_load_n(&s->accept_paused, __ATOMIC_RELAXED));
    metrics_family(f, "lfepolld_workers_busy", "gauge",
                   "Workers inside a batch of events at the moment of the scrape.");
    {
        uint64_t busy = 0;

        for (int gi = 0; gi < s->ngroups; gi++)
            for (int wi = 0; wi < s->groups[gi].nworkers; wi++)
                busy +=
                    (uint64_t)__atomic_load_n(&s->groups[gi].workers[wi].busy, __ATOMIC_RELAXED);
        metrics_u64(f, "lfepolld_workers_busy", NULL, busy);
    }
    WORKER_STATS(W_FAMILY)
    ACCEPT_STATS(A_FAMILY)
    metrics_family(f, "lfepolld_service_seconds", "histogram",
                   "Per epoll group: time from the epoll_wait return that took an event to its "
                   "re-arm or close, seconds.");
    for (int gi = 0; gi < s->ngroups; gi++) {
        struct svc_hist h = {0};

        for (int wi = 0; wi < s->groups[gi].nworkers; wi++)
            stats_add_svc(&h, &s->groups[gi].workers[wi].svc);
        snprintf(lab, sizeof(lab), "group=\"%d\"", gi);
        metrics_svc(f, "lfepolld_service_seconds", lab, &h);
    }
    if (s->lua) {
        metrics_family(f, "lfepolld_lua_memory_bytes", "gauge",
                       "Memory of each worker's Lua state, bytes.");
        for (int gi = 0; gi < s->ngroups; gi++)
            for (int wi = 0; wi < s->groups[gi].nworkers; wi++) {
                snprintf(lab, sizeof(lab), "group=\"%d\",worker=\"%d\"", gi, wi);
                metrics_u64(f, "lfepolld_lua_memory_bytes", lab,
                            script_mem(s->groups[gi].workers[wi].script));
            }
        script_env_metrics(s->lua, f);
    }
    metrics_process(f, "/proc/self", "/proc/stat");
}

int server_reload(struct server *s)
{
    char err[512];
    long gen;

    if (!s->lua) {
        log_info("SIGHUP: nothing to reload in echo mode");
        return 0;
    }
    gen = script_env_reload(s->lua, err, sizeof(err));
    if (gen < 0) {
        log_err("SIGHUP: reload failed, the running script stays: %s", err);
        return -1;
    }
    __atomic_store_n(&s->lua_connect_first, script_env_connect_first(s->lua), __ATOMIC_RELAXED);
    log_info("SIGHUP: script reloaded as generation %ld; each worker switches before its next "
             "request",
             gen);
    return 0;
}

void server_free(struct server *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->nlisten; i++)
        if (s->lfds[i] >= 0)
            close(s->lfds[i]);
    if (s->acc_epfd >= 0)
        close(s->acc_epfd);
    if (s->acc_wakefd >= 0)
        close(s->acc_wakefd);
    for (int gi = 0; s->groups && gi < s->ngroups; gi++) {
        struct group *g = &s->groups[gi];

        if (g->epfd >= 0)
            close(g->epfd);
        if (g->stopfd >= 0)
            close(g->stopfd);
        for (int wi = 0; g->workers && wi < g->nworkers; wi++) {
            free(g->workers[wi].buf);
            free(g->workers[wi].evs);
            script_free(g->workers[wi].script);
            free(g->workers[wi].lout.data);
        }
        free(g->workers);
    }
    free(s->groups);
    free(s->table);
    iplimit_free(s->iplimit);
    free(s->ipslot);
    free(s->idle);
    free(s->idle_outq);
    pthread_mutex_destroy(&s->iplock);
    free(s);
}
