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
};

/* Every option once, in --help's order. The words follow lfepolld --help's where the two say
 * the same thing (-q, --quiet; -h, --help; -V, --version; a TIME as 10, 2.5s, 500ms). */
const struct bopt_option bopt_options[] = {
    {'t', 't', NULL, "N", "threads, one event loop each (default 1)"},
    {O_CPUS, 0, "cpus", "LIST", "pin the threads to these CPUs, e.g. 1 or 2-3"},
    {'c', 'c', NULL, "N", "connections (long) or connections in flight (short) (default 100)"},
    {O_MODE, 0, "mode", "long|short",
     "long: keep connections open (default); one the server closes\n"
     "cleanly between requests is opened again (reconnects, not an\n"
     "error), a request it leaves unanswered is the error 'closed';\n"
     "short: one request per connection (connect, write, read the\n"
     "response, close)"},
    {O_PIPELINE, 0, "pipeline", "D", "requests in flight per connection (long mode, default 1)"},
    {'d', 'd', NULL, "TIME", "run time after warm-up: 10, 2.5s, 500ms, 1m (default 10s)"},
    {'n', 'n', NULL, "REQUESTS", "stop after this many requests instead"},
    {O_WARMUP, 0, "warmup", "TIME", "excluded from the statistics: 2, 2s, 500ms (default 0)"},
    {O_TIMEOUT, 0, "timeout", "TIME",
     "per request; a stuck request is an error: 2 (seconds), 1.5s,\n"
     "250ms (default 5s); a bare number was once milliseconds, and\n"
     "one of 10 or more draws a warning"},
    {'R', 'R', NULL, "RATE",
     "open loop: RATE requests/s in total, latency measured from the\n"
     "intended send time (no coordinated omission); a due send waits\n"
     "for a connection, and one never sent is 'unsent' and fails the run"},
    {O_CONNECT_RATE, 0, "connect-rate", "N",
     "at most N new connections per second (short mode with -R: at\n"
     "least RATE)"},
    {O_LINGER0, 0, "linger0", NULL, "close with SO_LINGER {1,0}: a reset instead of a FIN"},
    {O_FASTOPEN, 0, "fastopen", NULL,
     "TCP Fast Open: a connection's first request goes in its SYN\n"
     "once the server's cookie is cached (needs net.ipv4.tcp_fastopen\n"
     "with bit 1, the default, and a server that takes it)"},
    {O_BUSY_POLL, 0, "busy-poll", NULL,
     "threads never sleep: each polls its sockets and its send\n"
     "schedule in a loop, using all of its CPU; with -R no timer\n"
     "syscall, interrupt and wakeup per request, so one CPU offers\n"
     "about twice the rate. Give each thread a CPU of its own (--cpus)"},
    {O_SIZE, 0, "size", "BYTES", "generated payload size (default 64); carries a sequence number"},
    {O_PAYLOAD, 0, "payload", "FILE", "send FILE as every request"},
    {O_MIX, 0, "mix", "F:W,F:W,...", "weighted mix of request files; latency reported per file"},
    {O_EXPECT, 0, "expect", "echo", "responses are the request, byte for byte (default)"},
    {0, 0, "expect", "line", "a response is everything up to and including '\\n'"},
    {0, 0, "expect", "len32", "a response is a 4-byte big-endian length, then that many bytes"},
    {0, 0, "expect", "bytes N", "a response is exactly N bytes"},
    {0, 0, "expect", "http",
     "HTTP/1.1 responses framed by Content-Length, chunked encoding or\n"
     "the close; 1xx skipped, HEAD/204/304 bodiless; a status outside\n"
     "--ok-status is counted as non-2xx: not an error, but it breaks a\n"
     "--rate-sweep or --find-rate step; keep-alive and Connection: close\n"
     "honoured: a close is a reconnect, and requests pipelined behind it\n"
     "are sent again (closed loop) or counted closed and lost (-R)"},
    {O_OK_STATUS, 0, "ok-status", "LIST",
     "--expect http: the statuses that are answers, e.g. 2xx,404 or\n"
     "200-299,301 (default 2xx); any other is counted as non-2xx"},
    {O_REQUEST, 0, "request", "FILE",
     "the raw HTTP/1.x request to send with --expect http (default:\n"
     "GET / or the URL's path, with the target as Host); LF line ends\n"
     "in its head are sent as CRLF"},
    {'H', 'H', "header", "\"N: V\"",
     "add this header to lfbench's own GET (repeatable; Host replaces\n"
     "the default one): -H 'Connection: close' makes the server close"},
    {O_SCRIPT, 0, "script", "FILE",
     "Lua 5.4 script with wrk's API: request() makes each request,\n"
     "response() checks each answer (false or an error: a mismatch),\n"
     "delay(), setup(), init(args), done(); ARGS after the target and\n"
     "'--' go to init(). Any --expect (see lfbench(1), SCRIPTS)"},
    {O_SCRIPT_BUFFERS_MB, 0, "script-buffers-mb", "N",
     "--script: MiB lfbench holds for the script outside its Lua\n"
     "states, split evenly between the threads (default 1024): the\n"
     "responses kept for response() (one that would pass it, or 64 MiB,\n"
     "fails its check at once and its connection closes) and the copies\n"
     "of request() strings in flight (past it: the script fails, said)"},
    {O_RECONNECT_EVERY, 0, "reconnect-every", "N",
     "long mode: close and reopen a connection after N requests"},
    {O_SOURCE, 0, "source", "A[-B]", "spread connections over these IPv4 source addresses"},
    {O_JSON, 0, "json", "FILE",
     "write the results, the per-second series and the full\n"
     "histograms as JSON (lfbench merge and plot read it)"},
    {O_JSON_STREAM, 0, "json-stream", "FILE",
     "one JSON object per second as the run goes, flushed ('-': stdout)"},
    {O_HDR_LOG, 0, "hdr-log", "FILE",
     "HdrHistogram interval log (format 1.3), one histogram per second"},
    {O_LATENCY, 0, "latency", NULL,
     "after the summary, the latency distribution: 50% to 100%, as\n"
     "wrk2 prints it (the summary always has p50 to p99.99)"},
    {O_START_AT, 0, "start-at", "WHEN",
     "begin at WHEN (epoch seconds, or +TIME from now: +5, +2.5s), so that\n"
     "several lfbench processes measure the same window"},
    {O_OPEN_TIMEOUT, 0, "open-timeout", "TIME",
     "long mode: the measured window starts when every connection is\n"
     "open, or after TIME of opening: 10, 2.5s, 500ms (default 10s +\n"
     "1s per 1,000 connections; 0: at once)"},
    {O_RATE_SWEEP, 0, "rate-sweep", "F:T:S",
     "open-loop steps from F to T requests/s by S, each with its own\n"
     "warm-up and -d, on the same connections; a row per step"},
    {O_FIND_RATE, 0, "find-rate", "pP=LAT",
     "the highest rate whose pP latency stays within LAT (e.g. p99=1ms);\n"
     "searches within --rate-sweep's range if given; a rate whose step\n"
     "breaks it is run again, and counts as broken on 2 of 3 tries"},
    {O_MAX_ERRORS, 0, "max-errors", "N", "exit non-zero when errors exceed N (default 0)"},
    {'q', 'q', "quiet", NULL, "no progress lines on stderr: the result and errors only"},
    {'h', 'h', "help", NULL, "this text"},
    {'V', 'V', "version", NULL, "version"},
};
const size_t bopt_noptions = sizeof(bopt_options) / sizeof(bopt_options[0]);

