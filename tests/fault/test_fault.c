/* Fault injection: the real lfepolld with tests/fault/shim.c preloaded (LFE_FAULT picks the
 * calls that fail) on 127.0.0.1. For each error path: the connection it hits is closed (the
 * client sees EOF or a reset), a counter in the SIGUSR1 stats moved, a log line names the
 * failure, the counters still add up (accepted = closed + live), and the daemon then serves a
 * fresh connection byte-exactly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "load.h"

static char shim[PATH_MAX];

/* The environment lfepolld is started with: the shim preloaded, LFE_FAULT=rules. Under
 * AddressSanitizer the shim goes first in the library list (so that its calloc is the one
 * called), which ASan allows with verify_asan_link_order=0. */
static char *saved_asan;

static void fault_env(const char *rules)
{
    const char *asan = getenv("ASAN_OPTIONS");
    char opts[1024];

    saved_asan = asan ? strdup(asan) : NULL;
    snprintf(opts, sizeof(opts), "%s%sverify_asan_link_order=0", asan ? asan : "",
             asan && *asan ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
    setenv("LD_PRELOAD", shim, 1);
    setenv("LFE_FAULT", rules, 1);
}

static void fault_env_clear(void)
{
    unsetenv("LD_PRELOAD");
    unsetenv("LFE_FAULT");
    if (saved_asan)
        setenv("ASAN_OPTIONS", saved_asan, 1);
    else
        unsetenv("ASAN_OPTIONS");
    free(saved_asan);
    saved_asan = NULL;
}

/* Starts lfepolld with the shim and LFE_FAULT=rules. */
static void spawn_faulty(struct daemon *d, const char *rules, const char *const *args)
{
    int rc;

    fault_env(rules);
    rc = spawn(d, args, 0, NULL);
    fault_env_clear();
    if (rc < 0)
        fail_msg("lfepolld did not start with LFE_FAULT=%s: %s", rules, log_text(d));
}

/* Reads until buf holds want bytes, the peer closes, or timeout_ms pass. Returns the bytes
 * read; *closed says whether the peer closed (EOF or reset). */
static size_t read_n(int fd, char *buf, size_t want, long timeout_ms, bool *closed)
{
    long deadline = now_ms() + timeout_ms * slow;
    size_t got = 0;

    *closed = false;
    while (got < want) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        long left = deadline - now_ms();
        ssize_t n;

        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            break;
        n = read(fd, buf + got, want - got);
        if (n <= 0) {
            *closed = n == 0 || errno == ECONNRESET;
            break;
        }
        got += (size_t)n;
    }
    return got;
}

/* Sends msg and expects it back exactly, the connection still open. */
static void echo_once(int fd, const char *msg)
{
    char buf[256];
    bool closed;
    size_t n;

    send_all(fd, msg, strlen(msg));
    n = read_n(fd, buf, strlen(msg), 5000, &closed);
    if (n != strlen(msg) || memcmp(buf, msg, n) != 0)
        fail_msg("sent '%s', got '%.*s'%s", msg, (int)n, buf, closed ? " and a close" : "");
}

/* Expects the server to close fd (EOF or reset) within 5 s; returns the bytes read before. */
static size_t expect_closed(int fd, char *buf, size_t len)
{
    bool closed;
    size_t n = read_n(fd, buf, len, 5000, &closed);

    if (!closed)
        fail_msg("want the server to close the connection; got %zu bytes and no close", n);
    return n;
}

/* The value of field on the last line starting with prefix, or -1. "live" is read from the
 * prefix itself ("stats: total live=N:"). */
static long stat_value(const char *text, const char *prefix, const char *field)
{
    const char *line = NULL, *p = text, *f, *end;
    char key[64];

    while ((p = strstr(p, prefix))) {
        line = p;
        p += strlen(prefix);
    }
    if (!line)
        return -1;
    end = strchr(line, '\n');
    snprintf(key, sizeof(key), "%s=", field);
    for (f = line; (f = strstr(f, key)); f++)
        if ((f[-1] == ' ' || f[-1] == ':') && (!end || f < end))
            return atol(f + strlen(key));
    return -1;
}

