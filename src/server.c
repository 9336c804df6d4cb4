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
 * Solo groups (--oneshot auto, the default). A group of one worker has no hand-off to make: the
 * one thread in epoll_wait on its fd owns every connection in it. Its connections are
 * registered level-triggered, without EPOLLONESHOT, and the worker calls EPOLL_CTL_MOD only
 * when the events a connection waits for change (the CONN_REG_* bits remember what the
 * registration asks: pool.h, pool_arm_events): one syscall less per request. Level-triggered
 * re-reporting stands in for MOD's re-poll; the idle words are published the same way (ARMED
 * between events), and close() still removes the registration (the only reference).
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
 * for, and no fall of its send queue. The words, their states and the sweep are idle.h's and
 * idle.c's; the same sweep ends lingering Lua closes and PROXY headers past --proxy-timeout, by
 * their dates.
 *
 * Stop. SIGTERM: each listener drops new SYNs (a socket filter), the accept threads take what
 * the queues hold, exit, and main closes the listeners; workers go on serving. Listeners that
 * live on in other hands are left as they came: a successor's (a hand-over) and systemd's
 * (socket activation: no filter, no drain of the queue, O_NONBLOCK put back). Main waits until the
 * pool is quiet (no output pending, no worker inside a batch, no event handled across two 10 ms
 * looks) or the drain timeout passes, then makes each group's stop eventfd readable
 * (level-triggered, never read, so all W workers see it), joins them, writes out any output still
 * pending (within the timeout) and closes every connection. Echo has no request boundary, so "in
 * flight" means bytes moving; a client that never stops sending holds the drain to its timeout. A
 * hand-over (--takeover: a successor serves the listeners) does not wait for clients to stop: an
 * echo connection that has an event and is found between requests (everything echoed, nothing more
 * in its socket) gets its FIN at once, in the segment of its last echo (worker.c, drain_echo), and
 * ends when its client closes. Only a hand-over, because "nothing in its socket" may also be the
 * middle of a long request whose next bytes are on their way: a client that has somewhere to
 * reconnect loses at most that one request, while a plain stop keeps its promise that what a client
 * sends is echoed.
 */
#include "server.h"

#include "idle.h"
#include "log.h"
#include "net.h"
#include "pool.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define STOP_GRACE_MS 300 /* past the drain timeout: joining workers, the last writes */

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

/* Gives each listener to an accept thread: the j-th socket bound to an address (its j-th shard)
 * to thread j % nacc. With as many shards as threads, each thread polls one socket of each
 * address and no two threads share a queue; with fewer (socket activation, a hand-over from an
 * instance with fewer), the extra threads have none of that address; with more, a thread polls
 * several. */
static void assign_listeners(struct server *s)
{
    struct sockaddr_storage addr[OPT_MAX_LFDS];

    for (int i = 0; i < s->nlisten; i++) {
        socklen_t sl = sizeof(addr[i]);
        int shard = 0;
        struct acceptor *t;

        memset(&addr[i], 0, sizeof(addr[i]));
        getsockname(s->lfds[i], (struct sockaddr *)&addr[i], &sl);
        for (int k = 0; k < i; k++)
            shard += !memcmp(&addr[k], &addr[i], sizeof(addr[i]));
        t = &s->acc[shard % s->nacc];
        t->li[t->nl++] = i;
    }
}

static int out_of_memory(char *err, size_t errlen)
{
    snprintf(err, errlen, "out of memory");
    return -ENOMEM;
}

/* The accept threads' structs, each with its own dispatch, before any descriptor is open. */
static int new_acceptors(struct server *s, int nacc)
{
    s->nacc = nacc;
    s->acc = calloc64((size_t)nacc, sizeof(*s->acc));
    if (!s->acc)
        return -ENOMEM;
    for (int i = 0; i < nacc; i++) {
        struct acceptor *t = &s->acc[i];

        t->srv = s;
        t->idx = i;
        t->epfd = t->wakefd = -1;
        /* each thread its own round-robin, starting one group further than the last */
        dispatch_init(&t->disp, s->opt->dispatch, (unsigned)s->plan->ngroups,
                      ((uint64_t)getpid() + (uint64_t)i) * 2654435761u);
        t->disp.next = (unsigned)i % (unsigned)s->plan->ngroups;
    }
    return 0;
}

