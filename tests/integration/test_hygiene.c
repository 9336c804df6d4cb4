/* test_hygiene: connection hygiene. --idle-timeout against idle clients, a flood of them, a
 * client that never reads, a client that keeps talking, and a Lua script that hears "idle";
 * --proxy-protocol against v1 and v2 headers whole and byte by byte, garbage, a stop in the
 * middle of a header, the per-address limit on the header's address, and a real HAProxy
 * (send-proxy, send-proxy-v2, its health checks) in front; a group of one worker asleep while
 * its clients hold still. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static pid_t haproxy_pid = -1; /* killed by the teardown, whatever the test did */

static int teardown_haproxy(void **state)
{
    if (haproxy_pid > 0) {
        kill(haproxy_pid, SIGKILL);
        waitpid(haproxy_pid, NULL, 0);
    }
    haproxy_pid = -1;
    return teardown(state);
}

static void start(struct daemon *d, const char *const *args)
{
    if (spawn(d, args, 0, NULL) < 0)
        fail_msg("lfepolld did not start: %s", log_text(d));
}

/* What fd says within timeout_ms: 1 data (read into buf, *n bytes), 0 EOF or reset by the
 * server, -1 nothing at all. */
static int wait_read(int fd, char *buf, size_t cap, ssize_t *n, long timeout_ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};

    if (poll(&p, 1, (int)timeout_ms) <= 0)
        return -1;
    *n = read(fd, buf, cap);
    return *n > 0 ? 1 : 0;
}

/* The server closed fd within timeout_ms: whatever was pending to read is read first. */
static bool closed_within(int fd, long timeout_ms)
{
    long deadline = now_ms() + timeout_ms * slow;
    char buf[65536];
    ssize_t n;

    while (now_ms() < deadline) {
        int r = wait_read(fd, buf, sizeof(buf), &n, deadline - now_ms());

        if (r == 0)
            return true;
        if (r < 0)
            return false;
    }
    return false;
}

static double metric(int ap, const char *name)
{
    char *body;
    double v;

    assert_int_equal(http_get(ap, "/metrics", &body), 200);
    v = metric_sum(body, name);
    free(body);
    return v;
}

/* Sends line and expects want back within 5 s. */
static void ask(int fd, const char *line, const char *want)
{
    char buf[256];
    size_t got = 0, wl = strlen(want);
    ssize_t n;

    send_all(fd, line, strlen(line));
    while (got < wl) {
        if (wait_read(fd, buf + got, sizeof(buf) - 1 - got, &n, 5000 * slow) != 1)
            fail_msg("'%s': no answer (got '%.*s', want '%s')", line, (int)got, buf, want);
        got += (size_t)n;
    }
    buf[got] = '\0';
    assert_string_equal(buf, want);
}

/* --idle-timeout 500ms: an idle connection is closed, and not before its time; one that keeps
 * talking is not; one that never reads its echo (output stuck at --max-pending) is; a flood of
 * 300 silent ones all go; each is counted, and the daemon serves on. */
static void test_idle_timeout(void **state)
{
    static const char *const args[] = {"--idle-timeout", "500ms", "--admin", "127.0.0.1:0",
                                       "--max-pending",  "64K",   NULL};
    static const char *const bad[] = {"--idle-timeout", "soon", NULL};
    static char chunk[65536];
    struct daemon d;
    int ap, idle, busy, reader, flood[300], fl;
    ssize_t n;
    char buf[64];
    size_t sent = 0;
    long t0;

    (void)state;
    bad_start(bad, 2, "--idle-timeout: 'soon' is not a duration of 0 (never) to 86400s");
    start(&d, args);
    ap = admin_port(&d);

    idle = tcp_connect(d.port);
    busy = tcp_connect(d.port);
    ask(idle, "hello\n", "hello\n");
    /* not before its time: nothing at all for the first 200 ms */
    assert_int_equal(wait_read(idle, buf, sizeof(buf), &n, 200), -1);
    t0 = now_ms();
    /* the busy one talks every 100 ms for 1.5 s, three timeouts */
    while (now_ms() - t0 < 1500) {
        ask(busy, "still here\n", "still here\n");
        sleep_ms(100);
    }
    assert_true(closed_within(idle, 5000));
    ask(busy, "after\n", "after\n");
    close(busy);

    /* never reads: the echo fills its receive buffer, then the daemon's 64K, and the daemon
     * stops reading it: no event comes any more */
    reader = tcp_connect(d.port);
    fl = fcntl(reader, F_GETFL);
    fcntl(reader, F_SETFL, fl | O_NONBLOCK);
    memset(chunk, 'x', sizeof(chunk));
    for (long until = now_ms() + 400; now_ms() < until;) {
        ssize_t w = send(reader, chunk, sizeof(chunk), MSG_NOSIGNAL);

        if (w > 0)
            sent += (size_t)w;
        else
            sleep_ms(10);
    }
    fcntl(reader, F_SETFL, fl);
    assert_true(sent > 65536);
    sleep_ms(1500); /* reading nothing for three timeouts */
    assert_true(closed_within(reader, 5000));

    for (int i = 0; i < 300; i++)
        flood[i] = tcp_connect(d.port);
    for (int i = 0; i < 300; i++)
        if (!closed_within(flood[i], 10000))
            fail_msg("silent connection %d of 300 still open", i);
    busy = tcp_connect(d.port);
    ask(busy, "and after the flood\n", "and after the flood\n");
    close(busy);
    sleep_ms(100);
    assert_true(metric(ap, "lfepolld_worker_idle_closed_total") == 302);
    assert_true(metric(ap, "lfepolld_connections") == 0);
    close(idle);
    close(reader);
    for (int i = 0; i < 300; i++)
        close(flood[i]);
    assert_int_equal(stop_daemon(&d, SIGTERM, 10000), 0);
    assert_non_null(strstr(log_text(&d), "idle_closed=302"));
    cleanup(&d);
}

