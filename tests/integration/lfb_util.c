/* lfb_util: what the lfbench integration tests share (lfb_util.h says what each helper does). */
#include "lfb_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct lfb lfb = {.slow = 1};

int lfb_init(bool with_lfepolld)
{
    const char *s = getenv("TEST_SLOW");

    lfb.lfbench = getenv("LFBENCH");
    lfb.lfepolld = getenv("LFEPOLLD");
    lfb.badserver = getenv("BADSERVER");
    if (!lfb.lfbench || !lfb.badserver || (with_lfepolld && !lfb.lfepolld)) {
        fprintf(stderr, "set LFBENCH, %sBADSERVER (make test does)\n",
                with_lfepolld ? "LFEPOLLD and " : "");
        return -1;
    }
    if (s && atoi(s) > 0)
        lfb.slow = atoi(s);
    signal(SIGPIPE, SIG_IGN);
    if (getenv("TEST_FILTER"))
        cmocka_set_test_filter(getenv("TEST_FILTER"));
    return 0;
}

void lfb_start(const char *const *argv)
{
    lfb.server_port = 0;
    lfb.server_pid = lfb_start_server(argv, &lfb.server_port, lfb.slow);
}

int lfb_teardown(void **state)
{
    (void)state;
    lfb_stop_server(&lfb.server_pid);
    return 0;
}

long lfb_field(const char *name)
{
    return lfb_field_of(lfb.out, name);
}

void lfb_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int lfb_free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0), port;

    assert_true(fd >= 0);
    bind(fd, (struct sockaddr *)&a, sizeof(a));
    getsockname(fd, (struct sockaddr *)&a, &l);
    port = ntohs(a.sin_port);
    close(fd);
    return port;
}

bool lfb_port_open(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    bool ok = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;

    close(fd);
    return ok;
}

pid_t lfb_start_server(const char *const *argv, int *port, int slow)
{
    const char *args[16];
    char pstr[16], hostport[32];
    int n = 0, devnull;
    pid_t pid;

    if (*port <= 0)
        *port = lfb_free_port();
    snprintf(pstr, sizeof(pstr), "%d", *port);
    snprintf(hostport, sizeof(hostport), "127.0.0.1:%d", *port);
    for (; *argv && n < 15; argv++)
        args[n++] = !strcmp(*argv, "PORT")             ? pstr
                    : !strcmp(*argv, "127.0.0.1:PORT") ? hostport
                                                       : *argv;
    args[n] = NULL;
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, STDOUT_FILENO);
        dup2(devnull, STDERR_FILENO);
        execv(args[0], (char *const *)args);
        _exit(127);
    }
    for (int i = 0; i < 500 * slow && !lfb_port_open(*port); i++)
        lfb_sleep_ms(10);
    if (!lfb_port_open(*port))
        fail_msg("%s did not listen on 127.0.0.1:%d", args[0], *port);
    return pid;
}

void lfb_stop_server(pid_t *pid)
{
    if (*pid > 0) {
        kill(*pid, SIGKILL);
        waitpid(*pid, NULL, 0);
    }
    *pid = 0;
}

static long now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
}

/* The deadlines of the clients lfb_spawn started and lfb_wait has not reaped: the alarm set
 * before the exec is the client's own, which lfbench re-arms and cancels (its script phases'
 * alarm), so the parent keeps the deadline too. */
static struct {
    pid_t pid;
    long deadline_ms;
} spawned[32];

pid_t lfb_spawn(const char *const *argv, int fo, int fe, unsigned alarm_s)
{
    pid_t pid = fork();

    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fo, STDOUT_FILENO);
        dup2(fe, STDERR_FILENO);
        alarm(alarm_s);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    for (size_t i = 0; i < sizeof(spawned) / sizeof(spawned[0]); i++)
        if (spawned[i].pid == 0) {
            spawned[i].pid = pid;
            spawned[i].deadline_ms = now_ms() + (long)alarm_s * 1000 + 1000;
            break;
        }
    return pid;
}