#define NOPT (sizeof(bopt_options) / sizeof(bopt_options[0]))

static const char usage_head[] =
    "usage: lfbench [options] HOST:PORT [-- SCRIPT ARGS...]\n"
    "       lfbench [options] http://HOST[:PORT][/PATH] [-- SCRIPT ARGS...]\n"
    "\n"
    "Load client for TCP echo and framed servers: QPS and latency, every byte verified.\n"
    "An http:// target is --expect http with that path (no TLS; HOST an address or\n"
    "localhost). A TIME is seconds (10, 2.5) or has a unit: 500ms, 2.5s, 1m, 1h.\n"
    "\n";

static const char usage_tail[] =
    "\n"
    "       lfbench merge [--json FILE] RUN.json...   one summary of concurrent runs, exact\n"
    "       lfbench plot [-o FILE.png] RUN.json...    latency over time, percentiles, sweeps\n"
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

    if (!strncasecmp(s, "https://", 8))
        return -EPROTONOSUPPORT;
    if (strncasecmp(s, "http://", 7))
        return -EINVAL;
    a = s + 7;
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
                         port ? (int)(end - port) : 2, port ? port : "80") >= hpl)
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
    return 0;
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

static int parse_num(const char *s, double min, double max, double *out)
{
    char *end;
    double v;

    if (!s || !*s)
        return -EINVAL;
    errno = 0;
    v = strtod(s, &end);
    if (errno || *end || !isfinite(v) || v < min || v > max)
        return -EINVAL;
    *out = v;
    return 0;
}

