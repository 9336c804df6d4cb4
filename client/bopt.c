/* bopt: lfbench's command line. */
#include "bopt.h"

#include "args.h"
#include "topo.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char usage[] =
    "usage: lfbench [options] HOST:PORT\n"
    "\n"
    "Load client for TCP echo and framed servers: QPS and latency, every byte verified.\n"
    "\n"
    "  -t N                 threads, one event loop each (default 1)\n"
    "  --cpus LIST          pin the threads to these CPUs, e.g. 1 or 2-3\n"
    "  -c N                 connections (long) or connections in flight (short) (default 100)\n"
    "  --mode long|short    long: keep connections open (default); one the server closes\n"
    "                       cleanly between requests is opened again (reconnects, not an\n"
    "                       error), a request it leaves unanswered is the error 'closed';\n"
    "                       short: one request per connection (connect, write, read the\n"
    "                       response, close)\n"
    "  --pipeline D         requests in flight per connection (long mode, default 1)\n"
    "  -d TIME              run time after warm-up: 10, 2.5s, 500ms (default 10s)\n"
    "  -n REQUESTS          stop after this many requests instead\n"
    "  --warmup TIME        excluded from the statistics: 2, 2s, 500ms (default 0)\n"
    "  --timeout TIME       per request; a stuck request is an error: 250 (ms, for a plain\n"
    "                       number), 1s, 2.5s (default 5s)\n"
    "  -R RATE              open loop: RATE requests/s in total, latency measured from the\n"
    "                       intended send time (no coordinated omission); a due send waits\n"
    "                       for a connection, and one never sent is 'unsent' and fails the run\n"
    "  --connect-rate N     at most N new connections per second (short mode with -R: at\n"
    "                       least RATE)\n"
    "  --linger0            close with SO_LINGER {1,0}: a reset instead of a FIN\n"
    "  --busy-poll          threads never sleep: each polls its sockets and its send\n"
    "                       schedule in a loop, using all of its CPU; with -R no timer\n"
    "                       syscall, interrupt and wakeup per request, so one CPU offers\n"
    "                       about twice the rate. Give each thread a CPU of its own (--cpus)\n"
    "  --size BYTES         generated payload size (default 64); carries a sequence number\n"
    "  --payload FILE       send FILE as every request\n"
    "  --mix F:W,F:W,...    weighted mix of request files; latency reported per file\n"
    "  --expect echo        responses are the request, byte for byte (default)\n"
    "  --expect line        a response is everything up to and including '\\n'\n"
    "  --expect len32       a response is a 4-byte big-endian length, then that many bytes\n"
    "  --expect bytes N     a response is exactly N bytes\n"
    "  --expect http        HTTP/1.1 responses framed by Content-Length, chunked encoding or\n"
    "                       the close; 1xx skipped, HEAD/204/304 bodiless; a status outside\n"
    "                       --ok-status is counted as non-2xx: not an error, but it breaks a\n"
    "                       --rate-sweep or --find-rate step; keep-alive and Connection: close\n"
    "                       honoured: a close is a reconnect, and requests pipelined behind it\n"
    "                       are sent again (closed loop) or counted closed and lost (-R)\n"
    "  --ok-status LIST     --expect http: the statuses that are answers, e.g. 2xx,404 or\n"
    "                       200-299,301 (default 2xx); any other is counted as non-2xx\n"
    "  --request FILE       the raw HTTP/1.x request to send with --expect http (default:\n"
    "                       GET / with the target as Host); LF line ends in its head are sent\n"
    "                       as CRLF\n"
    "  --reconnect-every N  long mode: close and reopen a connection after N requests\n"
    "  --source A[-B]       spread connections over these IPv4 source addresses\n"
    "  --json FILE          write the results, the per-second series and the full\n"
    "                       histograms as JSON (lfbench merge and plot read it)\n"
    "  --json-stream FILE   one JSON object per second as the run goes, flushed ('-': stdout)\n"
    "  --hdr-log FILE       HdrHistogram interval log (format 1.3), one histogram per second\n"
    "  --start-at WHEN      begin at WHEN (epoch seconds, or +TIME from now: +5, +2.5s), so that\n"
    "                       several lfbench processes measure the same window\n"
    "  --open-timeout TIME  long mode: the measured window starts when every connection is\n"
    "                       open, or after TIME of opening: 10, 2.5s, 500ms (default 10s +\n"
    "                       1s per 1,000 connections; 0: at once)\n"
    "  --rate-sweep F:T:S   open-loop steps from F to T requests/s by S, each with its own\n"
    "                       warm-up and -d, on the same connections; a row per step\n"
    "  --find-rate pP=LAT   the highest rate whose pP latency stays within LAT (e.g. p99=1ms);\n"
    "                       searches within --rate-sweep's range if given; a rate whose step\n"
    "                       breaks it is run again, and counts as broken on 2 of 3 tries\n"
    "  --max-errors N       exit non-zero when errors exceed N (default 0)\n"
    "  -q, --quiet          no progress lines on stderr: the result and errors only\n"
    "  -h, --help           this text\n"
    "  -V, --version        version\n"
    "\n"
    "       lfbench merge [--json FILE] RUN.json...   one summary of several runs, exact\n"
    "       lfbench plot [-o FILE.png] RUN.json...    latency over time, percentiles, sweeps\n"
    "\n"
    "Exit status: 0 when every response verified, none lost or unsent, and errors <=\n"
    "--max-errors (a sweep's steps report those instead, and it fails when a step completed\n"
    "nothing; --find-rate fails when no rate kept the bound); 1 otherwise, or when\n"
    "interrupted (Ctrl-C: the summary is of a partial run); 2 for bad usage.\n";

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
}

