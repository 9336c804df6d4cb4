/* Integration tests of lfbench --expect http: against lfepolld --lua lua/http_hello.lua (long,
 * pipelined, short and open-loop modes; keep-alive, Connection: close and HEAD request files),
 * against nginx (a static file, a chunked gzip response, a 404 counted as non-2xx, its
 * keepalive_requests closes, --ok-status), and against tests/integration/badserver.c's http
 * modes, whose malformed responses must be counted as mismatches without a hang or a crash, and
 * whose 503s above a rate must break --find-rate's steps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "lfb_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NGINX "/usr/sbin/nginx"

static const char *script;
static char tmpdir[] = "/tmp/lfe-http-XXXXXX"; /* request files, nginx's tree */

static int connect_port(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The path of tmpdir/name, written with text (static buffer, one at a time per slot). */
static const char *write_file(int slot, const char *name, const char *text, size_t len)
{
    static char path[4][256];
    int fd;

    snprintf(path[slot], sizeof(path[slot]), "%s/%s", tmpdir, name);
    fd = open(path[slot], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, len), (ssize_t)len);
    close(fd);
    return path[slot];
}

#define REQ(slot, name, text) write_file(slot, name, text, sizeof(text) - 1)

static void expect_clean(int rc, long requests)
{
    if (rc != 0 || !strstr(lfb.out, "errors       0:") ||
        (requests >= 0 && lfb_field("requests") != requests))
        fail_msg("lfbench rc=%d, want 0 and no errors (%ld requests):\n%s", rc, requests, lfb.out);
}

/* The summary's "reconnects N" and "http N" (non-2xx) lines; reconnects is printed only when
 * some happened. */
static long reconnects(void)
{
    long r = lfb_field("reconnects");
    return r < 0 ? 0 : r;
}

static void expect_non2xx(long want)
{
    if (lfb_field("http") != want)
        fail_msg("want %ld non-2xx responses in the summary's http line:\n%s", want, lfb.out);
}

static void start_hello(void)
{
    const char *srv[] = {lfb.lfepolld, "--listen", "127.0.0.1:PORT", "--lua", script, "-q", NULL};
    lfb_start(srv);
}

/* Keep-alive: one connection carries many requests, pipelined too; no reconnect. */
static void test_long_keepalive(void **state)
{
    (void)state;
    start_hello();
    expect_clean(lfb_bench(lfb.server_port, "--expect", "http", "-c", "8", "-t", "2", "-n", "5000",
                           "-q", NULL),
                 5000);
    assert_int_equal(reconnects(), 0);
    expect_non2xx(0);
    expect_clean(lfb_bench(lfb.server_port, "--expect", "http", "--pipeline", "16", "-c", "4", "-n",
                           "8000", "-q", NULL),
                 8000);
    assert_int_equal(reconnects(), 0);
}

/* A request with Connection: close: each response ends its connection, a clean reconnect,
 * never an error; the file is written with LF line ends (sent as CRLF). Pipelined, the
 * requests behind each close are sent again on the next connection. */
static void test_connection_close(void **state)
{
    const char *req = REQ(0, "close.req", "GET / HTTP/1.1\nHost: t\nConnection: close\n\n");

    (void)state;
    start_hello();
    expect_clean(lfb_bench(lfb.server_port, "--expect", "http", "--request", req, "-c", "4", "-n",
                           "1000", "-q", NULL),
                 1000);
    assert_in_range(reconnects(), 1000, 1004); /* one a response (and not the last in flight) */
    expect_clean(lfb_bench(lfb.server_port, "--expect", "http", "--request", req, "--pipeline", "4",
                           "-c", "2", "-n", "400", "-q", NULL),
                 400);
    assert_in_range(reconnects(), 400, 402);
    /* HTTP/1.0 without keep-alive closes too */
    req = REQ(1, "http10.req", "GET / HTTP/1.0\r\n\r\n");
    expect_clean(lfb_bench(lfb.server_port, "--expect", "http", "--request", req, "-c", "2", "-n",
                           "200", "-q", NULL),
                 200);
    assert_in_range(reconnects(), 200, 202);
}

/* HEAD: the response carries Content-Length: 14 and no body; a framer that did not know the
 * method would wait for 14 bytes and time out. */
