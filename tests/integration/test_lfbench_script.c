/* Integration tests of lfbench --script (wrk's Lua API): wrk's eight example scripts
 * (lua/bench/wrk/) against nginx, each seen doing what it says in nginx's access log or in
 * lfbench's output, and counter.lua and post.lua giving nginx the same requests under lfbench
 * as under wrk; an HTTP script with changing paths and a POST body checking every answer
 * (nginx, lfepolld with lua/http_hello.lua); lua/bench/kv_mix.lua against lua/kv.lua and
 * against a kv server that forgets (tests/lua/kv_forgets.lua); hostile scripts (errors in each
 * hook, endless loops, a C call that never returns, endless memory) and every run mode. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "lfb_util.h"

#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NGINX "/usr/sbin/nginx"
#define WRK "/usr/bin/wrk"
#define TOKEN "tok-7f3a"

static char tmpdir[] = "/tmp/lfe-script-XXXXXX"; /* scripts, nginx's prefix and its log */
static char top[4096];                           /* the repository root (the tests' cwd) */
static pid_t nginx_pid;
static int nginx_port;
static double elapsed; /* seconds the last run_lfb took */

static double mono_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* tmpdir/name written with text; its path (static, one per slot). */
static const char *script(int slot, const char *name, const char *text)
{
    static char path[4][256];
    int fd;

    snprintf(path[slot], sizeof(path[slot]), "%s/%s", tmpdir, name);
    fd = open(path[slot], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path[slot];
}

/* A file of the repository (lua/bench/wrk/NAME.lua ...), as an absolute path (static). */
static const char *repo(int slot, const char *rel)
{
    static char path[4][4200];

    snprintf(path[slot], sizeof(path[slot]), "%s/%s", top, rel);
    assert_int_equal(access(path[slot], R_OK), 0);
    return path[slot];
}

/* lfbench with the words of pre (NULL-terminated), 127.0.0.1:port, then "--" and the words
 * of post when post is given; output in lfb.out, the time it took in elapsed. */
static int run_lfb(int port, const char *const *pre, const char *const *post)
{
    const char *args[64] = {lfb.lfbench};
    char target[32];
    int n = 1, rc;
    double t0 = mono_s();

    for (; *pre && n < 56; pre++)
        args[n++] = *pre;
    snprintf(target, sizeof(target), "127.0.0.1:%d", port);
    args[n++] = target;
    if (post) {
        args[n++] = "--";
        for (; *post && n < 62; post++)
            args[n++] = *post;
    }
    args[n] = NULL;
    rc = lfb_run(args, lfb.out, sizeof(lfb.out), 90 * (unsigned)lfb.slow);
    elapsed = mono_s() - t0;
    return rc;
}

#define LFB(port, ...) run_lfb(port, (const char *const[]){__VA_ARGS__, NULL}, NULL)

/* The summary's script line: checks and failed ones. */
static void script_counts(long *checks, long *failed)
{
    const char *p = strstr(lfb.out, "\nscript       ");

    *checks = *failed = -1;
    if (p) {
        p = strstr(p, ": ");
        if (p)
            sscanf(p, ": %ld responses checked, %ld failed", checks, failed);
    }
}

static void expect_checks_pass(int rc, const char *what)
{
    long checks, failed;

    script_counts(&checks, &failed);
    if (rc != 0 || checks <= 0 || failed != 0 || !strstr(lfb.out, "errors       0:"))
        fail_msg("%s: want exit 0, checks passed and no errors (rc %d):\n%s", what, rc, lfb.out);
}

/* The line of out that starts with prefix, or NULL. */
static const char *line_at(const char *out, const char *prefix)
{
    size_t n = strlen(prefix);

    if (!strncmp(out, prefix, n))
        return out;
    for (const char *p = strchr(out, '\n'); p; p = strchr(p + 1, '\n'))
        if (!strncmp(p + 1, prefix, n))
            return p + 1;
    return NULL;
}

/* --- nginx: one for the whole file, with an access log of what each request carried ---------- */

static char access_log[300];

/* The access log emptied (nginx appends: its next line goes at the start again). */
static void log_reset(void)
{
    assert_int_equal(truncate(access_log, 0), 0);
}

/* The access log once it has at least want lines (nginx writes a line after its response: up
 * to 5 s, times slow); it fails the test with fewer. The lines: method, URI, X-Counter, request
 * length, $pipe ("p": it came in the buffer behind the one before), X-Token, Content-Length,
 * $msec. */
static const char *log_lines(int want)
{
    static char buf[1 << 20];
    int fd, lines = 0;

    for (int i = 0; i < 500 * lfb.slow; i++) {
        fd = open(access_log, O_RDONLY);
        assert_true(fd >= 0);
        lfb_read_back(fd, buf, sizeof(buf));
        close(fd);
        lines = 0;
        for (const char *p = buf; (p = strchr(p, '\n')); p++)
            lines++;
        if (lines >= want)
            return buf;
        lfb_sleep_ms(10);
    }
    fail_msg("nginx's access log has %d lines, want %d:\n%.2000s", lines, want, buf);
    return NULL;
}

/* Field i (from 0) of a log line: method, URI, X-Counter, request length, $pipe, X-Token,
 * Content-Length, $msec (static, one at a time). */
static const char *field(const char *line, int i)
{
    static char f[256];
    size_t n;

    for (; i > 0 && line; i--) {
        line = strpbrk(line, " \n");
        if (line && *line == ' ')
            line++;
        else
            line = NULL;
    }
    assert_non_null(line);
    n = strcspn(line, " \n");
    snprintf(f, sizeof(f), "%.*s", (int)(n < sizeof(f) ? n : sizeof(f) - 1), line);
    return f;
}

/* The log's first n lines as what the client asked: method, URI, X-Counter, request length,
 * Content-Length (the timing fields are each client's own). */
static void requests_of(const char *log, int n, char *out, size_t size)
{
    size_t len = 0;

    out[0] = '\0';
    for (int i = 0; i < n && len < size; i++, log = strchr(log, '\n') + 1) {
        static const int keep[] = {0, 1, 2, 3, 6};
        for (int k = 0; k < 5 && len < size; k++)
            len += (size_t)snprintf(out + len, size - len, "%s%c", field(log, keep[k]),
                                    k < 4 ? ' ' : '\n');
    }
}

/* nginx on a free port: /authenticate gives a token, /p/... answers its path, /post the
 * method and the body's length, anything else "hello". Skipped (a failure under CI) without
 * nginx. */
static void need_nginx(void)
{
    char conf[3000], path[300];

    if (nginx_pid > 0)
        return;
    if (access(NGINX, X_OK) != 0) {
        if (getenv("CI"))
            fail_msg(NGINX " is missing (make deps installs nginx-light)");
        skip();
    }
    snprintf(access_log, sizeof(access_log), "%s/access.log", tmpdir);
    nginx_port = lfb_free_port();
    snprintf(conf, sizeof(conf),
             "daemon off;\nmaster_process off;\nworker_processes 1;\npid %s/nginx.pid;\n"
             "error_log %s/error.log;\nevents { worker_connections 256; }\n"
             "http {\n  log_format t '$request_method $request_uri \"$http_x_counter\" "
             "$request_length $pipe \"$http_x_token\" \"$content_length\" $msec';\n"
             "  access_log %s t;\n  default_type text/plain;\n"
             "  client_body_temp_path %s/body;\n  proxy_temp_path %s/proxy;\n"
             "  fastcgi_temp_path %s/fastcgi;\n  uwsgi_temp_path %s/uwsgi;\n"
             "  scgi_temp_path %s/scgi;\n  keepalive_requests 1000000;\n"
             "  server {\n    listen 127.0.0.1:%d;\n"
             "    location = /authenticate { add_header X-Token " TOKEN
             "; return 200 \"ok\\n\"; }\n"
             "    location /p/ { return 200 \"$uri\\n\"; }\n"
             "    location = /post { return 200 \"$request_method $content_length\\n\"; }\n"
             "    location / { return 200 \"hello\\n\"; }\n  }\n}\n",
             tmpdir, tmpdir, access_log, tmpdir, tmpdir, tmpdir, tmpdir, tmpdir, nginx_port);
    snprintf(path, sizeof(path), "%s/nginx.conf", tmpdir);
    script(3, "nginx.conf", conf);
    nginx_pid =
        lfb_start_server((const char *[]){NGINX, "-p", tmpdir, "-c", path, "-e", "stderr", NULL},
                         &nginx_port, lfb.slow);
}

/* lfepolld with a handler of the repository (lua/http_hello.lua ...) as lfb's server. */
static void start_lfepolld(const char *handler)
{
    const char *srv[] = {lfb.lfepolld, "--listen", "127.0.0.1:PORT", "--lua", repo(3, handler),
                         "-q",         NULL};
    lfb_start(srv);
}

/* --- wrk's example scripts ----------------------------------------------------------------- */

/* counter.lua: paths /1, /2, ... (the first call, /0, is the check before the run, as in
 * wrk) with X-Counter headers that match, one per request, in order. */
static void test_wrk_counter(void **state)
{
    const char *log, *p;
    int rc;

    (void)state;
    need_nginx();
    log_reset();
    rc = LFB(nginx_port, "--expect", "http", "--script", repo(0, "lua/bench/wrk/counter.lua"), "-t",
             "1", "-c", "1", "-n", "30", "-q");
    if (rc != 0 || lfb_field("requests") != 30)
        fail_msg("rc %d, want 30 requests:\n%s", rc, lfb.out);
    log = log_lines(30);
    p = log;
    for (int i = 1; i <= 30; i++) {
        char want[64];
        snprintf(want, sizeof(want), "GET /%d \"%d\" ", i, i);
        if (strncmp(p, want, strlen(want)))
            fail_msg("line %d: want '%s':\n%.3000s", i, want, log);
        p = strchr(p, '\n') + 1;
    }
    assert_int_equal(*p, '\0');
}

/* post.lua: a POST with its body and Content-Type, nothing but 200s. */
static void test_wrk_post(void **state)
{
    const char *log;
    int rc, n = 0;

    (void)state;
    need_nginx();
    log_reset();
    rc = LFB(nginx_port, "--expect", "http", "--script", repo(0, "lua/bench/wrk/post.lua"), "-c",
             "2", "-n", "20", "-q");
    if (rc != 0 || lfb_field("requests") != 20 || lfb_field("http") != 0)
        fail_msg("rc %d, want 20 answered 200:\n%s", rc, lfb.out);
    log = log_lines(20);
    for (const char *p = log; *p; p = strchr(p, '\n') + 1, n++)
        if (strncmp(p, "POST / \"-\" ", 11) || !strstr(p, " \"16\" "))
            fail_msg("want POST / with a 16-byte body:\n%.2000s", log);
    assert_int_equal(n, 20);
}

/* pipeline.lua: three requests a write. nginx's $pipe says "p" for a request that came in the
 * buffer behind the one before: each write's first is ".", its second and third "p"; a client
 * sending one at a time would show no "p", one sending six at once a "p" fourth. */
static void test_wrk_pipeline(void **state)
{
    static const char *const path[] = {"/?foo", "/?bar", "/?baz"};
    const char *log, *p;
    int rc;

    (void)state;
    need_nginx();
    log_reset();
    rc = LFB(nginx_port, "--expect", "http", "--script", repo(0, "lua/bench/wrk/pipeline.lua"),
             "-t", "1", "-c", "1", "-n", "30", "-q");
    if (rc != 0 || lfb_field("requests") != 30)
        fail_msg("rc %d, want 30 requests:\n%s", rc, lfb.out);
    p = log = log_lines(30);
    for (int i = 0; i < 30; i++) {
        char want[64], pipe = field(p, 4)[0];
        snprintf(want, sizeof(want), "GET %s ", path[i % 3]);
        if (strncmp(p, want, strlen(want)) || pipe != (i % 3 ? 'p' : '.'))
            fail_msg("request %d: want %s, %s:\n%.3000s", i, want,
                     i % 3 ? "pipelined" : "in a write of its own", log);
        p = strchr(p, '\n') + 1;
    }
}

/* auth.lua: /authenticate first, then /resource with the token from its X-Token header. */
static void test_wrk_auth(void **state)
{
    const char *log, *p;
    int rc;

    (void)state;
    need_nginx();
    log_reset();
    rc = LFB(nginx_port, "--expect", "http", "--script", repo(0, "lua/bench/wrk/auth.lua"), "-t",
             "1", "-c", "1", "-n", "10", "-q");
    if (rc != 0 || lfb_field("requests") != 10)
        fail_msg("rc %d, want 10 requests:\n%s", rc, lfb.out);
    p = log = log_lines(10);
    if (strncmp(p, "GET /authenticate \"-\" ", 22) || strcmp(field(p, 5), "\"-\""))
        fail_msg("want /authenticate without a token first:\n%s", log);
    for (int i = 1; i < 10; i++) {
        p = strchr(p, '\n') + 1;
        if (strncmp(p, "GET /resource \"-\" ", 18) || strcmp(field(p, 5), "\"" TOKEN "\""))
            fail_msg("request %d: want /resource with X-Token " TOKEN ":\n%s", i, log);
    }
}

/* delay.lua: a connection waits 10 to 50 ms before each request: nginx logs the requests of one
 * connection at least 10 ms apart (less 1 ms: $msec's resolution), and a second holds at most
 * 100 of them. */
static void test_wrk_delay(void **state)
{
    const char *log;
    double prev = 0, gap_min = 1e9;
    int rc, n = 0;

    (void)state;
    need_nginx();
    log_reset();
    rc = LFB(nginx_port, "--expect", "http", "--script", repo(0, "lua/bench/wrk/delay.lua"), "-t",
             "1", "-c", "1", "-d", "1", "-q");
    if (rc != 0 || lfb_field("requests") < 5 || lfb_field("requests") > 101)
        fail_msg("rc %d, want 5 to 101 requests in a second:\n%s", rc, lfb.out);
    log = log_lines((int)lfb_field("requests"));
    for (const char *p = log; *p; p = strchr(p, '\n') + 1, n++) {
        double t = strtod(field(p, 7), NULL);
        if (n > 0 && t - prev < gap_min)
            gap_min = t - prev;
        prev = t;
    }
    if (n < 5 || n > 102 || gap_min < 0.009)
        fail_msg("want requests at least 10 ms apart, %d of them: the smallest gap %.3f s\n%s", n,
                 gap_min, log);
}

/* report.lua: after the summary, a line of dashes and the percentiles as CSV, in whole
 * microseconds: lfbench's own figures (the summary's p50 and p90, rounded). */
static void test_wrk_report(void **state)
{
    const char *dash, *sum;
    double want50, want90;
    long p[4];
    int rc;

    (void)state;
    need_nginx();
    rc = LFB(nginx_port, "--expect", "http", "--script", repo(0, "lua/bench/wrk/report.lua"), "-c",
             "1", "-n", "300", "-q");
    dash = line_at(lfb.out, "------------------------------\n");
    sum = line_at(lfb.out, "script       ");
    if (rc != 0 || !dash || !sum || dash < sum ||
        sscanf(dash + 31, "50%%,%ld\n90%%,%ld\n99%%,%ld\n99.999%%,%ld\n", &p[0], &p[1], &p[2],
               &p[3]) != 4)
        fail_msg("rc %d: want the four percentiles after the summary:\n%s", rc, lfb.out);
    sum = strstr(lfb.out, "  latency      min ");
    assert_non_null(sum);
    want50 = strtod(strstr(sum, " p50 ") + 5, NULL);
    want90 = strtod(strstr(sum, " p90 ") + 5, NULL);
    if (fabs((double)p[0] - want50) > 1 || fabs((double)p[1] - want90) > 1 || p[0] > p[1] ||
        p[1] > p[2] || p[2] > p[3] || p[0] <= 0)
        fail_msg("percentiles %ld %ld %ld %ld, summary p50 %.1f p90 %.1f:\n%s", p[0], p[1], p[2],
                 p[3], want50, want90, lfb.out);
}

/* setup.lua with two threads: each numbered in setup(), each counting its own calls; done()
 * reads them back. The first thread's request() ran once more than its responses (the check
 * before the run, as in wrk), the second's as often (its first string was sent), and the
 * responses add up to the run's. */
static void test_wrk_setup(void **state)
{
    long id[2], req[2], resp[2];
    const char *p, *sum;
    int rc;

    (void)state;
    need_nginx();
    rc = LFB(nginx_port, "--expect", "http", "--script", repo(0, "lua/bench/wrk/setup.lua"), "-t",
             "2", "-c", "4", "-n", "400", "-q");
    sum = line_at(lfb.out, "script       ");
    if (rc != 0 || !line_at(lfb.out, "thread 1 created\n") ||
        !line_at(lfb.out, "thread 2 created\n") || !sum)
        fail_msg("rc %d: want both threads created:\n%s", rc, lfb.out);
    p = sum;
    for (int i = 0; i < 2; i++) {
        p = line_at(p, "thread ");
        if (!p || sscanf(p, "thread %ld made %ld requests and got %ld responses", &id[i], &req[i],
                         &resp[i]) != 3)
            fail_msg("want done()'s line for thread %d after the summary:\n%s", i + 1, lfb.out);
        p++;
    }
    if (id[0] != 1 || id[1] != 2 || resp[0] + resp[1] != 400 || req[0] != resp[0] + 1 ||
        req[1] != resp[1] || resp[0] == 0 || resp[1] == 0)
        fail_msg("want threads 1 and 2 with 400 responses between them:\n%s", lfb.out);
}

/* stop.lua: each thread stops at its 100th response; the run ends then, not at -d 20. */
static void test_wrk_stop(void **state)
{
    int rc;

    (void)state;
    need_nginx();
    for (int t = 1; t <= 2; t++) {
        char ts[8];
        snprintf(ts, sizeof(ts), "%d", t);
        log_reset();
        rc = LFB(nginx_port, "--expect", "http", "--script", repo(0, "lua/bench/wrk/stop.lua"),
                 "-t", ts, "-c", ts, "-d", "20", "-q");
        if (rc != 0 || lfb_field("requests") != 100 * t || elapsed > 10)
            fail_msg("-t %d: rc %d after %.1f s, want %d requests, well before -d 20:\n%s", t, rc,
                     elapsed, 100 * t, lfb.out);
        log_lines(100 * t);
    }
}

/* The same script under wrk and under lfbench (-t 1 -c 1) gives nginx the same requests:
 * method, path, X-Counter, their length and the body's, line by line. */
static void test_same_requests_as_wrk(void **state)
{
    static const char *const scripts[] = {"lua/bench/wrk/counter.lua", "lua/bench/wrk/post.lua"};
    static char ours[1 << 16], theirs[1 << 16];
    enum { N = 50 };

    (void)state;
    need_nginx();
    if (access(WRK, X_OK) != 0) {
        if (getenv("CI"))
            fail_msg(WRK " is missing (make deps installs wrk)");
        skip();
    }
    for (size_t k = 0; k < sizeof(scripts) / sizeof(scripts[0]); k++) {
        char url[64];
        const char *log;
        int rc;

        log_reset();
        rc = LFB(nginx_port, "--expect", "http", "--script", repo(0, scripts[k]), "-t", "1", "-c",
                 "1", "-n", "50", "-q");
        if (rc != 0)
            fail_msg("%s: lfbench rc %d:\n%s", scripts[k], rc, lfb.out);
        log = log_lines(N);
        requests_of(log, N, ours, sizeof(ours));
        log_reset();
        snprintf(url, sizeof(url), "http://127.0.0.1:%d/", nginx_port);
        rc = lfb_run(
            (const char *const[]){WRK, "-t1", "-c1", "-d1s", "-s", repo(0, scripts[k]), url, NULL},
            lfb.out, sizeof(lfb.out), 30 * (unsigned)lfb.slow);
        if (rc != 0)
            fail_msg("%s: wrk rc %d:\n%s", scripts[k], rc, lfb.out);
        log = log_lines(N);
        requests_of(log, N, theirs, sizeof(theirs));
        if (strcmp(ours, theirs))
            fail_msg("%s: nginx saw different requests.\nlfbench:\n%.1500s\nwrk:\n%.1500s",
                     scripts[k], ours, theirs);
    }
}

/* --- an HTTP script that checks what it is answered ---------------------------------------- */

/* GET /p/N and POST /post with an N-byte body in turn, each with its tag; response() checks
 * each answer against what nginx must say (init's "nginx"), or lua/http_hello.lua ("hello":
 * "Hello, World!" to a GET, 413 to a body). */
static const char http_script[] =
    "local n, server = 0, 'nginx'\n"
    "function init(args) server = args[1] or server end\n"
    "function request()\n"
    "  n = n + 1\n"
    "  if n % 2 == 0 then\n"
    "    return wrk.format('GET', '/p/' .. n), {get = true, n = n}\n"
    "  end\n"
    "  wrk.headers['Content-Type'] = 'text/plain'\n"
    "  return wrk.format('POST', '/post', nil, string.rep('b', n)), {n = n}\n"
    "end\n"
    "function response(status, headers, body, tag)\n"
    "  local want\n"
    "  if server == 'nginx' then\n"
    "    want = tag.get and ('/p/' .. tag.n .. '\\n') or ('POST ' .. tag.n .. '\\n')\n"
    "    if status ~= 200 then return false, 'status ' .. status end\n"
    "  elseif tag.get then\n"
    "    want = 'Hello, World!\\n'\n"
    "  else\n"
    "    if status ~= 413 then return false, 'a body answered ' .. status end\n"
    "    return headers['Connection'] == 'close', 'a 413 without Connection: close'\n"
    "  end\n"
    "  if body ~= want then\n"
    "    return false, string.format('%s got %q, want %q', tag.get and 'GET' or 'POST', body, "
    "want)\n"
    "  end\n"
    "  return true\n"
    "end\n";

static void test_http_script_checks_answers(void **state)
{
    const char *sc = script(0, "http_check.lua", http_script), *log;
    long checks, failed;
    int rc, posts = 0, gets = 0;

    (void)state;
    need_nginx();
    log_reset();
    rc = run_lfb(nginx_port,
                 (const char *const[]){"--expect", "http", "--script", sc, "-t", "1", "-c", "4",
                                       "-n", "400", "-q", NULL},
                 (const char *const[]){"nginx", NULL});
    expect_checks_pass(rc, "nginx");
    script_counts(&checks, &failed);
    assert_int_equal(checks, 400);
    log = log_lines(400);
    for (const char *p = log; *p; p = strchr(p, '\n') + 1) {
        posts += !strncmp(p, "POST /post ", 11) && strcmp(field(p, 6), "\"-\"");
        gets += !strncmp(p, "GET /p/", 7);
    }
    if (posts != 200 || gets != 200)
        fail_msg("want 200 POSTs with a body and 200 GETs, got %d and %d:\n%.2000s", posts, gets,
                 log);
    /* the checks are live: nginx's answers are not http_hello's */
    rc = run_lfb(nginx_port,
                 (const char *const[]){"--expect", "http", "--script", sc, "-c", "2", "-n", "100",
                                       "-q", NULL},
                 (const char *const[]){"hello", NULL});
    script_counts(&checks, &failed);
    if (rc != 1 || failed != 100 ||
        !strstr(lfb.out, "http_check.lua:11: response() returned false"))
        fail_msg("want every check failed against nginx as hello:\n%s", lfb.out);

    /* lfepolld's http_hello.lua: "Hello, World!" to a GET, 413 and a close to a body */
    start_lfepolld("lua/http_hello.lua");
    rc = run_lfb(lfb.server_port,
                 (const char *const[]){"--expect", "http", "--script", sc, "--ok-status", "2xx,413",
                                       "-t", "1", "-c", "2", "-n", "200", "-q", NULL},
                 (const char *const[]){"hello", NULL});
    expect_checks_pass(rc, "http_hello.lua");
    script_counts(&checks, &failed);
    if (checks != 200 || lfb_field("reconnects") < 90)
        fail_msg("want 200 checks, and a reconnect after each 413:\n%s", lfb.out);
    rc = run_lfb(lfb.server_port,
                 (const char *const[]){"--expect", "http", "--script", sc, "-c", "2", "-n", "100",
                                       "-q", NULL},
                 (const char *const[]){"nginx", NULL});
    script_counts(&checks, &failed);
    if (rc != 1 || failed != 100)
        fail_msg("want every check failed against http_hello as nginx:\n%s", lfb.out);
}

/* --- lua/bench/kv_mix.lua ------------------------------------------------------------------ */

static void kv_run(const char *dist, const char *json)
{
    char d[32];

    snprintf(d, sizeof(d), "dist=%s", dist);
    run_lfb(lfb.server_port,
            (const char *const[]){"--expect", "line", "--script", repo(0, "lua/bench/kv_mix.lua"),
                                  "-t", "2", "-c", "16", "-d", "1", "--json", json, "-q", NULL},
            (const char *const[]){"keys=100", "get=0.8", d, NULL});
}

/* Against lua/kv.lua every check passes, uniform and Zipf, over 16 connections of 2 threads;
 * --json's script object says so. */
static void test_kv_mix_against_kv(void **state)
{
    static const char *const dists[] = {"uniform", "zipf"};
    char json[] = "/tmp/lfe-script-json-XXXXXX";

    (void)state;
    start_lfepolld("lua/kv.lua");
    for (int i = 0; i < 2; i++) {
        const char *j;
        close(mkstemp(json));
        kv_run(dists[i], json);
        expect_checks_pass(strstr(lfb.out, "FAILED") ? 1 : 0, dists[i]);
        j = lfb_slurp(json);
        if (!strstr(j, "\"script\": {\"file\": ") ||
            !(lfb_jnum(strstr(j, "\"script\""), "checks") >= 1000) ||
            lfb_jnum(strstr(j, "\"script\""), "failed") != 0 ||
            !strstr(j, "\"first_failure\": null"))
            fail_msg("%s: want 1,000 checks or more, none failed, in --json:\n%s", dists[i], j);
    }
}

/* Against a kv server that forgets every 50th SET (it answers STORED): the checks fail, the
 * run exits 1, --json counts the failures and the summary shows the first message. */
static void test_kv_mix_catches_a_forgetful_server(void **state)
{
    char json[] = "/tmp/lfe-script-json-XXXXXX";
    const char *j, *sc;
    long checks, failed;

    (void)state;
    start_lfepolld("tests/lua/kv_forgets.lua");
    close(mkstemp(json));
    kv_run("zipf", json);
    script_counts(&checks, &failed);
    j = lfb_slurp(json);
    sc = strstr(j, "\"script\"");
    if (!strstr(lfb.out, "lfbench: FAILED: ") || failed <= 0 || !sc ||
        lfb_jnum(sc, "failed") != failed || !strstr(lfb.out, "; the first: ") ||
        !strstr(lfb.out, "kv_mix.lua:") || !strstr(sc, "\"first_failure\": \""))
        fail_msg("want failed checks, counted and said:\n%s\n%s", lfb.out, j);
}

/* --- hostile scripts ----------------------------------------------------------------------- */

/* rc, and out holding needle; said with the output otherwise. */
static void expect_rc_msg(int rc, int want, const char *needle, const char *what)
{
    if (rc != want || !strstr(lfb.out, needle))
        fail_msg("%s: want exit %d and '%s', got %d after %.1f s:\n%s", what, want, needle, rc,
                 elapsed, lfb.out);
}

#define HELLO(sc, ...)                                                                             \
    LFB(lfb.server_port, "--expect", "http", "--script", sc, "-t", "1", "-c", "2", __VA_ARGS__,    \
        "-q")

/* A syntax error is a usage error before the run (exit 2), with its file and line, on one
 * line; an error in init() or setup() as well; one in done() fails the run after the summary. */
static void test_errors_in_each_phase(void **state)
{
    (void)state;
    start_lfepolld("lua/http_hello.lua");
    expect_rc_msg(
        HELLO(script(0, "syntax.lua", "function request()\n  return wrk.format(nil, '/'\nend\n"),
              "-n", "10"),
        2, "lfbench: --script: ", "syntax");
    if (!strstr(lfb.out, "syntax.lua:3: ") ||
        strchr(lfb.out, '\n') != lfb.out + strlen(lfb.out) - 1)
        fail_msg("want one line with syntax.lua:3:\n%s", lfb.out);
    expect_rc_msg(
        HELLO(script(0, "init.lua", "function init(args)\n  local x\n  return x.y\nend\n"), "-n",
              "10"),
        2, "init.lua:3: attempt to index a nil value (local 'x') (in init())", "init");
    expect_rc_msg(
        HELLO(script(0, "setup.lua", "function setup(t)\n  error('no setup')\nend\n"), "-n", "10"),
        2, "setup.lua:2: no setup (in setup())", "setup");
    expect_rc_msg(HELLO(script(0, "done.lua",
                               "function done(s)\n  print('done ran')\n  error('no done')\nend\n"),
                        "-n", "10"),
                  1, "done.lua:3: no done (in done())", "done");
    if (!line_at(lfb.out, "done ran\n") ||
        line_at(lfb.out, "done ran\n") < line_at(lfb.out, "script       "))
        fail_msg("want done() run after the summary:\n%s", lfb.out);
}

/* An error in request() mid-run stops the run at once (not at -d 30), exit 1, file:line. */
static void test_error_mid_run_stops_it(void **state)
{
    (void)state;
    start_lfepolld("lua/http_hello.lua");
    expect_rc_msg(HELLO(script(0, "mid.lua",
                               "local n = 0\nfunction request()\n  n = n + 1\n"
                               "  if n > 50 then error('boom at ' .. n) end\n"
                               "  return wrk.format(nil, '/')\nend\n"),
                        "-d", "30"),
                  1, "mid.lua:4: boom at 51 (in request()); stopping the run", "request() error");
    if (elapsed > 10 || !strstr(lfb.out, "lfbench: FAILED: ") || line_at(lfb.out, "done"))
        fail_msg("want the run stopped at once (%.1f s), failed:\n%s", elapsed, lfb.out);
}

/* A Lua loop that never ends, in request(), response() or init(): stopped by its budget (1 s,
 * init's 10 s), said as such with file:line, and lfbench ends (-d 2 + 10 s, init's 10 s + 10 s
 * at most). Regression: the budget's message was "invalid option '%.' to 'lua_pushfstring'"
 * (the hook formatted it with %.0f, which lua_pushfstring does not know). */
static void test_endless_loops_are_bounded(void **state)
{
    static const struct {
        const char *name, *text, *msg;
        int rc;
        double bound;
    } loops[] = {
        {"loop_request.lua",
         "local n = 0\nfunction request()\n  n = n + 1\n  if n > 20 then while true do end end\n"
         "  return wrk.format(nil, '/')\nend\n",
         "loop_request.lua:4: request() ran over its 1 s budget: a loop that never ends? (in "
         "request())",
         1, 12},
        {"loop_response.lua",
         "local n = 0\nfunction response()\n  n = n + 1\n  if n > 20 then\n    local t = {}\n"
         "    while true do t[1] = n end\n  end\nend\n",
         "loop_response.lua:6: response() ran over its 1 s budget", 1, 12},
        {"loop_init.lua", "function init()\n  while true do end\nend\n",
         "loop_init.lua:2: init() ran over its 10 s budget", 2, 20},
    };

    (void)state;
    start_lfepolld("lua/http_hello.lua");
    for (size_t i = 0; i < sizeof(loops) / sizeof(loops[0]); i++) {
        expect_rc_msg(HELLO(script(0, loops[i].name, loops[i].text), "-d", "2"), loops[i].rc,
                      loops[i].msg, loops[i].name);
        if (elapsed > loops[i].bound * lfb.slow)
            fail_msg("%s: lfbench took %.1f s, want at most %.0f", loops[i].name, elapsed,
                     loops[i].bound);
    }
}

/* A call stuck in C (os.execute of a 30 s sleep in response()), out of the hook's reach: main's
 * watchdog ends lfbench within the budget and its grace (1 + 2 s), exit 1, said. */
static void test_stuck_c_call_ends_by_the_watchdog(void **state)
{
    (void)state;
    start_lfepolld("lua/http_hello.lua");
    expect_rc_msg(HELLO(script(0, "stuck.lua",
                               "local n = 0\nfunction response()\n  n = n + 1\n"
                               "  if n == 20 then os.execute('sleep 30') end\nend\n"),
                        "-d", "30"),
                  1, "lfbench: FAILED: thread 0 has been in a call into the script for over 3 s",
                  "stuck");
    if (elapsed > 10 * lfb.slow)
        fail_msg("want the watchdog to end it within 10 s, took %.1f s", elapsed);
}

/* Endless memory is an error, not a crash: a string of 1 TiB, a table that grows without end
 * (the state's 512 MiB cap), in request(): exit 2 before the run, exit 1 during it. */
static void test_endless_memory_is_an_error(void **state)
{
    int rc;

    (void)state;
    start_lfepolld("lua/http_hello.lua");
    expect_rc_msg(
        HELLO(script(0, "rep.lua", "function request()\n  return string.rep('x', 1 << 40)\nend\n"),
              "-n", "10"),
        2, "rep.lua:2: resulting string too large (in request())", "string.rep");
    rc = HELLO(script(0, "grow.lua",
                      "local n, t = 0, {}\nfunction request()\n  n = n + 1\n"
                      "  if n > 20 then\n    local s = string.rep('y', 1 << 20)\n"
                      "    for i = 1, 1e9 do t[i] = s .. i end\n"
                      "  end\n  return wrk.format(nil, '/')\nend\n"),
               "-d", "30");
    /* under a sanitizer, 512 MiB can take longer to fill than the watchdog waits for a C
     * call: that ends it too, with exit 1 */
    if (rc != 1 || (!strstr(lfb.out, "not enough memory (in request())") &&
                    !(lfb.slow > 1 && strstr(lfb.out, "does not return"))))
        fail_msg("a growing table: want exit 1 and 'not enough memory', got %d:\n%s", rc, lfb.out);
    if (elapsed > 15 * lfb.slow)
        fail_msg("want the run ended at once, took %.1f s", elapsed);
}

/* done() runs once, after the summary and --json are written, with the run's figures: its
 * summary.requests is the summary's and --json's. */
static void test_done_once_after_the_summary(void **state)
{
    char json[] = "/tmp/lfe-script-json-XXXXXX";
    const char *d, *sum;
    long reqs = -1, checks = -1;
    int rc;

    (void)state;
    start_lfepolld("lua/http_hello.lua");
    close(mkstemp(json));
    rc = HELLO(script(0, "done_once.lua",
                      "function response() return true end\n"
                      "function done(summary, latency, requests)\n"
                      "  io.write(string.format('DONE requests=%d checks=%d count=%d\\n',\n"
                      "    summary.requests, summary.checks, latency.count))\nend\n"),
               "-n", "500", "--json", json);
    d = line_at(lfb.out, "DONE ");
    sum = line_at(lfb.out, "script       ");
    if (rc != 0 || !d || !sum || d < sum || strstr(d + 1, "DONE ") ||
        sscanf(d, "DONE requests=%ld checks=%ld", &reqs, &checks) != 2)
        fail_msg("rc %d: want one DONE line after the summary:\n%s", rc, lfb.out);
    if (reqs != 500 || checks != 500 || lfb_field("requests") != 500 ||
        lfb_jtop(lfb_slurp(json), "requests") != 500 || !strstr(d, "count=500"))
        fail_msg("want done() told 500 requests, as the summary and --json:\n%s", lfb.out);
}

/* response() returning false is a failed check: a mismatch, its message with the file. */
static void test_response_false_is_a_mismatch(void **state)
{
    long checks, failed;
    int rc;

    (void)state;
    start_lfepolld("lua/http_hello.lua");
    rc = HELLO(script(0, "tenth.lua",
                      "local n = 0\nfunction response(status, headers, body)\n  n = n + 1\n"
                      "  if n % 10 == 0 then return false, 'the tenth, ' .. n end\n"
                      "  return true\nend\n"),
               "-n", "100");
    script_counts(&checks, &failed);
    if (rc != 1 || checks != 100 || failed != 10 || lfb_field("mismatch") != 10 ||
        lfb_field("requests") != 100 ||
        !strstr(lfb.out, "tenth.lua:2: response() returned false: the tenth, 10\n"))
        fail_msg("rc %d: want 10 of 100 checks failed, as mismatches:\n%s", rc, lfb.out);
}

/* The sum of key's values over the per-second objects of a --json text's "series". */
static long series_sum(const char *json, const char *key)
{
    const char *p = strstr(json, "\"series\": ["), *end = p ? strstr(p, "\"steps\": [") : NULL;
    char pat[64];
    long sum = 0;

    snprintf(pat, sizeof(pat), "\"%s\": ", key);
    for (p = p ? strstr(p, pat) : NULL; p && p < end; p = strstr(p + 1, pat))
        sum += atol(p + strlen(pat));
    return sum;
}

/* test_failed_checks_count_in_the_rate: a response that failed the script's check is still a
 * response the server gave: it counts in the requests, req/s, --json (its qps and series) and
 * lfbench merge, and the failures are said beside it, as wrk's "Non-2xx or 3xx responses". With
 * every other check failing, req/s read half the server's rate. */
static void test_failed_checks_count_in_the_rate(void **state)
{
    static char ja[1 << 20];
    char a[] = "/tmp/lfe-script-a-XXXXXX", b[] = "/tmp/lfe-script-b-XXXXXX",
         ab[] = "/tmp/lfe-script-ab-XXXXXX", pa[300], pb[300];
    const char *half = script(0, "half.lua",
                              "local n = 0\nfunction response(status, headers, body)\n"
                              "  n = n + 1\n  return n % 2 == 1, 'the even one'\nend\n");
    const char *j;
    long checks, failed;
    int rc;

    (void)state;
    start_lfepolld("lua/http_hello.lua");
    close(mkstemp(a));
    close(mkstemp(b));
    close(mkstemp(ab));
    rc = HELLO(half, "-n", "1000", "--json", a);
    script_counts(&checks, &failed);
    if (rc != 1 || lfb_field("requests") != 1000 || checks != 1000 || failed != 500 ||
        lfb_field("mismatch") != 500 ||
        !strstr(lfb.out, "; 500 of them failed the script's check\n") ||
        !strstr(lfb.out, "(µs, 1000 samples)"))
        fail_msg("rc %d: want 1000 responses counted, 500 of them failed, exit 1:\n%s", rc,
                 lfb.out);
    snprintf(ja, sizeof(ja), "%s", lfb_slurp(a));
    j = ja;
    if (!lfb_json_valid(j, strlen(j)) || lfb_jtop(j, "requests") != 1000 ||
        /* measured_s is written to the ms: a run of some 40 ms is off by up to 0.5 ms */
        fabs(lfb_jtop(j, "qps") * lfb_jtop(j, "measured_s") - 1000) >
            0.0005 * lfb_jtop(j, "qps") + 1 ||
        lfb_jnum(strstr(j, "\"script\""), "checks") != 1000 ||
        lfb_jnum(strstr(j, "\"script\""), "failed") != 500 || series_sum(j, "requests") != 1000 ||
        series_sum(j, "check_failed") != 500 || series_sum(j, "checks") != 1000)
        fail_msg("want --json to count the 1000 and the 500 as the summary, second by second:\n%s",
                 j);
    script(2, "a.json", ja);
    rc = HELLO(half, "-n", "600", "--json", b);
    if (rc != 1 || lfb_field("requests") != 600)
        fail_msg("rc %d: want 600 responses counted:\n%s", rc, lfb.out);
    script(3, "b.json", lfb_slurp(b));
    snprintf(pa, sizeof(pa), "%s/a.json", tmpdir);
    snprintf(pb, sizeof(pb), "%s/b.json", tmpdir);
    /* one run after the other: merged as one, for its counts */
    rc = lfb_run(
        (const char *const[]){lfb.lfbench, "merge", "--allow-disjoint", "--json", ab, pa, pb, NULL},
        lfb.out, sizeof(lfb.out), 30);
    j = lfb_slurp(ab);
    script_counts(&checks, &failed);
    if (rc != 0 || lfb_field("requests") != 1600 || checks != 1600 || failed != 800 ||
        !strstr(lfb.out, "; 800 of them failed the script's check\n") ||
        lfb_jtop(j, "requests") != 1600 || lfb_jnum(strstr(j, "\"script\""), "failed") != 800 ||
        series_sum(j, "requests") != 1600 || series_sum(j, "check_failed") != 800)
        fail_msg(
            "rc %d: want the merge to count 1600 responses, 800 of them failed, in its summary "
            "and --json:\n%s\n%s",
            rc, lfb.out, j);
}

/* Regression: a script that makes its globals strict (a metatable on _G whose __index raises,
 * a common Lua idiom) aborted lfbench: the glue read the optional globals (response, delay,
 * done...) with lua_getglobal outside any protected call, and the script's error unwound to
 * Lua's panic. thread:set and thread:get also copy between states, and a value that cannot pass
 * (a function, a table holding itself) is an error the script can catch. */
static void test_strict_globals_and_transfers(void **state)
{
    int rc;

    (void)state;
    start_lfepolld("lua/http_hello.lua");
    rc = HELLO(
        script(0, "strict.lua",
               "local threads = {}\n"
               "function setup(thread)\n"
               "  thread:set('cfg', {a = 1, b = {c = 'x', d = {1, 2, 3}}})\n"
               "  local ok, err = pcall(thread.set, thread, 'f', print)\n"
               "  assert(not ok and err:find('only nil'), err)\n"
               "  local cyc = {}; cyc.self = cyc\n"
               "  ok, err = pcall(thread.set, thread, 'c', cyc)\n"
               "  assert(not ok and err:find('nested'), err)\n"
               "  threads[#threads + 1] = thread\n"
               "end\n"
               "function init()\n"
               "  assert(cfg.b.d[3] == 3); seen = cfg.b.c\n"
               "  setmetatable(_G, {__index = function(_, k) error('strict: ' .. k, 2) end})\n"
               "end\n"
               "function done()\n"
               "  for _, t in ipairs(threads) do\n"
               "    assert(t:get('seen') == 'x' and t:get('nothing') == nil)\n"
               "  end\n"
               "  print('transfers ok')\n"
               "end\n"),
        "-n", "50");
    if (rc != 0 || !strstr(lfb.out, "transfers ok\n"))
        fail_msg("rc %d: want a strict script to run, and its transfers to hold:\n%s", rc, lfb.out);
}

/* Regression: lfbench freed each thread, its state with it, before it closed main's state,
 * whose finalizers (__gc, run by lua_close at exit) may still hold the threads setup() was
 * handed: thread:get() in one read freed memory (a segfault, exit 139). */
static void test_finalizer_reaches_threads_at_exit(void **state)
{
    int rc;

    (void)state;
    start_lfepolld("lua/http_hello.lua");
    rc =
        LFB(lfb.server_port, "--expect", "http", "-t", "2", "-c", "2", "-n", "20", "-q", "--script",
            script(0, "gc_threads.lua",
                   "local threads = {}\n"
                   "function setup(thread)\n"
                   "  thread:set('x', 40 + thread.id)\n"
                   "  threads[#threads + 1] = thread\n"
                   "end\n"
                   "local keep = setmetatable({}, {__gc = function()\n"
                   "  for _, t in ipairs(threads) do\n"
                   "    io.write('gc saw ', tostring(t:get('x')), '\\n')\n"
                   "  end\n"
                   "end})\n"));
    if (rc != 0 || !line_at(lfb.out, "gc saw 41\n") || !line_at(lfb.out, "gc saw 42\n"))
        fail_msg("rc %d: want exit 0 and main's finalizer to read both threads:\n%s", rc, lfb.out);
}

/* lfbench with the words of pre and 127.0.0.1:port last, its output in lfb.out, killed
 * (SIGKILL, by this process: lfbench's own alarm() for its script phases cancels an alarm set
 * before exec) after limit_s; under RLIMIT_AS of as_mb MiB (0: none; none under ASan or TSan
 * either, whose shadow takes terabytes of address space), so that a copy that grows without end
 * fails the test instead of eating the machine. *maxrss_kb: its peak resident size. Returns its
 * exit status, or 128 + the signal that ended it. */
static int run_bounded(int port, const char *const *pre, unsigned as_mb, unsigned limit_s,
                       long *maxrss_kb)
{
    const char *args[64] = {lfb.lfbench}, *san = getenv("LFE_SANITIZER");
    char target[32], path[] = "/tmp/lfe-bench-XXXXXX";
    int n = 1, fd = mkstemp(path), status;
    struct rusage ru;
    double t0 = mono_s();
    pid_t pid, got;

    assert_true(fd >= 0);
    for (; *pre && n < 60; pre++)
        args[n++] = *pre;
    snprintf(target, sizeof(target), "127.0.0.1:%d", port);
    args[n++] = target;
    args[n] = NULL;
    if (san && (!strcmp(san, "address") || !strcmp(san, "thread")))
        as_mb = 0;
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct rlimit rl = {(rlim_t)as_mb << 20, (rlim_t)as_mb << 20};
        if (as_mb)
            setrlimit(RLIMIT_AS, &rl);
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        execv(args[0], (char *const *)args);
        _exit(127);
    }
    while ((got = wait4(pid, &status, WNOHANG, &ru)) == 0) {
        if (mono_s() - t0 > limit_s)
            kill(pid, SIGKILL);
        lfb_sleep_ms(20);
    }
    assert_int_equal(got, pid);
    elapsed = mono_s() - t0;
    *maxrss_kb = ru.ru_maxrss;
    lfb_read_back(fd, lfb.out, sizeof(lfb.out));
    close(fd);
    unlink(path);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Regression: lfbench pushed response()'s arguments before the call began, and an allocation
 * there may run a collection step and the script's finalizers, which Lua runs with hooks off:
 * a __gc that loops ran outside any call, where neither the budget nor the watchdog saw it, and
 * lfbench hung for ever. The pushes are part of the call: the watchdog ends it, said. (No
 * request(), and a response() that allocates nothing after its first call: the collection
 * steps come from the pushes.) */
static void test_finalizer_loop_is_seen_by_the_watchdog(void **state)
{
    long rss;
    int rc;

    (void)state;
    start_lfepolld("lua/http_hello.lua");
    rc = run_bounded(lfb.server_port,
                     (const char *const[]){"--expect", "http", "-c", "2", "-d", "30", "-q",
                                           "--script",
                                           script(0, "gc_loop.lua",
                                                  "local armed = false\n"
                                                  "function response()\n"
                                                  "  if not armed then\n"
                                                  "    armed = true\n"
                                                  "    setmetatable({}, {__gc = function()\n"
                                                  "      while true do end\n"
                                                  "    end})\n"
                                                  "  end\n"
                                                  "  return true\n"
                                                  "end\n"),
                                           NULL},
                     0, 40 * (unsigned)lfb.slow, &rss);
    if (rc != 1 ||
        !strstr(lfb.out, "lfbench: FAILED: thread 0 has been in a call into the "
                         "script for over 3 s") ||
        elapsed > 20 * lfb.slow)
        fail_msg("rc %d after %.1f s: want the watchdog to end a finalizer's loop:\n%s", rc,
                 elapsed, lfb.out);
}

/* Regression: thread:set() from setup() copies into a thread's state that is in none of its
 * calls, where the state's 512 MiB cap did not hold, and a copy made a table anew each time it
 * was reached: 30 tables that share their children ({v, v}) became 2^30 tables (4.8 GB in 32 s
 * before setup()'s alarm). A copy keeps the shape (the 30 arrive shared, both ways: set in
 * setup(), get in done()), and whatever a copy adds to a state is under its cap, said with the
 * call's name. Under a 1.25 GiB RLIMIT_AS and a 40 s alarm: the
 * copy that grows without end fails the test, not the machine. */
static void test_copies_keep_shape_within_the_cap(void **state)
{
    long rss;
    int rc;

    (void)state;
    start_lfepolld("lua/http_hello.lua");
    rc = run_bounded(
        lfb.server_port,
        (const char *const[]){
            "--expect", "http", "-t", "2", "-c", "2", "-n", "20", "-q", "--script",
            script(0, "dag.lua",
                   "local function dag()\n"
                   "  local v = {}\n"
                   "  for i = 1, 30 do v = {v, v} end\n"
                   "  return v\n"
                   "end\n"
                   "local function depth(x)\n"
                   "  local d = 0\n"
                   "  while x[1] do assert(x[1] == x[2], 'not shared'); x = x[1]; d = d + 1 end\n"
                   "  return d\n"
                   "end\n"
                   "local threads = {}\n"
                   "function setup(thread)\n"
                   "  thread:set('v', dag())\n"
                   "  threads[#threads + 1] = thread\n"
                   "end\n"
                   "function init() got = depth(v); mine = dag() end\n"
                   "function done()\n"
                   "  for _, t in ipairs(threads) do\n"
                   "    io.write('thread ', t.id, ': set ', t:get('got'), ', get ',\n"
                   "      depth(t:get('mine')), '\\n')\n"
                   "  end\n"
                   "end\n"),
            NULL},
        1280, 40 * (unsigned)lfb.slow, &rss);
    if (rc != 0 || !line_at(lfb.out, "thread 1: set 30, get 30\n") ||
        !line_at(lfb.out, "thread 2: set 30, get 30\n"))
        fail_msg("rc %d: want 30 shared tables copied as 30, both ways:\n%.3000s", rc, lfb.out);
    /* A thread's state holds 480 MiB; setup()'s next 64 MiB would take it past its cap. Each
     * string.rep repeats 1 KiB: Lua's repeats a byte with one memcpy a byte, which under
     * ThreadSanitizer took the 480 MiB past setup()'s budget. */
    rc = run_bounded(
        lfb.server_port,
        (const char *const[]){
            "--expect", "http", "-c", "1", "-n", "5", "-q", "--script",
            script(0, "fill.lua",
                   "if wrk.thread then\n"
                   "  keep = {}\n"
                   "  for i = 1, 30 do keep[i] = string.rep(string.rep('x', 1024), 16 << 10) end\n"
                   "end\n"
                   "function setup(thread)\n"
                   "  thread:set('s', string.rep(string.rep('y', 1024), 64 << 10))\n"
                   "end\n"),
            NULL},
        1280, 40 * (unsigned)lfb.slow, &rss);
    if (rc != 2 ||
        !strstr(lfb.out, "fill.lua:6: thread:set('s'): the copy exceeds the 512 MiB "
                         "cap of thread 1's state") ||
        !strstr(lfb.out, "(in setup())\n"))
        fail_msg("rc %d: want the copy past the thread's cap refused, said:\n%.3000s", rc, lfb.out);
}

/* Regression: responses kept for response() were capped per connection (64 MiB) but not in all,
 * and one over 64 MiB was read on to its end: an endless chunked body from a hostile server took
 * 266 MB at -c 4, and the run said nothing but timeouts. --script-buffers-mb bounds what is held
 * (16 MiB here: lfbench's peak RSS stays far below the 4 x 64 MiB it reached); a response that
 * would pass it, or 64 MiB, fails its check at once, with the reason, and its connection closes
 * (no timeout waits for the end of an endless body). */
static void test_response_memory_is_bounded(void **state)
{
    const char *san = getenv("LFE_SANITIZER"), *sc;
    long rss, checks, failed;
    int rc;

    (void)state;
    lfb_start((const char *const[]){lfb.badserver, "PORT", "http", "endless", NULL});
    sc = script(0, "keep.lua", "function response(status, headers, body) return true end\n");
    rc = run_bounded(lfb.server_port,
                     (const char *const[]){"--expect", "http", "--script", sc, "-c", "4", "-d", "2",
                                           "--timeout", "60s", "--script-buffers-mb", "16", "-q",
                                           NULL},
                     0, 30 * (unsigned)lfb.slow, &rss);
    script_counts(&checks, &failed);
    if (rc != 1 || failed < 1 || failed != checks || lfb_field("timeout") != 0 ||
        !strstr(lfb.out, "; the first: a response not kept for response(): the script's buffers "
                         "would pass --script-buffers-mb 16\n"))
        fail_msg("rc %d: want responses refused at the 16 MiB bound, each a failed check:\n%s", rc,
                 lfb.out);
    /* Regression: a refused response is a failed check but no response: the requests line
     * said "requests 0 in 2.00 s: ...; 265 of them failed the script's check", 265 of none */
    {
        const char *l = strstr(lfb.out, "\nrequests     "), *eol, *of;
        unsigned long long nreq, nof = 0;

        assert_non_null(l);
        nreq = strtoull(l + 14, NULL, 10);
        eol = strchr(l + 1, '\n');
        of = strstr(l, " of them failed the script's check");
        if (of && of < eol) {
            while (of > l && of[-1] >= '0' && of[-1] <= '9')
                of--;
            nof = strtoull(of, NULL, 10);
        }
        if (nof > nreq)
            fail_msg("the requests line counts %llu failed checks of its %llu responses:\n%s", nof,
                     nreq, lfb.out);
    }
    /* sanitizers keep freed memory in quarantine: the bound is checked without them */
    if ((!san || !*san || !strcmp(san, "undefined")) && rss > 100 * 1024)
        fail_msg("lfbench peaked at %ld KiB with --script-buffers-mb 16:\n%s", rss, lfb.out);
    rc = run_bounded(lfb.server_port,
                     (const char *const[]){"--expect", "http", "--script", sc, "-c", "1", "-d", "2",
                                           "--timeout", "60s", "-q", NULL},
                     0, 30 * (unsigned)lfb.slow, &rss);
    script_counts(&checks, &failed);
    if (rc != 1 || failed < 1 || lfb_field("timeout") != 0 ||
        !strstr(lfb.out, "; the first: a response over 64 MiB, too big to hand to response()\n"))
        fail_msg("rc %d: want a response over 64 MiB refused at once, not timed out:\n%s", rc,
                 lfb.out);
    rc = LFB(lfb.server_port, "--expect", "http", "--script", sc, "--script-buffers-mb", "0");
    if (rc != 2 || strcmp(lfb.out, "lfbench: --script-buffers-mb: '0' is not a size in MiB from 1 "
                                   "to 1048576\n"))
        fail_msg("rc %d: want --script-buffers-mb 0 refused on one line:\n%s", rc, lfb.out);
}

/* Regression (found with the response bound): each connection's request slots keep a copy of
 * the request() string they carry, and nothing bounded them in all: a 1 MiB string at -c 64
 * held 64 MiB of copies, at -c 10000 10 GiB. The copies count against --script-buffers-mb with
 * the responses: past it the script fails, with the reason, and the run exits 1; below it the
 * same string runs. */
static void test_request_copies_are_bounded(void **state)
{
    const char *sc;
    int rc;

    (void)state;
    lfb_start((const char *const[]){lfb.lfepolld, "--listen", "127.0.0.1:PORT", "-q", NULL});
    sc = script(0, "big.lua",
                "local big = string.rep('x', 1 << 20)\nfunction request() return big end\n");
    rc = LFB(lfb.server_port, "--script", sc, "-c", "64", "-d", "2", "--script-buffers-mb", "16",
             "-q");
    if (rc != 1 || !strstr(lfb.out, "a request() string of 1048576 bytes: its copies in flight "
                                    "(one per connection and pipeline slot) would pass "
                                    "--script-buffers-mb 16"))
        fail_msg("rc %d: want the copies past --script-buffers-mb 16 to stop the run, said:\n%s",
                 rc, lfb.out);
    rc = LFB(lfb.server_port, "--script", sc, "-c", "8", "-d", "1", "--script-buffers-mb", "16",
             "-q");
    if (rc != 0)
        fail_msg("rc %d: 8 copies of 1 MiB are within 16 MiB:\n%s", rc, lfb.out);
}

/* Regression: the statistics done() is handed freed their arrays in their own __gc, which at
 * exit runs before the finalizer of an object made earlier: a script that kept `latency` in a
 * global and read it from its own __gc read the freed arrays (UBSan: a load of a null pointer
 * in stats_pct), a segfault, exit 139. The arrays are the object's own memory now: read from a
 * finalizer, the statistics are what done() saw. */
static void test_stats_outlive_their_finalizer(void **state)
{
    const char *l;
    long p99 = -1, count = -1, first = -1, nreq = -1;
    int rc;

    (void)state;
    start_lfepolld("lua/http_hello.lua");
    rc = HELLO(
        script(0, "gc_stats.lua",
               "KEEP = setmetatable({}, {__gc = function()\n"
               "  if not LAT then return end\n"
               "  io.write(string.format('gc: p99 %d count %d first %d requests %d\\n',\n"
               "    LAT:percentile(99), LAT.count, select(2, LAT(1)), #REQ))\n"
               "end})\n"
               "function done(summary, latency, requests) LAT, REQ = latency, requests end\n"),
        "-n", "20");
    l = line_at(lfb.out, "gc: ");
    if (rc != 0 || !l ||
        sscanf(l, "gc: p99 %ld count %ld first %ld requests %ld", &p99, &count, &first, &nreq) !=
            4 ||
        p99 <= 0 || count != 20 || first < 1 || nreq < 0)
        fail_msg("rc %d: want exit 0 and the finalizer to read done()'s statistics:\n%s", rc,
                 lfb.out);
}

/* Regression: each thread took its first request() string for the check before the run and sent
 * it never, where wrk does so in its first thread only: wrk's counter.lua sends /0 from every
 * thread but the first. Each thread tags its strings from 0 and counts what was answered. */
static void test_first_request_is_the_first_threads_check(void **state)
{
    int rc;

    (void)state;
    start_lfepolld("lua/http_hello.lua");
    rc =
        LFB(lfb.server_port, "--expect", "http", "-t", "3", "-c", "3", "-n", "30", "-q", "--script",
            script(0, "first.lua",
                   "local threads = {}\n"
                   "function setup(thread) threads[#threads + 1] = thread end\n"
                   "local n = 0\n"
                   "function request()\n"
                   "  n = n + 1\n"
                   "  return wrk.format(nil, '/' .. (n - 1)), n - 1\n"
                   "end\n"
                   "answered, zero = 0, false\n"
                   "function response(status, headers, body, tag)\n"
                   "  answered = answered + 1\n"
                   "  zero = zero or tag == 0\n"
                   "  return status == 200\n"
                   "end\n"
                   "function done()\n"
                   "  for _, t in ipairs(threads) do\n"
                   "    io.write(string.format('thread %d: %d answered, /0 %s\\n', t.id,\n"
                   "      t:get('answered'), t:get('zero') and 'sent' or 'not sent'))\n"
                   "  end\n"
                   "end\n"));
    if (rc != 0 || !line_at(lfb.out, "thread 1: 10 answered, /0 not sent\n") ||
        !line_at(lfb.out, "thread 2: 10 answered, /0 sent\n") ||
        !line_at(lfb.out, "thread 3: 10 answered, /0 sent\n"))
        fail_msg("rc %d: want /0 sent by threads 2 and 3, not by thread 1:\n%s", rc, lfb.out);
}

/* Regression: a script's message reached the summary and stderr as the script wrote it:
 * response() returning false, "a\nb" split the summary's script line in two, and an error of
 * 50 MB was a 50 MB line (stderr, the summary, --json). Each is one line, cut at 1 KiB. (2 MB
 * here: making 50 MB outlasts the watchdog's 3 s under ThreadSanitizer.) */
static void test_messages_are_one_short_line(void **state)
{
    const char *l, *e;
    int rc;

    (void)state;
    start_lfepolld("lua/http_hello.lua");
    rc = HELLO(script(0, "nl.lua",
                      "function response()\n  return false, 'line one\\nline two\\tand\\rthree'\n"
                      "end\n"),
               "-n", "5");
    if (rc != 1 || !strstr(lfb.out, "nl.lua:1: response() returned false: line one line two "
                                    "and three\n"))
        fail_msg("rc %d: want the failure on one line:\n%s", rc, lfb.out);
    rc = HELLO(script(0, "big.lua", "function response()\n  error(string.rep('x', 2e6))\nend\n"),
               "-n", "5");
    l = line_at(lfb.out, "script       ");
    e = l ? strchr(l, '\n') : NULL;
    if (rc != 1 || !e || e - l > 1200 || !strstr(l, "xxx [...] (in response())\n"))
        fail_msg("rc %d: want a 2 MB error cut to about 1 KiB, marked, on one line:\n%.3000s", rc,
                 lfb.out);
    rc = HELLO(script(0, "bigreq.lua",
                      "local n = 0\nfunction request()\n  n = n + 1\n"
                      "  if n > 5 then error(string.rep('\\n\\195\\169', 5e5)) end\n"
                      "  return wrk.format()\nend\n"),
               "-n", "50");
    l = strstr(lfb.out, "lfbench: script error in thread 0: ");
    e = l ? strchr(l, '\n') : NULL;
    if (rc != 1 || !e || e - l > 1200 || !strstr(l, "bigreq.lua:4:  \xc3\xa9 \xc3\xa9") ||
        !strstr(l, " [...] (in request()); stopping the run\n"))
        fail_msg("rc %d: want a 1.5 MB error of newlines cut, on one line:\n%.3000s", rc, lfb.out);
    if (strstr(l, "\xc3 [...]"))
        fail_msg("want the cut at a character's start:\n%.3000s", l);
}

/* Regression: -n counted strings, not requests: a request() string of 3 pipelined requests
 * with -n 10 sent 12 (each string went out whole). The last string is cut to the requests
 * left, in every shape of the run (threads, connections, --pipeline). */
static void test_n_counts_requests_of_a_pipelined_string(void **state)
{
    static const char *const shapes[][6] = {
        {"-t", "1", "-c", "1", "--pipeline", "1"},
        {"-t", "1", "-c", "2", "--pipeline", "1"},
        {"-t", "2", "-c", "3", "--pipeline", "2"},
    };
    static const char *const ns[] = {"10", "11", "11"};
    const char *sc;

    (void)state;
    start_lfepolld("lua/http_hello.lua");
    sc = script(0, "three.lua",
                "local req\n"
                "function init()\n"
                "  req = wrk.format(nil, '/1') .. wrk.format(nil, '/2') .. wrk.format(nil, '/3')\n"
                "end\n"
                "function request() return req end\n"
                "function response(status) return status == 200 end\n");
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        long checks, failed, want = atol(ns[i]);
        int rc =
            LFB(lfb.server_port, "--expect", "http", "--script", sc, "-q", "-n", ns[i],
                shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3], shapes[i][4], shapes[i][5]);
        script_counts(&checks, &failed);
        if (rc != 0 || lfb_field("requests") != want || checks != want || failed != 0)
            fail_msg("shape %zu, -n %ld: want exactly %ld requests, each checked (rc %d):\n%s", i,
                     want, want, rc, lfb.out);
    }
}

