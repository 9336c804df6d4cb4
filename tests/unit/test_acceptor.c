/* Unit tests of the accept thread (acceptor.c): the real thread on a real loopback listener,
 * with accept4 and the accept thread's EPOLL_CTL_MOD of its listeners faked through -Wl,--wrap.
 * No worker runs: a connection counts as accepted once it is in its group's epoll set
 * (acc[0].st.accepted), and the daemon's log is stderr, captured into a file per test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../../src/pool.h"
#include "net.h"
#include "server.h"

/* The faults, shared by the test and the accept thread (atomics). A budget counts down to 0
 * (no more faults); -1 fails every call. */
static struct {
    int acc_epfd;    /* the accept thread's epoll fd: only its MODs are faked */
    int fail_arm;    /* MOD to EPOLLIN (re-arm a listener) fails with ENOMEM */
    int fail_disarm; /* MOD to 0 (stop polling a listener) fails with ENOMEM */
    int accept_err;  /* the errno accept4 fails with while accept_budget lasts */
    int accept_budget;
    int accept_calls; /* accept4 calls seen */
    int only_fd;      /* > 0: only accept4 on this listener fails */
    int only_calls;   /* accept4 calls seen on only_fd */
} fk;

static int take(int *budget)
{
    int b = __atomic_load_n(budget, __ATOMIC_ACQUIRE);

    while (b != 0) {
        if (b < 0)
            return 1;
        if (__atomic_compare_exchange_n(budget, &b, b - 1, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE))
            return 1;
    }
    return 0;
}

int __real_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev);
int __wrap_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev);
int __wrap_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
    if (op == EPOLL_CTL_MOD && epfd == __atomic_load_n(&fk.acc_epfd, __ATOMIC_ACQUIRE) &&
        take(ev->events & EPOLLIN ? &fk.fail_arm : &fk.fail_disarm)) {
        errno = ENOMEM;
        return -1;
    }
    return __real_epoll_ctl(epfd, op, fd, ev);
}

int __real_accept4(int fd, struct sockaddr *a, socklen_t *l, int flags);
int __wrap_accept4(int fd, struct sockaddr *a, socklen_t *l, int flags);
int __wrap_accept4(int fd, struct sockaddr *a, socklen_t *l, int flags)
{
    int only = __atomic_load_n(&fk.only_fd, __ATOMIC_ACQUIRE);

    __atomic_add_fetch(&fk.accept_calls, 1, __ATOMIC_RELAXED);
    if (only > 0 && fd == only)
        __atomic_add_fetch(&fk.only_calls, 1, __ATOMIC_RELAXED);
    if ((only <= 0 || fd == only) && take(&fk.accept_budget)) {
        errno = __atomic_load_n(&fk.accept_err, __ATOMIC_RELAXED);
        return -1;
    }
    return __real_accept4(fd, a, l, flags);
}

/* One server with one listener (two with rig_start_with) and one group, its accept thread
 * running, stderr captured. */
struct rig {
    struct opt o;
    struct plan p;
    int nworkers[1];
    cpu_set_t cpus[1];
    struct server *s;
    int port;
    int clients[16];
    int nclients;
    int saved_stderr;
    char log[64];
};

static long now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

/* Waits up to ms for *v to reach want (>=). */
static bool wait_u64(const uint64_t *v, uint64_t want, long ms)
{
    long deadline = now_ms() + ms;

    while (__atomic_load_n(v, __ATOMIC_RELAXED) < want)
        if (now_ms() > deadline)
            return false;
        else
            sleep_ms(5);
    return true;
}