static void test_head(void **state)
{
    const char *req = REQ(0, "head.req", "HEAD / HTTP/1.1\r\nHost: t\r\n\r\n");

    (void)state;
    start_hello();
    expect_clean(lfb_bench(lfb.server_port, "--expect", "http", "--request", req, "--pipeline", "4",
                           "--timeout", "2000ms", "-c", "2", "-n", "2000", "-q", NULL),
                 2000);
}

static void test_short_mode(void **state)
{
    const char *req = REQ(0, "close.req", "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");

    (void)state;
    start_hello();
    /* keep-alive responses: the client closes after each */
    expect_clean(lfb_bench(lfb.server_port, "--expect", "http", "--mode", "short", "-c", "8", "-n",
                           "1000", "-q", NULL),
                 1000);
    assert_int_equal(lfb_field("connections"), 1000);
    /* the server closes after each */
    expect_clean(lfb_bench(lfb.server_port, "--expect", "http", "--mode", "short", "--request", req,
                           "-c", "8", "-n", "1000", "-q", NULL),
                 1000);
}

static void test_open_loop(void **state)
{
    const char *req = REQ(0, "close.req", "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");

    (void)state;
    start_hello();
    expect_clean(lfb_bench(lfb.server_port, "--expect", "http", "-R", "1000", "-d", "2", "-c", "10",
                           "-q", NULL),
                 -1);
    assert_in_range(lfb_field("requests"), 1800, 2050);
    assert_int_equal(lfb_field("unsent"), 0);
    expect_clean(lfb_bench(lfb.server_port, "--expect", "http", "--request", req, "-R", "500", "-d",
                           "1", "-c", "10", "-q", NULL),
                 -1);
    assert_in_range(lfb_field("requests"), 450, 520);
    assert_true(reconnects() >= 450);
    expect_clean(lfb_bench(lfb.server_port, "--expect", "http", "--mode", "short", "-R", "500",
                           "-d", "1", "-c", "10", "-q", NULL),
                 -1);
    assert_in_range(lfb_field("requests"), 450, 520);
}

/* One raw request to the server; the whole response up to the close, in buf. */
static size_t fetch(int port, const char *req, char *buf, size_t size)
{
    int fd = connect_port(port);
    size_t got = 0;
    ssize_t n;

    assert_true(fd >= 0);
    assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
    while (got < size - 1 && (n = read(fd, buf + got, size - 1 - got)) > 0)
        got += (size_t)n;
    buf[got] = '\0';
    close(fd);
    return got;
}

/* nginx on a free port, from a config in tmpdir: no root paths (pid, logs and temp files in
 * tmpdir), keepalive_requests low, so every connection ends in a Connection: close; locations
 * goes into its server block. Without nginx: skipped, but in CI. */
static void start_nginx(const char *locations)
{
    static char conf[4096];
    char path[256];

    if (access(NGINX, X_OK) != 0) {
        if (getenv("CI"))
            fail_msg(NGINX " is missing (make deps installs nginx-light)");
        skip();
    }
    snprintf(path, sizeof(path), "%s/www", tmpdir);
    mkdir(path, 0755);
    lfb.server_port = lfb_free_port();
    snprintf(conf, sizeof(conf),
             "daemon off;\nmaster_process off;\nworker_processes 1;\npid %s/nginx.pid;\n"
             "error_log %s/error.log;\nevents { worker_connections 256; }\n"
             "http {\n  access_log off;\n  default_type text/plain;\n"
             "  client_body_temp_path %s/body;\n  proxy_temp_path %s/proxy;\n"
             "  fastcgi_temp_path %s/fastcgi;\n  uwsgi_temp_path %s/uwsgi;\n"
             "  scgi_temp_path %s/scgi;\n  keepalive_requests 100;\n"
             "  server {\n    listen 127.0.0.1:%d;\n    root %s/www;\n%s  }\n}\n",
             tmpdir, tmpdir, tmpdir, tmpdir, tmpdir, tmpdir, tmpdir, lfb.server_port, tmpdir,
             locations);
    write_file(0, "nginx.conf", conf, strlen(conf));
    snprintf(path, sizeof(path), "%s/nginx.conf", tmpdir);
    /* started on the port its config names */
    lfb.server_pid =
        lfb_start_server((const char *[]){NGINX, "-p", tmpdir, "-c", path, "-e", "stderr", NULL},
                         &lfb.server_port, lfb.slow);
}