/* The tables indexed by fd, as long as RLIMIT_NOFILE allows (at most 2^26 slots): the
 * connections, and those the options ask for (client address slots, idle words). */
static int new_tables(struct server *s, long max_conns)
{
    const struct opt *o = s->opt;
    struct rlimit rl;

    getrlimit(RLIMIT_NOFILE, &rl);
    s->table_size =
        rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (1u << 26) ? (1u << 26) : rl.rlim_cur;
    /* calloc of a large table is mmap'd zero pages: untouched slots cost no memory. */
    s->table = calloc(s->table_size, sizeof(*s->table));
    if (o->max_per_ip && (!(s->iplimit = iplimit_new(max_conns)) ||
                          !(s->ipslot = calloc(s->table_size, sizeof(*s->ipslot)))))
        return -ENOMEM;
    /* Lua's lingering close needs the sweeper's clock even without --idle-timeout */
    s->idle_limit_ms = o->idle_ms ? o->idle_ms : LINGER_MS;
    if ((o->idle_ms || s->lua || o->proxy || o->ntls) &&
        !(s->idle = calloc(s->table_size, sizeof(*s->idle))))
        return -ENOMEM;
    /* written by the sweep only, for the few connections it finds past their time */
    if (o->idle_ms && !(s->idle_outq = calloc(s->table_size, sizeof(*s->idle_outq))))
        return -ENOMEM;
    return s->table ? 0 : -ENOMEM;
}

/* Worker wi of group g: its buffers and, in Lua mode, its own Lua state. */
static int new_worker(struct server *s, struct group *g, int wi, char *err, size_t errlen)
{
    struct worker *w = &g->workers[wi];

    w->srv = s;
    w->g = g;
    w->idx = wi;
    w->buf = malloc(WORKER_BUF);
    w->evs = calloc((size_t)s->opt->batch, sizeof(*w->evs));
    if (!w->buf || !w->evs)
        return out_of_memory(err, errlen);
    if (s->lua) {
        char name[24], why[512];

        snprintf(name, sizeof(name), "%d.%d", g->idx, wi);
        w->script = script_new(s->lua, name, &w->st, why, sizeof(why));
        if (!w->script) {
            snprintf(err, errlen, "worker %s: %s", name, why);
            return -1;
        }
    }
    return 0;
}

/* Group gi of the plan: its CPUs, its epoll set with the stop eventfd in it, its workers. */
static int new_group(struct server *s, int gi, char *err, size_t errlen)
{
    struct group *g = &s->groups[gi];
    int rc;

    g->idx = gi;
    g->nworkers = s->plan->nworkers[gi];
    g->solo = g->nworkers == 1 && !s->opt->oneshot_always;
    g->cpus = s->plan->cpus[gi];
    CPU_OR(&s->all_cpus, &s->all_cpus, &g->cpus);
    g->workers = calloc64((size_t)g->nworkers, sizeof(*g->workers));
    if (!g->workers)
        return out_of_memory(err, errlen);
    g->epfd = epoll_create1(EPOLL_CLOEXEC);
    g->stopfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (g->epfd < 0 || g->stopfd < 0 || add_fd(g->epfd, g->stopfd, EPOLLIN, 0) < 0) {
        snprintf(err, errlen, "group %d: epoll/eventfd: %s (raise ulimit -n?)", gi,
                 strerror(errno));
        return -1;
    }
    for (int wi = 0; wi < g->nworkers; wi++)
        if ((rc = new_worker(s, g, wi, err, errlen)) < 0)
            return rc;
    return 0;
}

static int new_groups(struct server *s, char *err, size_t errlen)
{
    int rc;

    s->groups = calloc64((size_t)s->ngroups, sizeof(*s->groups));
    if (!s->groups)
        return out_of_memory(err, errlen);
    for (int gi = 0; gi < s->ngroups; gi++)
        s->groups[gi].epfd = s->groups[gi].stopfd = -1; /* before anything can fail */
    for (int gi = 0; gi < s->ngroups; gi++)
        if ((rc = new_group(s, gi, err, errlen)) < 0)
            return rc;
    return 0;
}

