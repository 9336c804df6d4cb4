/* test_admin: lfepolld --admin: /metrics as a real Prometheus reads it (promtool, and a
 * Prometheus server scraping it), /health through a stuck worker and a drain, /stats, and
 * hostile admin clients that must not stop the scrapes or the echo service. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/* Sends line on a new connection and expects want back (bounded: never hangs the run). */
static void round_trip(int port, const char *line, const char *want)
{
    int fd = tcp_connect(port);
    size_t wl = strlen(want), got = 0;
    char buf[64];

    send_all(fd, line, strlen(line));
    while (got < wl) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        ssize_t n;

        if (poll(&p, 1, 5000 * slow) <= 0)
            break;
        if ((n = read(fd, buf + got, wl - got)) <= 0)
            break;
        got += (size_t)n;
    }
    if (got != wl || memcmp(buf, want, wl) != 0)
        fail_msg("sent '%s': want '%s', got '%.*s'", line, want, (int)got, buf);
    close(fd);
}

static void echo_round(int port)
{
    round_trip(port, "ping\n", "ping\n");
}

static void start(struct daemon *d, const char *const *args)
{
    if (spawn(d, args, 0, NULL) < 0)
        fail_msg("lfepolld did not start: %s", log_text(d));
}

/* promtool (Debian's prometheus) accepts what /metrics writes: exit 0, no lint complaint. */
static void promtool_check(const char *body)
{
    char path[] = "/tmp/lfe-metrics-XXXXXX", cmd[256];
    int fd = mkstemp(path), rc;

    assert_true(fd >= 0);
    assert_int_equal(write(fd, body, strlen(body)), (ssize_t)strlen(body));
    close(fd);
    if (system("command -v promtool >/dev/null") != 0) {
        unlink(path);
        if (getenv("CI"))
            fail_msg("promtool is not installed (Debian package prometheus; make deps)");
        print_message("promtool not installed: skipping its check (make deps installs it)\n");
        return;
    }
    snprintf(cmd, sizeof(cmd), "promtool check metrics < %s 2>&1", path);
    rc = system(cmd);
    unlink(path);
    if (rc != 0)
        fail_msg("promtool check metrics failed (output above)");
}

static void test_metrics_counters_and_histogram(void **state)
{
    static const char *const args[] = {"--admin", "127.0.0.1:0", "--workers", "2", NULL};
    struct daemon d;
    int ap, fds[5];
    char *body;
    double events, count;

    (void)state;
    start(&d, args);
    ap = admin_port(&d);
    assert_int_equal(http_get(ap, "/metrics", &body), 200);
    promtool_check(body);
    assert_true(metric_sum(body, "lfepolld_connections") == 0);
    free(body);
    for (int i = 0; i < 5; i++)
        fds[i] = tcp_connect(d.port);
    for (int i = 0; i < 40; i++)
        echo_round(d.port);
    sleep_ms(200);
    assert_int_equal(http_get(ap, "/metrics", &body), 200);
    promtool_check(body);
    assert_true(metric_sum(body, "lfepolld_connections") == 5);
    assert_true(metric_sum(body, "lfepolld_accept_accepted_total") == 45);
    assert_true(metric_sum(body, "lfepolld_worker_bytes_out_total") == 200);
    /* Every event handled is one observation of the service-time histogram. */
    events = metric_sum(body, "lfepolld_worker_events_total");
    count = metric_sum(body, "lfepolld_service_seconds_count");
    if (events < 80 || count != events)
        fail_msg("events %g, service-time observations %g", events, count);
    assert_non_null(strstr(body, "lfepolld_service_seconds_bucket{group=\"0\",le=\"+Inf\"}"));
    assert_true(metric_sum(body, "process_open_fds") > 5);
    assert_true(metric_sum(body, "process_resident_memory_bytes") > 0);
    free(body);
    for (int i = 0; i < 5; i++)
        close(fds[i]);
    /* /stats is the SIGUSR1 text */
    assert_int_equal(http_get(ap, "/stats", &body), 200);
    assert_non_null(strstr(body, "stats: total live="));
    assert_non_null(strstr(body, "stats: accept: accepted=45"));
    free(body);
    assert_int_equal(stop_daemon(&d, SIGTERM, 10000), 0);
    cleanup(&d);
}