/* nginx: a static file (Content-Length), gzip (chunked), a 404, keepalive_requests. */
static void test_nginx(void **state)
{
    static char text[20000], resp[65536];
    char path[256];
    const char *get, *gz, *missing;

    (void)state;
    snprintf(path, sizeof(path), "%s/www", tmpdir);
    mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/www/gz", tmpdir);
    mkdir(path, 0755);
    for (size_t i = 0; i < sizeof(text); i++)
        text[i] = "lfbench speaks HTTP/1.1\n"[i % 24];
    write_file(0, "www/index.html", text, 1000);
    write_file(0, "www/gz/big.txt", text, sizeof(text));
    start_nginx("    location /gz/ { gzip on; gzip_min_length 0; gzip_types text/plain; }\n");
    get = REQ(1, "get.req", "GET /index.html HTTP/1.1\r\nHost: t\r\n\r\n");
    gz = REQ(2, "gz.req", "GET /gz/big.txt HTTP/1.1\r\nHost: t\r\nAccept-Encoding: gzip\r\n\r\n");
    missing = REQ(3, "missing.req", "GET /missing HTTP/1.1\r\nHost: t\r\n\r\n");
    /* the gzip response is chunked (else this test would not cover chunked from nginx) */
    fetch(
        lfb.server_port,
        "GET /gz/big.txt HTTP/1.1\r\nHost: t\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n",
        resp, sizeof(resp));
    if (!strstr(resp, "Transfer-Encoding: chunked") || !strstr(resp, "Content-Encoding: gzip"))
        fail_msg("nginx did not answer chunked gzip:\n%.300s", resp);
    fetch(lfb.server_port, "GET /index.html HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", resp,
          sizeof(resp));
    assert_non_null(strstr(resp, "Content-Length: 1000"));

    expect_clean(lfb_bench(lfb.server_port, "--expect", "http", "--request", get, "-c", "4", "-n",
                           "2000", "-q", NULL),
                 2000);
    expect_non2xx(0);
    assert_in_range(reconnects(), 16, 24); /* every 100th response closes its connection */
    expect_clean(lfb_bench(lfb.server_port, "--expect", "http", "--request", gz, "--pipeline", "4",
                           "-c", "4", "-n", "2000", "-q", NULL),
                 2000);
    assert_true(reconnects() >= 16);
    expect_non2xx(0);
    /* a 404 is a whole response: counted as non-2xx, not an error */
    expect_clean(lfb_bench(lfb.server_port, "--expect", "http", "--request", missing, "-c", "2",
                           "-n", "300", "-q", NULL),
                 300);
    expect_non2xx(300);
    /* --ok-status: a 404 this server is asked for on purpose is an answer */
    expect_clean(lfb_bench(lfb.server_port, "--expect", "http", "--request", missing, "--ok-status",
                           "2xx,404", "-c", "2", "-n", "300", "-q", NULL),
                 300);
    expect_non2xx(0);
    assert_non_null(strstr(lfb.out, "responses with a status other than 2xx,404"));
    /* ... and in a search, a 404 breaks every step unless --ok-status accepts it */
    if (lfb_bench(lfb.server_port, "--expect", "http", "--request", missing, "-c", "4",
                  "--find-rate", "p99=200ms", "--rate-sweep", "100:200:100", "-d", "0.3", "-q",
                  NULL) != 1 ||
        !strstr(lfb.out, "found        no rate kept the bound: ") ||
        !strstr(lfb.out, " responses had a status other than 2xx at 100/s"))
        fail_msg("want no rate found for the 404s at 100/s:\n%s", lfb.out);
    {
        unsigned long a = 0, b = 0;
        sscanf(strstr(lfb.out, "found        no rate kept the bound: ") + 37, "%lu of %lu", &a, &b);
        if (a == 0 || a != b)
            fail_msg("want every response of the step counted (%lu of %lu):\n%s", a, b, lfb.out);
    }
    if (lfb_bench(lfb.server_port, "--expect", "http", "--request", missing, "--ok-status", "404",
                  "-c", "4", "--find-rate", "p99=200ms", "--rate-sweep", "100:200:100", "-d", "0.3",
                  "-q", NULL) != 0 ||
        !strstr(lfb.out, "found        200 requests/s kept the bound: every rate up to the range's "
                         "end (200/s) kept it"))
        fail_msg("want 200/s found with --ok-status 404:\n%s", lfb.out);
    /* a mix of the three; the default request (GET /) is a 200 of index.html too */
    {
        char mix[1024];
        snprintf(mix, sizeof(mix), "%s:2,%s:1,%s:1", get, gz, missing);
        expect_clean(lfb_bench(lfb.server_port, "--expect", "http", "--mix", mix, "-c", "4", "-n",
                               "2000", "-q", NULL),
                     2000);
        assert_in_range(lfb_field("http"), 300, 700);
    }
    expect_clean(lfb_bench(lfb.server_port, "--expect", "http", "--mode", "short", "-c", "4", "-n",
                           "300", "-q", NULL),
                 300);
    expect_non2xx(0);
}