/* Regression (white-box review): with --pipeline 4, a later request() string of more requests
 * than the first was accepted while the connection had room, refused when it had not: a rule
 * that hung on timing. The first string sets the batch; a longer one is a script error, always. */
static void test_batch_rule_is_fixed(void **state)
{
    int rc;

    (void)state;
    start_lfepolld("lua/http_hello.lua");
    rc = HELLO(script(0, "grows.lua",
                      "local n = 0\n"
                      "function request()\n"
                      "  n = n + 1\n"
                      "  local one = wrk.format('GET', '/')\n"
                      "  return n == 2 and one .. one or one\n"
                      "end\n"),
               "--pipeline", "4", "-d", "1");
    if (rc != 1 || !strstr(lfb.out, "more than 1 requests"))
        fail_msg("rc %d: want a string longer than the first refused:\n%s", rc, lfb.out);
}

/* delay() and -R are refused (one line, exit 2); the words after "--" reach init(args), with
 * args[0] the target; "--" words without --script are refused. */
static void test_usage(void **state)
{
    const char *sc;
    char want[64];
    int rc;

    (void)state;
    start_lfepolld("lua/http_hello.lua");
    sc = script(0, "delay.lua", "function delay() return 5 end\n");
    rc = LFB(lfb.server_port, "--expect", "http", "--script", sc, "-R", "100", "-d", "1", "-q");
    if (rc != 2 || !strstr(lfb.out, "defines delay()") || !strstr(lfb.out, "-R") ||
        strchr(lfb.out, '\n') != lfb.out + strlen(lfb.out) - 1)
        fail_msg("want delay() with -R refused on one line:\n%s", lfb.out);
    sc = script(0, "args.lua",
                "function init(args)\n"
                "  io.write('ARGS ', #args, ' [', table.concat(args, '|'), '] ', args[0], '\\n')\n"
                "end\n");
    rc = run_lfb(lfb.server_port,
                 (const char *const[]){"--expect", "http", "--script", sc, "-n", "10", "-q", NULL},
                 (const char *const[]){"a", "b c", "--json", "-n", NULL});
    snprintf(want, sizeof(want), "ARGS 4 [a|b c|--json|-n] 127.0.0.1:%d\n", lfb.server_port);
    if (rc != 0 || !line_at(lfb.out, want) || lfb_field("requests") != 10)
        fail_msg("rc %d: want '%s':\n%s", rc, want, lfb.out);
    rc = run_lfb(lfb.server_port, (const char *const[]){"--expect", "http", "-n", "10", NULL},
                 (const char *const[]){"a", NULL});
    if (rc != 2 || !strstr(lfb.out, "arguments after '--' are a script's"))
        fail_msg("want words after -- without --script refused:\n%s", lfb.out);
}