/* Connections that wake as they expire: 64 clients each send 8 bytes and read their echo, then
 * wait 60 to 140 ms around the 100 ms timeout (the sweep runs every 50 ms) and send again, for
 * 3 s. Every send must end in its exact echo or in a close (the sweep won the race), never in
 * silence (a connection no worker is handed again) or in other bytes; a closed client comes
 * back. Both outcomes must have happened many times. make test SANITIZER=thread runs it under
 * TSan, where the daemon's exit status says whether a race was seen. */
static void test_idle_race(void **state)
{
    static const char *const args[] = {"--idle-timeout", "100ms", "--admin", "127.0.0.1:0", NULL};
    enum { N = 64 };
    struct {
        int fd;
        bool waiting;
        long next, sent_at;
        char msg[9];
        size_t got;
    } c[N];
    struct daemon d;
    long t0, echoes = 0, closes = 0, seq = 0;
    int ap;

    (void)state;
    start(&d, args);
    ap = admin_port(&d);
    srand(12345);
    for (int i = 0; i < N; i++) {
        c[i].fd = tcp_connect(d.port);
        c[i].waiting = false;
        c[i].next = now_ms() + rand() % 100;
    }
    t0 = now_ms();
    while (now_ms() - t0 < 3000) {
        struct pollfd p[N];
        long now = now_ms();

        for (int i = 0; i < N; i++) {
            if (!c[i].waiting && now >= c[i].next) {
                snprintf(c[i].msg, sizeof(c[i].msg), "%07ld\n", seq++);
                c[i].got = 0;
                c[i].sent_at = now;
                c[i].waiting = true;
                if (send(c[i].fd, c[i].msg, 8, MSG_NOSIGNAL) != 8) {
                    closes++; /* closed by the sweep before this send */
                    close(c[i].fd);
                    c[i].fd = tcp_connect(d.port);
                    c[i].waiting = false;
                }
            }
            if (c[i].waiting && now - c[i].sent_at > 5000 * slow)
                fail_msg("client %d: neither an echo nor a close 5 s after its send", i);
            p[i].fd = c[i].waiting ? c[i].fd : -1;
            p[i].events = POLLIN;
            p[i].revents = 0;
        }
        if (poll(p, N, 5) < 0)
            fail_msg("poll: %s", strerror(errno));
        for (int i = 0; i < N; i++) {
            char buf[16];
            ssize_t n;

            if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            n = read(c[i].fd, buf, 8 - c[i].got);
            if (n > 0) {
                if (memcmp(buf, c[i].msg + c[i].got, (size_t)n) != 0)
                    fail_msg("client %d: got other bytes than its own", i);
                c[i].got += (size_t)n;
                if (c[i].got == 8) {
                    echoes++;
                    c[i].waiting = false;
                    c[i].next = now_ms() + 60 + rand() % 81;
                }
                continue;
            }
            closes++; /* EOF or reset: the sweep took it */
            close(c[i].fd);
            c[i].fd = tcp_connect(d.port);
            c[i].waiting = false;
            c[i].next = now_ms();
        }
    }
    for (int i = 0; i < N; i++)
        close(c[i].fd);
    for (long until = now_ms() + 5000 * slow;
         metric(ap, "lfepolld_connections") != 0 && now_ms() < until;)
        sleep_ms(50);
    assert_true(metric(ap, "lfepolld_connections") == 0);
    print_message("idle race: %ld echoes, %ld closes by the sweep\n", echoes, closes);
    if (echoes < 100 || closes < 20)
        fail_msg("the race was not exercised: %ld echoes, %ld closes", echoes, closes);
    assert_true(metric(ap, "lfepolld_worker_idle_closed_total") >= (double)closes);
    assert_int_equal(stop_daemon(&d, SIGTERM, 10000), 0);
    cleanup(&d);
}

/* In Lua mode on_close hears "idle", for a silent connection and for one in the middle of a
 * line; the rest of the script's connections are untouched. */
static void test_idle_timeout_lua(void **state)
{
    static const char *const args[] = {"--lua", "tests/lua/peer.lua", "--idle-timeout", "300ms",
                                       NULL};
    struct daemon d;
    int a, b, c;

    (void)state;
    start(&d, args);
    a = tcp_connect(d.port);
    b = tcp_connect(d.port);
    ask(a, "x\n", "x\n");
    send_all(b, "half a li", 9);
    assert_true(closed_within(a, 5000));
    assert_true(closed_within(b, 5000));
    c = tcp_connect(d.port);
    /* the clients saw the sweep's shutdown; the workers' on_close may come a little later */
    for (long until = now_ms() + 5000 * slow;; sleep_ms(50)) {
        char buf[16];
        ssize_t n;

        send_all(c, "closes idle\n", 12);
        assert_int_equal(wait_read(c, buf, sizeof(buf) - 1, &n, 5000 * slow), 1);
        buf[n] = '\0';
        if (!strcmp(buf, "2\n"))
            break;
        if (now_ms() > until)
            fail_msg("on_close heard \"idle\" %s time(s), want 2", buf);
    }
    ask(c, "closes eof\n", "0\n");
    close(a);
    close(b);
    close(c);
    assert_int_equal(stop_daemon(&d, SIGTERM, 10000), 0);
    cleanup(&d);
}

