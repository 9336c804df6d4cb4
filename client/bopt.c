/* bopt: lfbench's command line. */
#include "bopt.h"

#include "args.h"
#include "http.h"
#include "topo.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* The ids of the options with no short letter (those with one use the letter). */
enum {
    O_CPUS = 256,
    O_MODE,
    O_PIPELINE,
    O_WARMUP,
    O_TIMEOUT,
    O_CONNECT_RATE,
    O_LINGER0,
    O_FASTOPEN,
    O_BUSY_POLL,
    O_SIZE,
    O_PAYLOAD,
    O_MIX,
    O_EXPECT,
    O_OK_STATUS,
    O_REQUEST,
    O_SCRIPT,
    O_LATENCY,
    O_RECONNECT_EVERY,
    O_SOURCE,
    O_JSON,
    O_JSON_STREAM,
    O_HDR_LOG,
    O_START_AT,
    O_OPEN_TIMEOUT,
    O_RATE_SWEEP,
    O_FIND_RATE,
    O_MAX_ERRORS,
    O_SCRIPT_BUFFERS_MB,
    O_TLS,
    O_TLS_SNI,
    O_TLS_CA,
    O_TLS_CERT,
    O_TLS_KEY,
    O_TLS_INSECURE,
    O_TLS_VERSION,
    O_TLS_CIPHERS,
    O_TLS_CIPHERSUITES,
    O_TLS_GROUPS,
    O_TLS_ALPN,
    O_TLS_RESUME,
};

int bopt_parse_target(const char *s, struct sockaddr_storage *ss, socklen_t *len)
{
    const char *colon = strrchr(s, ':');
    char host[64], *end;
    long port;
    size_t hl;

    if (!colon || colon == s)
        return -EINVAL;
    port = strtol(colon + 1, &end, 10);
    if (*end || end == colon + 1 || port < 1 || port > 65535)
        return -EINVAL;
    hl = (size_t)(colon - s);
    memset(ss, 0, sizeof(*ss));
    if (s[0] == '[') {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
        if (hl < 3 || s[hl - 1] != ']' || hl - 2 >= sizeof(host))
            return -EINVAL;
        memcpy(host, s + 1, hl - 2);
        host[hl - 2] = '\0';
        if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1)
            return -EINVAL;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t)port);
        *len = sizeof(*a);
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)ss;
        if (hl >= sizeof(host))
            return -EINVAL;
        memcpy(host, s, hl);
        host[hl] = '\0';
        if (strcmp(host, "localhost") == 0)
            strcpy(host, "127.0.0.1");
        if (inet_pton(AF_INET, host, &a->sin_addr) != 1)
            return -EINVAL;
        a->sin_family = AF_INET;
        a->sin_port = htons((uint16_t)port);
        *len = sizeof(*a);
    }
    return 0;
}

#define URL_MAX_PATH 8192

int bopt_parse_url(const char *s, char *hostport, size_t hpl, char *authority, size_t al,
                   char **path)
{
    const char *a, *end, *host_end, *port = NULL, *p;
    size_t plen;
    char *out;

    bool tls = !strncasecmp(s, "https://", 8);

    if (!tls && strncasecmp(s, "http://", 7))
        return -EINVAL;
    a = s + 7 + tls;
    end = a + strcspn(a, "/?#");
    if (end == a || memchr(a, '@', (size_t)(end - a)))
        return -EINVAL; /* no host, or user info: a password on a command line is no target */
    if (*a == '[') {
        host_end = memchr(a, ']', (size_t)(end - a));
        if (!host_end || (++host_end < end && *host_end != ':'))
            return -EINVAL;
    } else {
        host_end = memchr(a, ':', (size_t)(end - a));
        if (!host_end)
            host_end = end;
    }
    if (host_end < end) {
        port = host_end + 1;
        if (port == end || strspn(port, "0123456789") != (size_t)(end - port))
            return -EINVAL;
    }
    if ((size_t)(end - a) >= al ||
        (size_t)snprintf(hostport, hpl, "%.*s:%.*s", (int)(host_end - a), a,
                         port  ? (int)(end - port)
                         : tls ? 3
                               : 2,
                         port  ? port
                         : tls ? "443"
                               : "80") >= hpl)
        return -EINVAL;
    snprintf(authority, al, "%.*s", (int)(end - a), a);
    /* the path and query; a fragment is the client's, never sent */
    plen = strcspn(end, "#");
    if (plen > URL_MAX_PATH)
        return -EINVAL;
    /* the fragment too: it is not sent, but the URL is printed as given (the opening line) */
    for (p = end; *p; p++)
        if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f)
            return -EINVAL;
    if (!(out = malloc(plen + 2)))
        return -ENOMEM;
    snprintf(out, plen + 2, "%s%.*s", *end == '/' ? "" : "/", (int)plen, end);
    *path = out;
    return tls;
}

int bopt_parse_sources(const char *s, struct in_addr *out, int max)
{
    char a[32], b[32];
    const char *dash = strchr(s, '-');
    struct in_addr lo, hi;
    uint32_t l, h;

    if (dash) {
        if ((size_t)(dash - s) >= sizeof(a) || strlen(dash + 1) >= sizeof(b))
            return -EINVAL;
        memcpy(a, s, (size_t)(dash - s));
        a[dash - s] = '\0';
        strcpy(b, dash + 1);
    } else {
        if (strlen(s) >= sizeof(a))
            return -EINVAL;
        strcpy(a, s);
        strcpy(b, s);
    }
    if (inet_pton(AF_INET, a, &lo) != 1 || inet_pton(AF_INET, b, &hi) != 1)
        return -EINVAL;
    l = ntohl(lo.s_addr);
    h = ntohl(hi.s_addr);
    if (h < l || h - l >= (uint32_t)max)
        return -EINVAL;
    for (uint32_t v = l; v <= h; v++)
        out[v - l].s_addr = htonl(v);
    return (int)(h - l + 1);
}

/* "1700000000.5" (CLOCK_REALTIME seconds) or "+N" (seconds from now), at most a day ahead and
 * not in the past. */
static int parse_start_at(const char *s, double *out)
{
    struct timespec ts;
    double now, v;

    clock_gettime(CLOCK_REALTIME, &ts);
    now = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
    if (s[0] == '+') {
        if (args_duration_ms(s + 1, 1000.0, &v) < 0)
            return -EINVAL;
        *out = now + v / 1000.0;
        return 0;
    }
    if (strspn(s, "0123456789.") != strlen(s) || args_num(s, now - 1, now + 86400, &v) < 0)
        return -EINVAL;
    *out = v;
    return 0;
}