static void test_metrics_lua(void **state)
{
    static const char *const args[] = {"--admin", "127.0.0.1:0", "--lua", "lua/kv.lua", NULL};
    struct daemon d;
    char *body;

    (void)state;
    start(&d, args);
    assert_int_equal(http_get(admin_port(&d), "/metrics", &body), 200);
    promtool_check(body);
    assert_true(metric_sum(body, "lfepolld_lua_memory_bytes") >= 0);
    assert_true(metric_sum(body, "lfepolld_lua_generation") == 1);
    free(body);
    assert_int_equal(stop_daemon(&d, SIGTERM, 10000), 0);
    cleanup(&d);
}

/* A worker stuck in C inside a callback (os.execute("sleep 3"), where the timeout's hook cannot
 * reach) past --lua-timeout-ms: /health is 503 while it is stuck, 200 again after. */
static void test_health_stuck_worker(void **state)
{
    static const char *const args[] = {"--admin",
                                       "127.0.0.1:0",
                                       "--lua",
                                       "tests/lua/sleepy.lua",
                                       "--lua-unsafe",
                                       "--lua-timeout-ms",
                                       "300",
                                       "--workers",
                                       "2",
                                       NULL};
    struct daemon d;
    int ap, fd, code;
    bool saw503 = false;
    long deadline;
    char *body;

    (void)state;
    start(&d, args);
    ap = admin_port(&d);
    assert_int_equal(http_get(ap, "/health", NULL), 200);
    fd = tcp_connect(d.port);
    send_all(fd, "sleep 3\n", 8);
    deadline = now_ms() + 2800;
    while (!saw503 && now_ms() < deadline) {
        code = http_get(ap, "/health", &body);
        if (code == 503) {
            saw503 = true;
            assert_non_null(strstr(body, "inside one batch for more than 300 ms"));
        } else {
            assert_int_equal(code, 200);
        }
        free(body);
        sleep_ms(50);
    }
    assert_true(saw503);
    free(read_all(fd, 6000)); /* "slept", or the timeout's close */
    close(fd);
    deadline = now_ms() + 5000L * slow;
    while ((code = http_get(ap, "/health", NULL)) != 200 && now_ms() < deadline)
        sleep_ms(50);
    assert_int_equal(code, 200);
    round_trip(d.port, "x\n", "ok\n");
    assert_int_equal(stop_daemon(&d, SIGTERM, 10000), 0);
    cleanup(&d);
}

/* While the daemon drains (a callback still running at SIGTERM), /health answers 503
 * "draining", and the admin listener is the last thing to close. */
static void test_health_draining(void **state)
{
    static const char *const args[] = {"--admin",
                                       "127.0.0.1:0",
                                       "--lua",
                                       "tests/lua/sleepy.lua",
                                       "--lua-unsafe",
                                       "--lua-timeout-ms",
                                       "0",
                                       "--drain-timeout",
                                       "5s",
                                       NULL};
    struct daemon d;
    int ap, fd, code = 0;
    long deadline;
    char *body = NULL;

    (void)state;
    start(&d, args);
    ap = admin_port(&d);
    fd = tcp_connect(d.port);
    send_all(fd, "sleep 2\n", 8);
    sleep_ms(200);
    kill(d.pid, SIGTERM);
    deadline = now_ms() + 1500;
    while (now_ms() < deadline) {
        free(body);
        body = NULL;
        code = http_get(ap, "/health", &body);
        if (code == 503 && strstr(body, "draining"))
            break;
        sleep_ms(20);
    }
    if (code != 503 || !strstr(body, "draining"))
        fail_msg("during the drain /health said %d '%s'", code, body ? body : "");
    free(body);
    free(read_all(fd, 5000));
    close(fd);
    assert_int_equal(stop_daemon(&d, SIGTERM, 10000), 0);
    cleanup(&d);
}