/* Sends 64 KiB chunks without blocking until the socket has taken nothing for 300 ms (every
 * buffer on the way is full: the daemon has stopped reading) or 10 s pass. Returns the bytes. */
static size_t send_until_stuck(int fd)
{
    static char chunk[65536];
    size_t sent = 0;
    long stuck = now_ms();

    memset(chunk, 'x', sizeof(chunk));
    for (long until = now_ms() + 10000 * slow; now_ms() < until && now_ms() - stuck < 300;) {
        ssize_t w = send(fd, chunk, sizeof(chunk), MSG_NOSIGNAL | MSG_DONTWAIT);

        if (w > 0) {
            sent += (size_t)w;
            stuck = now_ms();
        } else if (w < 0 && errno != EAGAIN) {
            fail_msg("send: %s after %zu bytes", strerror(errno), sent);
        } else {
            sleep_ms(5);
        }
    }
    return sent;
}

/* The daemon's live count reaches 0 within timeout_ms: true, or false once the time is up. */
static bool none_live_within(int ap, long timeout_ms)
{
    for (long until = now_ms() + timeout_ms * slow; now_ms() < until; sleep_ms(100))
        if (metric(ap, "lfepolld_connections") == 0)
            return true;
    return metric(ap, "lfepolld_connections") == 0;
}

/* --idle-timeout 1s, echo and Lua: a client that sends megabytes and never reads. The daemon
 * stops reading it at --max-pending and re-arms for output only; its sweep once took the input
 * it had stopped reading for an event waiting for a worker, re-dated the connection on every
 * look, and kept it (with --max-pending of heap and its kernel buffers) for ever. Nothing moves
 * on it: it must go within a few seconds, counted as idle. Under ThreadSanitizer it also caught
 * a solo group's worker writing the connection's CONN_REG_* flags after publishing it ARMED,
 * while the sweep read them (idle.c, judge). */
static void test_idle_closes_a_sender_that_never_reads(void **state)
{
    static const char *const echo[] = {"--idle-timeout", "1s", "--admin", "127.0.0.1:0", NULL};
    static const char *const lua[] = {"--idle-timeout", "1s",           "--admin", "127.0.0.1:0",
                                      "--lua",          "lua/echo.lua", NULL};
    const char *const *modes[] = {echo, lua};

    (void)state;
    for (int m = 0; m < 2; m++) {
        struct daemon d;
        int ap, fd;
        size_t sent;
        long t0;

        start(&d, modes[m]);
        ap = admin_port(&d);
        fd = tcp_connect(d.port);
        sent = send_until_stuck(fd);
        t0 = now_ms();
        if (metric(ap, "lfepolld_worker_paused_total") < 1)
            fail_msg("%s: reading never paused at --max-pending after %zu bytes",
                     m ? "lua" : "echo", sent);
        if (!none_live_within(ap, 10000))
            fail_msg("%s: a client that sent %zu bytes and never read is still open %ld ms "
                     "later, under a 1 s idle timeout",
                     m ? "lua" : "echo", sent, now_ms() - t0);
        assert_true(metric(ap, "lfepolld_worker_idle_closed_total") == 1);
        close(fd);
        assert_int_equal(stop_daemon(&d, SIGTERM, 10000), 0);
        cleanup(&d);
    }
}

/* --idle-timeout 1s, echo and Lua: a client that sends more than the kernel can hold for it,
 * shuts down its side (SHUT_WR) and never reads. The daemon reads it all, its end included,
 * and re-arms for output only; the end of input the sweep saw (POLLRDHUP) kept it for ever. */
static void test_idle_closes_a_half_closed_peer_that_never_reads(void **state)
{
    size_t total = tcp_wmem_max() + (2u << 20);
    char cap[32];
    const char *const echo[] = {"--idle-timeout", "1s", "--admin", "127.0.0.1:0",
                                "--max-pending",  cap,  NULL};
    const char *const lua[] = {
        "--idle-timeout", "1s",           "--admin", "127.0.0.1:0", "--max-pending", cap,
        "--lua",          "lua/echo.lua", NULL};
    const char *const *modes[] = {echo, lua};
    char *buf = malloc(total);

    (void)state;
    assert_non_null(buf);
    memset(buf, 'h', total);
    /* everything read: the rest that the kernel does not hold is output pending below the cap */
    snprintf(cap, sizeof(cap), "%zuK", (total >> 10) + 4096);
    for (int m = 0; m < 2; m++) {
        struct daemon d;
        int ap, fd = socket(AF_INET, SOCK_STREAM, 0), small = 4096;
        struct sockaddr_in a = {.sin_family = AF_INET};
        long t0;

        start(&d, modes[m]);
        ap = admin_port(&d);
        /* a small receive window: most of what comes back waits in the daemon */
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons((uint16_t)d.port);
        assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
        send_all(fd, buf, total);
        assert_int_equal(shutdown(fd, SHUT_WR), 0);
        for (long until = now_ms() + 10000 * slow;
             metric(ap, "lfepolld_worker_bytes_in_total") < (double)total && now_ms() < until;)
            sleep_ms(50);
        if (metric(ap, "lfepolld_worker_bytes_in_total") != (double)total ||
            metric(ap, "lfepolld_connections_pending_output") != 1)
            fail_msg("%s: want all %zu bytes read and output pending", m ? "lua" : "echo", total);
        t0 = now_ms();
        if (!none_live_within(ap, 10000))
            fail_msg("%s: a half-closed peer that never reads is still open %ld ms later, under a "
                     "1 s idle timeout",
                     m ? "lua" : "echo", now_ms() - t0);
        assert_true(metric(ap, "lfepolld_worker_idle_closed_total") == 1);
        if (metric(ap, "lfepolld_connections_pending_output") != 0) /* conn_close's count */
            fail_msg("%s: closed with output pending, it is still counted as pending",
                     m ? "lua" : "echo");
        close(fd);
        assert_int_equal(stop_daemon(&d, SIGTERM, 10000), 0);
        cleanup(&d);
    }
    free(buf);
}