static int parse_sweep(const char *s, struct bopt *o)
{
    char buf[128], *a, *b, *c;
    double from, to, step;

    if (strlen(s) >= sizeof(buf))
        return -EINVAL;
    strcpy(buf, s);
    a = buf;
    if (!(b = strchr(a, ':')) || !(c = strchr(b + 1, ':')))
        return -EINVAL;
    *b++ = '\0';
    *c++ = '\0';
    if (args_num(a, 0.001, 1e9, &from) < 0 || args_num(b, from, 1e9, &to) < 0 ||
        args_num(c, 0.001, 1e9, &step) < 0 || (to - from) / step + 1 > BOPT_MAX_STEPS + 1e-6)
        return -EINVAL;
    o->sweep_from = from;
    o->sweep_to = to;
    o->sweep_step = step;
    return 0;
}

int bopt_parse_statuses(const char *s, uint64_t *ok)
{
    const char *p = s;

    memset(ok, 0, 10 * sizeof(*ok));
    for (;;) {
        long a, b;
        char *end;

        if (p[0] >= '1' && p[0] <= '5' && (p[1] == 'x' || p[1] == 'X') &&
            (p[2] == 'x' || p[2] == 'X')) {
            a = (p[0] - '0') * 100;
            b = a + 99;
            end = (char *)p + 3;
        } else {
            if (*p < '0' || *p > '9')
                return -EINVAL;
            a = b = strtol(p, &end, 10);
            if (*end == '-') {
                if (end[1] < '0' || end[1] > '9')
                    return -EINVAL;
                b = strtol(end + 1, &end, 10);
            }
            if (a < 100 || b > 599 || a > b)
                return -EINVAL;
        }
        for (long c = a; c <= b; c++)
            ok[c / 64] |= 1ull << (c % 64);
        if (*end == '\0')
            return 0;
        if (*end != ',')
            return -EINVAL;
        p = end + 1;
    }
}

/* "p99=1ms": the percentile (0 < p < 100, or 100 for the max) and the bound in µs. */
static int parse_find(const char *s, double *pct, double *bound_us)
{
    static const struct {
        const char *unit;
        double us;
    } units[] = {{"ns", 1e-3}, {"us", 1}, {"µs", 1}, {"ms", 1e3}, {"s", 1e6}};
    char buf[64], *eq, *end;
    double p, v;

    if (strlen(s) >= sizeof(buf) || s[0] != 'p')
        return -EINVAL;
    strcpy(buf, s + 1);
    if (!(eq = strchr(buf, '=')))
        return -EINVAL;
    *eq = '\0';
    if (args_num(buf, 0.001, 100, &p) < 0)
        return -EINVAL;
    errno = 0;
    v = strtod(eq + 1, &end);
    if (errno || end == eq + 1 || !isfinite(v) || v <= 0)
        return -EINVAL;
    for (size_t k = 0; k < sizeof(units) / sizeof(units[0]); k++)
        if (!strcmp(end, units[k].unit)) {
            *pct = p;
            *bound_us = v * units[k].us;
            return *bound_us >= 1 ? 0 : -EINVAL;
        }
    return -EINVAL;
}

void bopt_free(struct bopt *o)
{
    free(o->mixbuf);
    o->mixbuf = NULL;
    free(o->path);
    o->path = NULL;
    free(o->get_name);
    o->get_name = NULL;
}

/* What was given, for the checks of one option against another. */
struct given {
    bool d, n, size, request, expect, tls_resume;
};

/* What parse holds as it reads argv: the configuration, and the rows of bopt_options given. */
struct bparse {
    struct bopt *o;
    int argc;
    char **argv;
    bool seen[64];
};

static const char *const expect_words[] = {"echo", "line", "len32", "bytes N", "http"};

/* A bare number of seconds that was milliseconds once (--timeout): one of at least this many
 * seconds is more likely an old command line's milliseconds than a request timeout anyone
 * means, and draws a warning; a smaller one reads as wrk's (2 s by default) and does not. */
#define TIMEOUT_WARN_S 10

/* In the functions that take options: one line in err, and the error return. */
#define BAD(...)                                                                                   \
    do {                                                                                           \
        snprintf(err, errlen, __VA_ARGS__);                                                        \
        return -1;                                                                                 \
    } while (0)

/* The options no args_kind says, each a hook of its row: val is the option's value. Each returns
 * 0, or -1 with one line in err when val is bad. */

static int take_cpus(struct bparse *p, const char *val, char *err, size_t errlen)
{
    if (cpulist_parse(val, &p->o->cpus) < 0)
        BAD("--cpus: '%s' is not a CPU list; write e.g. 1 or 2-3", val);
    p->o->have_cpus = true;
    return 0;
}

/* A bare number was milliseconds once: one that reads as an old timeout is told so. */
static int take_timeout(struct bparse *p, const char *val, char *err, size_t errlen)
{
    struct bopt *o = p->o;
    /* bare: digits and a '.' only; args_duration_ms says whether it is a number at all */
    bool bare = *val && val[strspn(val, "0123456789.")] == '\0';
    double d, old;

    if (args_duration_ms(val, 1000.0, &d) < 0 || d < 1 || d > 3600000) {
        if (bare && args_duration_ms(val, 1.0, &old) == 0 && old >= 1 && old <= 3600000)
            BAD("--timeout: '%s' is not a duration of 1ms to 3600s: a bare number is "
                "seconds now (it was milliseconds); write %sms for the old meaning",
                val, val);
        BAD("--timeout: '%s' is not a duration of 1ms to 3600s; write 2 (seconds), 1.5s or "
            "250ms",
            val);
    }
    o->timeout_ms = (int)(d + 0.5);
    if (bare && d >= TIMEOUT_WARN_S * 1000.0)
        snprintf(o->warning, sizeof(o->warning),
                 "--timeout %s: a bare number is seconds now (was milliseconds); write %sms "
                 "for the old meaning, or %ss to say seconds without this warning",
                 val, val, val);
    else
        o->warning[0] = '\0'; /* the last --timeout given is the one */
    return 0;
}

static int take_start_at(struct bparse *p, const char *val, char *err, size_t errlen)
{
    if (parse_start_at(val, &p->o->start_at) < 0)
        BAD("--start-at: '%s' is not a time within the next day: epoch seconds (date "
            "+%%s) or +SECONDS from now",
            val);
    return 0;
}

static int take_sweep(struct bparse *p, const char *val, char *err, size_t errlen)
{
    if (parse_sweep(val, p->o) < 0)
        BAD("--rate-sweep: '%s' is not FROM:TO:STEP in requests/s with 0 < FROM <= TO, "
            "STEP > 0 and at most %d steps",
            val, BOPT_MAX_STEPS);
    return 0;
}

static int take_find(struct bparse *p, const char *val, char *err, size_t errlen)
{
    if (parse_find(val, &p->o->find_pct, &p->o->find_bound_us) < 0)
        BAD("--find-rate: '%s' is not pP=LATENCY, e.g. p99=1ms or p99.9=500us (units "
            "ns, us, ms, s)",
            val);
    return 0;
}