/* --- modes ----------------------------------------------------------------------------------- */

/* Each request to a path of its own, with its number as the tag; response() checks the body
 * and the tag; "fail=K" (init's args) fails every Kth check. */
static const char mode_script[] =
    "local n, fail, seen = 0, 0, 0\n"
    "function init(args)\n"
    "  for _, a in ipairs(args) do fail = tonumber(a:match('^fail=(%d+)$')) or fail end\n"
    "end\n"
    "function request()\n"
    "  n = n + 1\n"
    "  return wrk.format('GET', '/m/' .. n), n\n"
    "end\n"
    "function response(status, headers, body, tag)\n"
    "  seen = seen + 1\n"
    "  if status ~= 200 or body ~= 'Hello, World!\\n' or math.type(tag) ~= 'integer' then\n"
    "    return false, 'bad answer to ' .. tostring(tag)\n"
    "  end\n"
    "  if fail > 0 and seen % fail == 0 then return false, 'planned failure' end\n"
    "  return true\n"
    "end\n";

static void mode_run(const char *what, const char *const *args, bool failing)
{
    const char *pre[32] = {"--expect", "http", "--script", script(1, "modes.lua", mode_script),
                           "-t",       "1",    "-q"};
    long checks, failed, requests;
    int n = 7, rc;

    for (; *args; args++)
        pre[n++] = *args;
    pre[n] = NULL;
    rc = run_lfb(lfb.server_port, pre,
                 failing ? (const char *const[]){"fail=7", NULL}
                         : (const char *const[]){"fail=0", NULL});
    script_counts(&checks, &failed);
    requests = lfb_field("requests");
    if (failing) {
        if (rc != 1 || failed <= 0 || checks < 7 * failed || !strstr(lfb.out, "; the first: ") ||
            !strstr(lfb.out, "planned failure"))
            fail_msg("%s: want exit 1 and every 7th check failed:\n%s", what, lfb.out);
    } else if (rc != 0 || failed != 0 || requests <= 0 || checks < requests) {
        fail_msg("%s: rc %d, want every response checked and passed:\n%s", what, rc, lfb.out);
    }
}