/* A connection to 127.0.0.1:port whose receive buffer is small (most of what comes back
 * waits in the daemon), that has sent the PROXY header head (NULL: none). */
static int held_connect(int port, const char *head)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0), small = 4096;
    struct sockaddr_in a = {.sin_family = AF_INET};

    assert_true(fd >= 0);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    if (head)
        send_all(fd, head, strlen(head));
    return fd;
}

/* A group of one worker registers its connections level-triggered (--oneshot auto): a socket
 * that stays ready for what its registration asks is reported at every epoll_wait, so a state
 * the daemon leaves a connection in while it waits for the client must ask for nothing that
 * is already there, or the worker spins. Clients hold each such state still, at once, in one
 * daemon: a PROXY header cut short ("PROX"); a client that sent until reading paused at
 * --max-pending and never reads; one that sent less than the cap but more than the kernel holds,
 * then its end (SHUT_WR), and never reads (output pending, input ended); one answered and left
 * open; in Lua also a script's close (hold.lua's "bigclose") whose 900,000-byte reply the
 * client does not read. One that half-closes after a request must be answered and closed. Then
 * the worker must sleep: no more than a few events in 500 ms (a spinning one handles thousands),
 * every connection still there, a new one served. The same with --oneshot always (EPOLLONESHOT,
 * a re-arm per event), where a spin would be one re-arm's re-poll per event. */
static void hold_still(const char *oneshot, bool lua)
{
    static const char v1[] = "PROXY TCP4 192.0.2.1 127.0.0.1 40000 9876\r\n";
    size_t total = tcp_wmem_max() + (2u << 20);
    char cap[32], *buf = malloc(total), got[64];
    const char *args[20] = {"--groups",      "1",     "--workers",       "1",
                            "--oneshot",     oneshot, "--admin",         "127.0.0.1:0",
                            "--max-pending", cap,     "--proxy-protocol"};
    const char *what = lua ? "lua" : "echo";
    int ap, partial, paused, ended, answered, closing = -1, fin, fresh, n = 11;
    double ev0, ev1, live;
    struct daemon d;
    long t0 = now_ms();
    ssize_t r;

    assert_non_null(buf);
    memset(buf, 'h', total);
    /* room for everything "ended" sends */
    snprintf(cap, sizeof(cap), "%zuK", (total >> 10) + 4096);
    if (lua) {
        args[n++] = "--lua";
        args[n++] = "tests/lua/hold.lua";
    }
    start(&d, args);
    ap = admin_port(&d);
    ended = held_connect(d.port, v1);
    send_all(ended, buf, total);
    assert_int_equal(shutdown(ended, SHUT_WR), 0);
    for (long until = now_ms() + 10000 * slow;
         metric(ap, "lfepolld_worker_bytes_in_total") < (double)total && now_ms() < until;)
        sleep_ms(20);
    if (metric(ap, "lfepolld_worker_bytes_in_total") != (double)total ||
        metric(ap, "lfepolld_connections_pending_output") != 1)
        fail_msg("%s, --oneshot %s: want all %zu bytes read and output pending", what, oneshot,
                 total);
    paused = held_connect(d.port, v1);
    /* until the daemon takes nothing for 300 ms */
    for (long stuck = now_ms(), off = 0; now_ms() - stuck < 300;) {
        ssize_t w = send(paused, buf + off, 65536, MSG_NOSIGNAL | MSG_DONTWAIT);

        if (w < 0 && errno != EAGAIN)
            fail_msg("%s, --oneshot %s: send: %s", what, oneshot, strerror(errno));
        if (w > 0) {
            off = (off + w) % (long)(total - 65536);
            stuck = now_ms();
        } else {
            sleep_ms(5);
        }
        if (now_ms() - t0 > 10000L * slow)
            fail_msg("%s, --oneshot %s: the daemon kept reading for 10 s", what, oneshot);
    }
    if (metric(ap, "lfepolld_worker_paused_total") < 1)
        fail_msg("%s, --oneshot %s: reading never paused at --max-pending", what, oneshot);
    partial = held_connect(d.port, "PROX");
    answered = held_connect(d.port, v1);
    send_all(answered, "hi\n", 3);
    assert_int_equal(wait_read(answered, got, sizeof(got), &r, 5000 * slow), 1);
    if (lua) {
        closing = held_connect(d.port, v1);
        send_all(closing, "bigclose\n", 9);
    }
    fin = held_connect(d.port, v1);
    send_all(fin, "bye\n", 4);
    assert_int_equal(shutdown(fin, SHUT_WR), 0);
    if (!closed_within(fin, 5000))
        fail_msg("%s, --oneshot %s: a client that half-closed after its request was not "
                 "answered and closed",
                 what, oneshot);
    sleep_ms(200); /* the last events of those states */
    live = metric(ap, "lfepolld_connections");
    ev0 = metric(ap, "lfepolld_worker_events_total");
    sleep_ms(500);
    ev1 = metric(ap, "lfepolld_worker_events_total");
    if (ev1 - ev0 > 4)
        fail_msg("%s, --oneshot %s: %.0f events in 500 ms while every client held still: the "
                 "worker spins on a connection that stays ready",
                 what, oneshot, ev1 - ev0);
    if (live != (lua ? 5 : 4) || metric(ap, "lfepolld_connections") != live)
        fail_msg("%s, --oneshot %s: %.0f connections live, want %d", what, oneshot, live,
                 lua ? 5 : 4);
    fresh = held_connect(d.port, v1);
    send_all(fresh, "still\n", 6);
    assert_int_equal(wait_read(fresh, got, sizeof(got), &r, 5000 * slow), 1);
    for (int *fd = (int[]){fresh, fin, partial, paused, ended, answered, closing}, i = 0; i < 7;
         i++)
        if (fd[i] >= 0)
            close(fd[i]);
    assert_int_equal(stop_daemon(&d, SIGTERM, 10000), 0);
    cleanup(&d);
    free(buf);
}