/* Asks for the stats (SIGUSR1) and waits until the new block is in the log. */
static const char *stats(struct daemon *d)
{
    const char *t = log_text(d);
    int before = 0;
    long deadline = now_ms() + 5000L * slow;

    for (const char *p = t; (p = strstr(p, "stats: accept:")); p++)
        before++;
    kill(d->pid, SIGUSR1);
    while (now_ms() < deadline) {
        int n = 0;
        const char *last = NULL;

        sleep_ms(10);
        t = log_text(d);
        for (const char *p = t; (p = strstr(p, "stats: accept:")); p++) {
            n++;
            last = p;
        }
        if (n > before && strchr(last, '\n'))
            return t;
    }
    fail_msg("no stats after SIGUSR1: %s", log_text(d));
    return NULL;
}

static long acc_stat(struct daemon *d, const char *field)
{
    return stat_value(stats(d), "stats: accept:", field);
}

static long total_stat(struct daemon *d, const char *field)
{
    return stat_value(stats(d), "stats: total ", field);
}

/* Once every client has gone: nothing live, and every connection handed to a worker closed. */
static void assert_counters_add_up(struct daemon *d)
{
    long deadline = now_ms() + 5000L * slow, live = -1, accepted = -1, closed = -1;

    while (now_ms() < deadline) {
        const char *t = stats(d);

        live = stat_value(t, "stats: total ", "live");
        accepted = stat_value(t, "stats: accept:", "accepted");
        closed = stat_value(t, "stats: total ", "closed");
        if (live == 0 && accepted == closed)
            return;
        sleep_ms(50);
    }
    fail_msg("counters do not add up: accepted=%ld closed=%ld live=%ld", accepted, closed, live);
}

/* A fresh load after the fault: 4 connections, 10 requests each, 1 B to 64 KiB, byte-exact. */
static void assert_serves(struct daemon *d)
{
    struct load l = {.port = d->port,
                     .conns = 4,
                     .reqs = 10,
                     .depth = 1,
                     .min_size = 1,
                     .max_size = 65536,
                     .timeout_ms = 20000 * slow};

    load_run(&l);
    if (l.timed_out || l.mismatches || l.early_eof || l.errors || l.requests != 40)
        fail_msg("after the fault: requests %llu/40, mismatches %llu, early EOF %llu, errors "
                 "%llu%s; log:\n%s",
                 (unsigned long long)l.requests, (unsigned long long)l.mismatches,
                 (unsigned long long)l.early_eof, (unsigned long long)l.errors,
                 l.timed_out ? ", TIMED OUT" : "", log_text(d));
}

static void assert_log(struct daemon *d, const char *needle)
{
    if (!strstr(log_text(d), needle))
        fail_msg("want '%s' in the log:\n%s", needle, log_text(d));
}

static void stop(struct daemon *d)
{
    assert_int_equal(stop_daemon(d, SIGTERM, 10000), 0);
    cleanup(d);
}

/* EPOLL_CTL_MOD failing in a worker: the third re-arm of the connection fails after its third
 * echo went out; the worker closes it (pending output lost), counts err_epoll, logs. In Lua
 * mode the script hears on_close "io_error": on_connect and on_close still pair. With
 * --oneshot always: a re-arm at every event, in every group. */
static void mod_fails(const char *const *args, bool lua)
{
    struct daemon d;
    char buf[64];
    int fd;

    spawn_faulty(&d, "epoll_ctl_mod:ENOMEM:nth=3:thread=lfe-g", args);
    fd = tcp_connect(d.port);
    echo_once(fd, "one");
    echo_once(fd, "two");
    echo_once(fd, "three");
    assert_int_equal(expect_closed(fd, buf, sizeof(buf)), 0);
    close(fd);
    assert_int_equal(total_stat(&d, "err_epoll"), 1);
    assert_log(&d, "lfe-fault: epoll_ctl_mod -> ENOMEM (call 3)");
    assert_log(&d, "epoll_ctl(MOD) on fd ");
    assert_log(&d, strerror(ENOMEM));
    if (lua)
        assert_log(&d, "on_close io_error");
    assert_counters_add_up(&d);
    assert_serves(&d);
    assert_counters_add_up(&d);
    stop(&d);
}

static void test_fault_worker_epoll_mod(void **state)
{
    static const char *const args[] = {"--oneshot", "always", NULL};

    (void)state;
    mod_fails(args, false);
}

static void test_fault_worker_epoll_mod_lua(void **state)
{
    static const char *const args[] = {"--lua", "tests/fault/close_log.lua", "--oneshot", "always",
                                       NULL};

    (void)state;
    mod_fails(args, true);
}

/* EPOLL_CTL_ADD failing in the accept thread: the second connection is closed before any
 * worker sees it, counted in the accept thread's err_other (not in accepted), logged. */