/* Hostile admin clients: garbage, a wrong method, an unknown path, an endless header, and more
 * half-open connections than there are slots. Each gets its status or is let go; scrapes and
 * the echo service go on. */
static void test_admin_hostile_clients(void **state)
{
    static const char *const args[] = {"--admin", "127.0.0.1:0", NULL};
    struct daemon d;
    int ap, idle[40];
    char *r, *big;

    (void)state;
    start(&d, args);
    ap = admin_port(&d);
    r = http_raw(ap, "\x01\x02garbage\r\n\r\n");
    assert_true(strncmp(r, "HTTP/1.1 400 ", 13) == 0);
    free(r);
    r = http_raw(ap, "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
    assert_true(strncmp(r, "HTTP/1.1 405 ", 13) == 0);
    assert_non_null(strstr(r, "Allow: GET, HEAD"));
    free(r);
    assert_int_equal(http_get(ap, "/nope", NULL), 404);
    r = http_raw(ap, "HEAD /metrics HTTP/1.1\r\n\r\n");
    assert_true(strncmp(r, "HTTP/1.1 200 ", 13) == 0);
    assert_non_null(strstr(r, "\r\n\r\n"));
    assert_true(strstr(r, "\r\n\r\n")[4] == '\0'); /* HEAD: no body */
    free(r);
    big = malloc(20000);
    memcpy(big, "GET /metrics HTTP/1.1\r\nX: ", 26);
    memset(big + 26, 'a', 20000 - 27);
    big[20000 - 1] = '\0';
    r = http_raw(ap, big);
    assert_true(strncmp(r, "HTTP/1.1 431 ", 13) == 0);
    free(r);
    free(big);
    /* Lines that end in LF alone (RFC 9112 section 2.2 lets a server accept them), or mixed:
     * each is the request the CRLF form is, not a 400. */
    {
        static const char *const heads[] = {
            "GET /health HTTP/1.1\nHost: x\n\n",
            "GET /health HTTP/1.1\r\nHost: x\n\n",
            "GET /health HTTP/1.1\nHost: x\r\n\r\n",
            "GET /health HTTP/1.0\n\r\n",
        };

        for (size_t i = 0; i < sizeof(heads) / sizeof(heads[0]); i++) {
            r = http_raw(ap, heads[i]);
            if (strncmp(r, "HTTP/1.1 200 ", 13) != 0)
                fail_msg("request %zu (LF line ends): want 200, got '%.40s'", i, r);
            free(r);
        }
        r = http_raw(ap, "GET /nope HTTP/1.1\n\n");
        assert_true(strncmp(r, "HTTP/1.1 404 ", 13) == 0);
        free(r);
    }
    /* Pipelined requests: the first is answered, the connection closes cleanly (no reset eats
     * the answer). */
    r = http_raw(ap, "GET /health HTTP/1.1\r\n\r\nGET /health HTTP/1.1\r\n\r\n");
    assert_true(strncmp(r, "HTTP/1.1 200 ", 13) == 0);
    free(r);
    /* 40 clients that connect and say half a request, more than the 32 slots */
    for (int i = 0; i < 40; i++) {
        idle[i] = tcp_connect(ap);
        send_all(idle[i], "GET /met", 8);
    }
    sleep_ms(100);
    for (int i = 0; i < 3; i++) {
        char *body;
        assert_int_equal(http_get(ap, "/metrics", &body), 200);
        assert_non_null(strstr(body, "lfepolld_build_info"));
        free(body);
    }
    echo_round(d.port);
    for (int i = 0; i < 40; i++)
        close(idle[i]);
    assert_int_equal(stop_daemon(&d, SIGTERM, 10000), 0);
    assert_non_null(strstr(log_text(&d), "the oldest closed to make room"));
    cleanup(&d);
}

/* CPU ticks (utime + stime) of the daemon's thread named comm, or -1. */
static long thread_ticks(pid_t pid, const char *comm)
{
    char path[96], buf[512];
    long ticks = -1;

    for (int tid = pid; tid < pid + 64 && ticks < 0; tid++) {
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)pid, tid);
        if (!(f = fopen(path, "r")))
            continue;
        if (fgets(buf, sizeof(buf), f) && strncmp(buf, comm, strlen(comm)) == 0) {
            unsigned long ut, st;
            const char *p;
            FILE *g;

            snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, tid);
            if ((g = fopen(path, "r"))) {
                if (fgets(buf, sizeof(buf), g) && (p = strrchr(buf, ')')) &&
                    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut,
                           &st) == 2)
                    ticks = (long)(ut + st);
                fclose(g);
            }
        }
        fclose(f);
    }
    return ticks;
}