static void test_solo_group_sleeps_while_clients_hold_still(void **state)
{
    (void)state;
    hold_still("auto", false);
    hold_still("always", false);
}

static void test_solo_group_sleeps_while_lua_clients_hold_still(void **state)
{
    (void)state;
    hold_still("auto", true);
    hold_still("always", true);
}

/* The other side of "nothing moved": a client that sent megabytes and then reads slowly but
 * steadily, 256 KiB every 0.5 s, raises no event for seconds at a time (the daemon hears of
 * room for output only once a third of the send buffer is free), but the peer taking bytes from
 * the kernel's send queue is progress: a 1 s idle timeout keeps it for 6 s, every byte its
 * own. Once it stops reading it goes: the sweep was watching it all along. */
static void test_idle_keeps_a_slow_steady_reader(void **state)
{
    static const char *const args[] = {"--idle-timeout", "1s", "--admin", "127.0.0.1:0", NULL};
    static char buf[256 << 10];
    struct daemon d;
    size_t sent, got = 0;
    int ap, fd;
    long t0;

    (void)state;
    start(&d, args);
    ap = admin_port(&d);
    fd = tcp_connect(d.port);
    sent = send_until_stuck(fd);
    for (t0 = now_ms(); now_ms() - t0 < 6000;) {
        size_t want = sizeof(buf);

        sleep_ms(500);
        while (want > 0) {
            ssize_t n = recv(fd, buf, want, MSG_DONTWAIT);

            if (n < 0 && errno == EAGAIN)
                break;
            if (n <= 0)
                fail_msg("the steady reader was closed %ld ms into its reading (%zu of %zu bytes "
                         "back): %s",
                         now_ms() - t0, got, sent, n ? strerror(errno) : "EOF");
            for (ssize_t i = 0; i < n; i++)
                if (buf[i] != 'x')
                    fail_msg("byte %zu of the echo is not its own", got + (size_t)i);
            got += (size_t)n;
            want -= (size_t)n;
        }
    }
    if (got >= sent)
        fail_msg("the reader took all %zu bytes: nothing was left to read slowly", sent);
    assert_true(metric(ap, "lfepolld_connections") == 1);
    assert_true(metric(ap, "lfepolld_worker_idle_closed_total") == 0);
    t0 = now_ms();
    if (!none_live_within(ap, 10000))
        fail_msg("the reader stopped reading and is still open %ld ms later", now_ms() - t0);
    assert_true(metric(ap, "lfepolld_worker_idle_closed_total") == 1);
    close(fd);
    assert_int_equal(stop_daemon(&d, SIGTERM, 10000), 0);
    cleanup(&d);
}

static const char v2_sig[12] = "\r\n\r\n\0\r\nQUIT\n";

/* A v2 PROXY header for an IPv4 (fam 0x11) or IPv6 (0x21) client src:sport. */
static size_t v2_header(char *out, int fam, const char *src, int sport)
{
    unsigned char *p = (unsigned char *)out;
    size_t alen = fam == 0x11 ? 12 : 36, half = (alen - 4) / 2;

    memcpy(p, v2_sig, 12);
    p[12] = 0x21;
    p[13] = (unsigned char)fam;
    p[14] = 0;
    p[15] = (unsigned char)alen;
    memset(p + 16, 0, alen);
    inet_pton(fam == 0x11 ? AF_INET : AF_INET6, src, p + 16);
    p[16 + 2 * half] = (unsigned char)(sport >> 8);
    p[16 + 2 * half + 1] = (unsigned char)sport;
    return 16 + alen;
}

/* Echo behind --proxy-protocol: the header never comes back, whole or byte by byte, with the
 * payload in the same segment or not; garbage, a header that is too long, and a half header at
 * a stop are closed, and none of their bytes is echoed. */
