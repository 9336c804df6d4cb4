/* harness: starting, watching and stopping lfepolld for the integration tests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

const char *lfepolld;
static struct daemon spawned[4]; /* copies of what the running test started: teardown kills
                                  * what is left, even after a failed assertion */
const char *sanitizer;
int slow = 1;

long now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
}

size_t tcp_wmem_max(void)
{
    unsigned long lo, def, max = 4ul << 20; /* the kernel's default when /proc says nothing */
    FILE *f = fopen("/proc/sys/net/ipv4/tcp_wmem", "r");

    if (f) {
        if (fscanf(f, "%lu %lu %lu", &lo, &def, &max) != 3)
            max = 4ul << 20;
        fclose(f);
    }
    return max;
}

void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

/* The daemon's whole log so far (static buffer). */
const char *log_text(const struct daemon *d)
{
    static char buf[1 << 16];
    int fd = open(d->log, O_RDONLY);
    ssize_t n = fd < 0 ? 0 : read(fd, buf, sizeof(buf) - 1);

    if (fd >= 0)
        close(fd);
    buf[n > 0 ? n : 0] = '\0';
    return buf;
}

/* Starts lfepolld with args (NULL-terminated; "--listen 127.0.0.1:0" is added when args name
 * no --listen). nofile > 0 sets RLIMIT_NOFILE, cpus pins the process (as taskset would).
 * Returns 0 with d filled once the daemon logs its port, or -1 (then d->pid may have exited:
 * see its log). */
int spawn(struct daemon *d, const char *const *args, long nofile, const cpu_set_t *cpus)
{
    const char *argv[64] = {lfepolld}, *nacc = getenv("LFE_ACCEPT_THREADS"),
               *oneshot = getenv("LFE_ONESHOT");
    int argc = 1, fd;
    bool has_listen = false;
    long deadline = now_ms() + 5000L * slow;

    /* $LFE_ACCEPT_THREADS: the whole suite again with several accept threads (.ci/run) */
    if (nacc && *nacc) {
        argv[argc++] = "--accept-threads";
        argv[argc++] = nacc;
    }
    /* $LFE_ONESHOT: the same with --oneshot always (every group re-arms at each event) */
    if (oneshot && *oneshot) {
        argv[argc++] = "--oneshot";
        argv[argc++] = oneshot;
    }
    for (; args && *args; args++) {
        has_listen |= strcmp(*args, "--listen") == 0;
        argv[argc++] = *args;
    }
    if (!has_listen) {
        argv[argc++] = "--listen";
        argv[argc++] = "127.0.0.1:0";
    }
    snprintf(d->log, sizeof(d->log), "/tmp/lfe-daemon-XXXXXX");
    fd = mkstemp(d->log);
    assert_true(fd >= 0);
    d->port = 0;
    d->pid = fork();
    assert_true(d->pid >= 0);
    if (d->pid == 0) {
        if (nofile > 0) {
            struct rlimit rl = {(rlim_t)nofile, (rlim_t)nofile};
            setrlimit(RLIMIT_NOFILE, &rl);
        }
        if (cpus)
            sched_setaffinity(0, sizeof(*cpus), cpus);
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        execv(lfepolld, (char *const *)argv);
        _exit(127);
    }
    close(fd);
    for (size_t i = 0; i < sizeof(spawned) / sizeof(spawned[0]); i++)
        if (!spawned[i].log[0]) {
            spawned[i] = *d;
            break;
        }
    while (now_ms() < deadline) {
        const char *t = log_text(d), *p = strstr(t, "listening on ");
        int status;

        if (p && (p = strchr(p, '\n'))) {
            const char *colon = p;
            while (colon > t && colon[-1] != ':')
                colon--;
            d->port = atoi(colon);
            return 0;
        }
        if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
            d->pid = -(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status)) - 1000;
            return -1;
        }
        sleep_ms(10);
    }
    return -1;
}

/* Sends sig and waits up to timeout_ms; returns the exit status, 128+signal if killed by one,
 * or -1 if it had to be killed with SIGKILL. */
int stop_daemon(struct daemon *d, int sig, long timeout_ms)
{
    long deadline = now_ms() + timeout_ms * slow;
    int status;

    if (d->pid <= 0)
        return d->pid <= -1000 ? -(d->pid + 1000) : -1;
    kill(d->pid, sig);
    while (now_ms() < deadline) {
        if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
            d->pid = 0;
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        }
        sleep_ms(5);
    }
    kill(d->pid, SIGKILL);
    waitpid(d->pid, &status, 0);
    d->pid = 0;
    return -1;
}

void cleanup(struct daemon *d)
{
    if (d->pid > 0)
        stop_daemon(d, SIGKILL, 1000);
    for (size_t i = 0; i < sizeof(spawned) / sizeof(spawned[0]); i++)
        if (d->log[0] && strcmp(spawned[i].log, d->log) == 0)
            spawned[i].log[0] = '\0';
    if (d->log[0])
        unlink(d->log);
    d->log[0] = '\0';
}

/* After every test, pass or fail: no daemon or log file outlives it (TEST_KEEP_LOGS=1 keeps the
 * logs of a failed test and names them). */
int teardown(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(spawned) / sizeof(spawned[0]); i++) {
        struct daemon *d = &spawned[i];
        int status;

        if (!d->log[0])
            continue;
        if (d->pid > 0 && kill(d->pid, SIGKILL) == 0)
            waitpid(d->pid, &status, 0);
        if (getenv("TEST_KEEP_LOGS"))
            fprintf(stderr, "daemon log kept: %s\n", d->log);
        else
            unlink(d->log);
        d->log[0] = '\0';
    }
    return 0;
}