/* Well-formed responses from badserver: chunked with extensions and trailers; close-delimited
 * (each ends at the close, a reconnect). */
static void test_badserver_wellformed(void **state)
{
    const char *chunked[] = {lfb.badserver, "PORT", "http", "chunked", NULL};
    const char *eof[] = {lfb.badserver, "PORT", "http", "eof", NULL};

    (void)state;
    lfb_start(chunked);
    expect_clean(
        lfb_bench(lfb.server_port, "--expect", "http", "-c", "4", "-n", "2000", "-q", NULL), 2000);
    lfb_teardown(state);
    lfb_start(eof);
    expect_clean(lfb_bench(lfb.server_port, "--expect", "http", "-c", "4", "-n", "500", "-q", NULL),
                 500);
    assert_in_range(reconnects(), 500, 504);
    expect_clean(lfb_bench(lfb.server_port, "--expect", "http", "--mode", "short", "-c", "4", "-n",
                           "300", "-q", NULL),
                 300);
}

/* Malformed responses: mismatches, the run fails, lfbench neither hangs nor crashes. */
static void test_badserver_malformed(void **state)
{
    static const char *const kinds[] = {"garbage", "badcl", "badchunk", "fold", "hugehead"};

    (void)state;
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        const char *srv[] = {lfb.badserver, "PORT", "http", kinds[k], NULL};
        int rc;

        lfb_start(srv);
        rc = lfb_bench(lfb.server_port, "--expect", "http", "-c", "2", "-n", "100", "--timeout",
                       "2000ms", "--max-errors", "1000000", "-q", NULL);
        if (rc != 1 || lfb_field("mismatch") <= 0)
            fail_msg("%s: want exit 1 with mismatches, got %d:\n%s", kinds[k], rc, lfb.out);
        rc = lfb_bench(lfb.server_port, "--expect", "http", "--mode", "short", "-c", "2", "-n",
                       "50", "--timeout", "2000ms", "-q", NULL);
        if (rc != 1 || lfb_field("mismatch") <= 0)
            fail_msg("%s short: want exit 1 with mismatches, got %d:\n%s", kinds[k], rc, lfb.out);
        lfb_teardown(state);
    }
    /* a body cut short by the close: closed and lost, not a response */
    {
        const char *srv[] = {lfb.badserver, "PORT", "http", "short", NULL};
        int rc;

        lfb_start(srv);
        rc = lfb_bench(lfb.server_port, "--expect", "http", "-c", "2", "-n", "100", "--timeout",
                       "2000ms", "--max-errors", "1000000", "-q", NULL);
        if (rc != 1 || lfb_field("closed") <= 0 || lfb_field("lost") <= 0 ||
            lfb_field("requests") != 0)
            fail_msg("short body: want exit 1, closed and lost, got %d:\n%s", rc, lfb.out);
    }
}

/* Regression (white-box review, defect 1): --find-rate and --rate-sweep kept a step answered
 * with 503s. Against a server that answers 200 up to 500 requests/s and 503 beyond, --find-rate
 * answered the range's end (4,000/s, with 5,324 of 7,746 responses 503), and the steps' --json
 * had no count of them. A status outside --ok-status (2xx by default) now breaks a step, and
 * the table, the found line and each step's --json say how many there were. */
