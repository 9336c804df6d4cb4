/* Integration tests of lfbench's run features against lfepolld and small servers of their own:
 * --reconnect-every, --rate-sweep, --find-rate, --json-stream, --start-at, the opening before
 * the measured window, and Ctrl-C in the middle of a sweep. Each run is short and light. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *lfbench, *lfepolld, *badserver;
static int slow = 1;
static pid_t server_pid;
static int server_port;
static char out[1 << 17];  /* lfbench's stdout of the last run */
static char eout[1 << 16]; /* ... and its stderr */
static double elapsed;     /* ... and how long it took, seconds */

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static double mono(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double wall(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A port nothing listens on right now. */
static int free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0), port;

    bind(fd, (struct sockaddr *)&a, sizeof(a));
    getsockname(fd, (struct sockaddr *)&a, &l);
    port = ntohs(a.sin_port);
    close(fd);
    return port;
}

static bool port_open(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    bool ok = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;

    close(fd);
    return ok;
}

/* Starts a server: argv with "PORT" (alone, or after "127.0.0.1:") replaced by a free port. */
static void start_server(const char *const *argv)
{
    const char *args[16];
    char port[16], hostport[32];
    int n = 0, devnull;

    server_port = free_port();
    snprintf(port, sizeof(port), "%d", server_port);
    snprintf(hostport, sizeof(hostport), "127.0.0.1:%d", server_port);
    for (; *argv; argv++)
        args[n++] = !strcmp(*argv, "PORT")             ? port
                    : !strcmp(*argv, "127.0.0.1:PORT") ? hostport
                                                       : *argv;
    args[n] = NULL;
    server_pid = fork();
    assert_true(server_pid >= 0);
    if (server_pid == 0) {
        devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, STDOUT_FILENO);
        dup2(devnull, STDERR_FILENO);
        execv(args[0], (char *const *)args);
        _exit(127);
    }
    for (int i = 0; i < 500 && !port_open(server_port); i++)
        sleep_ms(10);
    assert_true(port_open(server_port));
}

static void start_lfepolld(void)
{
    start_server((const char *[]){lfepolld, "--listen", "127.0.0.1:PORT", "-q", NULL});
}

/* A listening socket on a free port, backlog as given. */
static int listen_on(int backlog)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd, one = 1;

    server_port = free_port();
    a.sin_port = htons((uint16_t)server_port);
    fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(fd, backlog), 0);
    return fd;
}

/* A slow echo server in a child: one request at a time over all its connections, each read
 * answered after us microseconds, so it serves at most about 1e6/us requests a second. */
static void start_slow_server(long us)
{
    int lfd = listen_on(1024);

    server_pid = fork();
    assert_true(server_pid >= 0);
    if (server_pid == 0) {
        int ep = epoll_create1(0);
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = lfd}, evs[64];
        char buf[4096];

        alarm(120 * (unsigned)slow);
        epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
        for (;;) {
            int n = epoll_wait(ep, evs, 64, -1);
            for (int i = 0; i < n; i++) {
                int fd = evs[i].data.fd;
                ssize_t r;
                if (fd == lfd) {
                    int c = accept(lfd, NULL, NULL);
                    ev = (struct epoll_event){.events = EPOLLIN, .data.fd = c};
                    if (c >= 0)
                        epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev);
                    continue;
                }
                r = read(fd, buf, sizeof(buf));
                if (r <= 0) {
                    close(fd);
                    continue;
                }
                usleep((useconds_t)us);
                if (write(fd, buf, (size_t)r) != r)
                    close(fd);
            }
        }
    }
    close(lfd);
}

/* A server that listens with the smallest backlog and never accepts: a connection or two
 * complete, the kernel drops the others' SYNs (no error: they would retry for minutes). */
static void start_deaf_server(void)
{
    int lfd = listen_on(0);

    server_pid = fork();
    assert_true(server_pid >= 0);
    if (server_pid == 0) {
        alarm(60 * (unsigned)slow);
        for (;;)
            pause();
    }
    close(lfd);
}