static enum bopt_result parse(struct bopt *o, int argc, char **argv, FILE *out, char *err,
                              size_t errlen)
{
    static const char *const with_value[] = {"-t",
                                             "-c",
                                             "--cpus",
                                             "--mode",
                                             "--pipeline",
                                             "-d",
                                             "-n",
                                             "--warmup",
                                             "--timeout",
                                             "-R",
                                             "--connect-rate",
                                             "--size",
                                             "--payload",
                                             "--mix",
                                             "--expect",
                                             "--source",
                                             "--json",
                                             "--max-errors",
                                             "--json-stream",
                                             "--hdr-log",
                                             "--request",
                                             "--start-at",
                                             "--reconnect-every",
                                             "--rate-sweep",
                                             "--find-rate",
                                             "--open-timeout",
                                             "--ok-status",
                                             NULL};
    bool have_d = false, have_n = false, have_size = false, have_request = false;

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
    bopt_parse_statuses("2xx", o->ok_status);

    for (int i = 1; i < argc; i++) {
        struct arg a;
        const char *arg = argv[i], *name = a.name, *val;
        double d;
        long v;

        if (arg[0] != '-' || arg[1] == '\0') {
            if (o->target) {
                snprintf(err, errlen,
                         "unexpected argument '%s' after the target %s; options go before it", arg,
                         o->target);
                return BOPT_ERROR;
            }
            o->target = arg;
            continue;
        }
        if (args_next(argc, argv, &i, with_value, "lfbench", &a, err, errlen) < 0)
            return BOPT_ERROR;
        val = a.val;

#define BAD(...)                                                                                   \
    do {                                                                                           \
        snprintf(err, errlen, __VA_ARGS__);                                                        \
        return BOPT_ERROR;                                                                         \
    } while (0)
        if (!strcmp(name, "-h") || !strcmp(name, "--help")) {
            fputs(usage, out);
            return BOPT_EXIT;
        } else if (!strcmp(name, "-V") || !strcmp(name, "--version")) {
            fprintf(out, "lfbench %s\n", LFE_VERSION);
            return BOPT_EXIT;
        } else if (!strcmp(name, "-q") || !strcmp(name, "--quiet")) {
            o->quiet = true;
        } else if (!strcmp(name, "--linger0")) {
            o->linger0 = true;
        } else if (!strcmp(name, "--busy-poll")) {
            o->busy_poll = true;
        } else if (!strcmp(name, "-t")) {
            if (parse_int(val, 1, 256, &v) < 0)
                BAD("-t: '%s' is not a thread count from 1 to 256", val);
            o->threads = (int)v;
        } else if (!strcmp(name, "-c")) {
            if (parse_int(val, 1, 10000000, &v) < 0)
                BAD("-c: '%s' is not a connection count from 1 to 10000000", val);
            o->conns = (int)v;
        } else if (!strcmp(name, "--cpus")) {
            if (cpulist_parse(val, &o->cpus) < 0)
                BAD("--cpus: '%s' is not a CPU list; write e.g. 1 or 2-3", val);
            o->have_cpus = true;
        } else if (!strcmp(name, "--mode")) {
            if (!strcmp(val, "long"))
                o->mode = MODE_LONG;
            else if (!strcmp(val, "short"))
                o->mode = MODE_SHORT;
            else
                BAD("--mode: '%s' is not a mode; use long or short", val);
        } else if (!strcmp(name, "--pipeline")) {
            if (parse_int(val, 1, BOPT_MAX_PIPELINE, &v) < 0)
                BAD("--pipeline: '%s' is not a depth from 1 to %d", val, BOPT_MAX_PIPELINE);
            o->pipeline = (int)v;
        } else if (!strcmp(name, "-d")) {
            if (args_duration_ms(val, 1000.0, &d) < 0 || d < 1)
                BAD("-d: '%s' is not a duration of 1ms to 86400s; write 10 (seconds), 2.5s or "
                    "500ms",
                    val);
            o->duration = d / 1000.0;
            have_d = true;
        } else if (!strcmp(name, "-n")) {
            if (parse_int(val, 1, 1e15, &v) < 0)
                BAD("-n: '%s' is not a request count of at least 1", val);
            o->requests = (uint64_t)v;
            have_n = true;
        } else if (!strcmp(name, "--warmup")) {
            if (args_duration_ms(val, 1000.0, &d) < 0 || d > 3600000)
                BAD("--warmup: '%s' is not a duration of 0 to 3600s; write 2 (seconds), 2.5s or "
                    "500ms",
                    val);
            o->warmup = d / 1000.0;
        } else if (!strcmp(name, "--timeout")) {
            if (args_duration_ms(val, 1.0, &d) < 0 || d < 1 || d > 3600000)
                BAD("--timeout: '%s' is not a duration of 1ms to 3600s; write 250 (milliseconds), "
                    "250ms or 1.5s",
                    val);
            o->timeout_ms = (int)(d + 0.5);
        } else if (!strcmp(name, "-R")) {
            if (parse_num(val, 0.001, 1e9, &d) < 0)
                BAD("-R: '%s' is not a rate in requests per second", val);
            o->rate = d;
        } else if (!strcmp(name, "--connect-rate")) {
            if (parse_num(val, 0.001, 1e9, &d) < 0)
                BAD("--connect-rate: '%s' is not a rate in connections per second", val);
            o->connect_rate = d;
        } else if (!strcmp(name, "--size")) {
            if (parse_int(val, 1, 1 << 30, &v) < 0)
                BAD("--size: '%s' is not a size in bytes from 1 to %d", val, 1 << 30);
            o->size = (size_t)v;
            have_size = true;
        } else if (!strcmp(name, "--payload")) {
            if (o->nclasses)
                BAD("--payload: give either --payload or --mix, once");
            o->cls[0] = (struct bclass){val, 1};
            o->nclasses = 1;
        } else if (!strcmp(name, "--mix")) {
            char *save = NULL;
            if (o->nclasses)
                BAD("--mix: give either --payload or --mix, once");
            free(o->mixbuf);
            o->mixbuf = strdup(val);
            if (!o->mixbuf)
                BAD("out of memory");
            for (char *tok = strtok_r(o->mixbuf, ",", &save); tok;
                 tok = strtok_r(NULL, ",", &save)) {
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
        } else if (!strcmp(name, "--expect")) {
            if (!strcmp(val, "echo"))
                o->expect = EXPECT_ECHO;
            else if (!strcmp(val, "line"))
                o->expect = EXPECT_LINE;
            else if (!strcmp(val, "len32"))
                o->expect = EXPECT_LEN32;
            else if (!strcmp(val, "http"))
                o->expect = EXPECT_HTTP;
            else if (!strcmp(val, "bytes")) {
                if (i + 1 >= argc || parse_int(argv[i + 1], 1, 1 << 30, &v) < 0)
                    BAD("--expect bytes needs a byte count from 1 to %d", 1 << 30);
                o->expect = EXPECT_BYTES;
                o->expect_bytes = (size_t)v;
                i++;
            } else
                BAD("--expect: '%s' is not echo, line, len32, bytes N or http", val);
        } else if (!strcmp(name, "--source")) {
            int n = bopt_parse_sources(val, o->sources, BOPT_MAX_SOURCES);
            if (n < 0)
                BAD("--source: '%s' is not an IPv4 address or ascending range A-B of at most %d",
                    val, BOPT_MAX_SOURCES);
            o->nsources = n;
        } else if (!strcmp(name, "--json")) {
            o->json = val;
        } else if (!strcmp(name, "--json-stream")) {
            o->json_stream = val;
        } else if (!strcmp(name, "--hdr-log")) {
            o->hdr_log = val;
        } else if (!strcmp(name, "--request")) {
            if (o->nclasses)
                BAD("--request: give one of --request, --payload or --mix, once");
            o->cls[0] = (struct bclass){val, 1};
            o->nclasses = 1;
            o->request = val;
            have_request = true;
        } else if (!strcmp(name, "--start-at")) {
            if (parse_start_at(val, &o->start_at) < 0)
                BAD("--start-at: '%s' is not a time within the next day: epoch seconds (date "
                    "+%%s) or +SECONDS from now",
                    val);
        } else if (!strcmp(name, "--reconnect-every")) {
            if (parse_int(val, 1, 1e15, &v) < 0)
                BAD("--reconnect-every: '%s' is not a request count of at least 1", val);
            o->reconnect_every = (uint64_t)v;
        } else if (!strcmp(name, "--open-timeout")) {
            if (args_duration_ms(val, 1000.0, &d) < 0 || d > 3600000)
                BAD("--open-timeout: '%s' is not a duration of 0 to 3600s; write 10 (seconds), "
                    "2.5s or 500ms",
                    val);
            o->open_timeout = d / 1000.0;
        } else if (!strcmp(name, "--rate-sweep")) {
            if (parse_sweep(val, o) < 0)
                BAD("--rate-sweep: '%s' is not FROM:TO:STEP in requests/s with 0 < FROM <= TO, "
                    "STEP > 0 and at most %d steps",
                    val, BOPT_MAX_STEPS);
        } else if (!strcmp(name, "--find-rate")) {
            if (parse_find(val, &o->find_pct, &o->find_bound_us) < 0)
                BAD("--find-rate: '%s' is not pP=LATENCY, e.g. p99=1ms or p99.9=500us (units "
                    "ns, us, ms, s)",
                    val);
        } else if (!strcmp(name, "--ok-status")) {
            if (strlen(val) > 200 || bopt_parse_statuses(val, o->ok_status) < 0)
                BAD("--ok-status: '%s' is not a list of HTTP statuses from 100 to 599, e.g. "
                    "2xx,404 or 200-299,301",
                    val);
            o->ok_status_arg = val;
        } else if (!strcmp(name, "--max-errors")) {
            if (parse_int(val, 0, 1e15, &v) < 0)
                BAD("--max-errors: '%s' is not a count of 0 or more", val);
            o->max_errors = (uint64_t)v;
        } else {
            BAD("unknown option '%s'; see lfbench --help", name);
        }
    }
    if (!o->target)
        BAD("no target: give HOST:PORT last, e.g. lfbench 127.0.0.1:9876");
    if (bopt_parse_target(o->target, &o->addr, &o->addrlen) < 0)
        BAD("target '%s' is not ADDR:PORT; write 127.0.0.1:9876 or [::1]:9876", o->target);
    if (have_d && have_n)
        BAD("-d and -n both given: pick a duration or a request count");
    if (have_n)
        o->duration = 0;
    if (o->nclasses && have_size)
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
    if (o->expect == EXPECT_HTTP && have_size)
        BAD("--size makes generated echo payloads; with --expect http the request is --request "
            "FILE (default GET /)");
    if (have_request && o->expect != EXPECT_HTTP)
        BAD("--request is an HTTP request file and needs --expect http; for other protocols "
            "use --payload");
    if (o->ok_status_arg && o->expect != EXPECT_HTTP)
        BAD("--ok-status names the HTTP statuses that count as answers and needs --expect http");
    if (o->reconnect_every && o->mode != MODE_LONG)
        BAD("--reconnect-every needs --mode long: a short connection carries one request");
    if ((o->sweep_step > 0 || o->find_pct > 0) && o->rate > 0)
        BAD("-R with --rate-sweep or --find-rate: the steps set the rate; give one or the other");
    if ((o->sweep_step > 0 || o->find_pct > 0) && have_n)
        BAD("-n with --rate-sweep or --find-rate: each step runs for -d seconds");
    if (o->threads > o->conns)
        o->threads = o->conns; /* a thread with no connection would idle */
    if (have_n && (uint64_t)o->threads > o->requests)
        o->threads = (int)o->requests; /* a share of 0 is no limit: it never ended (-n 1 -t 2) */
    return BOPT_RUN;
#undef BAD
}

enum bopt_result bopt_parse(struct bopt *o, int argc, char **argv, FILE *out, char *err,
                            size_t errlen)
{
    enum bopt_result r = parse(o, argc, argv, out, err, errlen);

    if (r == BOPT_ERROR) /* the messages quote arguments, which may hold a newline */
        args_one_line(err);
    return r;
}