static void test_find_rate_counts_503(void **state)
{
    const char *srv[] = {lfb.badserver, "PORT", "http503", "500", NULL};
    char json[] = "/tmp/lfe-http-json-XXXXXX";
    const char *f, *j, *st;
    double found;
    int rc, steps = 0;

    (void)state;
    lfb_start(srv);
    close(mkstemp(json));
    rc = lfb_bench(lfb.server_port, "--expect", "http", "-c", "20", "--find-rate", "p99=50ms",
                   "--rate-sweep", "250:2000:250", "-d", "0.5", "--warmup", "0.2", "--json", json,
                   "-q", NULL);
    f = strstr(lfb.out, "\nfound        ");
    if (!f)
        fail_msg("rc %d, no found line:\n%s", rc, lfb.out);
    found = strtod(f + 14, NULL);
    /* 500/s is within the server's rate (its bucket holds 50 ms of it): 250 on a machine slow
     * enough to bunch the sends */
    if (rc != 0 || found < 250 || found > 500 ||
        !strstr(f, " responses had a status other than 2xx at "))
        fail_msg("rc %d: want 250 to 500/s found, for the 503s:%s", rc,
                 strstr(lfb.out, "\nsteps ") ? strstr(lfb.out, "\nsteps ") : lfb.out);
    if (!strstr(lfb.out, "    non-2xx  kept\n"))
        fail_msg("the steps table has no non-2xx column:\n%s", lfb.out);
    /* each step's --json: its count; a step with any is not kept, one at 1,000/s has half */
    j = lfb_slurp(json);
    st = strstr(j, "\"steps\": [");
    assert_non_null(st);
    for (const char *q = st; (q = strstr(q + 1, "{\"rate\": ")); steps++) {
        double rate = lfb_jnum(q, "rate"), non2xx = lfb_jnum(q, "http_non2xx"),
               req = lfb_jnum(q, "requests");
        const char *kept = strstr(q, "\"kept\": ");

        assert_non_null(kept);
        if (!(non2xx >= 0) || (non2xx > 0) != !strncmp(kept + 8, "false", 5) ||
            (rate <= 250 && non2xx > 0) || (rate >= 1000 && non2xx < req * 0.3))
            fail_msg("step at %.0f/s: http_non2xx %.0f of %.0f, %.5s:\n%s", rate, non2xx, req,
                     kept + 8, lfb.out);
    }
    assert_true(steps >= 4);

    /* the statuses the user names as answers: 503 is one, and the whole range keeps it */
    rc = lfb_bench(lfb.server_port, "--expect", "http", "--ok-status", "2xx,503", "-c", "20",
                   "--find-rate", "p99=50ms", "--rate-sweep", "250:2000:250", "-d", "0.5",
                   "--warmup", "0.2", "-q", NULL);
    if (rc != 0 || !strstr(lfb.out, "found        2000 requests/s kept the bound: every rate up to "
                                    "the range's end (2000/s) kept it"))
        fail_msg("rc %d: want 2000/s found with --ok-status 2xx,503:%s", rc,
                 strstr(lfb.out, "\nsteps ") ? strstr(lfb.out, "\nsteps ") : lfb.out);
    if (lfb_field("http") != 0 || !strstr(lfb.out, "other than 2xx,503, which break a step"))
        fail_msg("want no response counted with --ok-status 2xx,503:\n%s", lfb.out);

    /* the staircase: a step with 503s is not kept, and its --json says how many */
    close(mkstemp(json));
    rc = lfb_bench(lfb.server_port, "--expect", "http", "-c", "20", "--rate-sweep", "250:1000:750",
                   "-d", "0.5", "--warmup", "0.2", "--json", json, "-q", NULL);
    j = lfb_slurp(json);
    st = strstr(j, "{\"rate\": 1000.000");
    if (rc != 0 || !st || !(lfb_jnum(st, "http_non2xx") >= 100) || !strstr(st, "\"kept\": false"))
        fail_msg("rc %d: want the 1000/s step not kept, with its 503s counted:\n%s\n%s", rc,
                 lfb.out, st ? st : j);
}

/* lfbench with args (NULL-terminated, the target among them), its output into lfb.out. */
static int bench_args(const char *first, ...)
{
    const char *args[48] = {lfb.lfbench};
    int n = 1;
    va_list ap;

    va_start(ap, first);
    for (const char *a = first; a && n < 47; a = va_arg(ap, const char *))
        args[n++] = a;
    va_end(ap);
    args[n] = NULL;
    return lfb_run(args, lfb.out, sizeof(lfb.out), 60 * (unsigned)lfb.slow);
}