static void test_fault_accept_epoll_add(void **state)
{
    struct daemon d;
    char buf[64];
    int a, b;

    (void)state;
    spawn_faulty(&d, "epoll_ctl_add:ENOMEM:nth=2:thread=lfe-accept", NULL);
    a = tcp_connect(d.port);
    echo_once(a, "first");
    b = tcp_connect(d.port);
    assert_int_equal(expect_closed(b, buf, sizeof(buf)), 0);
    close(b);
    echo_once(a, "first, still served");
    close(a);
    assert_int_equal(acc_stat(&d, "err_other"), 1);
    assert_int_equal(acc_stat(&d, "accepted"), 1);
    assert_log(&d, "lfe-fault: epoll_ctl_add -> ENOMEM (call 2)");
    /* the group is the round-robin's second pick: 1 where the plan has two (echo, 2 CPUs) */
    assert_log(&d, "accept: epoll_ctl(ADD) into group ");
    assert_log(&d, ": Cannot allocate memory; connection closed");
    assert_counters_add_up(&d);
    assert_serves(&d);
    assert_counters_add_up(&d);
    stop(&d);
}

/* A connection to port on 127.0.0.1 within 3 s (times TEST_SLOW), or -1: a listener whose
 * SYNs are dropped answers nothing, and a blocking connect would wait minutes. */
static int connect_within(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    struct pollfd p;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), err = 0;
    socklen_t el = sizeof(err);

    assert_true(fd >= 0);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    p = (struct pollfd){.fd = fd, .events = POLLOUT};
    if (poll(&p, 1, 3000 * slow) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0 ||
        err) {
        close(fd);
        return -1;
    }
    fcntl(fd, F_SETFL, 0);
    return fd;
}

/* A --takeover successor whose start fails after it took the listeners over (here: it cannot
 * create its first worker) leaves them to its predecessor as they were. Its failed start's
 * stop used to put the SYN-dropping filter on them (a stop's, to reset nothing queued): the
 * predecessor, still serving them, then took no new connection, silently. */
static void test_fault_takeover_successor_fails_to_start(void **state)
{
    char sock[64], listen[32];
    const char *args[] = {"--listen", listen, "--takeover", sock, NULL};
    struct daemon a, b;
    int rc, fd;

    (void)state;
    snprintf(sock, sizeof(sock), "/tmp/lfe-fault-takeover-%d.sock", (int)getpid());
    unlink(sock);
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", free_port());
    assert_int_equal(spawn(&a, args, 0, NULL), 0);
    fault_env("pthread_create:EAGAIN:nth=1:thread=lfepolld");
    rc = spawn(&b, args, 0, NULL);
    fault_env_clear();
    assert_int_equal(rc, -1);
    assert_int_equal(stop_daemon(&b, 0, 10000), 1);
    assert_log(&b, "lfe-fault: pthread_create -> EAGAIN");
    cleanup(&b);
    fd = connect_within(a.port);
    if (fd < 0)
        fail_msg("the predecessor took no new connection after a successor failed to start: %s",
                 log_text(&a));
    echo_once(fd, "after a failed successor");
    close(fd);
    assert_int_equal(stop_daemon(&a, SIGTERM, 10000), 0);
    cleanup(&a);
    unlink(sock);
}

/* calloc failing for a new connection (the accept thread's only calloc of its own; "exe" leaves
 * out libc's, such as the one a sanitizer's thread start makes): that connection is closed at
 * once, counted in enomem, logged; the next one is served. Echo and Lua mode (a bigger struct). */
static void calloc_fails(const char *const *args)
{
    struct daemon d;
    char buf[64];
    int a, b;

    spawn_faulty(&d, "calloc:ENOMEM:nth=2:thread=lfe-accept:exe", args);
    a = tcp_connect(d.port);
    echo_once(a, "first");
    b = tcp_connect(d.port);
    assert_int_equal(expect_closed(b, buf, sizeof(buf)), 0);
    close(b);
    echo_once(a, "first, still served");
    close(a);
    assert_int_equal(acc_stat(&d, "enomem"), 1);
    assert_int_equal(acc_stat(&d, "accepted"), 1);
    assert_log(&d, "lfe-fault: calloc -> ENOMEM (call 2)");
    assert_log(&d, "accept: out of memory for a new connection");
    assert_counters_add_up(&d);
    assert_serves(&d);
    assert_counters_add_up(&d);
    stop(&d);
}

static void test_fault_accept_calloc(void **state)
{
    (void)state;
    calloc_fails(NULL);
}