/* Issue 23, daemon 5: out of descriptors, the admin thread spun on its level-triggered listener
 * (198 of 200 ticks in 2 s) and answered nothing. Now its listener rests ADMIN_RETRY_MS at a
 * time: the thread sleeps while accept4 fails, and /health answers once descriptors are back. */
static void test_admin_at_emfile_does_not_spin(void **state)
{
    static const char *const args[] = {"--admin",     "127.0.0.1:0", "--workers", "1",
                                       "--max-conns", "1000",        NULL};
    struct daemon d;
    int ap, fds[200], waiting;
    long t0, t1;

    (void)state;
    if (spawn(&d, args, 120, NULL) < 0) /* --max-conns over what 120 leaves: EMFILE */
        fail_msg("lfepolld did not start: %s", log_text(&d));
    ap = admin_port(&d);
    for (int i = 0; i < 200; i++)
        fds[i] = tcp_connect(d.port);
    sleep_ms(300);
    waiting = tcp_connect(ap); /* in the admin backlog: accept4 says EMFILE */
    send_all(waiting, "GET /health HTTP/1.1\r\n\r\n", 24);
    sleep_ms(300);
    t0 = thread_ticks(d.pid, "lfe-admin");
    sleep_ms(2000);
    t1 = thread_ticks(d.pid, "lfe-admin");
    assert_true(t0 >= 0 && t1 >= 0);
    if (t1 - t0 > 40) /* the whole thread, 2 s = 200 ticks at 100 Hz: spinning took 198 */
        fail_msg("the admin thread used %ld of 200 ticks while accept4 failed", t1 - t0);
    for (int i = 0; i < 200; i++)
        close(fds[i]);
    {
        char *r = read_all(waiting, 10000);

        if (strncmp(r, "HTTP/1.1 200 ", 13) != 0)
            fail_msg("the /health that waited out the EMFILE got '%.40s'", r);
        free(r);
    }
    close(waiting);
    assert_int_equal(http_get(ap, "/health", NULL), 200);
    assert_int_equal(stop_daemon(&d, SIGTERM, 10000), 0);
    assert_non_null(strstr(log_text(&d), "admin: accept: Too many open files"));
    cleanup(&d);
}

/* Issue 23, daemon 5: the descriptors kept out of --max-conns were 8, fewer than the admin
 * connections (32): with the daemon at its connection limit, a few slow admin clients left
 * /health nothing to answer with. Now the admin's share is kept: at the limit, with 20 admin
 * clients holding half a request, /health and /metrics still answer. */
static void test_admin_answers_at_max_conns(void **state)
{
    static const char *const args[] = {"--admin", "127.0.0.1:0", "--workers", "1", NULL};
    struct daemon d;
    int ap, fds[250], slow_clients[20];

    (void)state;
    if (spawn(&d, args, 200, NULL) < 0)
        fail_msg("lfepolld did not start: %s", log_text(&d));
    ap = admin_port(&d);
    for (int i = 0; i < 250; i++) /* more than the limit: the rest are shed */
        fds[i] = tcp_connect(d.port);
    sleep_ms(300);
    for (int i = 0; i < 20; i++) {
        slow_clients[i] = tcp_connect(ap);
        send_all(slow_clients[i], "GET /he", 7);
    }
    sleep_ms(200);
    for (int i = 0; i < 3; i++) {
        char *body = NULL;

        assert_int_equal(http_get(ap, "/health", NULL), 200);
        assert_int_equal(http_get(ap, "/metrics", &body), 200);
        assert_true(metric_sum(body, "lfepolld_accept_shed_total") > 0);
        free(body);
    }
    for (int i = 0; i < 20; i++)
        close(slow_clients[i]);
    for (int i = 0; i < 250; i++)
        close(fds[i]);
    assert_int_equal(stop_daemon(&d, SIGTERM, 10000), 0);
    assert_null(strstr(log_text(&d), "admin: accept:"));
    cleanup(&d);
}