/* A server of one request, to see it as sent: a listener on family's loopback, and a child
 * that accepts one connection, reads its request up to the empty line, answers 200, and writes
 * every byte it read, up to the client's close, to tmpdir/caught. Returns the child's pid and
 * its port in *port; -1 when that loopback cannot be bound (no IPv6 here). */
static pid_t catch_one(int family, int *port)
{
    struct sockaddr_storage ss;
    socklen_t len = family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
    int lfd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    char path[256];
    pid_t pid;

    assert_true(lfd >= 0);
    snprintf(path, sizeof(path), "%s/caught", tmpdir);
    unlink(path);
    memset(&ss, 0, sizeof(ss));
    if (family == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    } else {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_addr = in6addr_loopback;
    }
    if (bind(lfd, (struct sockaddr *)&ss, len) < 0 || listen(lfd, 4) < 0) {
        close(lfd);
        return -1;
    }
    assert_int_equal(getsockname(lfd, (struct sockaddr *)&ss, &len), 0);
    *port = ntohs(family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                    : ((struct sockaddr_in6 *)&ss)->sin6_port);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        static char buf[1 << 16];
        static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        size_t got = 0;
        bool answered = false;
        int fd, out;
        ssize_t n;

        alarm(30 * (unsigned)lfb.slow);
        fd = accept(lfd, NULL, NULL);
        while (fd >= 0 && got < sizeof(buf) && (n = read(fd, buf + got, sizeof(buf) - got)) > 0) {
            got += (size_t)n;
            if (!answered && memmem(buf, got, "\r\n\r\n", 4)) {
                answered = write(fd, ok, sizeof(ok) - 1) == (ssize_t)sizeof(ok) - 1;
            }
        }
        out = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        _exit(out >= 0 && write(out, buf, got) == (ssize_t)got ? 0 : 1);
    }
    close(lfd);
    return pid;
}

/* The request catch_one's child read, once it has exited. */
static const char *caught(pid_t pid)
{
    static char buf[1 << 16];
    char path[256];
    int fd, status;
    ssize_t n;

    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    snprintf(path, sizeof(path), "%s/caught", tmpdir);
    fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    assert_true(n >= 0);
    buf[n] = '\0';
    return buf;
}

/* Issue 33 (B.10): wrk's target, http://HOST:PORT/PATH, and -H: the request as the server reads
 * it, byte for byte, over IPv4 and IPv6; and --latency's distribution after the summary. */
static void test_url_and_headers_as_sent(void **state)
{
    char url[128], want[512];
    const char *got;
    int port;
    pid_t pid;

    (void)state;
    /* a path with a query (the fragment is the client's), two -H in the order given */
    pid = catch_one(AF_INET, &port);
    assert_true(pid > 0);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/p/a.html?q=1&r=%%2F#frag", port);
    if (bench_args("-c", "1", "-n", "1", "-H", "X-A: b", "--header", "X-B:  c d", "--latency", url,
                   NULL) != 0)
        fail_msg("lfbench %s:\n%s", url, lfb.out);
    got = caught(pid);
    snprintf(want, sizeof(want),
             "GET /p/a.html?q=1&r=%%2F HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nX-A: b\r\nX-B:  c "
             "d\r\n\r\n",
             port);
    if (strcmp(got, want))
        fail_msg("the server read:\n%s\nwant:\n%s", got, want);
    snprintf(want, sizeof(want), "lfbench: %s, long mode, 1 connection", url);
    if (!strstr(lfb.out, want) || !strstr(lfb.out, "expect http") || lfb_field("requests") != 1 ||
        !strstr(lfb.out, "\nlatency distribution (µs, 1 samples)\n") ||
        !strstr(lfb.out, "\n    50.000% ") || !strstr(lfb.out, "\n   100.000% "))
        fail_msg("want the URL in the banner, one request and the distribution:\n%s", lfb.out);

    /* -H Host replaces the default one; no path: GET / */
    pid = catch_one(AF_INET, &port);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
    if (bench_args("-c", "1", "-n", "1", "-H", "Host: example.org", url, NULL) != 0)
        fail_msg("lfbench %s:\n%s", url, lfb.out);
    assert_string_equal(caught(pid), "GET / HTTP/1.1\r\nHost: example.org\r\n\r\n");
    if (strstr(lfb.out, "latency distribution"))
        fail_msg("a distribution without --latency:\n%s", lfb.out);

    /* HOST:PORT with --expect http takes -H too, its Host the target as given */
    pid = catch_one(AF_INET, &port);
    snprintf(url, sizeof(url), "localhost:%d", port);
    if (bench_args("-c", "1", "-n", "1", "--expect", "http", "-H", "Accept: */*", url, NULL) != 0)
        fail_msg("lfbench %s:\n%s", url, lfb.out);
    snprintf(want, sizeof(want), "GET / HTTP/1.1\r\nHost: localhost:%d\r\nAccept: */*\r\n\r\n",
             port);
    assert_string_equal(caught(pid), want);

    /* IPv6 in brackets, the Host as written */
    pid = catch_one(AF_INET6, &port);
    if (pid < 0) {
        if (getenv("CI"))
            fail_msg("no IPv6 on loopback ([::1]) in CI");
        fprintf(stderr, "no [::1] here: the IPv6 URL not tried\n");
        return;
    }
    snprintf(url, sizeof(url), "http://[::1]:%d/v6", port);
    if (bench_args("-c", "1", "-n", "1", url, NULL) != 0)
        fail_msg("lfbench %s:\n%s", url, lfb.out);
    snprintf(want, sizeof(want), "GET /v6 HTTP/1.1\r\nHost: [::1]:%d\r\n\r\n", port);
    assert_string_equal(caught(pid), want);
}