static void test_proxy_echo(void **state)
{
    static const char *const args[] = {"--proxy-protocol", "--admin", "127.0.0.1:0", NULL};
    static const char v1[] = "PROXY TCP4 192.0.2.1 127.0.0.1 40000 9876\r\n";
    struct daemon d;
    char buf[256], h2[64], longv1[200];
    int ap, a, b, c, e, f, g;
    size_t n2;
    ssize_t n;

    (void)state;
    start(&d, args);
    ap = admin_port(&d);

    a = tcp_connect(d.port);
    snprintf(buf, sizeof(buf), "%shello\n", v1);
    send_all(a, buf, strlen(buf));
    ask(a, "", "hello\n");
    ask(a, "again\n", "again\n");

    b = tcp_connect(d.port);
    for (const char *p = v1; *p; p++) {
        send_all(b, p, 1);
        sleep_ms(2); /* each byte its own segment, most its own event */
    }
    ask(b, "split\n", "split\n");

    c = tcp_connect(d.port);
    n2 = v2_header(h2, 0x21, "2001:db8::1", 1234);
    memcpy(h2 + n2, "v2 payload\n", 11);
    send_all(c, h2, n2 + 11);
    ask(c, "", "v2 payload\n");

    e = tcp_connect(d.port);
    send_all(e, "GET / HTTP/1.0\r\n\r\n", 18);
    assert_true(closed_within(e, 5000));

    memset(longv1, '1', sizeof(longv1));
    memcpy(longv1, "PROXY TCP4 ", 11);
    f = tcp_connect(d.port);
    send_all(f, longv1, sizeof(longv1));
    assert_true(closed_within(f, 5000));

    g = tcp_connect(d.port);
    send_all(g, v1, 20); /* half a header, then the daemon stops */
    sleep_ms(100);
    assert_true(metric(ap, "lfepolld_worker_proxy_bad_total") == 2);
    close(a);
    close(b);
    close(c);
    close(e);
    close(f);
    assert_int_equal(stop_daemon(&d, SIGTERM, 10000), 0);
    /* the half header is not output: nothing comes back before the close */
    n = read(g, buf, sizeof(buf));
    assert_true(n <= 0);
    close(g);
    cleanup(&d);
}

/* conn.peer is the header's client; UNKNOWN and LOCAL fall back to the socket's peer; the
 * per-address limit counts the header's address, not the proxy's. */
static void test_proxy_lua_peer_and_limit(void **state)
{
    static const char *const args[] = {"--lua",
                                       "tests/lua/peer.lua",
                                       "--proxy-protocol",
                                       "--max-conns-per-ip",
                                       "2",
                                       "--admin",
                                       "127.0.0.1:0",
                                       NULL};
    struct daemon d;
    char h[128], want[64];
    struct sockaddr_in me;
    socklen_t ml = sizeof(me);
    int ap, a, b, c, one[3], other;
    size_t n;

    (void)state;
    start(&d, args);
    ap = admin_port(&d);

    a = tcp_connect(d.port);
    send_all(a, "PROXY TCP4 203.0.113.9 127.0.0.1 4000 80\r\n", 42);
    ask(a, "peer\n", "203.0.113.9:4000\n");

    b = tcp_connect(d.port);
    n = v2_header(h, 0x21, "2001:db8::9", 4001);
    send_all(b, h, n);
    ask(b, "peer\n", "[2001:db8::9]:4001\n");

    c = tcp_connect(d.port);
    getsockname(c, (struct sockaddr *)&me, &ml);
    send_all(c, "PROXY UNKNOWN\r\n", 15);
    snprintf(want, sizeof(want), "127.0.0.1:%d\n", ntohs(me.sin_port));
    ask(c, "peer\n", want);

    /* two from 198.51.100.1 through the same proxy address: the third is closed */
    for (int i = 0; i < 3; i++) {
        one[i] = tcp_connect(d.port);
        snprintf(h, sizeof(h), "PROXY TCP4 198.51.100.1 127.0.0.1 %d 80\r\n", 5000 + i);
        send_all(one[i], h, strlen(h));
        if (i < 2)
            ask(one[i], "peer\n", i ? "198.51.100.1:5001\n" : "198.51.100.1:5000\n");
    }
    assert_true(closed_within(one[2], 5000));
    other = tcp_connect(d.port);
    send_all(other, "PROXY TCP4 198.51.100.2 127.0.0.1 6000 80\r\n", 43);
    ask(other, "peer\n", "198.51.100.2:6000\n");
    assert_true(metric(ap, "lfepolld_worker_proxy_shed_per_ip_total") == 1);
    close(one[0]);
    sleep_ms(200);
    one[2] = tcp_connect(d.port);
    send_all(one[2], "PROXY TCP4 198.51.100.1 127.0.0.1 5009 80\r\n", 43);
    ask(one[2], "peer\n", "198.51.100.1:5009\n");
    ask(one[2], "closes eof\n", "1\n"); /* one[0]'s; one[2]'s first was never started */
    close(a);
    close(b);
    close(c);
    close(one[1]);
    close(one[2]);
    close(other);
    assert_int_equal(stop_daemon(&d, SIGTERM, 10000), 0);
    cleanup(&d);
}

/* --proxy-protocol without --idle-timeout: a client that sends "PROX" and stops, and one that
 * sends nothing, once held a descriptor (and no per-address slot) for ever. The header has a
 * deadline of its own (--proxy-timeout, 2 s here): both go after it, not before, counted as
 * bad headers, and a header written in pieces over a second still opens its connection. A flood
 * of such connections holds at most --max-conns descriptors (the rest are shed at once), each
 * until its deadline, and the daemon serves once they are gone. In Lua, a connection closed
 * for its header never started: its script hears nothing of it. */