/* Every mode runs the script, its checks counted: the open loop, a sweep, a search,
 * --pipeline, short mode (closed and open loop), --hdr-log; failed checks fail each. */
static void test_modes(void **state)
{
    char hlog[] = "/tmp/lfe-script-hlog-XXXXXX";
    const char *h;

    (void)state;
    start_lfepolld("lua/http_hello.lua");
    close(mkstemp(hlog));
    for (int failing = 0; failing <= 1; failing++) {
        mode_run("-R", (const char *const[]){"-R", "400", "-d", "0.5", "-c", "4", NULL}, failing);
        if (!failing && lfb_field("requests") < 150)
            fail_msg("-R 400 -d 0.5: want about 200 requests:\n%s", lfb.out);
        mode_run("--rate-sweep",
                 (const char *const[]){"--rate-sweep", "200:400:200", "-d", "0.5", "-c", "4", NULL},
                 failing);
        mode_run("--pipeline 4",
                 (const char *const[]){"--pipeline", "4", "-c", "2", "-n", "2000", NULL}, failing);
        mode_run("--mode short",
                 (const char *const[]){"--mode", "short", "-c", "4", "-n", "300", NULL}, failing);
        mode_run(
            "--mode short -R",
            (const char *const[]){"--mode", "short", "-R", "300", "-d", "0.5", "-c", "4", NULL},
            failing);
    }
    mode_run("--find-rate",
             (const char *const[]){"--find-rate", "p99=200ms", "--rate-sweep", "200:400:200", "-d",
                                   "0.5", "-c", "4", NULL},
             false);
    if (!strstr(lfb.out, "found        400 requests/s kept the bound"))
        fail_msg("--find-rate: want 400/s found:\n%s", lfb.out);
    mode_run("--hdr-log", (const char *const[]){"--hdr-log", hlog, "-d", "1", "-c", "2", NULL},
             false);
    h = lfb_slurp(hlog);
    if (!strstr(h, "#[Histogram log format version 1.3]") || !strstr(h, ",HISTF"))
        fail_msg("want an interval log with a histogram:\n%.500s", h);
}