static int teardown(void **state)
{
    (void)state;
    if (server_pid > 0) {
        kill(server_pid, SIGKILL);
        waitpid(server_pid, NULL, 0);
    }
    server_pid = 0;
    return 0;
}

static void read_back(int fd, char *buf, size_t size)
{
    ssize_t len = pread(fd, buf, size - 1, 0);

    buf[len > 0 ? len : 0] = '\0';
}

/* Starts lfbench with args (NULL-terminated), target 127.0.0.1:port last, its stdout and stderr
 * into the files fo and fe. */
static pid_t spawn(int port, const char *const *argv, int fo, int fe)
{
    const char *args[48] = {lfbench};
    char target[32];
    int n = 1;
    pid_t pid;

    for (; *argv; argv++)
        args[n++] = *argv;
    snprintf(target, sizeof(target), "127.0.0.1:%d", port);
    args[n++] = target;
    args[n] = NULL;
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fo, STDOUT_FILENO);
        dup2(fe, STDERR_FILENO);
        alarm(60 * (unsigned)slow); /* a hung client fails the test, not the suite */
        execv(lfbench, (char *const *)args);
        _exit(127);
    }
    return pid;
}

static int status_of(int status)
{
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Runs lfbench to its end; returns its exit status; stdout in out, stderr in eout. */
static int bench(int port, ...)
{
    const char *args[48];
    char po[] = "/tmp/lfe-runs-XXXXXX", pe[] = "/tmp/lfe-runs-XXXXXX";
    int n = 0, fo = mkstemp(po), fe = mkstemp(pe), status;
    double t0 = mono();
    va_list ap;
    pid_t pid;

    va_start(ap, port);
    for (const char *a = va_arg(ap, const char *); a && n < 46; a = va_arg(ap, const char *))
        args[n++] = a;
    va_end(ap);
    args[n] = NULL;
    pid = spawn(port, args, fo, fe);
    waitpid(pid, &status, 0);
    elapsed = mono() - t0;
    read_back(fo, out, sizeof(out));
    read_back(fe, eout, sizeof(eout));
    close(fo);
    close(fe);
    unlink(po);
    unlink(pe);
    return status_of(status);
}

/* A counter: the first word of a summary line ("requests     12"), else one within a line. */
static long field(const char *name)
{
    char key[64];
    const char *p;

    snprintf(key, sizeof(key), "\n%s ", name);
    p = strstr(out, key);
    if (!p && !strncmp(out, key + 1, strlen(key + 1)))
        p = out - 1;
    if (!p) {
        snprintf(key, sizeof(key), " %s ", name);
        p = strstr(out, key);
    }
    if (!p)
        return -1;
    p += strlen(key);
    while (*p == ' ')
        p++;
    return atol(p);
}

/* A number from JSON text: the first "name": in it, or NAN. */
static double jnum(const char *json, const char *name)
{
    char key[64];
    const char *p;

    snprintf(key, sizeof(key), "\"%s\": ", name);
    p = strstr(json, key);
    return p ? strtod(p + strlen(key), NULL) : NAN;
}

/* The file's contents, NUL-terminated, in a static buffer (then removed). */
static const char *slurp(const char *path)
{
    static char buf[1 << 20];
    int fd = open(path, O_RDONLY);
    ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);

    buf[n > 0 ? n : 0] = '\0';
    if (fd >= 0)
        close(fd);
    unlink(path);
    return buf;
}

/* A strict JSON (RFC 8259) value parser: returns the end of the value at p, or NULL. */
static const char *json_value(const char *p, int depth);

static const char *json_ws(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    return p;
}

static const char *json_string(const char *p)
{
    if (*p++ != '"')
        return NULL;
    for (;;) {
        unsigned char c = (unsigned char)*p++;
        if (c == '"')
            return p;
        if (c < 0x20)
            return NULL;
        if (c != '\\')
            continue;
        c = (unsigned char)*p++;
        if (c == 'u') {
            for (int k = 0; k < 4; k++, p++)
                if (!*p || !strchr("0123456789abcdefABCDEF", *p))
                    return NULL;
        } else if (!c || !strchr("\"\\/bfnrt", c)) {
            return NULL;
        }
    }
}