static void test_admin_bad_flags(void **state)
{
    static const char *const bad[] = {"--admin", "nowhere", NULL};
    static const char *const fmt[] = {"--log-format", "xml", NULL};
    struct daemon d;
    static const char *args[] = {"--admin", NULL, "--backlog", "128", NULL};
    char addr[32];

    (void)state;
    bad_start(bad, 2, "--admin: 'nowhere' is not HOST:PORT");
    bad_start(fmt, 2, "--log-format: 'xml' is not a format; use text or json");
    /* the admin port taken by the daemon's own listener: a clear line, exit 1 */
    {
        static const char *const first[] = {NULL};
        start(&d, first);
        snprintf(addr, sizeof(addr), "127.0.0.1:%d", d.port);
        args[1] = addr;
        bad_start(args, 1, "--admin: cannot listen on");
        assert_int_equal(stop_daemon(&d, SIGTERM, 10000), 0);
        cleanup(&d);
    }
}

/* --log-format json: every line of a run (start, a Lua log line with hostile bytes, stop) is one
 * JSON object that Python's json module reads, with the message intact. */
static void test_log_format_json(void **state)
{
    static const char *const args[] = {"--log-format", "json", "--lua", "tests/lua/hostile.lua",
                                       NULL};
    struct daemon d;
    char cmd[256];
    int fd;
    char buf[3];

    (void)state;
    start(&d, args);
    fd = tcp_connect(d.port);
    send_all(fd, "a\"b\\c\x1b[31m\xff\xfe\n", 14);
    assert_int_equal(read(fd, buf, 3), 3);
    close(fd);
    sleep_ms(100);
    assert_int_equal(stop_daemon(&d, SIGTERM, 10000), 0);
    snprintf(cmd, sizeof(cmd),
             "python3 -c 'import json,sys\n"
             "n=0\n"
             "for l in open(sys.argv[1]):\n"
             "  o=json.loads(l); assert set(o)=={\"time\",\"level\",\"pid\",\"msg\"}, o; n+=1\n"
             "assert n>=5, n' %s",
             d.log);
    if (system(cmd) != 0)
        fail_msg("a log line is not one JSON object:\n%s", log_text(&d));
    assert_non_null(strstr(log_text(&d), "\"msg\":\"listening on 127.0.0.1:"));
    cleanup(&d);
}

/* A real Prometheus server scrapes lfepolld every second; its query API returns the live
 * connection count the test holds open. */