/* Issue 33 (B.10), against nginx: a URL's path is what is asked for, -H's headers are what the
 * server sees (each location answers 200 only when they are), Connection: close from -H makes
 * nginx close each connection, in long and short mode; and the targets and -H that cannot be
 * run are refused before any connection, with one line. */
static void test_url_and_headers_nginx(void **state)
{
    char need[128], q[128], host[128], bad[128];

    (void)state;
    start_nginx("    location = /need { if ($http_x_probe != \"lfbench-42\") { return 403; }\n"
                "                       return 200 \"probe\\n\"; }\n"
                "    location = /q { if ($arg_n != \"7\") { return 404; } return 200 \"q\\n\"; }\n"
                "    location = /host { if ($http_host != \"example.org\") { return 421; }\n"
                "                       return 200 \"host\\n\"; }\n");
    snprintf(need, sizeof(need), "http://127.0.0.1:%d/need", lfb.server_port);
    snprintf(q, sizeof(q), "http://127.0.0.1:%d/q?n=7", lfb.server_port);
    snprintf(host, sizeof(host), "http://127.0.0.1:%d/host", lfb.server_port);
    /* without the header: every answer a 403, counted non-2xx (the path was /need) */
    expect_clean(bench_args("-c", "2", "-n", "300", "-q", need, NULL), 300);
    expect_non2xx(300);
    /* with it: every answer a 200 */
    expect_clean(bench_args("-c", "2", "-n", "300", "-q", "-H", "X-Probe: lfbench-42", need, NULL),
                 300);
    expect_non2xx(0);
    expect_clean(bench_args("--mode", "short", "-c", "2", "-n", "100", "-q", "-H",
                            "x-probe:lfbench-42", need, NULL),
                 100);
    expect_non2xx(0);
    assert_int_equal(lfb_field("connections"), 100);
    /* the query goes with the path */
    expect_clean(bench_args("-c", "2", "-n", "300", "-q", q, NULL), 300);
    expect_non2xx(0);
    snprintf(bad, sizeof(bad), "http://127.0.0.1:%d/q?n=8", lfb.server_port);
    expect_clean(bench_args("-c", "2", "-n", "100", "-q", bad, NULL), 100);
    expect_non2xx(100);
    /* Host from -H */
    expect_clean(bench_args("-c", "2", "-n", "100", "-q", host, NULL), 100);
    expect_non2xx(100);
    expect_clean(bench_args("-c", "2", "-n", "100", "-q", "-H", "Host: example.org", host, NULL),
                 100);
    expect_non2xx(0);
    /* Connection: close: nginx closes after each response, a reconnect, never an error */
    expect_clean(bench_args("-c", "2", "-n", "200", "-q", "-H", "Connection: close", "-H",
                            "X-Probe: lfbench-42", need, NULL),
                 200);
    expect_non2xx(0);
    assert_in_range(reconnects(), 200, 202);
    expect_clean(bench_args("--mode", "short", "-c", "2", "-n", "100", "-q", "-H",
                            "Connection: close", need, NULL),
                 100);

    /* https:// to this plain-text server: its answer to the ClientHello is named */
    snprintf(bad, sizeof(bad), "https://127.0.0.1:%d/need", lfb.server_port);
    if (bench_args("--mode", "short", "-n", "1", "-q", "--tls-insecure", bad, NULL) != 1 ||
        !strstr(lfb.out, "the server did not answer TLS (its first bytes: \"HTTP/") ||
        lfb_field("tls_not_tls") != 1)
        fail_msg("want https:// to a plain server named:\n%s", lfb.out);
    /* refused, exit 2, before any connection */
    snprintf(bad, sizeof(bad), "127.0.0.1:%d", lfb.server_port);
    if (bench_args("-n", "1", "-H", "X: y", bad, NULL) != 2 ||
        !strstr(lfb.out, "-H adds a header to an HTTP request: give an http:// target or "
                         "--expect http"))
        fail_msg("want -H without HTTP refused:\n%s", lfb.out);
    if (bench_args("-n", "1", "-H", "X-Probe lfbench-42", need, NULL) != 2 ||
        !strstr(lfb.out, "-H: 'X-Probe lfbench-42' is not a header 'Name: value'"))
        fail_msg("want a malformed -H refused:\n%s", lfb.out);
    if (bench_args("-n", "1", "-H", "X: a\r\nX-Probe: lfbench-42", need, NULL) != 2 ||
        !strstr(lfb.out, "its value holds a control byte"))
        fail_msg("want a header with a CRLF in it refused:\n%s", lfb.out);
}