/* --json of a script run, and lfbench merge of two: the checks and failures summed, the first
 * message kept. */
static void test_json_and_merge(void **state)
{
    char a[] = "/tmp/lfe-script-a-XXXXXX", b[] = "/tmp/lfe-script-b-XXXXXX",
         ab[] = "/tmp/lfe-script-ab-XXXXXX";
    static char ja[1 << 20], jb[1 << 20];
    const char *jab, *sc;

    (void)state;
    start_lfepolld("lua/http_hello.lua");
    close(mkstemp(a));
    close(mkstemp(b));
    close(mkstemp(ab));
    mode_run("--json a", (const char *const[]){"-c", "2", "-n", "140", "--json", a, NULL}, true);
    mode_run("--json b", (const char *const[]){"-c", "2", "-n", "70", "--json", b, NULL}, true);
    snprintf(ja, sizeof(ja), "%s", lfb_slurp(a));
    snprintf(jb, sizeof(jb), "%s", lfb_slurp(b));
    /* lfb_slurp removed them: written back for merge */
    script(0, "a.json", ja);
    script(1, "b.json", jb);
    if (!lfb_json_valid(ja, strlen(ja)) || lfb_jnum(strstr(ja, "\"script\""), "checks") != 140 ||
        lfb_jnum(strstr(ja, "\"script\""), "failed") != 20 ||
        lfb_jnum(strstr(jb, "\"script\""), "failed") != 10)
        fail_msg("want 140 checks and 20 failed, then 10, in --json:\n%s\n%s", ja, jb);
    {
        char pa[300], pb[300];
        snprintf(pa, sizeof(pa), "%s/a.json", tmpdir);
        snprintf(pb, sizeof(pb), "%s/b.json", tmpdir);
        /* two runs one after the other: merge refuses them unless asked (issue 33, B.5) */
        lfb_run((const char *const[]){lfb.lfbench, "merge", "--allow-disjoint", "--json", ab, pa,
                                      pb, NULL},
                lfb.out, sizeof(lfb.out), 30);
    }
    jab = lfb_slurp(ab);
    sc = strstr(jab, "\"script\"");
    if (!sc || lfb_jnum(sc, "checks") != 210 || lfb_jnum(sc, "failed") != 30 ||
        !strstr(sc, "\"first_failure\": \"") || !strstr(sc, "planned failure") ||
        !strstr(lfb.out, "210 responses checked, 30 failed; the first: "))
        fail_msg("want the merge to sum the checks (210, 30 failed):\n%s\n%s", lfb.out, jab);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wrk_counter),
        cmocka_unit_test(test_wrk_post),
        cmocka_unit_test(test_wrk_pipeline),
        cmocka_unit_test(test_wrk_auth),
        cmocka_unit_test(test_wrk_delay),
        cmocka_unit_test(test_wrk_report),
        cmocka_unit_test(test_wrk_setup),
        cmocka_unit_test(test_wrk_stop),
        cmocka_unit_test(test_same_requests_as_wrk),
        cmocka_unit_test_teardown(test_http_script_checks_answers, lfb_teardown),
        cmocka_unit_test_teardown(test_kv_mix_against_kv, lfb_teardown),
        cmocka_unit_test_teardown(test_kv_mix_catches_a_forgetful_server, lfb_teardown),
        cmocka_unit_test_teardown(test_errors_in_each_phase, lfb_teardown),
        cmocka_unit_test_teardown(test_error_mid_run_stops_it, lfb_teardown),
        cmocka_unit_test_teardown(test_endless_loops_are_bounded, lfb_teardown),
        cmocka_unit_test_teardown(test_stuck_c_call_ends_by_the_watchdog, lfb_teardown),
        cmocka_unit_test_teardown(test_endless_memory_is_an_error, lfb_teardown),
        cmocka_unit_test_teardown(test_done_once_after_the_summary, lfb_teardown),
        cmocka_unit_test_teardown(test_response_false_is_a_mismatch, lfb_teardown),
        cmocka_unit_test_teardown(test_failed_checks_count_in_the_rate, lfb_teardown),
        cmocka_unit_test_teardown(test_strict_globals_and_transfers, lfb_teardown),
        cmocka_unit_test_teardown(test_finalizer_reaches_threads_at_exit, lfb_teardown),
        cmocka_unit_test_teardown(test_finalizer_loop_is_seen_by_the_watchdog, lfb_teardown),
        cmocka_unit_test_teardown(test_copies_keep_shape_within_the_cap, lfb_teardown),
        cmocka_unit_test_teardown(test_response_memory_is_bounded, lfb_teardown),
        cmocka_unit_test_teardown(test_request_copies_are_bounded, lfb_teardown),
        cmocka_unit_test_teardown(test_stats_outlive_their_finalizer, lfb_teardown),
        cmocka_unit_test_teardown(test_first_request_is_the_first_threads_check, lfb_teardown),
        cmocka_unit_test_teardown(test_messages_are_one_short_line, lfb_teardown),
        cmocka_unit_test_teardown(test_n_counts_requests_of_a_pipelined_string, lfb_teardown),
        cmocka_unit_test_teardown(test_batch_rule_is_fixed, lfb_teardown),
        cmocka_unit_test_teardown(test_usage, lfb_teardown),
        cmocka_unit_test_teardown(test_modes, lfb_teardown),
        cmocka_unit_test_teardown(test_json_and_merge, lfb_teardown),
    };
    int rc;

    if (lfb_init(true) < 0)
        return 1;
    if (!getcwd(top, sizeof(top)) || access("lua/bench/wrk/counter.lua", R_OK) != 0) {
        fprintf(stderr, "run from the repository root: lua/bench/wrk/counter.lua not found\n");
        return 1;
    }
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    lfb_stop_server(&nginx_pid);
    {
        char cmd[256];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", tmpdir);
    }
    return rc;
}