int count_lines(const char *s)
{
    int n = 0;

    for (; *s; s++)
        n += *s == '\n';
    return n;
}

void bad_start(const char *const *args, int want_status, const char *needle)
{
    struct daemon d;
    const char *text;

    assert_int_equal(spawn(&d, args, 0, NULL), -1);
    assert_int_equal(stop_daemon(&d, 0, 5000), want_status);
    text = log_text(&d);
    if (count_lines(text) != 1 || !strstr(text, needle))
        fail_msg("want one line with '%s', got: %s", needle, text);
    cleanup(&d);
}

int harness_init(void)
{
    struct rlimit rl;

    lfepolld = getenv("LFEPOLLD");
    if (!lfepolld) {
        fprintf(stderr, "set LFEPOLLD to the lfepolld binary (make test does)\n");
        return -1;
    }
    sanitizer =
        getenv("LFE_SANITIZER") && *getenv("LFE_SANITIZER") ? getenv("LFE_SANITIZER") : NULL;
    if (getenv("TEST_SLOW"))
        slow = atoi(getenv("TEST_SLOW")) > 0 ? atoi(getenv("TEST_SLOW")) : 1;
    /* 1,000 connections and their server side need more than the usual 1024 descriptors. */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    signal(SIGPIPE, SIG_IGN);
    if (getenv("TEST_FILTER")) /* one test while working on it: TEST_FILTER=test_name */
        cmocka_set_test_filter(getenv("TEST_FILTER"));
    return 0;
}

/* --- clients the daemon tests share --- */

int tcp_connect(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

    assert_true(fd >= 0);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

void send_all(int fd, const void *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        assert_true(w > 0);
        p = (const char *)p + w;
        n -= (size_t)w;
    }
}

/* Reads exactly n bytes from fd, waiting up to timeout_ms for each read; returns how many came
 * (fewer: the end of the stream, an error or the timeout). */
size_t read_exact(int fd, char *buf, size_t n, long timeout_ms)
{
    size_t got = 0;

    while (got < n) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        ssize_t r;

        if (poll(&p, 1, (int)timeout_ms) <= 0 || (r = read(fd, buf + got, n - got)) <= 0)
            break;
        got += (size_t)r;
    }
    return got;
}

/* Reads until EOF (or timeout_ms): the whole answer of a Connection: close server. Returns a
 * malloc'd, NUL-terminated string. */
char *read_all(int fd, long timeout_ms)
{
    long deadline = now_ms() + timeout_ms * slow;
    size_t len = 0, cap = 65536;
    char *buf = malloc(cap);

    assert_non_null(buf);
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        long left = deadline - now_ms();
        ssize_t n;

        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            break;
        if (len + 1 == cap) {
            buf = realloc(buf, cap *= 2);
            assert_non_null(buf);
        }
        n = read(fd, buf + len, cap - len - 1);
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    buf[len] = '\0';
    return buf;
}

/* Sends the raw request and returns the whole answer (malloc'd). */
char *http_raw(int port, const char *req)
{
    int fd = tcp_connect(port);
    char *r;

    send_all(fd, req, strlen(req));
    r = read_all(fd, 10000);
    close(fd);
    return r;
}

/* GET path: returns the status code, *body (malloc'd) the body. */
int http_get(int port, const char *path, char **body)
{
    char req[512], *r, *b;
    int code = -1;

    snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", path);
    r = http_raw(port, req);
    sscanf(r, "HTTP/1.1 %d", &code);
    b = strstr(r, "\r\n\r\n");
    if (body)
        *body = strdup(b ? b + 4 : "");
    free(r);
    return code;
}

/* The admin port from the daemon's log. */
int admin_port(struct daemon *d)
{
    long deadline = now_ms() + 5000;

    while (now_ms() < deadline) {
        const char *p = strstr(log_text(d), "admin HTTP on 127.0.0.1:");
        if (p)
            return atoi(p + strlen("admin HTTP on 127.0.0.1:"));
        sleep_ms(10);
    }
    fail_msg("no admin port in the log: %s", log_text(d));
    return -1;
}

/* The sum over every sample of family name (labels ignored) in a /metrics body. */
double metric_sum(const char *body, const char *name)
{
    size_t nl = strlen(name);
    double sum = 0;
    bool seen = false;

    for (const char *p = body; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        const char *v;

        if (strncmp(p, name, nl) != 0 || (p[nl] != ' ' && p[nl] != '{'))
            continue;
        v = p[nl] == '{' ? strchr(p, '}') + 1 : p + nl;
        sum += strtod(v, NULL);
        seen = true;
    }
    if (!seen)
        fail_msg("no %s in /metrics", name);
    return sum;
}

/* A connection from source address src (127.x.y.z) to port, or -1. */
int connect_from(int port, const char *src)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    struct sockaddr_in b = {.sin_family = AF_INET};
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    inet_pton(AF_INET, src, &b.sin_addr);
    assert_int_equal(bind(fd, (struct sockaddr *)&b, sizeof(b)), 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    return fd;
}

/* Whether fd echoes a line (true), or was closed by the server (false). */
bool echoes(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    char buf[8];
    ssize_t n;

    if (send(fd, "abc\n", 4, MSG_NOSIGNAL) != 4)
        return false;
    if (poll(&p, 1, 5000 * slow) <= 0)
        fail_msg("neither an echo nor a close within 5 s");
    n = read(fd, buf, sizeof(buf));
    return n == 4 && memcmp(buf, "abc\n", 4) == 0;
}

/* A TCP port free now on 127.0.0.1 (another process may take it before the caller binds it). */
int free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t l = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0), port;

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    getsockname(fd, (struct sockaddr *)&a, &l);
    port = ntohs(a.sin_port);
    close(fd);
    return port;
}