static void test_prometheus_scrapes(void **state)
{
    static const char *const args[] = {"--admin", "127.0.0.1:0", NULL};
    char dir[] = "/tmp/lfe-prom-XXXXXX", path[256], cmd[1024], url[256];
    struct daemon d;
    int ap, pport, fds[7], rc;
    pid_t prom;
    long deadline;
    bool seen = false;
    FILE *f;

    (void)state;
    if (access("/usr/bin/prometheus", X_OK) != 0) {
        if (getenv("CI"))
            fail_msg("/usr/bin/prometheus is missing (Debian package prometheus; make deps)");
        print_message("prometheus not installed: skipping (make deps installs it)\n");
        return;
    }
    start(&d, args);
    ap = admin_port(&d);
    for (int i = 0; i < 7; i++)
        fds[i] = tcp_connect(d.port);
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/prometheus.yml", dir);
    f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f,
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
            "scrape_configs:\n  - job_name: lfepolld\n    static_configs:\n"
            "      - targets: ['127.0.0.1:%d']\n",
            ap);
    fclose(f);
    { /* a free port for its web API */
        struct sockaddr_in a = {.sin_family = AF_INET};
        socklen_t al = sizeof(a);
        int s = socket(AF_INET, SOCK_STREAM, 0);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
        getsockname(s, (struct sockaddr *)&a, &al);
        pport = ntohs(a.sin_port);
        close(s);
    }
    prom = fork();
    assert_true(prom >= 0);
    if (prom == 0) {
        char cfg[300], data[300], web[64];
        int null = open("/dev/null", O_WRONLY);

        snprintf(cfg, sizeof(cfg), "--config.file=%s", path);
        snprintf(data, sizeof(data), "--storage.tsdb.path=%s/data", dir);
        snprintf(web, sizeof(web), "--web.listen-address=127.0.0.1:%d", pport);
        dup2(null, 1);
        dup2(null, 2);
        execl("/usr/bin/prometheus", "prometheus", cfg, data, web, (char *)NULL);
        _exit(127);
    }
    snprintf(url, sizeof(url), "/api/v1/query?query=sum(lfepolld_connections)");
    deadline = now_ms() + 60000;
    while (!seen && now_ms() < deadline) {
        int fd;
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)pport)};

        sleep_ms(500);
        fd = socket(AF_INET, SOCK_STREAM, 0);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
            char req[512], *r;

            snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                     url);
            send_all(fd, req, strlen(req));
            r = read_all(fd, 5000);
            /* {"status":"success","data":{"resultType":"vector","result":[{"metric":{},
             * "value":[1795481226.6,"7"]}]}} */
            seen = strstr(r, "\"status\":\"success\"") && strstr(r, ",\"7\"]");
            free(r);
        }
        close(fd);
    }
    kill(prom, SIGTERM);
    waitpid(prom, &rc, 0);
    for (int i = 0; i < 7; i++)
        close(fds[i]);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0)
        print_message("could not remove %s\n", dir);
    if (!seen)
        fail_msg("Prometheus never returned 7 live connections for sum(lfepolld_connections)");
    assert_int_equal(stop_daemon(&d, SIGTERM, 10000), 0);
    cleanup(&d);
}

/* --max-conns-per-ip 3: from one address the 4th and 5th connections are closed at once and
 * counted; other addresses are counted apart; a close makes room again; 300 addresses, each
 * at its limit, are all served (the table holds them). */
static void test_max_conns_per_ip(void **state)
{
    static const char *const args[] = {"--admin", "127.0.0.1:0", "--max-conns-per-ip", "3", NULL};
    static const char *const bad[] = {"--max-conns-per-ip", "-1", NULL};
    struct daemon d;
    int ap, fds[5], other, many[300], served = 0, freed = 0;
    char *body, src[32];

    (void)state;
    bad_start(bad, 2, "--max-conns-per-ip: '-1' is not an integer from 0 (no limit)");
    start(&d, args);
    ap = admin_port(&d);
    for (int i = 0; i < 5; i++)
        fds[i] = connect_from(d.port, "127.0.0.1");
    if (getenv("LFE_ACCEPT_THREADS")) {
        /* several accept threads take the five in no fixed order: any three are served */
        for (int i = 0; i < 5; i++)
            if (echoes(fds[i]) && served++ == 0)
                freed = i; /* a served one: closing it frees a slot (fds[0] may be a shed one) */
        if (served != 3)
            fail_msg("%d of 5 connections from 127.0.0.1 served: want 3", served);
        served = 0;
    } else {
        for (int i = 0; i < 5; i++)
            if (echoes(fds[i]) != (i < 3))
                fail_msg("connection %d from 127.0.0.1: want %s", i, i < 3 ? "served" : "closed");
    }
    other = connect_from(d.port, "127.0.0.2");
    assert_true(echoes(other));
    assert_int_equal(http_get(ap, "/metrics", &body), 200);
    assert_true(metric_sum(body, "lfepolld_accept_shed_per_ip_total") == 2);
    free(body);
    close(fds[freed]);
    sleep_ms(200L * slow); /* the worker's close frees the slot (TSan with two accept threads
                            * once took longer than 200 ms, loaded by parallel builds) */
    fds[freed] = connect_from(d.port, "127.0.0.1");
    assert_true(echoes(fds[freed]));
    for (int i = 0; i < 300; i++) {
        snprintf(src, sizeof(src), "127.1.%d.%d", i / 200, i % 200 + 1);
        many[i] = connect_from(d.port, src);
    }
    for (int i = 0; i < 300; i++) {
        served += echoes(many[i]);
        close(many[i]);
    }
    assert_int_equal(served, 300);
    for (int i = 0; i < 5; i++)
        close(fds[i]);
    close(other);
    assert_int_equal(stop_daemon(&d, SIGTERM, 10000), 0);
    assert_non_null(strstr(log_text(&d), "shed_per_ip=2"));
    cleanup(&d);
}