static void test_proxy_header_deadline(void **state)
{
    static const char *const args[] = {
        "--proxy-protocol", "--proxy-timeout", "2s", "--max-conns", "40",
        "--admin",          "127.0.0.1:0",     NULL};
    static const char *const lua[] = {
        "--proxy-protocol", "--proxy-timeout", "1s", "--lua", "tests/lua/peer.lua", NULL};
    static const char *const bad[] = {"--proxy-protocol", "--proxy-timeout", "0", NULL};
    static const char v1[] = "PROXY TCP4 192.0.2.1 127.0.0.1 40000 9876\r\n";
    enum { FLOOD = 120, CAP = 40 };
    struct daemon d;
    int ap, prox, silent, slowh, flood[FLOOD], shed = 0;
    char buf[64];
    ssize_t n;
    long t0;

    (void)state;
    bad_start(bad, 2, "--proxy-timeout: '0' is not a duration of 1ms to 86400s");
    start(&d, args);
    ap = admin_port(&d);
    prox = tcp_connect(d.port);
    silent = tcp_connect(d.port);
    slowh = tcp_connect(d.port);
    t0 = now_ms();
    send_all(prox, "PROX", 4);
    for (size_t i = 0; i < sizeof(v1) - 1; i += 4) { /* 11 pieces over about 1.1 s */
        send_all(slowh, v1 + i, sizeof(v1) - 1 - i < 4 ? sizeof(v1) - 1 - i : 4);
        sleep_ms(100);
    }
    ask(slowh, "slow header\n", "slow header\n");
    /* not before its time: still open 1.9 s after the accept */
    if (now_ms() - t0 < 1900)
        assert_int_equal(wait_read(prox, buf, sizeof(buf), &n, 1900 - (now_ms() - t0)), -1);
    if (!closed_within(prox, 10000) || !closed_within(silent, 10000))
        fail_msg("a connection without its header is still open %ld ms after its accept",
                 now_ms() - t0);
    ask(slowh, "and on\n", "and on\n"); /* its deadline ended with its header */
    close(slowh);
    /* the clients saw the sweep's shutdown; the workers' close may come a little later */
    assert_true(none_live_within(ap, 5000)); /* and the flood meets an empty daemon */
    assert_true(metric(ap, "lfepolld_worker_proxy_bad_total") == 2);

    for (int i = 0; i < FLOOD; i++) {
        flood[i] = tcp_connect(d.port);
        send(flood[i], "PROX", 4, MSG_NOSIGNAL);
    }
    sleep_ms(300);
    if (metric(ap, "lfepolld_connections") > CAP)
        fail_msg("%.0f connections live, over --max-conns %d", metric(ap, "lfepolld_connections"),
                 CAP);
    t0 = now_ms();
    for (int i = 0; i < FLOOD; i++) {
        if (!closed_within(flood[i], 10000))
            fail_msg("flooding connection %d still open %ld ms after the flood", i, now_ms() - t0);
        close(flood[i]);
    }
    assert_true(none_live_within(ap, 5000));
    shed = (int)metric(ap, "lfepolld_accept_shed_total");
    if (shed != FLOOD - CAP || metric(ap, "lfepolld_worker_proxy_bad_total") != 2 + CAP)
        fail_msg("want %d shed at the accept and %d bad headers: %d and %.0f", FLOOD - CAP, 2 + CAP,
                 shed, metric(ap, "lfepolld_worker_proxy_bad_total"));
    prox = tcp_connect(d.port);
    send_all(prox, v1, sizeof(v1) - 1);
    ask(prox, "after the flood\n", "after the flood\n");
    close(prox);
    close(silent);
    assert_int_equal(stop_daemon(&d, SIGTERM, 10000), 0);
    assert_non_null(strstr(log_text(&d), "no whole PROXY header within 2000 ms of its accept"));
    cleanup(&d);

    start(&d, lua);
    prox = tcp_connect(d.port);
    send_all(prox, "PROX", 4);
    assert_true(closed_within(prox, 10000));
    close(prox);
    prox = tcp_connect(d.port);
    send_all(prox, v1, sizeof(v1) - 1);
    ask(prox, "closes idle\n", "0\n");
    ask(prox, "closes io_error\n", "0\n");
    close(prox);
    assert_int_equal(stop_daemon(&d, SIGTERM, 10000), 0);
    cleanup(&d);
}

/* A real HAProxy in front, one frontend with send-proxy (v1), one with send-proxy-v2, each
 * backend health-checked with check-send-proxy every 100 ms: a client through either one is
 * seen by the script at its own address and port, and the health checks cost no proxy_bad. */
static void test_haproxy(void **state)
{
    static const char *const args[] = {"--lua",   "tests/lua/peer.lua", "--proxy-protocol",
                                       "--admin", "127.0.0.1:0",        NULL};
    struct daemon d;
    char cfg[] = "/tmp/lfe-haproxy-XXXXXX", want[64];
    int ap, p1, p2, fd, status;
    FILE *f;
    pid_t hp;

    (void)state;
    if (access("/usr/sbin/haproxy", X_OK) != 0)
        fail_msg("haproxy is not installed: run make deps (Debian package haproxy)");
    start(&d, args);
    ap = admin_port(&d);
    p1 = free_port();
    p2 = free_port();
    fd = mkstemp(cfg);
    assert_true(fd >= 0);
    f = fdopen(fd, "w");
    fprintf(f,
            "global\n  maxconn 200\n"
            "defaults\n  mode tcp\n  timeout connect 2s\n  timeout client 10s\n"
            "  timeout server 10s\n"
            "frontend v1\n  bind 127.0.0.1:%d\n  default_backend v1\n"
            "backend v1\n  server s 127.0.0.1:%d send-proxy check inter 100ms check-send-proxy\n"
            "frontend v2\n  bind 127.0.0.1:%d\n  default_backend v2\n"
            "backend v2\n  server s 127.0.0.1:%d send-proxy-v2 check inter 100ms "
            "check-send-proxy\n",
            p1, d.port, p2, d.port);
    fclose(f);
    hp = fork();
    if (hp == 0) {
        int null = open("/dev/null", O_WRONLY);

        dup2(null, 1);
        execl("/usr/sbin/haproxy", "haproxy", "-db", "-q", "-f", cfg, (char *)NULL);
        _exit(127);
    }
    assert_true(hp > 0);
    haproxy_pid = hp;
    for (int port = p1, round = 0; round < 2; round++, port = p2) {
        struct sockaddr_in me;
        socklen_t ml = sizeof(me);
        long deadline = now_ms() + 10000 * slow;
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};

        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        for (;;) { /* until HAProxy listens */
            fd = socket(AF_INET, SOCK_STREAM, 0);
            if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
                break;
            close(fd);
            if (now_ms() > deadline || waitpid(hp, &status, WNOHANG) == hp)
                fail_msg("HAProxy did not listen on %d", port);
            sleep_ms(50);
        }
        getsockname(fd, (struct sockaddr *)&me, &ml);
        snprintf(want, sizeof(want), "127.0.0.1:%d\n", ntohs(me.sin_port));
        ask(fd, "peer\n", want);
        ask(fd, "through HAProxy\n", "through HAProxy\n");
        close(fd);
    }
    sleep_ms(500); /* a few health checks, each a connection with a header and nothing more */
    kill(hp, SIGTERM);
    waitpid(hp, &status, 0);
    haproxy_pid = -1;
    unlink(cfg);
    assert_true(metric(ap, "lfepolld_worker_proxy_bad_total") == 0);
    assert_true(metric(ap, "lfepolld_worker_accepted_total") >= 4);
    assert_int_equal(stop_daemon(&d, SIGTERM, 10000), 0);
    cleanup(&d);
}