/* Request files that are not one HTTP request: refused with one line naming the file. */
static void test_bad_request_files(void **state)
{
    static const struct {
        const char *text, *needle;
    } bad[] = {
        {"GET / HTTP/1.1\r\nHost: t\r\n", "no empty line ends the head"},
        {"hello\n\n", "the request line"},
        {"GET /\r\n\r\n", "not METHOD TARGET HTTP/1.x"},
        {"POST / HTTP/1.1\r\nContent-Length: 9\r\n\r\nabc", "not Content-Length bytes"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *req = write_file(0, "bad.req", bad[i].text, strlen(bad[i].text));
        assert_int_equal(lfb_bench(1, "--expect", "http", "--request", req, NULL), 2);
        if (!strstr(lfb.out, bad[i].needle) || !strstr(lfb.out, "bad.req"))
            fail_msg("want '%s' naming bad.req:\n%s", bad[i].needle, lfb.out);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_long_keepalive, lfb_teardown),
        cmocka_unit_test_teardown(test_connection_close, lfb_teardown),
        cmocka_unit_test_teardown(test_head, lfb_teardown),
        cmocka_unit_test_teardown(test_short_mode, lfb_teardown),
        cmocka_unit_test_teardown(test_open_loop, lfb_teardown),
        cmocka_unit_test_teardown(test_nginx, lfb_teardown),
        cmocka_unit_test_teardown(test_badserver_wellformed, lfb_teardown),
        cmocka_unit_test_teardown(test_badserver_malformed, lfb_teardown),
        cmocka_unit_test_teardown(test_bad_request_files, lfb_teardown),
        cmocka_unit_test_teardown(test_url_and_headers_as_sent, lfb_teardown),
        cmocka_unit_test_teardown(test_url_and_headers_nginx, lfb_teardown),
        cmocka_unit_test_teardown(test_find_rate_counts_503, lfb_teardown),
    };
    static char script_path[4096];
    int rc;

    if (lfb_init(true) < 0)
        return 1;
    /* lua/http_hello.lua beside the tests' working directory (the repository root) */
    if (!realpath("lua/http_hello.lua", script_path)) {
        fprintf(stderr, "run from the repository root: lua/http_hello.lua not found\n");
        return 1;
    }
    script = script_path;
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    {
        char cmd[256];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", tmpdir);
    }
    return rc;
}