int lfb_wait(pid_t pid)
{
    long deadline = 0;
    pid_t got = 0;
    int status;

    for (size_t i = 0; i < sizeof(spawned) / sizeof(spawned[0]); i++)
        if (spawned[i].pid == pid) {
            deadline = spawned[i].deadline_ms;
            spawned[i].pid = 0;
        }
    while (deadline && (got = waitpid(pid, &status, WNOHANG)) == 0) {
        if (now_ms() >= deadline) {
            print_message("%d: past its deadline (the alarm lfb_spawn set): killed\n", (int)pid);
            kill(pid, SIGKILL);
            break;
        }
        lfb_sleep_ms(10);
    }
    if (got != pid)
        assert_int_equal(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void lfb_read_back(int fd, char *buf, size_t size)
{
    ssize_t len = pread(fd, buf, size - 1, 0);

    buf[len > 0 ? len : 0] = '\0';
}

int lfb_run(const char *const *argv, char *out, size_t size, unsigned alarm_s)
{
    char path[] = "/tmp/lfe-bench-XXXXXX";
    int fd = mkstemp(path), rc;

    assert_true(fd >= 0);
    rc = lfb_wait(lfb_spawn(argv, fd, fd, alarm_s));
    lfb_read_back(fd, out, size);
    close(fd);
    unlink(path);
    return rc;
}

int lfb_bench(int port, ...)
{
    const char *args[48] = {lfb.lfbench};
    char target[32];
    int n = 1;
    va_list ap;

    va_start(ap, port);
    for (const char *a = va_arg(ap, const char *); a && n < 45; a = va_arg(ap, const char *))
        args[n++] = a;
    va_end(ap);
    snprintf(target, sizeof(target), "127.0.0.1:%d", port);
    args[n++] = target;
    args[n] = NULL;
    return lfb_run(args, lfb.out, sizeof(lfb.out), 60 * (unsigned)lfb.slow);
}

long lfb_field_of(const char *out, const char *name)
{
    char key[64];
    const char *p;

    snprintf(key, sizeof(key), "\n%s ", name);
    if (strncmp(out, key + 1, strlen(key + 1)) == 0) /* -q: the result is the first line */
        return atol(out + strlen(key + 1));
    p = strstr(out, key);
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

double lfb_jnum(const char *json, const char *name)
{
    char key[64];
    const char *p;

    snprintf(key, sizeof(key), "\"%s\": ", name);
    p = strstr(json, key);
    return p ? strtod(p + strlen(key), NULL) : NAN;
}

double lfb_jtop(const char *json, const char *name)
{
    char key[64];
    const char *p;

    snprintf(key, sizeof(key), "\n  \"%s\": ", name);
    p = strstr(json, key);
    return p ? strtod(p + strlen(key), NULL) : lfb_jnum(json, name);
}

const char *lfb_slurp(const char *path)
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

/* --- a strict JSON validator: the tests' own, independent of client/json.c ------------------ */

/* Strict UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing above U+10FFFF. */
static bool utf8_valid(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned c = s[i], len = c < 0x80             ? 1
                                 : (c & 0xe0) == 0xc0 ? 2
                                 : (c & 0xf0) == 0xe0 ? 3
                                 : (c & 0xf8) == 0xf0 ? 4
                                                      : 0;
        uint32_t cp = len == 1 ? c : len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
        static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};

        if (!len || i + len > n)
            return false;
        for (unsigned k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return false;
            cp = cp << 6 | (s[i + k] & 0x3f);
        }
        if (cp < min[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += len;
    }
    return true;
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
            return NULL; /* a raw control character, or the end */
        if (c != '\\')
            continue;
        c = (unsigned char)*p++;
        if (c == 'u') {
            unsigned v = 0;
            for (int k = 0; k < 4; k++, p++) {
                if (!strchr("0123456789abcdefABCDEF", *p) || !*p)
                    return NULL;
                v = v * 16 + (unsigned)(*p <= '9' ? *p - '0' : (*p | 0x20) - 'a' + 10);
            }
            if (v >= 0xdc00 && v <= 0xdfff)
                return NULL;                  /* a low surrogate alone */
            if (v >= 0xd800 && v <= 0xdbff) { /* a high surrogate: its low half follows */
                if (p[0] != '\\' || p[1] != 'u' || strncasecmp(p + 2, "dc", 2) < 0 ||
                    strncasecmp(p + 2, "e0", 2) >= 0 || !strchr("0123456789abcdefABCDEF", p[4]) ||
                    !p[4] || !strchr("0123456789abcdefABCDEF", p[5]) || !p[5])
                    return NULL;
                p += 6;
            }
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

bool lfb_json_valid(const char *text, size_t len)
{
    char *copy = malloc(len + 1);
    const char *end;
    bool ok;

    assert_non_null(copy);
    memcpy(copy, text, len);
    copy[len] = '\0';
    /* a NUL inside is no JSON: the copy would end there */
    end = strlen(copy) == len && utf8_valid((const unsigned char *)copy, len) ? json_value(copy, 0)
                                                                              : NULL;
    ok = end && !*json_ws(end);
    free(copy);
    return ok;
}