static void test_fault_accept_calloc_lua(void **state)
{
    static const char *const args[] = {"--lua", "tests/fault/close_log.lua", NULL};

    (void)state;
    calloc_fails(args);
}

/* accept4 failing with each errno it can, the first time. "drop": the kernel has taken the
 * connection off the queue before failing (the network errors of a new connection, and
 * ECONNABORTED), so the shim closes it: the client sees the close. Otherwise it stays queued
 * and is served (at once, or after the pause or the retry of a listener set aside). */
static void test_fault_accept4_each_errno(void **state)
{
    static const struct {
        const char *err;
        bool drop;
        const char *counter; /* NULL: nothing counted */
        const char *line;    /* NULL: nothing logged */
    } cases[] = {
        {"EINTR", false, NULL, NULL},
        {"EAGAIN", false, NULL, NULL},
        {"ECONNABORTED", true, NULL, NULL}, /* the peer gave up: nothing to report */
        {"EMFILE", false, "emfile", "accepting paused until one closes"},
        {"ENFILE", false, "emfile", "accepting paused until one closes"},
        {"ENOBUFS", false, "enomem", "the kernel is short of memory"},
        {"ENOMEM", false, "enomem", "the kernel is short of memory"},
        {"EPROTO", true, "err_other", "a connection was lost before it was accepted"},
        {"ENETDOWN", true, "err_other", "a connection was lost before it was accepted"},
        {"ENOPROTOOPT", true, "err_other", "a connection was lost before it was accepted"},
        {"EHOSTDOWN", true, "err_other", "a connection was lost before it was accepted"},
        {"ENONET", true, "err_other", "a connection was lost before it was accepted"},
        {"EHOSTUNREACH", true, "err_other", "a connection was lost before it was accepted"},
        {"EOPNOTSUPP", true, "err_other", "a connection was lost before it was accepted"},
        {"ENETUNREACH", true, "err_other", "a connection was lost before it was accepted"},
        {"ETIMEDOUT", true, "err_other", "a connection was lost before it was accepted"},
        {"EPERM", false, "err_other", "this listener is set aside and retried every"},
        {"EINVAL", false, "err_other", "this listener is set aside and retried every"},
        {"EBADF", false, "err_other", "this listener is set aside and retried every"},
        {"ENOTSOCK", false, "err_other", "this listener is set aside and retried every"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct daemon d;
        char rules[128], want[128], buf[64];
        const char *t;
        int fd;

        snprintf(rules, sizeof(rules), "accept4:%s:nth=1%s", cases[i].err,
                 cases[i].drop ? ":drop" : "");
        spawn_faulty(&d, rules, NULL);
        fd = tcp_connect(d.port);
        if (cases[i].drop) {
            send_all(fd, "x", 1);
            assert_int_equal(expect_closed(fd, buf, sizeof(buf)), 0);
        } else {
            echo_once(fd, "queued, then served");
        }
        close(fd);
        snprintf(want, sizeof(want), "lfe-fault: accept4 -> %s (call 1)", cases[i].err);
        assert_log(&d, want);
        /* With drop the shim closes the connection before accept4 returns the error to the
         * accept thread: the client can see the close before the counter moves. Ask again
         * until it has (a wrong counter stays wrong: the loop ends and reports it). */
        for (long deadline = now_ms() + 2000L * slow;;) {
            const char *bad = NULL;
            long v = 0, w = 0;

            t = stats(&d);
            for (const char *const *c =
                     (const char *const[]){"emfile", "enomem", "err_other", NULL};
                 *c && !bad; c++) {
                v = stat_value(t, "stats: accept:", *c);
                w = cases[i].counter && strcmp(*c, cases[i].counter) == 0;
                if (v != w)
                    bad = *c;
            }
            if (!bad)
                break;
            if (now_ms() > deadline)
                fail_msg("%s: want %s=%ld, got %ld:\n%s", cases[i].err, bad, w, v, t);
            sleep_ms(20);
        }
        if (cases[i].line) {
            assert_log(&d, cases[i].line);
        } else if (strstr(log_text(&d), "warning: accept") ||
                   strstr(log_text(&d), "error: accept")) {
            fail_msg("%s: want no accept line in the log:\n%s", cases[i].err, log_text(&d));
        }
        assert_serves(&d);
        assert_counters_add_up(&d);
        stop(&d);
    }
}

/* send failing in the middle of a reply: the first half went out (a short send), the flush of
 * the rest fails. The client gets exactly that first half, then the close. A reset (EPIPE) is
 * ordinary churn: counted in err_reset, not logged. Any other error is counted in err_io and
 * logged. In Lua mode on_close hears why. */
static void send_fails(const char *const *args, const char *err, const char *counter,
                       const char *line, const char *reason)
{
    struct daemon d;
    char rules[160], want[128], req[4000], buf[sizeof(req)];
    size_t n;
    int fd;

    snprintf(rules, sizeof(rules), "send:short:nth=2:thread=lfe-g,send:%s:nth=3:thread=lfe-g", err);
    spawn_faulty(&d, rules, args);
    for (size_t i = 0; i < sizeof(req); i++)
        req[i] = (char)('a' + i % 26);
    fd = tcp_connect(d.port);
    echo_once(fd, "send 1 whole");
    send_all(fd, req, sizeof(req));
    n = expect_closed(fd, buf, sizeof(buf));
    close(fd);
    if (n == 0 || n >= sizeof(req) || memcmp(buf, req, n) != 0)
        fail_msg("want the first part of the reply, then the close; got %zu of %zu bytes%s", n,
                 sizeof(req), n && memcmp(buf, req, n) ? ", not what was sent" : "");
    assert_log(&d, "lfe-fault: send -> short (call 2)");
    snprintf(want, sizeof(want), "lfe-fault: send -> %s (call 3)", err);
    assert_log(&d, want);
    assert_int_equal(total_stat(&d, counter), 1);
    if (line)
        assert_log(&d, line);
    else if (strstr(log_text(&d), "I/O error"))
        fail_msg("a reset is churn, not worth a line:\n%s", log_text(&d));
    if (reason) {
        snprintf(want, sizeof(want), "on_close %s", reason);
        assert_log(&d, want);
    }
    assert_counters_add_up(&d);
    assert_serves(&d);
    assert_counters_add_up(&d);
    stop(&d);
}

static void test_fault_send_mid_reply_lua(void **state)
{
    static const char *const args[] = {"--lua", "tests/fault/close_log.lua", NULL};

    (void)state;
    send_fails(args, "ENOBUFS", "err_io",
               "connection closed on an I/O error: No buffer space available", "io_error");
}

static void test_fault_send_reset_mid_reply_lua(void **state)
{
    static const char *const args[] = {"--lua", "tests/fault/close_log.lua", NULL};

    (void)state;
    send_fails(args, "EPIPE", "err_reset", NULL, "reset");
}

static void test_fault_send_mid_reply_echo(void **state)
{
    (void)state;
    send_fails(NULL, "ENOBUFS", "err_io",
               "connection closed on an I/O error: No buffer space available", NULL);
}

/* Every re-arm failing (--oneshot always: one at every event): each connection is closed after
 * its first echo. 300 connections, each counted; the log says so about once a second per
 * worker, not 300 times. */
static void test_fault_epoll_mod_flood_rate_limited(void **state)
{
    struct daemon d;
    struct load l;
    long t0 = now_ms(), took;
    int lines = 0;

    (void)state;
    static const char *const args[] = {"--oneshot", "always", NULL};

    spawn_faulty(&d, "epoll_ctl_mod:ENOMEM:thread=lfe-g", args);
    l = (struct load){.port = d.port,
                      .conns = 10,
                      .short_total = 300,
                      .min_size = 64,
                      .max_size = 64,
                      .timeout_ms = 30000 * slow};
    load_run(&l); /* each echo goes out before the re-arm fails: all 300 verify */
    if (l.timed_out || l.mismatches || l.errors || l.requests != 300)
        fail_msg("requests %llu/300, mismatches %llu, errors %llu", (unsigned long long)l.requests,
                 (unsigned long long)l.mismatches, (unsigned long long)l.errors);
    took = now_ms() - t0;
    assert_int_equal(total_stat(&d, "err_epoll"), 300);
    assert_counters_add_up(&d);
    for (const char *p = log_text(&d); (p = strstr(p, "epoll_ctl(MOD) on fd")); p++)
        lines++;
    /* 2 workers, a line a second each at most */
    if (lines < 1 || lines > 2 * (took / 1000 + 2))
        fail_msg("%d lines for 300 failures in %ld ms", lines, took);
    stop(&d);
}

/* A solo group (one worker, level-triggered) re-arms only when what a connection waits for
 * changes: a request larger than the kernel's buffers from a client that does not read sends it
 * to EPOLLOUT, and that MOD fails. The worker closes it (its pending output lost: the client
 * sees the close), counts err_epoll, logs; small echoes, which never re-arm, go on; and the
 * next connection that needs the change gets it (only the first call fails). */
static void test_fault_solo_group_mod(void **state)
{
    static const char *const args[] = {
        "--groups", "1", "--workers", "1", "--oneshot", "auto", "--max-pending", "64K", NULL};
    static char big[8 << 20];
    struct daemon d;
    int fd;

    (void)state;
    spawn_faulty(&d, "epoll_ctl_mod:ENOMEM:nth=1:thread=lfe-g", args);
    fd = tcp_connect(d.port);
    for (int i = 0; i < 50; i++)
        echo_once(fd, "small"); /* no re-arm: the fault's first call is still to come */
    assert_int_equal(total_stat(&d, "err_epoll"), 0);
    memset(big, 'b', sizeof(big));
    fcntl(fd, F_SETFL, O_NONBLOCK);
    for (size_t off = 0; off < sizeof(big);) { /* send until the server stops reading */
        ssize_t n = send(fd, big + off, sizeof(big) - off, MSG_NOSIGNAL);
        struct pollfd p = {.fd = fd, .events = POLLOUT};

        if (n > 0) {
            off += (size_t)n;
            continue;
        }
        if (n < 0 && errno != EAGAIN)
            break; /* closed under us: the re-arm failed */
        if (poll(&p, 1, 300) <= 0)
            break; /* nothing moves: the server holds what it can */
    }
    for (long until = now_ms() + 5000 * slow; total_stat(&d, "err_epoll") < 1 && now_ms() < until;)
        sleep_ms(20);
    assert_int_equal(total_stat(&d, "err_epoll"), 1);
    fcntl(fd, F_SETFL, 0);
    expect_closed(fd, big, sizeof(big)); /* what was echoed before the fault, then the close */
    close(fd);
    assert_log(&d, "lfe-fault: epoll_ctl_mod -> ENOMEM (call 1)");
    assert_log(&d, "epoll_ctl(MOD) on fd ");
    assert_counters_add_up(&d);
    assert_serves(&d);
    assert_counters_add_up(&d);
    stop(&d);
}

/* A rule that does not parse stops the daemon before main, saying why. */
static void test_fault_shim_rejects_bad_rule(void **state)
{
    struct daemon d;

    (void)state;
    fault_env("accept4:ENOTANERRNO");
    assert_int_equal(spawn(&d, NULL, 0, NULL), -1);
    fault_env_clear();
    assert_int_equal(stop_daemon(&d, 0, 5000), 97);
    assert_log(&d, "bad LFE_FAULT rule 'accept4:ENOTANERRNO': unknown errno name");
    cleanup(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_fault_worker_epoll_mod, teardown),
        cmocka_unit_test_teardown(test_fault_worker_epoll_mod_lua, teardown),
        cmocka_unit_test_teardown(test_fault_accept_epoll_add, teardown),
        cmocka_unit_test_teardown(test_fault_takeover_successor_fails_to_start, teardown),
        cmocka_unit_test_teardown(test_fault_accept_calloc, teardown),
        cmocka_unit_test_teardown(test_fault_accept_calloc_lua, teardown),
        cmocka_unit_test_teardown(test_fault_accept4_each_errno, teardown),
        cmocka_unit_test_teardown(test_fault_send_mid_reply_lua, teardown),
        cmocka_unit_test_teardown(test_fault_send_reset_mid_reply_lua, teardown),
        cmocka_unit_test_teardown(test_fault_send_mid_reply_echo, teardown),
        cmocka_unit_test_teardown(test_fault_epoll_mod_flood_rate_limited, teardown),
        cmocka_unit_test_teardown(test_fault_solo_group_mod, teardown),
        cmocka_unit_test_teardown(test_fault_shim_rejects_bad_rule, teardown),
    };
    const char *env = getenv("LFE_FAULT_SHIM");
    char self[PATH_MAX];
    ssize_t n;

    if (harness_init() < 0)
        return 1;
    /* The shim: $LFE_FAULT_SHIM (make test sets it), else lfe-fault.so beside this binary. */
    if (env && *env) {
        snprintf(shim, sizeof(shim), "%s", env);
    } else if ((n = readlink("/proc/self/exe", self, sizeof(self) - 1)) > 0) {
        self[n] = '\0';
        snprintf(shim, sizeof(shim), "%s/lfe-fault.so", dirname(self));
    }
    if (access(shim, R_OK) != 0) {
        fprintf(stderr, "no fault shim at '%s': build it (make test does) or set LFE_FAULT_SHIM\n",
                shim);
        return 1;
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