/* The one request file of --payload and --request (why: the message when a file was given). */
static int one_file(struct bparse *p, const char *val, const char *why, char *err, size_t errlen)
{
    if (p->o->nclasses)
        BAD("%s", why);
    p->o->cls[0] = (struct bclass){val, 1};
    p->o->nclasses = 1;
    return 0;
}

static int take_payload(struct bparse *p, const char *val, char *err, size_t errlen)
{
    return one_file(p, val, "--payload: give either --payload or --mix, once", err, errlen);
}

static int take_request(struct bparse *p, const char *val, char *err, size_t errlen)
{
    if (one_file(p, val, "--request: give one of --request, --payload or --mix, once", err,
                 errlen) < 0)
        return -1;
    p->o->request = val;
    return 0;
}

/* "F:W,F:W,...": split in a copy of its own, which cls[].file point into. */
static int take_mix(struct bparse *p, const char *val, char *err, size_t errlen)
{
    struct bopt *o = p->o;
    char *save = NULL;
    long w;

    if (o->nclasses)
        BAD("--mix: give either --payload or --mix, once");
    free(o->mixbuf);
    o->mixbuf = strdup(val);
    if (!o->mixbuf)
        BAD("out of memory");
    for (char *tok = strtok_r(o->mixbuf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *c = strrchr(tok, ':');
        if (!c || c == tok || args_whole(c + 1, 1, 1000000, &w) < 0)
            BAD("--mix: '%s' is not FILE:WEIGHT (weight 1 to 1000000)", tok);
        if (o->nclasses == BOPT_MAX_CLASSES)
            BAD("--mix: at most %d files", BOPT_MAX_CLASSES);
        *c = '\0';
        o->cls[o->nclasses++] = (struct bclass){tok, (unsigned)w};
    }
    if (!o->nclasses)
        BAD("--mix: no FILE:WEIGHT in '%s'", val);
    return 0;
}

/* A value of --expect ("bytes N") takes the next word of argv too (getopt's optind). */
static int take_expect(struct bparse *p, const char *val, char *err, size_t errlen)
{
    long v;

    for (int e = EXPECT_ECHO; e <= EXPECT_HTTP; e++)
        if (e != EXPECT_BYTES && !strcmp(val, expect_words[e])) {
            p->o->expect = (enum expect)e;
            return 0;
        }
    if (strcmp(val, "bytes"))
        BAD("--expect: '%s' is not echo, line, len32, bytes N or http", val);
    if (optind >= p->argc || args_whole(p->argv[optind], 1, 1 << 30, &v) < 0)
        BAD("--expect bytes needs a byte count from 1 to %d", 1 << 30);
    p->o->expect = EXPECT_BYTES;
    p->o->expect_bytes = (size_t)v;
    optind++; /* N: a second value of --expect */
    return 0;
}

static int take_ok_status(struct bparse *p, const char *val, char *err, size_t errlen)
{
    if (strlen(val) > 200 || bopt_parse_statuses(val, p->o->ok_status) < 0)
        BAD("--ok-status: '%s' is not a list of HTTP statuses from 100 to 599, e.g. "
            "2xx,404 or 200-299,301",
            val);
    p->o->ok_status_arg = val;
    return 0;
}

/* -H: a header of lfbench's own GET, which has no body to frame. */
static int take_header(struct bparse *p, const char *val, char *err, size_t errlen)
{
    size_t nl;
    const char *why;

    if (p->o->nheaders == BOPT_MAX_HEADERS)
        BAD("-H: at most %d headers", BOPT_MAX_HEADERS);
    if (http_field_check(val, &nl, &why) < 0)
        BAD("-H: '%s' is not a header 'Name: value': %s", val, why);
    if ((nl == 14 && !strncasecmp(val, "content-length", 14)) ||
        (nl == 17 && !strncasecmp(val, "transfer-encoding", 17)))
        BAD("-H: %.*s frames a body, and lfbench's GET has none; for a request with a body "
            "give --request FILE, or --script",
            (int)nl, val);
    p->o->headers[p->o->nheaders++] = val;
    return 0;
}

static int take_source(struct bparse *p, const char *val, char *err, size_t errlen)
{
    int n = bopt_parse_sources(val, p->o->sources, BOPT_MAX_SOURCES);

    if (n < 0)
        BAD("--source: '%s' is not an IPv4 address or ascending range A-B of at most %d", val,
            BOPT_MAX_SOURCES);
    p->o->nsources = n;
    return 0;
}

static int take_tls_version(struct bparse *p, const char *val, char *err, size_t errlen)
{
    static const struct {
        const char *s;
        int lo, hi;
    } v[] = {{"1.2", 0x0303, 0x0303}, {"1.3", 0x0304, 0x0304}, {"1.2-1.3", 0x0303, 0x0304}};

    for (size_t k = 0; k < sizeof(v) / sizeof(v[0]); k++)
        if (!strcmp(val, v[k].s)) {
            p->o->tls_min = v[k].lo;
            p->o->tls_max = v[k].hi;
            return 0;
        }
    BAD("--tls-version: '%s' is not 1.2, 1.3 or 1.2-1.3", val);
}

static int take_tls_resume(struct bparse *p, const char *val, char *err, size_t errlen)
{
    char *end;
    double f;

    errno = 0;
    f = strtod(val, &end);
    if (errno || end == val || *end || !(f >= 0 && f <= 1))
        BAD("--tls-resume: '%s' is not a share from 0 to 1 (0.5: half the new connections offer "
            "a session)",
            val);
    p->o->tls_resume = f;
    return 0;
}

/* A value that goes into a ClientHello or a library call as a name: printable, no space. */
static int one_word(const char *opt, const char *val, const char *eg, char *err, size_t errlen)
{
    if (!*val || strlen(val) > 255)
        BAD("%s: give a value of 1 to 255 bytes, e.g. %s", opt, eg);
    for (const char *c = val; *c; c++)
        if ((unsigned char)*c <= ' ' || (unsigned char)*c >= 0x7f)
            BAD("%s: '%s' holds a space or a byte that is not printable ASCII; e.g. %s", opt, val,
                eg);
    return 0;
}

static int take_tls_sni(struct bparse *p, const char *val, char *err, size_t errlen)
{
    if (one_word("--tls-sni", val, "example.com", err, errlen) < 0)
        return -1;
    p->o->tls_sni = val;
    return 0;
}

static int take_tls_alpn(struct bparse *p, const char *val, char *err, size_t errlen)
{
    if (one_word("--tls-alpn", val, "http/1.1 or h2,http/1.1", err, errlen) < 0)
        return -1;
    for (const char *c = val; *c;) {
        size_t l = strcspn(c, ",");
        if (l == 0)
            BAD("--tls-alpn: '%s' has an empty name; write e.g. h2,http/1.1", val);
        c += l + (c[l] == ',');
        if (c[-1] == ',' && !*c)
            BAD("--tls-alpn: '%s' has an empty name; write e.g. h2,http/1.1", val);
    }
    p->o->tls_alpn = val;
    return 0;
}

static int take_tls_ciphers(struct bparse *p, const char *val, char *err, size_t errlen)
{
    if (one_word("--tls-ciphers", val, "ECDHE-ECDSA-AES128-GCM-SHA256", err, errlen) < 0)
        return -1;
    p->o->tls_ciphers = val;
    return 0;
}

static int take_tls_suites(struct bparse *p, const char *val, char *err, size_t errlen)
{
    if (one_word("--tls-ciphersuites", val, "TLS_AES_128_GCM_SHA256", err, errlen) < 0)
        return -1;
    p->o->tls_ciphersuites = val;
    return 0;
}

static int take_tls_groups(struct bparse *p, const char *val, char *err, size_t errlen)
{
    if (one_word("--tls-groups", val, "X25519:P-256", err, errlen) < 0)
        return -1;
    p->o->tls_groups = val;
    return 0;
}

/* An option's field of struct bopt, and the kinds its rows use (args.h says what each takes). */
#define KIND(...)                                                                                  \
    {                                                                                              \
        __VA_ARGS__                                                                                \
    }
#define AT(f) offsetof(struct bopt, f), sizeof(((struct bopt *)0)->f)
#define HOOK(fn) KIND(ARGS_HOOK, 0, 0, 0, 0, NULL, NULL, NULL, NULL), fn
#define FLAG(f) KIND(ARGS_FLAG, AT(f), 1, 1, NULL, NULL, NULL, NULL), NULL
#define WHOLE(f, lo, hi, what) KIND(ARGS_WHOLE, AT(f), lo, hi, what, NULL, NULL, NULL), NULL
#define NUM(f, what, tail) KIND(ARGS_NUM, AT(f), 0.001, 1e9, what, NULL, tail, NULL), NULL
#define SECONDS(f, lo, hi, tail)                                                                   \
    KIND(ARGS_SECONDS, AT(f), lo, hi, "a duration", NULL, tail, NULL), NULL
#define NAME(f, what) KIND(ARGS_NAME, AT(f), 0, 0, what, NULL, NULL, NULL), NULL
#define PATH(f) KIND(ARGS_STRING, AT(f), 0, 0, NULL, NULL, NULL, NULL), NULL

/* Every option once, in --help's order, with what its value is (args_set, or the row's hook). The
 * words follow lfepolld --help's where the two say the same thing (-q, --quiet; -h, --help; -V,
 * --version; a TIME as 10, 2.5s, 500ms). */
const struct bopt_option bopt_options[] = {
    {'t', 't', NULL, "N", WHOLE(threads, 1, 256, "a thread count"),
     "threads, one event loop each (default 1)"},
    {O_CPUS, 0, "cpus", "LIST", HOOK(take_cpus), "pin the threads to these CPUs, e.g. 1 or 2-3"},
    {'c', 'c', NULL, "N", WHOLE(conns, 1, 10000000, "a connection count"),
     "connections (long) or connections in flight (short) (default 100)"},
    {O_MODE, 0, "mode", "long|short", NAME(mode, "a mode"),
     "long: keep connections open (default); one the server closes\n"
     "cleanly between requests is opened again (reconnects, not an\n"
     "error), a request it leaves unanswered is the error 'closed';\n"
     "short: one request per connection (connect, write, read the\n"
     "response, close)"},
    {O_PIPELINE, 0, "pipeline", "D", WHOLE(pipeline, 1, BOPT_MAX_PIPELINE, "a depth"),
     "requests in flight per connection (long mode, default 1)"},
    {'d', 'd', NULL, "TIME", SECONDS(duration, 1, 86400000, "; write 10 (seconds), 2.5s or 500ms"),
     "run time after warm-up: 10, 2.5s, 500ms, 1m (default 10s)"},
    {'n', 'n', NULL, "REQUESTS", WHOLE(requests, 1, ARGS_NO_MAX, "a request count"),
     "stop after this many requests instead"},
    {O_WARMUP, 0, "warmup", "TIME",
     SECONDS(warmup, 0, 3600000, "; write 2 (seconds), 2.5s or 500ms"),
     "excluded from the statistics: 2, 2s, 500ms (default 0)"},
    {O_TIMEOUT, 0, "timeout", "TIME", HOOK(take_timeout),
     "per request; a stuck request is an error: 2 (seconds), 1.5s,\n"
     "250ms (default 5s); a bare number was once milliseconds, and\n"
     "one of 10 or more draws a warning"},
    {'R', 'R', NULL, "RATE",
     NUM(rate, "a rate in requests per second", "; write a number: 5000, 2500.5"),
     "open loop: RATE requests/s in total, latency measured from the\n"
     "intended send time (no coordinated omission); a due send waits\n"
     "for a connection, and one never sent is 'unsent' and fails the run"},
    {O_CONNECT_RATE, 0, "connect-rate", "N",
     NUM(connect_rate, "a rate in connections per second", NULL),
     "at most N new connections per second (short mode with -R: at\n"
     "least RATE)"},
    {O_LINGER0, 0, "linger0", NULL, FLAG(linger0),
     "close with SO_LINGER {1,0}: a reset instead of a FIN"},
    {O_FASTOPEN, 0, "fastopen", NULL, FLAG(fastopen),
     "TCP Fast Open: a connection's first request goes in its SYN\n"
     "once the server's cookie is cached (needs net.ipv4.tcp_fastopen\n"
     "with bit 1, the default, and a server that takes it)"},
    {O_BUSY_POLL, 0, "busy-poll", NULL, FLAG(busy_poll),
     "threads never sleep: each polls its sockets and its send\n"
     "schedule in a loop, using all of its CPU; with -R no timer\n"
     "syscall, interrupt and wakeup per request, so one CPU offers\n"
     "about twice the rate. Give each thread a CPU of its own (--cpus)"},
    {O_SIZE, 0, "size", "BYTES", WHOLE(size, 1, 1 << 30, "a size in bytes"),
     "generated payload size (default 64); carries a sequence number"},
    {O_PAYLOAD, 0, "payload", "FILE", HOOK(take_payload), "send FILE as every request"},
    {O_MIX, 0, "mix", "F:W,F:W,...", HOOK(take_mix),
     "weighted mix of request files; latency reported per file"},
    {O_EXPECT, 0, "expect", "echo", HOOK(take_expect),
     "responses are the request, byte for byte (default)"},
    {0, 0, "expect", "line", HOOK(NULL), "a response is everything up to and including '\\n'"},
    {0, 0, "expect", "len32", HOOK(NULL),
     "a response is a 4-byte big-endian length, then that many bytes"},
    {0, 0, "expect", "bytes N", HOOK(NULL), "a response is exactly N bytes"},
    {0, 0, "expect", "http", HOOK(NULL),
     "HTTP/1.1 responses framed by Content-Length, chunked encoding or\n"
     "the close; 1xx skipped, HEAD/204/304 bodiless; a status outside\n"
     "--ok-status is counted as non-2xx: not an error, but it breaks a\n"
     "--rate-sweep or --find-rate step; keep-alive and Connection: close\n"
     "honoured: a close is a reconnect, and requests pipelined behind it\n"
     "are sent again (closed loop) or counted closed and lost (-R)"},
    {O_OK_STATUS, 0, "ok-status", "LIST", HOOK(take_ok_status),
     "--expect http: the statuses that are answers, e.g. 2xx,404 or\n"
     "200-299,301 (default 2xx); any other is counted as non-2xx"},
    {O_REQUEST, 0, "request", "FILE", HOOK(take_request),
     "the raw HTTP/1.x request to send with --expect http (default:\n"
     "GET / or the URL's path, with the target as Host); LF line ends\n"
     "in its head are sent as CRLF"},
    {'H', 'H', "header", "\"N: V\"", HOOK(take_header),
     "add this header to lfbench's own GET (repeatable; Host replaces\n"
     "the default one): -H 'Connection: close' makes the server close"},
    {O_SCRIPT, 0, "script", "FILE", PATH(script),
     "Lua 5.4 script with wrk's API: request() makes each request,\n"
     "response() checks each answer (false or an error: a mismatch),\n"
     "delay(), setup(), init(args), done(); ARGS after the target and\n"
     "'--' go to init(). Any --expect (see lfbench(1), SCRIPTS)"},
    {O_SCRIPT_BUFFERS_MB, 0, "script-buffers-mb", "N",
     WHOLE(script_buffers_mb, 1, 1 << 20, "a size in MiB"),
     "--script: MiB lfbench holds for the script outside its Lua\n"
     "states, split evenly between the threads (default 1024): the\n"
     "responses kept for response() (one that would pass it, or 64 MiB,\n"
     "fails its check at once and its connection closes) and the copies\n"
     "of request() strings in flight (past it: the script fails, said)"},
    {O_RECONNECT_EVERY, 0, "reconnect-every", "N",
     WHOLE(reconnect_every, 1, ARGS_NO_MAX, "a request count"),
     "long mode: close and reopen a connection after N requests"},
    {O_SOURCE, 0, "source", "A[-B]", HOOK(take_source),
     "spread connections over these IPv4 source addresses"},
    {O_JSON, 0, "json", "FILE", PATH(json),
     "write the results, the per-second series and the full\n"
     "histograms as JSON (lfbench merge and plot read it)"},
    {O_JSON_STREAM, 0, "json-stream", "FILE", PATH(json_stream),
     "one JSON object per second as the run goes, flushed ('-': stdout)"},
    {O_HDR_LOG, 0, "hdr-log", "FILE", PATH(hdr_log),
     "HdrHistogram interval log (format 1.3), one histogram per second"},
    {O_LATENCY, 0, "latency", NULL, FLAG(latency),
     "after the summary, the latency distribution: 50% to 100%, as\n"
     "wrk2 prints it (the summary always has p50 to p99.99)"},
    {O_START_AT, 0, "start-at", "WHEN", HOOK(take_start_at),
     "begin at WHEN (epoch seconds, or +TIME from now: +5, +2.5s), so that\n"
     "several lfbench processes measure the same window"},
    {O_OPEN_TIMEOUT, 0, "open-timeout", "TIME",
     SECONDS(open_timeout, 0, 3600000, "; write 10 (seconds), 2.5s or 500ms"),
     "long mode: the measured window starts when every connection is\n"
     "open, or after TIME of opening: 10, 2.5s, 500ms (default 10s +\n"
     "1s per 1,000 connections; 0: at once)"},
    {O_RATE_SWEEP, 0, "rate-sweep", "F:T:S", HOOK(take_sweep),
     "open-loop steps from F to T requests/s by S, each with its own\n"
     "warm-up and -d, on the same connections; a row per step"},
    {O_FIND_RATE, 0, "find-rate", "pP=LAT", HOOK(take_find),
     "the highest rate whose pP latency stays within LAT (e.g. p99=1ms);\n"
     "searches within --rate-sweep's range if given; a rate whose step\n"
     "breaks it is run again, and counts as broken on 2 of 3 tries"},
    {O_MAX_ERRORS, 0, "max-errors", "N", WHOLE(max_errors, 0, ARGS_NO_MAX, "a count"),
     "exit non-zero when errors exceed N (default 0)"},
    {O_TLS, 0, "tls", NULL, FLAG(tls),
     "speak TLS on every connection (any --expect, mode and loop; an\n"
     "https:// target implies it): the handshake is part of opening a\n"
     "connection, and its counts and failures are in the summary"},
    {O_TLS_SNI, 0, "tls-sni", "NAME", HOOK(take_tls_sni),
     "the server name sent, and the name the certificate must be for\n"
     "(default: the target's host; none for an address, which the\n"
     "certificate must then hold)"},
    {O_TLS_CA, 0, "tls-ca", "FILE", PATH(tls_ca),
     "verify the server against the CA certificates in FILE (PEM)\n"
     "instead of the system's store"},
    {O_TLS_CERT, 0, "tls-cert", "FILE", PATH(tls_cert),
     "client certificate (PEM, with its chain); needs --tls-key"},
    {O_TLS_KEY, 0, "tls-key", "FILE", PATH(tls_key),
     "the private key of --tls-cert (PEM); checked at start to match"},
    {O_TLS_INSECURE, 0, "tls-insecure", NULL, FLAG(tls_insecure),
     "do not verify the server's certificate (the summary says so)"},
    {O_TLS_VERSION, 0, "tls-version", "V", HOOK(take_tls_version),
     "1.2, 1.3 or 1.2-1.3 (default: what the library allows)"},
    {O_TLS_CIPHERS, 0, "tls-ciphers", "LIST", HOOK(take_tls_ciphers),
     "TLS 1.2 cipher list, OpenSSL's syntax (openssl ciphers)"},
    {O_TLS_CIPHERSUITES, 0, "tls-ciphersuites", "LIST", HOOK(take_tls_suites),
     "TLS 1.3 suites, e.g. TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384"},
    {O_TLS_GROUPS, 0, "tls-groups", "LIST", HOOK(take_tls_groups),
     "key exchange groups in order, e.g. X25519:P-256"},
    {O_TLS_ALPN, 0, "tls-alpn", "LIST", HOOK(take_tls_alpn),
     "ALPN protocols offered, e.g. http/1.1 (an https:// target's\n"
     "default; none otherwise)"},
    {O_TLS_RESUME, 0, "tls-resume", "F", HOOK(take_tls_resume),
     "short mode or --reconnect-every: the share F (0 to 1) of new\n"
     "connections that offer a session saved from an earlier one of\n"
     "the same thread (0: every handshake full, the default); the\n"
     "summary says how many the server resumed"},
    {'q', 'q', "quiet", NULL, FLAG(quiet),
     "no progress lines on stderr: the result and errors only"},
    {'h', 'h', "help", NULL, HOOK(NULL), "this text"},
    {'V', 'V', "version", NULL, HOOK(NULL), "version"},
};
const size_t bopt_noptions = sizeof(bopt_options) / sizeof(bopt_options[0]);

#define NOPT (sizeof(bopt_options) / sizeof(bopt_options[0]))
_Static_assert(NOPT <= sizeof(((struct bparse *)0)->seen), "struct bparse: a seen flag per row");

static const char usage_head[] =
    "usage: lfbench [options] HOST:PORT [-- SCRIPT ARGS...]\n"
    "       lfbench [options] http[s]://HOST[:PORT][/PATH] [-- SCRIPT ARGS...]\n"
    "\n"
    "Load client for TCP echo and framed servers: QPS and latency, every byte verified.\n"
    "An http:// target is --expect http with that path (HOST an address or localhost),\n"
    "https:// the same over TLS. A TIME is seconds (10, 2.5) or has a unit:\n"
    "500ms, 2.5s, 1m, 1h.\n"
    "\n";

static const char usage_tail[] =
    "\n"
    "       lfbench merge [--json FILE] RUN.json...   one summary of concurrent runs, exact\n"
    "       lfbench plot [-o FILE.png] RUN.json...    latency over time, percentiles, sweeps\n"
    "       lfbench tune [--set KEY=V1,V2]... -- LOAD-OPTIONS   kernel settings measured, each\n"
    "                                         in a namespace of its own (lfbench tune --help)\n"
    "\n"
    "Exit status: 0 when every response verified, none lost or unsent, and errors <=\n"
    "--max-errors (a sweep's steps report those instead, and it fails when a step completed\n"
    "nothing; --find-rate fails when no rate kept the bound); 1 otherwise, or when\n"
    "interrupted (Ctrl-C: the summary is of a partial run); 2 for bad usage.\n";

void bopt_usage(FILE *out)
{
    fputs(usage_head, out);
    for (size_t k = 0; k < NOPT; k++) {
        const struct bopt_option *op = &bopt_options[k];
        char spec[64];
        const char *h = op->help;

        if (op->letter && op->name)
            snprintf(spec, sizeof(spec), "-%c, --%s%s%s", op->letter, op->name, op->arg ? " " : "",
                     op->arg ? op->arg : "");
        else if (op->letter)
            snprintf(spec, sizeof(spec), "-%c%s%s", op->letter, op->arg ? " " : "",
                     op->arg ? op->arg : "");
        else
            snprintf(spec, sizeof(spec), "--%s%s%s", op->name, op->arg ? " " : "",
                     op->arg ? op->arg : "");
        /* the words start in column 23; a line of them that goes on starts there again, and
         * after a spec too long for its column (it ran into its words: "N--script: MiB") */
        if (strlen(spec) > 20)
            fprintf(out, "  %s\n%23s", spec, "");
        else
            fprintf(out, "  %-21s", spec);
        for (const char *nl; (nl = strchr(h, '\n')); h = nl + 1)
            fprintf(out, "%.*s\n%23s", (int)(nl - h), h, "");
        fprintf(out, "%s\n", h);
    }
    fputs(usage_tail, out);
}

/* getopt_long's two forms of the table: the long options, and the short ones ("+:" first: stop
 * at the target, and say ':' for a missing value). */
static void getopt_tables(struct option *lopt, char *sopt)
{
    size_t nl = 0, ns = 0;

    sopt[ns++] = '+';
    sopt[ns++] = ':';
    for (size_t k = 0; k < NOPT; k++) {
        const struct bopt_option *op = &bopt_options[k];

        if (!op->id)
            continue;
        if (op->name)
            lopt[nl++] =
                (struct option){op->name, op->arg ? required_argument : no_argument, NULL, op->id};
        if (op->letter) {
            sopt[ns++] = op->letter;
            if (op->arg)
                sopt[ns++] = ':';
        }
    }
    lopt[nl] = (struct option){0};
    sopt[ns] = '\0';
}

/* The option at argv[at] as the user wrote it, for a message: "--name" without "=value", or
 * the short letter c. */
static void opt_name(char *buf, size_t len, const char *arg, int c)
{
    if (!strncmp(arg, "--", 2))
        snprintf(buf, len, "%.*s", (int)strcspn(arg, "="), arg);
    else
        snprintf(buf, len, "-%c", c);
}

/* An http:// target: o->target becomes its ADDR:PORT (o->url keeps it as given), and the run
 * --expect http. Any other target is left to bopt_parse_target. 0, or -1 with one line in
 * err. */
static int take_url(struct bopt *o, const struct given *g, char *err, size_t errlen)
{
    int rc;

    if (!strstr(o->target, "://"))
        return 0;
    rc = bopt_parse_url(o->target, o->hostport, sizeof(o->hostport), o->authority,
                        sizeof(o->authority), &o->path);
    /* a URL is quoted up to 100 bytes: a path may be 8 KiB */
    if (rc == -ENOMEM)
        BAD("out of memory");
    if (rc < 0 || bopt_parse_target(o->hostport, &o->addr, &o->addrlen) < 0)
        BAD("target '%.100s%s' is not http://ADDR[:PORT][/PATH]; write "
            "http://127.0.0.1:8080/path or http://[::1]:9876/ (an address or localhost: lfbench "
            "looks up no names; the path printable ASCII, %%-encoded, at most %d bytes)",
            o->target, strlen(o->target) > 100 ? "..." : "", URL_MAX_PATH);
    if (g->expect && o->expect != EXPECT_HTTP)
        BAD("an http:// target is HTTP, but --expect %s was given; drop --expect, or give the "
            "target as %s",
            expect_words[o->expect], o->hostport);
    o->url = o->target;
    o->target = o->hostport;
    o->expect = EXPECT_HTTP;
    if (rc == 1) { /* https:// */
        o->tls = true;
        if (!o->tls_alpn)
            o->tls_alpn = "http/1.1";
    }
    return 0;
}

/* The TLS options against each other and the target: what the SNI and the certificate's name
 * are. 0, or -1 with one line in err. */
static int check_tls(struct bopt *o, bool resume_given, char *err, size_t errlen)
{
    const char *h = o->url ? o->authority : o->target, *end;
    struct in6_addr a6;
    size_t hl;
    const char *which = o->tls_sni            ? "--tls-sni"
                        : o->tls_ca           ? "--tls-ca"
                        : o->tls_cert         ? "--tls-cert"
                        : o->tls_key          ? "--tls-key"
                        : o->tls_insecure     ? "--tls-insecure"
                        : o->tls_min          ? "--tls-version"
                        : o->tls_ciphers      ? "--tls-ciphers"
                        : o->tls_ciphersuites ? "--tls-ciphersuites"
                        : o->tls_groups       ? "--tls-groups"
                        : o->tls_alpn         ? "--tls-alpn"
                        : resume_given        ? "--tls-resume"
                                              : NULL;

    if (!o->tls && which)
        BAD("%s is a TLS option, and this run has no TLS: give --tls, or an https:// target",
            which);
    if (!o->tls)
        return 0;
    if (!o->tls_cert != !o->tls_key)
        BAD("--tls-cert and --tls-key go together: give the certificate and its key");
    if (o->tls_insecure && o->tls_ca)
        BAD("--tls-ca with --tls-insecure: the one verifies, the other does not; drop one");
    if (resume_given && o->mode != MODE_SHORT && !o->reconnect_every)
        BAD("--tls-resume shares out new connections: give --mode short or --reconnect-every N "
            "(a long connection handshakes once)");
    if (o->tls_ciphers && o->tls_min == 0x0304)
        BAD("--tls-ciphers is TLS 1.2's list, and --tls-version 1.3 was given: give "
            "--tls-ciphersuites for TLS 1.3");
    if (o->tls_ciphersuites && o->tls_max == 0x0303)
        BAD("--tls-ciphersuites is TLS 1.3's list, and --tls-version 1.2 was given: give "
            "--tls-ciphers for TLS 1.2");
    /* the host as written, without its port and brackets */
    if (*h == '[') {
        end = strchr(h, ']');
        h++;
    } else {
        end = strrchr(h, ':');
    }
    hl = end ? (size_t)(end - h) : strlen(h);
    if (hl >= sizeof(o->tls_host))
        BAD("the target's host is too long for TLS");
    memcpy(o->tls_host, h, hl);
    o->tls_host[hl] = '\0';
    o->tls_name_ip =
        inet_pton(AF_INET, o->tls_host, &a6) == 1 || inet_pton(AF_INET6, o->tls_host, &a6) == 1;
    if (o->tls_sni) {
        o->tls_name = o->tls_sni;
        o->tls_name_ip = false;
    } else {
        o->tls_name = o->tls_host;
        o->tls_sni = o->tls_name_ip ? NULL : o->tls_host; /* no SNI for an address (RFC 6066) */
    }
    return 0;
}

/* What the HTTP request lfbench makes itself takes from the URL and -H, against the options
 * that make the request in another way. 0, or -1 with one line in err. */
static int check_http(struct bopt *o, char *err, size_t errlen)
{
    size_t head;

    if (o->path && strcmp(o->path, "/") && o->nclasses)
        BAD("the URL's path %.100s with a request file (--request, --payload or --mix): the "
            "file holds the whole request, its path included; give the URL without a path "
            "(http://%s/), or drop the file",
            o->path, o->authority);
    if (o->path && strcmp(o->path, "/") && o->script)
        BAD("the URL's path %.100s with --script: lfbench does not give a script the URL's path "
            "yet (wrk.path stays /); set wrk.path in the script and give http://%s/",
            o->path, o->authority);
    if (o->nheaders && o->expect != EXPECT_HTTP)
        BAD("-H adds a header to an HTTP request: give an http:// target or --expect http");
    if (o->nheaders && o->nclasses)
        BAD("-H adds headers to lfbench's own GET, and a --request, --payload or --mix file "
            "holds its own: write them in the file");
    if (o->nheaders && o->script)
        BAD("-H with --script: the script makes the requests, and lfbench does not give it -H "
            "yet; set wrk.headers in the script");
    if (o->expect != EXPECT_HTTP || o->nclasses)
        return 0;
    head = strlen(o->path ? o->path : "/") + strlen(o->url ? o->authority : o->target) + 64;
    for (int k = 0; k < o->nheaders; k++)
        head += strlen(o->headers[k]) + 2;
    if (head > HTTP_MAX_HEAD)
        BAD("-H: the request's head would be about %zu bytes; at most %d (servers refuse more "
            "long before)",
            head, HTTP_MAX_HEAD);
    if (asprintf(&o->get_name, "GET %s", o->path ? o->path : "/") < 0) {
        o->get_name = NULL;
        BAD("out of memory");
    }
    return 0;
}

/* Why bopt_parse_target refused s, when it is one of the two a reader cannot guess: a port out
 * of range, or a host name (lfbench looks none up). "" otherwise. */
static const char *target_why(const char *s)
{
    const char *colon = strrchr(s, ':');
    char *end;
    long port;

    if (!colon || colon == s)
        return "";
    port = strtol(colon + 1, &end, 10);
    if (!*end && end != colon + 1 && (port < 1 || port > 65535))
        return "; a port is 1 to 65535";
    if (s[0] != '[' && strchr(s, ':') == colon && strspn(s, "0123456789.") < (size_t)(colon - s))
        return "; lfbench looks up no host name: give its address (getent hosts NAME), or "
               "localhost";
    return "";
}

/* The options against each other and the target, once all are read; what one implies of
 * another (-n: no -d; -t at most -c). 0, or -1 with one line in err. */
static int check(struct bopt *o, const struct given *g, char *err, size_t errlen)
{
    if (!o->target)
        BAD("no target: give HOST:PORT or an http:// URL last, e.g. lfbench 127.0.0.1:9876");
    if (take_url(o, g, err, errlen) < 0)
        return -1;
    if (bopt_parse_target(o->target, &o->addr, &o->addrlen) < 0)
        BAD("target '%s' is not ADDR:PORT; write 127.0.0.1:9876 or [::1]:9876 (or an HTTP URL: "
            "http://127.0.0.1:8080/path)%s",
            o->target, target_why(o->target));
    if (g->d && g->n)
        BAD("-d and -n both given: pick a duration or a request count");
    if (g->n)
        o->duration = 0;
    if (o->nclasses && g->size)
        BAD("--size applies to generated payloads; it cannot go with --payload or --mix");
    if (o->mode == MODE_SHORT && o->pipeline > 1)
        BAD("--pipeline needs --mode long: a short connection carries one request");
    if (o->mode == MODE_SHORT && o->rate > 0 && o->connect_rate > 0 && o->connect_rate < o->rate)
        BAD("--connect-rate %g is below -R %g: in short mode each request opens its own "
            "connection, so the schedule could never be kept; give --connect-rate of at least "
            "-R, or leave it out",
            o->connect_rate, o->rate);
    if (o->nsources && o->addr.ss_family != AF_INET)
        BAD("--source takes IPv4 addresses; the target is IPv6");
    if (o->expect == EXPECT_HTTP && g->size)
        BAD("--size makes generated echo payloads; with --expect http the request is --request "
            "FILE (default GET /)");
    if (g->request && o->expect != EXPECT_HTTP)
        BAD("--request is an HTTP request file and needs --expect http; for other protocols "
            "use --payload");
    if (o->ok_status_arg && o->expect != EXPECT_HTTP)
        BAD("--ok-status names the HTTP statuses that count as answers and needs --expect http");
    if (o->reconnect_every && o->mode != MODE_LONG)
        BAD("--reconnect-every needs --mode long: a short connection carries one request");
    if ((o->sweep_step > 0 || o->find_pct > 0) && o->rate > 0)
        BAD("-R with --rate-sweep or --find-rate: the steps set the rate; give one or the other");
    if ((o->sweep_step > 0 || o->find_pct > 0) && g->n)
        BAD("-n with --rate-sweep or --find-rate: each step runs for -d seconds");
    if (o->nscript_args && !o->script)
        BAD("arguments after '--' are a script's (init(args)): give --script FILE, or drop them");
    if (o->script && g->request)
        BAD("--request with --script: the script makes the HTTP requests (request(), or "
            "wrk.method, wrk.path, wrk.headers and wrk.body); drop one");
    if (check_http(o, err, errlen) < 0)
        return -1;
    if (check_tls(o, g->tls_resume, err, errlen) < 0)
        return -1;
    if (o->threads > o->conns)
        o->threads = o->conns; /* a thread with no connection would idle */
    if (g->n && (uint64_t)o->threads > o->requests)
        o->threads = (int)o->requests; /* a share of 0 is no limit: it never ended (-n 1 -t 2) */
    return 0;
}

/* The row of bopt_options whose id is id (an id getopt_long returns), or NULL. */
static const struct bopt_option *row(int id)
{
    for (size_t k = 0; k < NOPT; k++)
        if (bopt_options[k].id == id)
            return &bopt_options[k];
    return NULL;
}

/* Whether the option id was given. */
static bool seen(const struct bparse *p, int id)
{
    const struct bopt_option *op = row(id);

    return op && p->seen[op - bopt_options];
}

/* Applies option id, which getopt_long returned with its value val, to the configuration: its
 * row's hook or args_set. 0, or -1 with one line in err. */
static int take(struct bparse *p, int id, const char *val, char *err, size_t errlen)
{
    const struct bopt_option *op = row(id);
    char name[64];
    int rc;

    if (!op)
        return -ENOTSUP;
    p->seen[op - bopt_options] = true;
    if (op->take)
        return op->take(p, val, err, errlen);
    if (op->letter)
        snprintf(name, sizeof(name), "-%c", op->letter);
    else
        snprintf(name, sizeof(name), "--%s", op->name);
    rc = args_set(p->o, &op->kind, name, op->arg, val, err, errlen);
    return rc == -ENOTSUP ? rc : rc < 0 ? -1 : 0;
}

static void defaults(struct bopt *o)
{
    memset(o, 0, sizeof(*o));
    o->threads = 1;
    o->conns = 100;
    o->mode = MODE_LONG;
    o->pipeline = 1;
    o->duration = 10;
    o->timeout_ms = 5000;
    o->size = 64;
    o->expect = EXPECT_ECHO;
    o->open_timeout = -1; /* the default depends on -c */
    o->script_buffers_mb = 1024;
    bopt_parse_statuses("2xx", o->ok_status);
}

/* A word of argv that is no option, at optind: the target, or after it and "--" the script's
 * arguments (all the rest: *done). 0, or -1 with one line in err. */
static int take_word(struct bopt *o, int argc, char **argv, bool dashes, bool *done, char *err,
                     size_t errlen)
{
    if (o->target && dashes) { /* the script's arguments: init(args) */
        o->script_args = (const char *const *)argv + optind;
        o->nscript_args = argc - optind;
        *done = true;
        return 0;
    }
    if (o->target)
        BAD("unexpected argument '%s' after the target %s; options go before it, and a "
            "script's arguments after '--'",
            argv[optind], o->target);
    o->target = argv[optind++];
    return 0;
}

static enum bopt_result parse(struct bopt *o, int argc, char **argv, FILE *out, char *err,
                              size_t errlen)
{
    struct option lopt[NOPT + 1];
    char sopt[2 + 2 * NOPT + 1], name[64];
    struct bparse p = {o, argc, argv, {false}};
    bool dashes = false, done = false;
    int rc;

    defaults(o);
    getopt_tables(lopt, sopt);
    optind = 0; /* a fresh getopt: bopt_parse runs more than once in a process (tests, fuzzing) */
    opterr = 0; /* its messages are ours */
    while (!done) {
        int at = optind ? optind : 1, idx = -1, id;
        const char *eq;

        id = dashes ? -1 : getopt_long(argc, argv, sopt, lopt, &idx);
        if (id == -1) { /* the target, or the end ("--": what follows is no option) */
            if (!dashes && optind > at && !strcmp(argv[optind - 1], "--"))
                dashes = true;
            if (optind >= argc)
                break;
            if (take_word(o, argc, argv, dashes, &done, err, errlen) < 0)
                return BOPT_ERROR;
            continue;
        }
        opt_name(name, sizeof(name), argv[at], optopt);
        if (id == ':')
            BAD("%s needs a value; see lfbench --help", name);
        eq = strchr(argv[at], '=');
        if (id == '?' && optopt && eq && !strncmp(argv[at], "--", 2))
            BAD("%s takes no value (got '%s')", name, eq + 1);
        /* getopt_long takes a prefix of a long name; lfbench never did: a typo is no option */
        if (id == '?' || (idx >= 0 && strcmp(name + 2, lopt[idx].name)))
            BAD("unknown option '%s'; see lfbench --help", name);
        if (id == 'h') {
            bopt_usage(out);
            return BOPT_EXIT;
        }
        if (id == 'V') {
            fprintf(out, "lfbench %s\n", LFE_VERSION);
            return BOPT_EXIT;
        }
        if ((rc = take(&p, id, optarg, err, errlen)) == -ENOTSUP) /* a row no kind applies to */
            BAD("unknown option '%s'; see lfbench --help", name);
        if (rc < 0)
            return BOPT_ERROR;
    }
    return check(o,
                 &(struct given){seen(&p, 'd'), seen(&p, 'n'), seen(&p, O_SIZE),
                                 seen(&p, O_REQUEST), seen(&p, O_EXPECT), seen(&p, O_TLS_RESUME)},
                 err, errlen) < 0
               ? BOPT_ERROR
               : BOPT_RUN;
}

#undef BAD

enum bopt_result bopt_parse(struct bopt *o, int argc, char **argv, FILE *out, char *err,
                            size_t errlen)
{
    enum bopt_result r = parse(o, argc, argv, out, err, errlen);

    if (r == BOPT_ERROR) /* the messages quote arguments, which may hold a newline */
        args_one_line(err);
    return r;
}