/* Each accept thread's epoll set: its wake eventfd and the listeners assign_listeners gave it. */
static int open_acceptors(struct server *s, char *err, size_t errlen)
{
    for (int i = 0; i < s->nacc; i++) {
        struct acceptor *t = &s->acc[i];

        t->epfd = epoll_create1(EPOLL_CLOEXEC);
        t->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (t->epfd < 0 || t->wakefd < 0 || add_fd(t->epfd, t->wakefd, EPOLLIN, ACCEPT_WAKE) < 0) {
            snprintf(err, errlen, "accept thread %d: epoll/eventfd: %s", i, strerror(errno));
            return -1;
        }
        for (int k = 0; k < t->nl; k++) {
            if (add_fd(t->epfd, s->lfds[t->li[k]], EPOLLIN, (uint64_t)t->li[k]) < 0) {
                snprintf(err, errlen, "accept thread %d: epoll_ctl: %s", i, strerror(errno));
                return -1;
            }
        }
    }
    return 0;
}

struct server *server_new(const struct opt *o, const struct plan *p, const int *lfds, int nlisten,
                          int nacc, long max_conns, struct script_env *lua, char *err,
                          size_t errlen)
{
    struct server *s = calloc64(1, sizeof(*s));

    if (!s) {
        out_of_memory(err, errlen);
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
    s->nlisten = nlisten;
    memcpy(s->lfds, lfds, sizeof(*lfds) * (size_t)nlisten);
    if (new_acceptors(s, nacc) < 0) {
        free(s);
        out_of_memory(err, errlen);
        return NULL;
    }
    CPU_ZERO(&s->all_cpus);
    if (new_tables(s, max_conns) < 0) {
        out_of_memory(err, errlen);
        goto out_free;
    }
    if (new_groups(s, err, errlen) < 0)
        goto out_free;
    assign_listeners(s);
    if (open_acceptors(s, err, errlen) < 0)
        goto out_free;
    return s;

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

/* A socket systemd keeps is non-blocking only while this process serves it (the accept threads
 * rely on EAGAIN): its file status flags are systemd's and the next start's too. */
static int borrow_listeners(struct server *s)
{
    for (int i = 0; s->kept && i < s->nlisten; i++) {
        int fl = fcntl(s->lfds[i], F_GETFL);

        if (fl < 0 || fcntl(s->lfds[i], F_SETFL, fl | O_NONBLOCK) < 0) {
            log_err("socket activation: fd %d: cannot make it non-blocking: %s", s->lfds[i],
                    strerror(errno));
            return -errno;
        }
        s->lflags[i] = fl;
    }
    return 0;
}

/* Listener i as it came, then closed. */
static void close_listener(struct server *s, int i)
{
    if (s->lfds[i] < 0)
        return;
    if (s->kept && s->lflags[i] >= 0 && !(s->lflags[i] & O_NONBLOCK) &&
        fcntl(s->lfds[i], F_SETFL, s->lflags[i]) < 0)
        log_warn("socket activation: fd %d: cannot make it blocking again as systemd passed it "
                 "(%s): the next start gets it non-blocking",
                 s->lfds[i], strerror(errno));
    close(s->lfds[i]);
    s->lfds[i] = -1;
}

int server_start(struct server *s)
{
    char name[32];
    int rc;

    if ((rc = borrow_listeners(s)) < 0)
        return rc;
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
    for (int i = 0; i < s->nacc; i++) {
        struct acceptor *t = &s->acc[i];

        if (i == 0)
            snprintf(name, sizeof(name), "lfe-accept"); /* the others: lfe-accept1, 2... */
        else
            snprintf(name, sizeof(name), "lfe-accept%d", i);
        rc = start_thread(&t->tid, acceptor_main, t, s->plan->pin ? &s->all_cpus : NULL, name);
        if (rc < 0) {
            log_err("cannot create accept thread %d: %s", i, strerror(-rc));
            goto out_stop;
        }
        t->started = true;
    }
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
    bool ask = now_ms() < deadline, told = ask || !conn_started(c) || !runner;

    if (c->phase == CONN_PH_PROXY || c->phase == CONN_PH_HANDSHAKE)
        obuf_free(&c->out); /* part of a PROXY header, not output (a handshake has none) */
    while (obuf_len(&c->out)) {
        struct pollfd pfd = {.fd = c->fd, .events = POLLOUT};
        long left = deadline - now_ms();
        ssize_t w;

        if (left <= 0 || poll(&pfd, 1, (int)left) <= 0)
            break;
        w = conn_write_some(c, c->out.data + c->out.off, obuf_len(&c->out));
        if (w < 0)
            break;
        if (w > 0)
            obuf_consume(&c->out, (size_t)w);
    }
    /* a lingering one was the script's close: it only ends late */
    conn_close(s, NULL, c, c->phase == CONN_PH_LINGER ? CONN_WHY_CLOSED : CONN_WHY_SHUTDOWN,
               ask ? runner : NULL);
    return told;
}

void server_set_tls(struct server *s, struct tls_conf *tls, const bool *ltls)
{
    s->tls = tls;
    memcpy(s->ltls, ltls, sizeof(*ltls) * (size_t)s->nlisten);
}

void server_handover(struct server *s)
{
    s->handover = true;
}

void server_listeners_shared(struct server *s, bool shared)
{
    s->shared = shared;
}

void server_listeners_kept(struct server *s)
{
    s->kept = true;
    for (int i = 0; i < s->nlisten; i++)
        s->lflags[i] = -1;
}

/* Not a hand-over (where the listeners are the successor's now): every listener drops new
 * SYNs, the accept threads take what the queues hold and what completes meanwhile, then
 * the listeners close; a client that comes later is refused, none queued is reset. The
 * filter is the socket's, not this process's: never on listeners a successor may serve,
 * nor on those systemd keeps (its socket outlives us, queue and all: what waits there is
 * the next start's, and a filter would drop every SYN it is ever sent). Sets how long the
 * accept threads drain (s->drain_accept_ms, s->drain_min_ms): 0 where nothing was filtered. */
static void refuse_new_syns(struct server *s, int timeout_ms)
{
    s->drain_accept_ms = s->drain_min_ms = 0;
    for (int i = 0, failed = 0; !s->handover && !s->shared && !s->kept && i < s->nlisten; i++) {
        int rc = s->lfds[i] >= 0 ? net_refuse_syns(s->lfds[i]) : 0;
        long want = DRAIN_ACCEPT_MS;

        if (rc < 0 && !failed++) /* one line for all: each listener fails alike */
            log_warn("stop: cannot make the listeners drop new connections (%s%s): those that "
                     "come while they close may be reset",
                     strerror(-rc), rc == -EPERM ? ": this kernel wants CAP_NET_ADMIN" : "");
        /* A deferring listener (--defer-accept, or a predecessor's socket that defers) holds
         * connections its clients think open in the SYN queue, out of accept4's reach, until
         * their first bytes or the end of the defer period: wait that out (acceptor.c). */
        if (s->lfds[i] >= 0 && net_defers(s->lfds[i]))
            s->drain_min_ms = want = DRAIN_DEFER_MS;
        want = timeout_ms < want ? timeout_ms : want;
        s->drain_accept_ms = want > s->drain_accept_ms ? want : s->drain_accept_ms;
    }
}

/* Wakes the accept threads (each sees draining, drains its queues as set above, and returns)
 * and joins them, taking signals meanwhile where they drain queues (abort_wait, 10 ms a look:
 * that takes up to DRAIN_ACCEPT_MS, and a signal left pending until the drain could not be told
 * from one sent with the first). Returns whether a second stop signal came. */
static bool join_acceptors(struct server *s, int (*abort_wait)(void))
{
    bool second = false, look = abort_wait && s->drain_accept_ms > 0; /* else they return now */

    for (int i = 0; i < s->nacc; i++)
        if (s->acc[i].started)
            pool_kick(s->acc[i].wakefd);
    for (int i = 0; i < s->nacc; i++)
        if (s->acc[i].started) {
            while (look && pthread_tryjoin_np(s->acc[i].tid, NULL) == EBUSY)
                second |= abort_wait() != 0;
            if (!look)
                pthread_join(s->acc[i].tid, NULL);
            s->acc[i].started = false;
        }
    return second;
}

/* A second stop signal: what the drain waits for ends now, Lua calls that wait too. Returns
 * the new deadline. */
static long second_signal(struct server *s)
{
    long now = now_ms();

    log_warn("second stop signal: not waiting for in-flight work");
    script_env_stop(s->lua, now);
    return now;
}

/* Waits, 10 ms a look (abort_wait's), until the pool is quiet, deadline passes or a second
 * signal comes. Quiet means: no connection left, or nothing pending, no worker busy, no
 * connection a hand-over sent its FIN still open (its client may yet send what raced the FIN:
 * it is read and counted, not reset by a close) and no event handled across two consecutive
 * looks (an idle connection is closed after, losing nothing). Returns the deadline, now if a
 * second signal came. */
static long wait_quiet(struct server *s, long deadline, int (*abort_wait)(void))
{
    uint64_t prev = 0;
    int quiet = 0;

    while (abort_wait && now_ms() < deadline) {
        bool busy;
        uint64_t ev;

        if (abort_wait()) { /* waits up to 10 ms; non-zero: a second signal */
            deadline = second_signal(s);
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
    return deadline;
}

/* Tells every worker to stop and joins each until the deadline plus STOP_GRACE_MS. A worker
 * that does not come back (a callback stuck where the timeout cannot reach it: a finalizer
 * under --lua-unsafe) must not hold the process: it is named, and left started (nothing it may
 * touch is freed). Returns how many were left; *runner is a joined worker whose Lua state main
 * may run from here (NULL in echo mode). */
static int join_workers(struct server *s, long deadline, struct worker **runner)
{
    struct timespec until;
    int wedged = 0;

    for (int gi = 0; gi < s->ngroups; gi++)
        pool_kick(s->groups[gi].stopfd);
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
            if (!*runner && s->lua)
                *runner = w;
        }
    return wedged;
}

/* Every thread joined: each connection left gets its pending output (flush_and_close) and is
 * closed. */
static void close_connections(struct server *s, long deadline, struct worker *runner)
{
    long left = __atomic_load_n(&s->live, __ATOMIC_RELAXED), unasked = 0;

    if (runner)
        script_env_bind(runner->script); /* main runs on_close from here; the watchdog signals it */
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
}

int server_stop(struct server *s, int timeout_ms, int (*abort_wait)(void))
{
    long deadline = now_ms() + timeout_ms;
    struct worker *runner = NULL; /* a joined worker whose Lua state main runs from here */
    bool second;
    int wedged;

    refuse_new_syns(s, timeout_ms);
    __atomic_store_n(&s->draining, 1, __ATOMIC_RELEASE);
    s->next_sweep_ms = 0; /* the drain's sweeps (lingering connections) start now */
    for (int gi = 0; s->handover && gi < s->ngroups; gi++) /* echo: end between requests */
        for (int wi = 0; wi < s->groups[gi].nworkers; wi++)
            __atomic_store_n(&s->groups[gi].workers[wi].drain, 1, __ATOMIC_RELAXED);
    script_env_stop(s->lua, deadline); /* Lua calls that wait end by the drain's deadline */
    second = join_acceptors(s, abort_wait);
    for (int i = 0; i < s->nlisten; i++)
        close_listener(s, i); /* new connections are refused from here on (or wait in systemd's) */
    log_info("draining %ld connections (%ld with output pending), up to %d ms",
             __atomic_load_n(&s->live, __ATOMIC_RELAXED),
             __atomic_load_n(&s->npending, __ATOMIC_RELAXED), timeout_ms);
    deadline = second ? second_signal(s) : wait_quiet(s, deadline, abort_wait);
    wedged = join_workers(s, deadline, &runner);
    if (wedged) /* its connections may be in its hands: leave them to the exit */
        return wedged;
    close_connections(s, deadline, runner);
    return 0;
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
        close_listener(s, i);
    for (int i = 0; i < s->nacc; i++) {
        if (s->acc[i].epfd >= 0)
            close(s->acc[i].epfd);
        if (s->acc[i].wakefd >= 0)
            close(s->acc[i].wakefd);
    }
    free(s->acc);
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