static int parse_int(const char *s, long min, long max, long *out)
{
    double v;

    if (parse_num(s, (double)min, (double)max, &v) < 0 || v != floor(v))
        return -EINVAL;
    *out = (long)v;
    return 0;
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
    if (strspn(s, "0123456789.") != strlen(s) || parse_num(s, now - 1, now + 86400, &v) < 0)
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
    if (parse_num(a, 0.001, 1e9, &from) < 0 || parse_num(b, from, 1e9, &to) < 0 ||
        parse_num(c, 0.001, 1e9, &step) < 0 || (to - from) / step + 1 > BOPT_MAX_STEPS + 1e-6)
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
    if (parse_num(buf, 0.001, 100, &p) < 0)
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
    bool d, n, size, request, expect;
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

/* The options that shape the load: how many connections, how long, how fast, when. Returns 0
 * when id is one of them and val is good, 1 when id is not one of them, -1 with one line in err
 * when val is bad. */
static int take_load(struct bopt *o, struct given *g, int id, const char *val, char *err,
                     size_t errlen)
{
    double d;
    long v;

    switch (id) {
    case 't':
        if (parse_int(val, 1, 256, &v) < 0)
            BAD("-t: '%s' is not a thread count from 1 to 256", val);
        o->threads = (int)v;
        break;
    case 'c':
        if (parse_int(val, 1, 10000000, &v) < 0)
            BAD("-c: '%s' is not a connection count from 1 to 10000000", val);
        o->conns = (int)v;
        break;
    case O_CPUS:
        if (cpulist_parse(val, &o->cpus) < 0)
            BAD("--cpus: '%s' is not a CPU list; write e.g. 1 or 2-3", val);
        o->have_cpus = true;
        break;
    case O_MODE:
        if (!strcmp(val, "long"))
            o->mode = MODE_LONG;
        else if (!strcmp(val, "short"))
            o->mode = MODE_SHORT;
        else
            BAD("--mode: '%s' is not a mode; use long or short", val);
        break;
    case O_PIPELINE:
        if (parse_int(val, 1, BOPT_MAX_PIPELINE, &v) < 0)
            BAD("--pipeline: '%s' is not a depth from 1 to %d", val, BOPT_MAX_PIPELINE);
        o->pipeline = (int)v;
        break;
    case 'd':
        if (args_duration_ms(val, 1000.0, &d) < 0 || d < 1)
            BAD("-d: '%s' is not a duration of 1ms to 86400s; write 10 (seconds), 2.5s or "
                "500ms",
                val);
        o->duration = d / 1000.0;
        g->d = true;
        break;
    case 'n':
        if (parse_int(val, 1, 1e15, &v) < 0)
            BAD("-n: '%s' is not a request count of at least 1", val);
        o->requests = (uint64_t)v;
        g->n = true;
        break;
    case O_WARMUP:
        if (args_duration_ms(val, 1000.0, &d) < 0 || d > 3600000)
            BAD("--warmup: '%s' is not a duration of 0 to 3600s; write 2 (seconds), 2.5s or "
                "500ms",
                val);
        o->warmup = d / 1000.0;
        break;
    case O_TIMEOUT: {
        /* bare: digits and a '.' only; args_duration_ms says whether it is a number at all */
        bool bare = *val && val[strspn(val, "0123456789.")] == '\0';
        double old;

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
        break;
    }
    case 'R':
        if (parse_num(val, 0.001, 1e9, &d) < 0)
            BAD("-R: '%s' is not a rate in requests per second; write a number: 5000, 2500.5", val);
        o->rate = d;
        break;
    case O_CONNECT_RATE:
        if (parse_num(val, 0.001, 1e9, &d) < 0)
            BAD("--connect-rate: '%s' is not a rate in connections per second", val);
        o->connect_rate = d;
        break;
    case O_LINGER0:
        o->linger0 = true;
        break;
    case O_FASTOPEN:
        o->fastopen = true;
        break;
    case O_BUSY_POLL:
        o->busy_poll = true;
        break;
    case O_RECONNECT_EVERY:
        if (parse_int(val, 1, 1e15, &v) < 0)
            BAD("--reconnect-every: '%s' is not a request count of at least 1", val);
        o->reconnect_every = (uint64_t)v;
        break;
    case O_START_AT:
        if (parse_start_at(val, &o->start_at) < 0)
            BAD("--start-at: '%s' is not a time within the next day: epoch seconds (date "
                "+%%s) or +SECONDS from now",
                val);
        break;
    case O_OPEN_TIMEOUT:
        if (args_duration_ms(val, 1000.0, &d) < 0 || d > 3600000)
            BAD("--open-timeout: '%s' is not a duration of 0 to 3600s; write 10 (seconds), "
                "2.5s or 500ms",
                val);
        o->open_timeout = d / 1000.0;
        break;
    case O_RATE_SWEEP:
        if (parse_sweep(val, o) < 0)
            BAD("--rate-sweep: '%s' is not FROM:TO:STEP in requests/s with 0 < FROM <= TO, "
                "STEP > 0 and at most %d steps",
                val, BOPT_MAX_STEPS);
        break;
    case O_FIND_RATE:
        if (parse_find(val, &o->find_pct, &o->find_bound_us) < 0)
            BAD("--find-rate: '%s' is not pP=LATENCY, e.g. p99=1ms or p99.9=500us (units "
                "ns, us, ms, s)",
                val);
        break;
    case O_MAX_ERRORS:
        if (parse_int(val, 0, 1e15, &v) < 0)
            BAD("--max-errors: '%s' is not a count of 0 or more", val);
        o->max_errors = (uint64_t)v;
        break;
    case 'q':
        o->quiet = true;
        break;
    case O_LATENCY:
        o->latency = true;
        break;
    default:
        return 1;
    }
    return 0;
}

/* The options of what goes out and what comes back, from where, and where the results go. A
 * value of --expect ("bytes N") takes the next word of argv too (getopt's optind). Returns as
 * take_load does. */
static int take_io(struct bopt *o, struct given *g, int id, const char *val, int argc, char **argv,
                   char *err, size_t errlen)
{
    long v;

    switch (id) {
    case O_SIZE:
        if (parse_int(val, 1, 1 << 30, &v) < 0)
            BAD("--size: '%s' is not a size in bytes from 1 to %d", val, 1 << 30);
        o->size = (size_t)v;
        g->size = true;
        break;
    case O_PAYLOAD:
        if (o->nclasses)
            BAD("--payload: give either --payload or --mix, once");
        o->cls[0] = (struct bclass){val, 1};
        o->nclasses = 1;
        break;
    case O_MIX: {
        char *save = NULL;
        if (o->nclasses)
            BAD("--mix: give either --payload or --mix, once");
        free(o->mixbuf);
        o->mixbuf = strdup(val);
        if (!o->mixbuf)
            BAD("out of memory");
        for (char *tok = strtok_r(o->mixbuf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            char *c = strrchr(tok, ':');
            if (!c || c == tok || parse_int(c + 1, 1, 1000000, &v) < 0)
                BAD("--mix: '%s' is not FILE:WEIGHT (weight 1 to 1000000)", tok);
            if (o->nclasses == BOPT_MAX_CLASSES)
                BAD("--mix: at most %d files", BOPT_MAX_CLASSES);
            *c = '\0';
            o->cls[o->nclasses++] = (struct bclass){tok, (unsigned)v};
        }
        if (!o->nclasses)
            BAD("--mix: no FILE:WEIGHT in '%s'", val);
        break;
    }
    case O_EXPECT:
        g->expect = true;
        if (!strcmp(val, "echo"))
            o->expect = EXPECT_ECHO;
        else if (!strcmp(val, "line"))
            o->expect = EXPECT_LINE;
        else if (!strcmp(val, "len32"))
            o->expect = EXPECT_LEN32;
        else if (!strcmp(val, "http"))
            o->expect = EXPECT_HTTP;
        else if (!strcmp(val, "bytes")) {
            if (optind >= argc || parse_int(argv[optind], 1, 1 << 30, &v) < 0)
                BAD("--expect bytes needs a byte count from 1 to %d", 1 << 30);
            o->expect = EXPECT_BYTES;
            o->expect_bytes = (size_t)v;
            optind++; /* N: a second value of --expect */
        } else
            BAD("--expect: '%s' is not echo, line, len32, bytes N or http", val);
        break;
    case O_OK_STATUS:
        if (strlen(val) > 200 || bopt_parse_statuses(val, o->ok_status) < 0)
            BAD("--ok-status: '%s' is not a list of HTTP statuses from 100 to 599, e.g. "
                "2xx,404 or 200-299,301",
                val);
        o->ok_status_arg = val;
        break;
    case O_REQUEST:
        if (o->nclasses)
            BAD("--request: give one of --request, --payload or --mix, once");
        o->cls[0] = (struct bclass){val, 1};
        o->nclasses = 1;
        o->request = val;
        g->request = true;
        break;
    case O_SCRIPT:
        o->script = val;
        break;
    case 'H': {
        size_t nl;
        const char *why;

        if (o->nheaders == BOPT_MAX_HEADERS)
            BAD("-H: at most %d headers", BOPT_MAX_HEADERS);
        if (http_field_check(val, &nl, &why) < 0)
            BAD("-H: '%s' is not a header 'Name: value': %s", val, why);
        if ((nl == 14 && !strncasecmp(val, "content-length", 14)) ||
            (nl == 17 && !strncasecmp(val, "transfer-encoding", 17)))
            BAD("-H: %.*s frames a body, and lfbench's GET has none; for a request with a body "
                "give --request FILE, or --script",
                (int)nl, val);
        o->headers[o->nheaders++] = val;
        break;
    }
    case O_SCRIPT_BUFFERS_MB:
        if (parse_int(val, 1, 1 << 20, &v) < 0)
            BAD("--script-buffers-mb: '%s' is not a size in MiB from 1 to %d", val, 1 << 20);
        o->script_buffers_mb = (unsigned)v;
        break;
    case O_SOURCE: {
        int n = bopt_parse_sources(val, o->sources, BOPT_MAX_SOURCES);
        if (n < 0)
            BAD("--source: '%s' is not an IPv4 address or ascending range A-B of at most %d", val,
                BOPT_MAX_SOURCES);
        o->nsources = n;
        break;
    }
    case O_JSON:
        o->json = val;
        break;
    case O_JSON_STREAM:
        o->json_stream = val;
        break;
    case O_HDR_LOG:
        o->hdr_log = val;
        break;
    default:
        return 1;
    }
    return 0;
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
    if (rc == -EPROTONOSUPPORT)
        BAD("target '%.100s%s': https:// is not supported yet (lfbench has no TLS); give an "
            "http:// URL, or put a TLS terminator such as stunnel or haproxy in front of the "
            "server",
            o->target, strlen(o->target) > 100 ? "..." : "");
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
    if (o->threads > o->conns)
        o->threads = o->conns; /* a thread with no connection would idle */
    if (g->n && (uint64_t)o->threads > o->requests)
        o->threads = (int)o->requests; /* a share of 0 is no limit: it never ended (-n 1 -t 2) */
    return 0;
}

static enum bopt_result parse(struct bopt *o, int argc, char **argv, FILE *out, char *err,
                              size_t errlen)
{
    struct option lopt[NOPT + 1];
    char sopt[2 + 2 * NOPT + 1], name[64];
    struct given g = {false, false, false, false, false};
    bool dashes = false;
    int rc;

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

    getopt_tables(lopt, sopt);
    optind = 0; /* a fresh getopt: bopt_parse runs more than once in a process (tests, fuzzing) */
    opterr = 0; /* its messages are ours */
    for (;;) {
        int at = optind ? optind : 1, idx = -1, id;
        const char *eq;

        id = dashes ? -1 : getopt_long(argc, argv, sopt, lopt, &idx);
        if (id == -1) { /* the target, or the end ("--": what follows is no option) */
            if (!dashes && optind > at && !strcmp(argv[optind - 1], "--"))
                dashes = true;
            if (optind >= argc)
                break;
            if (o->target && dashes) { /* the script's arguments: init(args) */
                o->script_args = (const char *const *)argv + optind;
                o->nscript_args = argc - optind;
                break;
            }
            if (o->target)
                BAD("unexpected argument '%s' after the target %s; options go before it, and a "
                    "script's arguments after '--'",
                    argv[optind], o->target);
            o->target = argv[optind++];
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
        if ((rc = take_load(o, &g, id, optarg, err, errlen)) == 1)
            rc = take_io(o, &g, id, optarg, argc, argv, err, errlen);
        if (rc == 1) /* a row of the table without its case */
            BAD("unknown option '%s'; see lfbench --help", name);
        if (rc < 0)
            return BOPT_ERROR;
    }
    return check(o, &g, err, errlen) < 0 ? BOPT_ERROR : BOPT_RUN;
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