static const char *json_value(const char *p, int depth)
{
    p = json_ws(p);
    if (depth > 64)
        return NULL;
    if (*p == '{' || *p == '[') {
        char close = *p == '{' ? '}' : ']';
        p = json_ws(p + 1);
        if (*p == close)
            return p + 1;
        for (;;) {
            if (close == '}') {
                if (!(p = json_string(json_ws(p))))
                    return NULL;
                p = json_ws(p);
                if (*p++ != ':')
                    return NULL;
            }
            if (!(p = json_value(p, depth + 1)))
                return NULL;
            p = json_ws(p);
            if (*p == close)
                return p + 1;
            if (*p++ != ',')
                return NULL;
        }
    }
    if (*p == '"')
        return json_string(p);
    if (!strncmp(p, "true", 4) || !strncmp(p, "null", 4))
        return p + 4;
    if (!strncmp(p, "false", 5))
        return p + 5;
    if (*p == '-')
        p++;
    if (*p == '0')
        p++;
    else if (*p >= '1' && *p <= '9')
        while (*p >= '0' && *p <= '9')
            p++;
    else
        return NULL;
    if (*p == '.') {
        if (*++p < '0' || *p > '9')
            return NULL;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    if (*p == 'e' || *p == 'E') {
        if (*++p == '+' || *p == '-')
            p++;
        if (*p < '0' || *p > '9')
            return NULL;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    return p;
}

/* Whether text (of len bytes) is exactly one JSON object. */
static bool json_object(const char *text, size_t len)
{
    char buf[4096];
    const char *end;

    if (len >= sizeof(buf) || text[0] != '{')
        return false;
    memcpy(buf, text, len);
    buf[len] = '\0';
    end = json_value(buf, 0);
    return end && !*json_ws(end);
}

/* The summary's steps table: intended and done rates per row; returns the rows. */
static int steps_table(double *intended, double *done, int max)
{
    const char *p = strstr(out, "\nsteps ");
    int n = 0;

    if (!p)
        return -1;
    p = strchr(p + 1, '\n');
    while (p && n < max) {
        int row;
        double a, b;
        if (sscanf(p + 1, " %d %lf %lf", &row, &a, &b) != 3 || p[1] != ' ' || row != n + 1)
            break;
        intended[n] = a;
        done[n++] = b;
        p = strchr(p + 1, '\n');
    }
    return n;
}

static void expect_clean(int rc, long requests)
{
    if (rc != 0 || !strstr(out, "errors       0:") || !strstr(out, "; lost 0") ||
        (requests >= 0 && field("requests") != requests))
        fail_msg("lfbench rc=%d, want 0, no errors, none lost (%ld requests):\n%s%s", rc, requests,
                 out, eout);
}

/* --reconnect-every N: a connection carries N requests, closes cleanly and opens again; each is
 * a reconnect, not an error, in the closed loop, pipelined, and in the open loop. */
static void test_reconnect_every(void **state)
{
    char json[] = "/tmp/lfe-runs-json-XXXXXX";
    long rc, reqs;

    (void)state;
    start_lfepolld();
    close(mkstemp(json));
    rc = bench(server_port, "-c", "5", "-n", "500", "--reconnect-every", "10", "--json", json, "-q",
               NULL);
    expect_clean(rc, 500);
    /* each connection reconnects after each 10 of its own: 50, less up to one per connection
     * whose count is not a multiple of 10 */
    if (field("reconnects") < 45 || field("reconnects") > 50)
        fail_msg("want 45 to 50 reconnects:\n%s", out);
    assert_true(jnum(slurp(json), "reconnects") == field("reconnects"));
    /* opened: the first 5, and one per reconnect */
    assert_non_null(strstr(out, "opening      5 of 5"));

    expect_clean(bench(server_port, "-c", "5", "-n", "500", "--pipeline", "4", "--reconnect-every",
                       "10", "-q", NULL),
                 500);
    if (field("reconnects") < 45 || field("reconnects") > 50)
        fail_msg("pipelined: want 45 to 50 reconnects:\n%s", out);

    /* every request on its own connection */
    expect_clean(bench(server_port, "-c", "3", "-n", "60", "--reconnect-every", "1", "-q", NULL),
                 60);
    assert_in_range(field("reconnects"), 57, 60);

    /* open loop: due sends wait while a connection reopens; none unsent, none lost */
    rc = bench(server_port, "-c", "5", "-R", "500", "-d", "1", "--reconnect-every", "10", "-q",
               NULL);
    expect_clean(rc, -1);
    reqs = field("requests");
    assert_in_range(reqs, 450, 520);
    assert_int_equal(field("unsent"), 0);
    if (field("reconnects") < reqs / 10 - 10 || field("reconnects") > reqs / 10 + 10)
        fail_msg("open loop: want about %ld reconnects:\n%s", reqs / 10, out);
}

/* --rate-sweep: a row per step at its rate, on the same connections; --json has the steps. */
static void test_rate_sweep(void **state)
{
    char json[] = "/tmp/lfe-runs-json-XXXXXX";
    double in[8], done[8];
    const char *j, *p;
    int rc, n, k = 0;

    (void)state;
    start_lfepolld();
    close(mkstemp(json));
    rc = bench(server_port, "-c", "10", "--rate-sweep", "500:1500:500", "-d", "1", "--warmup",
               "0.2", "--json", json, "-q", NULL);
    expect_clean(rc, -1);
    n = steps_table(in, done, 8);
    if (n != 3)
        fail_msg("want a table of 3 steps:\n%s", out);
    for (int i = 0; i < 3; i++) {
        assert_true(in[i] == 500.0 * (i + 1));
        if (done[i] < in[i] * 0.9 || done[i] > in[i] * 1.1)
            fail_msg("step %d: %.0f/s done for %.0f/s intended:\n%s", i + 1, done[i], in[i], out);
    }
    /* the same connections throughout: 10 opened, none again */
    assert_non_null(strstr(out, "opening      10 of 10"));
    j = slurp(json);
    p = strstr(j, "\"steps\": [");
    assert_non_null(p);
    for (const char *q = p; (q = strstr(q, "{\"rate\": ")); q++)
        k++;
    assert_int_equal(k, 3);
    assert_true(jnum(p, "rate") == 500);
    assert_true(jnum(j, "connections") == 0 || jnum(j, "connections") == 10);
    /* The whole run's line: 3,000 requests over three measured seconds, not over one (the
     * rate of no step). */
    if (field("requests") < 2700 || strtod(strstr(out, "s: ") + 3, NULL) > 1500 * 1.1 ||
        jnum(j, "qps") > 1500 * 1.1)
        fail_msg("the requests line (and --json's qps) says more than any step did:\n%s\n%s", out,
                 strstr(j, "\"requests\":"));
}

/* --find-rate within a range: lfepolld keeps the whole range; a server that serves about 240
 * requests a second does not, and the answer is below that, for its latency. */
static void test_find_rate(void **state)
{
    double in[16], done[16], found;
    const char *f;
    int rc, n;

    (void)state;
    start_lfepolld();
    rc = bench(server_port, "-c", "10", "--find-rate", "p99=50ms", "--rate-sweep", "200:800:200",
               "-d", "0.5", "-q", NULL);
    expect_clean(rc, -1);
    if (!strstr(out, "found        800 requests/s kept the bound: every rate up to the range's "
                     "end (800/s) kept it\n"))
        fail_msg("want 800/s found, the whole range kept:\n%s", out);
    n = steps_table(in, done, 16);
    assert_int_equal(n, 3);
    assert_true(in[0] == 200 && in[1] == 400 && in[2] == 800);
    teardown(NULL);

    start_slow_server(4000); /* 4 ms a request: at most 250/s */
    rc = bench(server_port, "-c", "50", "--find-rate", "p99=50ms", "--rate-sweep", "100:400:100",
               "-d", "0.5", "--warmup", "0.2", "-q", NULL);
    f = strstr(out, "\nfound        ");
    if (!f)
        fail_msg("rc %d, no found line:\n%s%s", rc, out, eout);
    found = strtod(f + 14, NULL);
    if (found < 100 || found >= 250 || !strstr(f, " kept it and ") || !strstr(f, "latency: p99 "))
        fail_msg("want a rate from 100 to 250 found, for latency:\n%s", out);
    /* the search is the run's purpose: steps that broke the bound do not fail it */
    if (rc != 0)
        fail_msg("a --find-rate that found its answer exits %d:\n%s%s", rc, out, eout);
}

/* Regression (white-box review, defect 3): --find-rate judged each rate on one step and never
 * ran it again, so one stall of the server at 2,000/s answered 1,900/s for a server that keeps
 * the bound up to 8,000/s. Here a server pauses 300 ms once, inside the second step (400/s):
 * that step breaks p99=50ms, its rate is run again and keeps it, and the search goes on to the
 * range's end; the answer says which break was not confirmed. */
static void test_find_rate_retests_a_stall(void **state)
{
    char at[32];
    const char *f;
    int rc;

    (void)state;
    /* the steps: [0.02, 1.22] s after the launch, then the second's measured window [1.44,
     * 2.44]: the pause, [1.9, 2.2] s after now, is inside it with 0.15 s either side for the
     * server's start and the machine's load */
    snprintf(at, sizeof(at), "%.0f", (wall() + 1.9) * 1000);
    start_server((const char *[]){badserver, "PORT", "pauseat", at, "300", NULL});
    rc = bench(server_port, "-c", "20", "--find-rate", "p99=50ms", "--rate-sweep", "200:1600:200",
               "-d", "1", "--warmup", "0.2", "-q", NULL);
    f = strstr(out, "\nfound        ");
    /* the table and the found line (cmocka cuts a long message short) */
    if (rc != 0 || !f || strtod(f + 14, NULL) != 1600)
        fail_msg("rc %d: want 1600/s found, the pause's break not confirmed:%s", rc,
                 strstr(out, "\nsteps ") ? strstr(out, "\nsteps ") : eout);
    if (!strstr(f, "every rate up to the range's end (1600/s) kept it; a break not confirmed on "
                   "re-test: ") ||
        !strstr(out, "  no\n") || !strstr(out, "  yes (re-test 1 of "))
        fail_msg("want the broken step, its re-test, and the note in the found line:%s",
                 strstr(out, "\nsteps "));
}

/* Regression (white-box review, defect 10): a sweep's end_wall was its start plus the steps'
 * -d, not the end of its last step: against a server that answers every request 300 ms after
 * it came, the responses came up to 1 s after it, and merge took the shorter span. */
static void test_sweep_end_wall_is_the_last_response(void **state)
{
    char json[] = "/tmp/lfe-runs-json-XXXXXX", merged[] = "/tmp/lfe-runs-json-XXXXXX";
    double start, end, t_exit, last_busy = 0;
    const char *j;
    int rc;

    (void)state;
    start_server((const char *[]){badserver, "PORT", "delay", "300", NULL});
    close(mkstemp(json));
    close(mkstemp(merged));
    rc = bench(server_port, "-c", "100", "--rate-sweep", "100:200:100", "-d", "0.5", "--warmup",
               "0.2", "--json", json, "-q", NULL);
    t_exit = wall();
    expect_clean(rc, -1);
    /* merge's span: the union of the windows, here one window twice */
    {
        pid_t pid = fork();
        int status;

        assert_true(pid >= 0);
        if (pid == 0) {
            alarm(60 * (unsigned)slow);
            execl(lfbench, lfbench, "merge", "-q", "--json", merged, json, json, (char *)NULL);
            _exit(127);
        }
        waitpid(pid, &status, 0);
        assert_int_equal(status_of(status), 0);
    }
    j = slurp(json);
    start = jnum(j, "start_wall");
    end = jnum(j, "end_wall");
    /* the windows: 0.5 s, the 300 ms answers to its last sends, 0.2 s of the next step's
     * warm-up, 0.5 s, and the last answers 300 ms after the last sends */
    if (!(end - start >= 0.5 + 0.3 + 0.2 + 0.5 + 0.3 - 0.02 && end <= t_exit))
        fail_msg("start_wall %.3f, end_wall %.3f (%.3f s): want at least 1.78 s, before the exit "
                 "at %.3f",
                 start, end, end - start, t_exit);
    /* every response came before end_wall: the last second with some began before it */
    for (const char *p = strstr(j, "\"series\": ["); (p = strstr(p + 1, "{\"t\": "));)
        if (jnum(p, "requests") > 0)
            last_busy = jnum(p, "wall");
    if (!(last_busy - 1 < end))
        fail_msg("responses in the second that ends at %.3f: after end_wall %.3f", last_busy, end);
    j = slurp(merged);
    if (fabs(jnum(j, "measured_s") - (end - start)) > 0.002)
        fail_msg("merge's span %.3f s, want end_wall - start_wall %.3f", jnum(j, "measured_s"),
                 end - start);
}

/* Regression (white-box review, defect 9): a percentile was its bucket's midpoint even where
 * the histogram knows the value: p100 (here p99.99 of fewer than 10,000 samples, and a
 * second's p99 of at most 100) was not the max. Against a server with a fixed 20 ms service
 * time the maxima fall anywhere in their buckets, 50 µs wide; each is printed as it is. */
static void test_percentile_extremes_exact(void **state)
{
    char json[] = "/tmp/lfe-runs-json-XXXXXX";
    const char *j;
    int objects = 0, seconds = 0;

    (void)state;
    start_server((const char *[]){badserver, "PORT", "delay", "20", NULL});
    close(mkstemp(json));
    expect_clean(bench(server_port, "-c", "20", "--rate-sweep", "50:90:20", "-d", "0.6", "--json",
                       json, "-q", NULL),
                 -1);
    j = slurp(json);
    /* every latency object: the run's, the class's, each step's */
    for (const char *p = j; (p = strstr(p + 1, "{\"samples\": "));) {
        if (jnum(p, "samples") == 0 || jnum(p, "samples") >= 10000)
            continue;
        if (jnum(p, "p9999_us") != jnum(p, "max_us"))
            fail_msg("p99.99 of %.0f samples is the max, %.3f µs; printed %.3f:\n%.300s",
                     jnum(p, "samples"), jnum(p, "max_us"), jnum(p, "p9999_us"), p);
        objects++;
    }
    /* every second of at most 100 responses: its p99 is its max */
    for (const char *p = strstr(j, "\"series\": ["); (p = strstr(p + 1, "{\"t\": "));) {
        if (jnum(p, "requests") == 0 || jnum(p, "requests") > 100)
            continue;
        if (jnum(p, "p99_us") != jnum(p, "max_us"))
            fail_msg("a second's p99 of %.0f samples is its max, %.3f µs; printed %.3f",
                     jnum(p, "requests"), jnum(p, "max_us"), jnum(p, "p99_us"));
        seconds++;
    }
    if (objects < 5 || seconds < 2)
        fail_msg("%d latency objects, %d seconds checked: want at least 5 and 2:\n%s", objects,
                 seconds, out);
}

/* --json-stream -: a JSON object per line per second on stdout, flushed as the run goes; the
 * seconds are the wall clock's (but the last, shorter one). */
static void test_json_stream(void **state)
{
    double t_launch = wall(), last_t = 0, gap = 1, walls[16];
    int objects = 0, rc;

    (void)state;
    start_lfepolld();
    rc = bench(server_port, "-c", "5", "-R", "300", "-d", "2.5", "--json-stream", "-", "-q", NULL);
    expect_clean(rc, -1);
    for (const char *l = out; *l;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        double t;

        if (*l == '{') {
            if (!json_object(l, len))
                fail_msg("not a JSON object: %.*s", (int)len, l);
            static const char *const keys[] = {"\"t\": ",        "\"wall\": ",   "\"phase\": ",
                                               "\"requests\": ", "\"p99_us\": ", "\"open\": "};
            for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
                if (!memmem(l, len, keys[k], strlen(keys[k])))
                    fail_msg("no %s in %.*s", keys[k], (int)len, l);
            t = jnum(l, "t");
            if (objects && gap < 0.05) /* only the last may be that short */
                fail_msg("t %.3f after %.3f: want one a second:\n%s", last_t, last_t - gap, out);
            gap = t - last_t;
            if (objects && (gap > 1.1 || gap < 0.004))
                fail_msg("t %.3f after %.3f: want one a second:\n%s", t, last_t, out);
            if (jnum(l, "wall") < t_launch || jnum(l, "wall") > wall() + 0.1)
                fail_msg("wall %.3f outside the run:\n%s", jnum(l, "wall"), out);
            if (objects < 16)
                walls[objects] = jnum(l, "wall");
            last_t = t;
            objects++;
        }
        l += len + (e != NULL);
    }
    if (objects < 3 || objects > 5)
        fail_msg("want 3 to 5 seconds' objects for a 2.5 s run:\n%s", out);
    for (int k = 0; k < objects - 1; k++)
        if (fabs(walls[k] - round(walls[k])) > 0.0006)
            fail_msg("second %d ends at %.3f, not at a whole second of the wall clock:\n%s", k,
                     walls[k], out);

    /* a path that cannot be written: one line, exit 2, no run */
    rc = bench(server_port, "-c", "2", "-d", "1", "--json-stream", "/nonexistent-dir/s.json", NULL);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(eout, "lfbench: cannot write --json-stream /nonexistent-dir/s.json: "));
    assert_null(strstr(out, "requests "));

    /* Regression (attack on issue 11): a full disk lost every line and the run exited 0 */
    rc = bench(server_port, "-c", "2", "-d", "1.5", "-R", "100", "-q", "--json-stream", "/dev/full",
               NULL);
    if (rc != 1 || !strstr(eout, "--json-stream /dev/full is incomplete: No space left"))
        fail_msg("want exit 1 and 'incomplete' for a full disk (rc %d):\n%s", rc, eout);
}

/* --start-at: the measured window begins at that wall-clock time, not at launch. */
static void test_start_at(void **state)
{
    char json[] = "/tmp/lfe-runs-json-XXXXXX", past[32];
    double t_launch, start;
    const char *j;
    int rc;

    (void)state;
    start_lfepolld();
    close(mkstemp(json));
    t_launch = wall();
    rc = bench(server_port, "-c", "5", "-R", "200", "-d", "0.5", "--start-at", "+2", "--json", json,
               "-q", NULL);
    expect_clean(rc, -1);
    j = slurp(json);
    start = jnum(j, "start_wall");
    if (!(start >= t_launch + 2 && start < t_launch + 4)) /* not before; soon after */
        fail_msg("start_wall %.3f, launched at %.3f: want 2 s later", start, t_launch);
    /* a lower bound, not a speed: a slow machine only makes it larger; it checks that lfbench
     * really waited (start_wall above is only its own word for it) */
    assert_true(elapsed >= 2.5);
    assert_in_range(field("requests"), 90, 110);

    /* a sweep's window, too */
    close(mkstemp(json));
    t_launch = wall();
    rc = bench(server_port, "-c", "5", "--rate-sweep", "200:200:100", "-d", "0.5", "--start-at",
               "+2", "--json", json, "-q", NULL);
    expect_clean(rc, -1);
    start = jnum(slurp(json), "start_wall");
    if (!(start >= t_launch + 2 && start < t_launch + 4)) /* not before; soon after */
        fail_msg("sweep: start_wall %.3f, launched at %.3f: want 2 s later", start, t_launch);

    snprintf(past, sizeof(past), "%.0f", wall() - 3600);
    assert_int_equal(bench(server_port, "--start-at", past, NULL), 2);
    assert_non_null(strstr(eout, "lfbench: --start-at: '"));
    assert_null(strstr(out, "requests ")); /* refused before any run */
}

/* The opening: nothing listens, so it gives up after a second without progress (refused), not
 * after --open-timeout's 10 s; a server that never accepts keeps it to --open-timeout. */
static void test_opening(void **state)
{
    int rc, port = free_port();

    (void)state;
    rc = bench(port, "-c", "200", "-d", "1", "-q", NULL);
    if (rc != 1 || elapsed >= 8 || field("refused") <= 0)
        fail_msg("rc %d after %.1f s: want 1, refused errors, well before --open-timeout:\n%s%s",
                 rc, elapsed, out, eout);
    assert_non_null(strstr(eout, "only 0 of 200 connections opened"));

    start_deaf_server();
    rc = bench(server_port, "-c", "20", "-d", "0.5", "--timeout", "300", "--open-timeout", "1",
               "-q", NULL);
    if (rc != 1 || elapsed > 5 || !strstr(eout, " of 20 connections opened in 1.0 s") ||
        !strstr(out, " of 20 connections open in 1.0"))
        fail_msg("rc %d after %.1f s: want the window after 1 s of opening:\n%s%s", rc, elapsed,
                 out, eout);
    /* --open-timeout 0 is not the default of ten seconds: refused, or the window at once (a
     * --timeout past it, so that no connect times out and ends the opening first) */
    rc = bench(server_port, "-c", "20", "-d", "0.5", "--timeout", "8000", "--open-timeout", "0",
               "-q", NULL);
    if (rc != 2 && elapsed > 3)
        fail_msg("--open-timeout 0 waited %.1f s:\n%s%s", elapsed, out, eout);
}

/* Ctrl-C in a sweep's second step: it stops there, the summary has the steps done. */
static void test_sigint_in_sweep(void **state)
{
    char po[] = "/tmp/lfe-runs-XXXXXX", pe[] = "/tmp/lfe-runs-XXXXXX";
    int fo = mkstemp(po), fe = mkstemp(pe), status, n;
    const char *const args[] = {"-c", "5", "--rate-sweep", "200:1000:200", "-d", "1", NULL};
    double in[8], done[8], t_int;
    pid_t pid;

    (void)state;
    start_lfepolld();
    pid = spawn(server_port, args, fo, fe);
    for (int i = 0; i < 1000; i++) {
        read_back(fe, eout, sizeof(eout));
        if (strstr(eout, "step 1:"))
            break;
        sleep_ms(10);
    }
    assert_non_null(strstr(eout, "step 1:"));
    sleep_ms(400);
    kill(pid, SIGINT);
    t_int = mono();
    waitpid(pid, &status, 0);
    elapsed = mono() - t_int;
    read_back(fo, out, sizeof(out));
    read_back(fe, eout, sizeof(eout));
    close(fo);
    close(fe);
    unlink(po);
    unlink(pe);
    n = steps_table(in, done, 8);
    if (n != 2 || elapsed > 1.5)
        fail_msg("want it stopped at once (%.1f s) with 2 steps:\n%s%s", elapsed, out, eout);
    assert_true(in[0] == 200 && in[1] == 400);
    assert_true(done[0] > 180 && done[0] < 220);
    assert_null(strstr(eout, "step 3:"));
    /* exit status 1 (bopt.c's usage): a run cut short by Ctrl-C is partial, and says so */
    if (status_of(status) != 1 || !strstr(eout, "interrupted (SIGINT)"))
        fail_msg("exit %d, want 1 and 'interrupted':\n%s%s", status_of(status), out, eout);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_reconnect_every, teardown),
        cmocka_unit_test_teardown(test_rate_sweep, teardown),
        cmocka_unit_test_teardown(test_find_rate, teardown),
        cmocka_unit_test_teardown(test_json_stream, teardown),
        cmocka_unit_test_teardown(test_start_at, teardown),
        cmocka_unit_test_teardown(test_opening, teardown),
        cmocka_unit_test_teardown(test_sigint_in_sweep, teardown),
        cmocka_unit_test_teardown(test_find_rate_retests_a_stall, teardown),
        cmocka_unit_test_teardown(test_sweep_end_wall_is_the_last_response, teardown),
        cmocka_unit_test_teardown(test_percentile_extremes_exact, teardown),
    };

    lfbench = getenv("LFBENCH");
    lfepolld = getenv("LFEPOLLD");
    badserver = getenv("BADSERVER");
    if (!lfbench || !lfepolld || !badserver) {
        fprintf(stderr, "set LFBENCH, LFEPOLLD and BADSERVER (make test does)\n");
        return 1;
    }
    if (getenv("TEST_SLOW"))
        slow = atoi(getenv("TEST_SLOW")) > 0 ? atoi(getenv("TEST_SLOW")) : 1;
    signal(SIGPIPE, SIG_IGN);
    if (getenv("TEST_FILTER"))
        cmocka_set_test_filter(getenv("TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