/* --max-conns-per-ip with several accept threads: each takes its connections from its own shard
 * at the same moment as the others, and a client address's count is one count whichever thread
 * accepted. Bursts of 8 connections from each of 8 fresh addresses, up to 1000 times (8 s),
 * under a limit of 1: each address is served exactly once. (The accept threads once shared the
 * table's free slots unlocked: two could claim one slot for one address at once, both storing 1,
 * and serve two; the two closes then left the slot at -1, lost to every address for good.) */
static void test_max_conns_per_ip_accept_threads(void **state)
{
    static const char *const args[] = {"--max-conns-per-ip", "1", "--accept-threads", "4", NULL};
    struct daemon d;
    int fds[8][8];
    char src[32];
    long end;

    (void)state;
    start(&d, args);
    end = now_ms() + 8000; /* a race: the more rounds, the surer (about 0.5 s for 120) */
    for (int r = 0; r < 1000 && now_ms() < end; r++) {
        for (int k = 0; k < 8; k++)
            for (int a = 0; a < 8; a++) {
                snprintf(src, sizeof(src), "127.%d.%d.%d", 3 + r / 250, r % 250 + 1, a + 1);
                fds[a][k] = connect_from(d.port, src);
            }
        for (int a = 0; a < 8; a++) {
            int served = 0;

            /* all eight asked before any closes: a close would make room for one still queued */
            for (int k = 0; k < 8; k++)
                served += echoes(fds[a][k]);
            for (int k = 0; k < 8; k++)
                close(fds[a][k]);
            if (served != 1)
                fail_msg("round %d: %d of 8 connections from 127.%d.%d.%d served under "
                         "--max-conns-per-ip 1",
                         r, served, 3 + r / 250, r % 250 + 1, a + 1);
        }
    }
    assert_int_equal(stop_daemon(&d, SIGTERM, 10000), 0);
    cleanup(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_metrics_counters_and_histogram, teardown),
        cmocka_unit_test_teardown(test_metrics_lua, teardown),
        cmocka_unit_test_teardown(test_health_stuck_worker, teardown),
        cmocka_unit_test_teardown(test_health_draining, teardown),
        cmocka_unit_test_teardown(test_admin_hostile_clients, teardown),
        cmocka_unit_test_teardown(test_admin_at_emfile_does_not_spin, teardown),
        cmocka_unit_test_teardown(test_admin_answers_at_max_conns, teardown),
        cmocka_unit_test_teardown(test_admin_bad_flags, teardown),
        cmocka_unit_test_teardown(test_log_format_json, teardown),
        cmocka_unit_test_teardown(test_prometheus_scrapes, teardown),
        cmocka_unit_test_teardown(test_max_conns_per_ip, teardown),
        cmocka_unit_test_teardown(test_max_conns_per_ip_accept_threads, teardown),
    };

    if (harness_init() < 0)
        return 1;
    return cmocka_run_group_tests(tests, NULL, NULL);
}