/* first >= 0: the server's first listener, before the rig's own loopback listener. */
static void rig_start_with(struct rig *r, int first)
{
    char *argv[] = {(char *)"lfepolld", NULL};
    char err[256];
    struct sockaddr_in a;
    socklen_t al = sizeof(a);
    int lfds[2], nl = 0, fd;

    memset(r, 0, sizeof(*r));
    assert_int_equal(opt_parse(&r->o, 1, argv, NULL, err, sizeof(err)), OPT_RUN);
    r->nworkers[0] = 1;
    CPU_ZERO(&r->cpus[0]);
    CPU_SET(0, &r->cpus[0]);
    r->p = (struct plan){.ngroups = 1, .nworkers = r->nworkers, .pin = false, .cpus = r->cpus};
    if (first >= 0)
        lfds[nl++] = first;
    lfds[nl] = net_listen("127.0.0.1:0", 128, err, sizeof(err));
    assert_true(lfds[nl] >= 0);
    assert_int_equal(getsockname(lfds[nl++], (struct sockaddr *)&a, &al), 0);
    r->port = ntohs(a.sin_port);
    r->s = server_new(&r->o, &r->p, lfds, nl, 1, 1000, NULL, err, sizeof(err));
    if (!r->s)
        fail_msg("server_new: %s", err);
    /* The log goes to a file from here until rig_stop. */
    snprintf(r->log, sizeof(r->log), "/tmp/lfe-acceptor-XXXXXX");
    fd = mkstemp(r->log);
    assert_true(fd >= 0);
    fflush(stderr);
    r->saved_stderr = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    close(fd);
    __atomic_store_n(&fk.acc_epfd, r->s->acc[0].epfd, __ATOMIC_RELEASE);
    assert_int_equal(pthread_create(&r->s->acc[0].tid, NULL, acceptor_main, &r->s->acc[0]), 0);
    r->s->acc[0].started = true;
}

static void rig_start(struct rig *r)
{
    rig_start_with(r, -1);
}

/* A client connected to the rig: connect() completes as soon as the kernel queues it. */
static void rig_connect_to(struct rig *r, int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_true(r->nclients < 16);
    r->clients[r->nclients++] = fd;
}

static void rig_connect(struct rig *r)
{
    rig_connect_to(r, r->port);
}