/* --defer-accept: short connections are served byte-exactly; a client that has sent nothing is
 * not accepted yet (the live count stays 0) and is served once it sends; a script whose
 * on_connect may speak first is refused with one line. */
static void test_defer_accept(void **state)
{
    static const char *const args[] = {"--defer-accept", "--admin", "127.0.0.1:0", NULL};
    static const char *const bad[] = {"--defer-accept", "--lua", "tests/lua/ctx.lua", NULL};
    struct daemon d;
    int ap, silent;

    (void)state;
    bad_start(bad, 2, "--defer-accept with tests/lua/ctx.lua, whose on_connect may speak first");
    start(&d, args);
    ap = admin_port(&d);
    for (int i = 0; i < 200; i++) {
        int fd = tcp_connect(d.port);

        ask(fd, "short\n", "short\n");
        close(fd);
    }
    silent = tcp_connect(d.port);
    sleep_ms(200);
    assert_true(metric(ap, "lfepolld_connections") == 0);
    ask(silent, "late\n", "late\n");
    close(silent);
    assert_int_equal(stop_daemon(&d, SIGTERM, 10000), 0);
    cleanup(&d);
}

/* --defer-accept and a stop: a client whose connect() returned but who has sent nothing yet
 * waits in the kernel's SYN queue, where no accept4 can reach it. The stop keeps accepting
 * until the kernel's one-second defer period has made every such connection acceptable, so the
 * client's first bytes, sent 400 ms into the stop, are echoed or meet a close, never a reset.
 * (The stop once closed the listeners after 100 ms without an accept: all 8 clients reset.) */
static void test_defer_accept_stop_resets_nothing(void **state)
{
    static const char *const args[] = {"--defer-accept", "--accept-threads", "2", NULL};
    struct daemon d;
    int fds[8], resets = 0;

    (void)state;
    start(&d, args);
    for (int i = 0; i < 8; i++)
        fds[i] = tcp_connect(d.port);
    sleep_ms(50);
    kill(d.pid, SIGTERM);
    sleep_ms(400);
    for (int i = 0; i < 8; i++) {
        struct pollfd p = {.fd = fds[i], .events = POLLIN};
        char buf[8];
        ssize_t n = send(fds[i], "late\n", 5, MSG_NOSIGNAL);

        if (n == 5 && poll(&p, 1, 5000 * slow) == 1)
            n = read(fds[i], buf, sizeof(buf));
        if (n < 0 && (errno == ECONNRESET || errno == EPIPE))
            resets++;
        else if (n != 0 && (n != 5 || memcmp(buf, "late\n", 5)))
            fail_msg("client %d: neither its echo nor a close (%zd: %s)", i, n, strerror(errno));
        close(fds[i]);
    }
    assert_int_equal(stop_daemon(&d, 0, 10000), 0);
    if (resets)
        fail_msg("%d of 8 connected clients reset by a stop under --defer-accept", resets);
    cleanup(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_idle_timeout, teardown),
        cmocka_unit_test_teardown(test_idle_race, teardown),
        cmocka_unit_test_teardown(test_idle_timeout_lua, teardown),
        cmocka_unit_test_teardown(test_idle_closes_a_sender_that_never_reads, teardown),
        cmocka_unit_test_teardown(test_idle_closes_a_half_closed_peer_that_never_reads, teardown),
        cmocka_unit_test_teardown(test_idle_keeps_a_slow_steady_reader, teardown),
        cmocka_unit_test_teardown(test_solo_group_sleeps_while_clients_hold_still, teardown),
        cmocka_unit_test_teardown(test_solo_group_sleeps_while_lua_clients_hold_still, teardown),
        cmocka_unit_test_teardown(test_proxy_echo, teardown),
        cmocka_unit_test_teardown(test_proxy_lua_peer_and_limit, teardown),
        cmocka_unit_test_teardown(test_proxy_header_deadline, teardown),
        cmocka_unit_test_teardown(test_haproxy, teardown_haproxy),
        cmocka_unit_test_teardown(test_defer_accept, teardown),
        cmocka_unit_test_teardown(test_defer_accept_stop_resets_nothing, teardown),
    };

    if (harness_init() < 0)
        return 1;
    return cmocka_run_group_tests(tests, NULL, NULL);
}