/* A TCP socket on 127.0.0.1 with a port of its own: listening (backlog 16) or only bound. */
static int tcp_socket(bool listening, int *port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    if (listening)
        assert_int_equal(listen(fd, 16), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

/* The captured log so far (static buffer). */
static const char *rig_log(struct rig *r)
{
    static char buf[1 << 16];
    FILE *f = fopen(r->log, "r");
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

    if (f)
        fclose(f);
    buf[n] = '\0';
    return buf;
}

static int count(const char *text, const char *needle)
{
    int n = 0;

    for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* Stops the accept thread (a stop that hangs fails the test by the run's timeout), restores
 * stderr, closes the clients. The log stays readable until rig_free. */
static long rig_stop(struct rig *r)
{
    long t0 = now_ms();

    server_stop(r->s, 0, NULL); /* joins the accept thread: the faults are ours again */
    t0 = now_ms() - t0;
    memset(&fk, 0, sizeof(fk));
    fk.acc_epfd = -1;
    server_free(r->s);
    r->s = NULL;
    dup2(r->saved_stderr, STDERR_FILENO);
    close(r->saved_stderr);
    for (int i = 0; i < r->nclients; i++)
        close(r->clients[i]);
    return t0;
}

static int reset(void **state)
{
    (void)state;
    memset(&fk, 0, sizeof(fk));
    fk.acc_epfd = -1;
    return 0;
}

static struct rig rig;

static int teardown(void **state)
{
    (void)state;
    if (rig.s) {
        rig_stop(&rig);
        fprintf(stderr, "log of the failed test:\n%s", rig_log(&rig));
    }
    if (rig.log[0])
        unlink(rig.log);
    rig.log[0] = '\0';
    return 0;
}

/* Defect 16: set_listening ignored epoll_ctl's result. When the MOD that re-arms a listener
 * after an EMFILE pause failed, the accept thread went back to epoll_wait(-1) believing it
 * armed: the daemon never accepted again, silently. Now the failure is logged and counted, the
 * thread stays paused, and each ACCEPT_RETRY_MS tick retries the re-arm until it takes. */
static void test_defect16_listener_rearm_failure_is_retried(void **state)
{
    struct rig *r = &rig;
    long deadline;

    (void)state;
    fk.accept_err = EMFILE;
    fk.accept_budget = 1; /* the first accept pauses */
    fk.fail_arm = 3;      /* the first three re-arms fail */
    rig_start(r);
    rig_connect(r);
    if (!wait_u64(&r->s->acc[0].st.accepted, 1, 2000))
        fail_msg("the first connection was never accepted");
    deadline = now_ms() + 3000;
    while ((__atomic_load_n(&fk.fail_arm, __ATOMIC_ACQUIRE) > 0 ||
            __atomic_load_n(&r->s->accept_paused, __ATOMIC_RELAXED)) &&
           now_ms() < deadline)
        sleep_ms(5);
    if (__atomic_load_n(&fk.fail_arm, __ATOMIC_ACQUIRE) > 0)
        fail_msg("the re-arm was tried %d time(s), then never again: the listener is deaf",
                 3 - fk.fail_arm);
    assert_int_equal(__atomic_load_n(&r->s->accept_paused, __ATOMIC_RELAXED), 0);
    /* Armed again: a new connection is taken at once, not at a tick. */
    rig_connect(r);
    if (!wait_u64(&r->s->acc[0].st.accepted, 2, 1000))
        fail_msg("a connection after the re-arm was not accepted");
    assert_true(__atomic_load_n(&r->s->acc[0].st.err_other, __ATOMIC_RELAXED) >= 1);
    rig_stop(r);
    if (!strstr(rig_log(r), "cannot re-arm listener 127.0.0.1:") ||
        !strstr(rig_log(r), strerror(ENOMEM)))
        fail_msg("want a line naming the listener and the error, got:\n%s", rig_log(r));
}

/* Defect 16: while the re-arm keeps failing, the listener is polled every tick: connections
 * are accepted late, never left in the queue. One log line a second at most. */
static void test_defect16_listener_polled_while_rearm_fails(void **state)
{
    struct rig *r = &rig;
    long t0 = now_ms(), took;

    (void)state;
    fk.accept_err = EMFILE;
    fk.accept_budget = 1;
    fk.fail_arm = -1; /* every re-arm fails */
    rig_start(r);
    rig_connect(r);
    if (!wait_u64(&r->s->acc[0].st.accepted, 1, 2000))
        fail_msg("the first connection was never accepted");
    for (uint64_t i = 2; i <= 4; i++) {
        rig_connect(r);
        if (!wait_u64(&r->s->acc[0].st.accepted, i, 1000))
            fail_msg("connection %llu stayed queued while the re-arm failed: the listener is "
                     "deaf",
                     (unsigned long long)i);
    }
    assert_int_equal(__atomic_load_n(&r->s->accept_paused, __ATOMIC_RELAXED), 1);
    /* The fault clears: the next tick arms the listener and the thread leaves polling. */
    __atomic_store_n(&fk.fail_arm, 0, __ATOMIC_RELEASE);
    for (long deadline = now_ms() + 1000;
         __atomic_load_n(&r->s->accept_paused, __ATOMIC_RELAXED) && now_ms() < deadline;)
        sleep_ms(5);
    assert_int_equal(__atomic_load_n(&r->s->accept_paused, __ATOMIC_RELAXED), 0);
    rig_connect(r);
    assert_true(wait_u64(&r->s->acc[0].st.accepted, 5, 1000));
    took = now_ms() - t0;
    rig_stop(r);
    if (count(rig_log(r), "cannot re-arm listener") < 1 ||
        count(rig_log(r), "cannot re-arm listener") > took / 1000 + 2)
        fail_msg("want one 'cannot re-arm' line a second at most over %ld ms, got:\n%s", took,
                 rig_log(r));
}

/* Defect 16, the other direction: when the MOD that stops polling a listener fails, the
 * listener stays armed; every wake-up then ended in EMFILE and another pause: the thread spun
 * at 100% CPU. Now it sleeps out the retry period: a few accept4 calls a second. */
static void test_defect16_listener_disarm_failure_does_not_spin(void **state)
{
    struct rig *r = &rig;
    int calls;
    long stop_ms;

    (void)state;
    fk.accept_err = EMFILE;
    fk.accept_budget = -1; /* out of descriptors for good */
    fk.fail_disarm = -1;
    rig_start(r);
    rig_connect(r);
    sleep_ms(100);
    calls = __atomic_load_n(&fk.accept_calls, __ATOMIC_RELAXED);
    sleep_ms(1000);
    calls = __atomic_load_n(&fk.accept_calls, __ATOMIC_RELAXED) - calls;
    /* Paused: one try per ACCEPT_RETRY_MS (10 a second), plus slack for a slow machine. */
    if (calls > 3 * 1000 / ACCEPT_RETRY_MS)
        fail_msg("%d accept4 calls in 1 s while out of descriptors: spinning", calls);
    assert_true(calls >= 1); /* and still trying */
    stop_ms = rig_stop(r);
    assert_true(stop_ms < 1000); /* the sleep does not hold up the stop for long */
    if (!strstr(rig_log(r), "cannot disarm listener") || count(rig_log(r), "accepting paused") > 3)
        fail_msg("want 'cannot disarm listener' and at most a pause line a second, got:\n%s",
                 rig_log(r));
}

/* accept4 failing with each errno it can: what the accept thread does with the connection,
 * which counter moves and what the log says. The faked error does not take the connection off
 * the queue, so every case ends with it accepted (at once, or at the next retry tick). */
static void test_accept_each_errno(void **state)
{
    static const struct {
        int err;
        const char *counter; /* NULL: nothing counted */
        const char *line;    /* NULL: nothing logged */
        bool pauses;
    } cases[] = {
        {EINTR, NULL, NULL, false},        /* retried inside net_accept */
        {ECONNABORTED, NULL, NULL, false}, /* the peer gave up: retried, nothing to say */
        {EAGAIN, NULL, NULL, false},       /* "empty": epoll reports the listener again */
        {EMFILE, "emfile", "accepting paused until one closes", true},
        {ENFILE, "emfile", "accepting paused until one closes", true},
        {ENOBUFS, "enomem", "the kernel is short of memory", true},
        {ENOMEM, "enomem", "the kernel is short of memory", true},
        /* network errors of the new connection (man 2 accept): it is lost, the queue is not */
        {EPROTO, "err_other", "a connection was lost before it was accepted", false},
        {ENETDOWN, "err_other", "a connection was lost before it was accepted", false},
        {ENOPROTOOPT, "err_other", "a connection was lost before it was accepted", false},
        {EHOSTDOWN, "err_other", "a connection was lost before it was accepted", false},
        {ENONET, "err_other", "a connection was lost before it was accepted", false},
        {EHOSTUNREACH, "err_other", "a connection was lost before it was accepted", false},
        {EOPNOTSUPP, "err_other", "a connection was lost before it was accepted", false},
        {ENETUNREACH, "err_other", "a connection was lost before it was accepted", false},
        {ETIMEDOUT, "err_other", "a connection was lost before it was accepted", false},
        /* the listener itself is refused: would fail again at once, so it is set aside and
         * retried alone, without a spin and without pausing the others */
        {EPERM, "err_other", "this listener is set aside and retried every", false},
        {EBADF, "err_other", "this listener is set aside and retried every", false},
        {EINVAL, "err_other", "this listener is set aside and retried every", false},
        {ENOTSOCK, "err_other", "this listener is set aside and retried every", false},
        {EFAULT, "err_other", "this listener is set aside and retried every", false},
    };
    struct rig *r = &rig;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct accept_stats st = {0};
        uint64_t moved = 0;
        const char *log;

        reset(NULL);
        fk.accept_err = cases[i].err;
        fk.accept_budget = 1;
        rig_start(r);
        rig_connect(r);
        if (!wait_u64(&r->s->acc[0].st.accepted, 1, 2000))
            fail_msg("%s: the connection was never accepted", strerror(cases[i].err));
        stats_snap_accept(&st, &r->s->acc[0].st);
        if (cases[i].counter) {
#define PICK(name, help)                                                                           \
    if (strcmp(cases[i].counter, #name) == 0)                                                      \
        moved = st.name;
            ACCEPT_STATS(PICK)
#undef PICK
            if (moved != 1)
                fail_msg("%s: want %s=1, got %llu", strerror(cases[i].err), cases[i].counter,
                         (unsigned long long)moved);
        } else if (st.emfile + st.enomem + st.err_other + st.shed != 0) {
            fail_msg("%s: counted as an error", strerror(cases[i].err));
        }
        rig_stop(r);
        log = rig_log(r);
        if (cases[i].line ? !strstr(log, cases[i].line) || !strstr(log, strerror(cases[i].err))
                          : strstr(log, "accept") != NULL)
            fail_msg("%s: want %s%s in the log, got:\n%s", strerror(cases[i].err),
                     cases[i].line ? "a line with " : "no accept line",
                     cases[i].line ? cases[i].line : "", log);
        unlink(r->log);
        r->log[0] = '\0';
    }
}

/* A flood of the same failure logs a line a second, the counter says how many. */
static void test_accept_error_flood_rate_limited(void **state)
{
    struct rig *r = &rig;

    (void)state;
    fk.accept_err = EPROTO;
    fk.accept_budget = 200;
    rig_start(r);
    rig_connect(r);
    assert_true(wait_u64(&r->s->acc[0].st.accepted, 1, 3000));
    assert_int_equal(__atomic_load_n(&r->s->acc[0].st.err_other, __ATOMIC_RELAXED), 200);
    rig_stop(r);
    if (count(rig_log(r), "lost before it was accepted") > 3)
        fail_msg("200 failures in well under a second should log a line or two, got:\n%s",
                 rig_log(r));
}

/* Regression (a white-box review of --takeover): a listener that refused accept4 paused the
 * whole accept thread, and the paused loop stopped at that listener on every retry: the
 * listeners after it were never served. Here the first listener is a TCP socket that is bound
 * and does not listen (what a --takeover successor once took for a listener): accept4 fails
 * with EINVAL, and epoll reports it (EPOLLHUP) whether armed or not. It is set aside with a
 * line; the second listener's connections are accepted at once, and the one set aside is
 * retried a few times a second, not in a spin. */
static void test_listener_refused_does_not_starve_others(void **state)
{
    struct rig *r = &rig;
    int bad_port, bad = tcp_socket(false, &bad_port), calls;
    char want[96];

    (void)state;
    __atomic_store_n(&fk.only_fd, bad, __ATOMIC_RELEASE); /* count its accept4 calls only */
    rig_start_with(r, bad);
    for (uint64_t i = 1; i <= 3; i++) {
        rig_connect(r);
        if (!wait_u64(&r->s->acc[0].st.accepted, i, 2000))
            fail_msg("connection %llu to the good listener was never accepted: a listener "
                     "that does not listen starves it",
                     (unsigned long long)i);
    }
    sleep_ms(100);
    calls = __atomic_load_n(&fk.only_calls, __ATOMIC_RELAXED);
    sleep_ms(1000);
    calls = __atomic_load_n(&fk.only_calls, __ATOMIC_RELAXED) - calls;
    /* one try per ACCEPT_RETRY_MS (10 a second), with slack for a slow machine */
    if (calls > 3 * 1000 / ACCEPT_RETRY_MS)
        fail_msg("%d accept4 calls in 1 s on the listener set aside: spinning", calls);
    assert_true(calls >= 1); /* and still retried */
    assert_int_equal(__atomic_load_n(&r->s->accept_paused, __ATOMIC_RELAXED), 0);
    rig_stop(r);
    snprintf(want, sizeof(want), "accept on 127.0.0.1:%d: %s: this listener is set aside", bad_port,
             strerror(EINVAL));
    if (!strstr(rig_log(r), want) || count(rig_log(r), "set aside") != 1)
        fail_msg("want one line '%s...', got:\n%s", want, rig_log(r));
}

/* The listener set aside comes back: accept4 on the first of two real listeners fails with
 * EPERM (a security module's refusal) 30 times, about 3 s of retries. Meanwhile the second
 * is served; then the first's queued connection is accepted, a line says so, and it is armed
 * again. */
static void test_listener_set_aside_comes_back(void **state)
{
    struct rig *r = &rig;
    int port0, first = tcp_socket(true, &port0);

    (void)state;
    fk.accept_err = EPERM;
    fk.accept_budget = 30;
    __atomic_store_n(&fk.only_fd, first, __ATOMIC_RELEASE);
    rig_start_with(r, first);
    rig_connect_to(r, port0);
    sleep_ms(200);
    assert_int_equal(__atomic_load_n(&r->s->acc[0].st.accepted, __ATOMIC_RELAXED), 0);
    rig_connect(r);
    if (!wait_u64(&r->s->acc[0].st.accepted, 1, 1000))
        fail_msg("the second listener was not served while the first was set aside");
    if (!wait_u64(&r->s->acc[0].st.accepted, 2, 10000))
        fail_msg("the listener set aside was never served again (%d accept4 failures left)",
                 fk.accept_budget);
    assert_int_equal(__atomic_load_n(&fk.accept_budget, __ATOMIC_ACQUIRE), 0);
    for (long deadline = now_ms() + 2000;
         !strstr(rig_log(r), "works again") && now_ms() < deadline;)
        sleep_ms(5);
    /* armed again: with nothing set aside and nothing paused, the thread waits on epoll
     * without a timeout, so a listener put back unarmed would never be heard */
    rig_connect_to(r, port0);
    if (!wait_u64(&r->s->acc[0].st.accepted, 3, 2000))
        fail_msg("a new connection to the listener put back was not accepted: not armed");
    rig_stop(r);
    if (count(rig_log(r), "this listener is set aside") != 1 ||
        count(rig_log(r), "works again: served as usual") != 1)
        fail_msg("want one 'set aside' and one 'works again' line, got:\n%s", rig_log(r));
}

/* The accept thread asks the listener how many connections wait (TCP_INFO) and calls accept4
 * that many times: never once more to hear EAGAIN, a call that costs the kernel a socket and a
 * file allocated and freed (2.7 us, more than the accept it ends). Eight connections, first
 * one at a time (each its own wake-up), then eight at once: sixteen accept4 calls, not one
 * more, however the wake-ups fell. */
static void test_accept_no_call_on_an_empty_queue(void **state)
{
    struct rig *r = &rig;
    int calls;

    (void)state;
    rig_start(r);
    for (uint64_t i = 1; i <= 8; i++) {
        rig_connect(r);
        if (!wait_u64(&r->s->acc[0].st.accepted, i, 2000))
            fail_msg("connection %llu was not accepted", (unsigned long long)i);
    }
    for (int i = 0; i < 8; i++)
        rig_connect(r);
    if (!wait_u64(&r->s->acc[0].st.accepted, 16, 2000))
        fail_msg("the burst of eight was not accepted");
    sleep_ms(200); /* a call to find the queue empty would come now */
    calls = __atomic_load_n(&fk.accept_calls, __ATOMIC_RELAXED);
    rig_stop(r);
    if (calls != 16)
        fail_msg("%d accept4 calls for 16 connections: %d found the queue empty", calls,
                 calls - 16);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_defect16_listener_rearm_failure_is_retried, reset,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_defect16_listener_polled_while_rearm_fails, reset,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_defect16_listener_disarm_failure_does_not_spin, reset,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_accept_each_errno, reset, teardown),
        cmocka_unit_test_setup_teardown(test_accept_error_flood_rate_limited, reset, teardown),
        cmocka_unit_test_setup_teardown(test_listener_refused_does_not_starve_others, reset,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_listener_set_aside_comes_back, reset, teardown),
        cmocka_unit_test_setup_teardown(test_accept_no_call_on_an_empty_queue, reset, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
