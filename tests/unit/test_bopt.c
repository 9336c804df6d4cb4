/* Unit tests of lfbench's options: defaults, every flag, bad values rejected with their
 * message, targets and source ranges; the option table against the parser, --help and
 * man/lfbench.1 (run from the top of the checkout, as make test does). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "args.h"
#include "bopt.h"
#include "payload.h"

static char err[512];
static struct bopt o;

static enum bopt_result parse(const char *first, ...)
{
    char *argv[64] = {(char *)"lfbench"};
    int argc = 1;
    va_list ap;
    FILE *out = fopen("/dev/null", "w");
    enum bopt_result r;

    va_start(ap, first);
    for (const char *a = first; a; a = va_arg(ap, const char *))
        argv[argc++] = (char *)a;
    va_end(ap);
    err[0] = '\0';
    bopt_free(&o); /* the previous parse's */
    r = bopt_parse(&o, argc, argv, out, err, sizeof(err));
    fclose(out);
    return r;
}

static void expect_error(const char *needle, enum bopt_result r)
{
    assert_int_equal(r, BOPT_ERROR);
    if (!strstr(err, needle))
        fail_msg("error '%s' lacks '%s'", err, needle);
    assert_null(strchr(err, '\n'));
}

static void test_defaults(void **state)
{
    struct sockaddr_in *a = (struct sockaddr_in *)&o.addr;

    (void)state;
    assert_int_equal(parse("127.0.0.1:9876", NULL), BOPT_RUN);
    assert_int_equal(o.threads, 1);
    assert_int_equal(o.conns, 100);
    assert_int_equal(o.mode, MODE_LONG);
    assert_int_equal(o.pipeline, 1);
    assert_true(o.duration == 10);
    assert_int_equal(o.requests, 0);
    assert_int_equal(o.timeout_ms, 5000);
    assert_true(o.rate == 0);
    assert_int_equal(o.size, 64);
    assert_int_equal(o.expect, EXPECT_ECHO);
    assert_int_equal(o.max_errors, 0);
    assert_int_equal(a->sin_family, AF_INET);
    assert_int_equal(ntohs(a->sin_port), 9876);
}

static void test_every_flag(void **state)
{
    (void)state;
    assert_int_equal(parse("-t", "2", "--cpus", "1", "-c", "50", "--mode", "long", "--pipeline",
                           "8", "-n", "1000", "--warmup", "0.5", "--timeout", "250ms", "-R",
                           "20000", "--connect-rate", "500", "--linger0", "--busy-poll", "--size",
                           "128", "--expect", "bytes", "12", "--source", "127.0.0.2-127.0.0.9",
                           "--json", "out.json", "--max-errors", "3", "-q", "127.0.0.1:80", NULL),
                     BOPT_RUN);
    assert_int_equal(o.threads, 2);
    assert_true(o.have_cpus && CPU_ISSET(1, &o.cpus));
    assert_int_equal(o.conns, 50);
    assert_int_equal(o.pipeline, 8);
    assert_int_equal(o.requests, 1000);
    assert_true(o.duration == 0);
    assert_true(o.warmup == 0.5);
    assert_int_equal(o.timeout_ms, 250);
    assert_true(o.rate == 20000);
    assert_true(o.connect_rate == 500);
    assert_true(o.linger0 && o.busy_poll && o.quiet);
    assert_int_equal(o.size, 128);
    assert_int_equal(o.expect, EXPECT_BYTES);
    assert_int_equal(o.expect_bytes, 12);
    assert_int_equal(o.nsources, 8);
    assert_string_equal(o.json, "out.json");
    assert_int_equal(o.max_errors, 3);
    assert_int_equal(parse("[::1]:80", NULL), BOPT_RUN);
    assert_int_equal(o.addr.ss_family, AF_INET6);
    assert_int_equal(
        parse("--mode", "short", "--expect", "line", "--mix", "a:1,b:9", "127.0.0.1:1", NULL),
        BOPT_RUN);
    assert_int_equal(o.mode, MODE_SHORT);
    assert_int_equal(o.expect, EXPECT_LINE);
    assert_int_equal(o.nclasses, 2);
    assert_string_equal(o.cls[1].file, "b");
    assert_int_equal(o.cls[1].weight, 9);
    assert_int_equal(parse("--expect", "len32", "--payload", "f", "localhost:7", NULL), BOPT_RUN);
    assert_int_equal(o.expect, EXPECT_LEN32);
    assert_int_equal(o.nclasses, 1);
}

static void test_bad_values(void **state)
{
    (void)state;
    expect_error("no target", parse("-c", "5", NULL));
    expect_error("target 'nohost:1' is not ADDR:PORT; write 127.0.0.1:9876 or [::1]:9876 (or an "
                 "HTTP URL: http://127.0.0.1:8080/path)",
                 parse("nohost:1", NULL));
    expect_error("target '127.0.0.1:0'", parse("127.0.0.1:0", NULL));
    /* test_target_errors_say_why: a port out of range and a name, which the line did not tell
     * from a typo; -R's line gives a number to write */
    expect_error("http://127.0.0.1:8080/path); a port is 1 to 65535",
                 parse("127.0.0.1:99999", NULL));
    expect_error("; lfbench looks up no host name: give its address (getent hosts NAME), or "
                 "localhost",
                 parse("example.com:80", NULL));
    expect_error("-R: '5k' is not a rate in requests per second; write a number: 5000, 2500.5",
                 parse("-R", "5k", "127.0.0.1:1", NULL));
    parse("127.0.0.1:x", NULL);
    if (strstr(err, "; a port") || strstr(err, "host name"))
        fail_msg("a port that is no number is neither out of range nor a name: %s", err);
    expect_error("target '::1:80'", parse("::1:80", NULL));
    expect_error("unexpected argument 'x' after the target", parse("127.0.0.1:1", "x", NULL));
    expect_error("unknown option '--bogus'", parse("--bogus", "127.0.0.1:1", NULL));
    expect_error("-c needs a value", parse("-c", NULL));
    expect_error("-t: '0' is not a thread count", parse("-t", "0", "127.0.0.1:1", NULL));
    expect_error("-c: 'many'", parse("-c", "many", "127.0.0.1:1", NULL));
    expect_error("--mode: 'medium'", parse("--mode", "medium", "127.0.0.1:1", NULL));
    expect_error("--pipeline: '0'", parse("--pipeline", "0", "127.0.0.1:1", NULL));
    expect_error("-d: '-1'", parse("-d", "-1", "127.0.0.1:1", NULL));
    expect_error("-n: '1.5'", parse("-n", "1.5", "127.0.0.1:1", NULL));
    expect_error("-d and -n both given", parse("-d", "1", "-n", "5", "127.0.0.1:1", NULL));
    expect_error("--timeout: '0'", parse("--timeout", "0", "127.0.0.1:1", NULL));
    expect_error("-R: 'fast'", parse("-R", "fast", "127.0.0.1:1", NULL));
    expect_error("--size: '0'", parse("--size", "0", "127.0.0.1:1", NULL));
    expect_error("--mix: 'a' is not FILE:WEIGHT", parse("--mix", "a", "127.0.0.1:1", NULL));
    expect_error("--mix: 'a:0'", parse("--mix", "a:0", "127.0.0.1:1", NULL));
    expect_error("either --payload or --mix",
                 parse("--payload", "a", "--mix", "b:1", "127.0.0.1:1", NULL));
    expect_error("--expect: 'xml'", parse("--expect", "xml", "127.0.0.1:1", NULL));
    expect_error("--expect bytes needs a byte count", parse("--expect", "bytes", "x", NULL));
    expect_error("--source: '127.0.0.9-127.0.0.2'",
                 parse("--source", "127.0.0.9-127.0.0.2", "127.0.0.1:1", NULL));
    expect_error("--source takes IPv4", parse("--source", "127.0.0.2", "[::1]:1", NULL));
    expect_error("--pipeline needs --mode long",
                 parse("--mode", "short", "--pipeline", "2", "127.0.0.1:1", NULL));
    /* issue 9, defect 10: short mode cannot keep -R on fewer connections per second */
    expect_error(
        "--connect-rate 100 is below -R 2000: in short mode each request opens its own",
        parse("--mode", "short", "-R", "2000", "--connect-rate", "100", "127.0.0.1:1", NULL));
    expect_error("--size applies to generated payloads",
                 parse("--size", "10", "--payload", "f", "127.0.0.1:1", NULL));
    expect_error("--cpus: 'x'", parse("--cpus", "x", "127.0.0.1:1", NULL));
}

static void test_sources(void **state)
{
    struct in_addr a[BOPT_MAX_SOURCES];
    char s[32];

    (void)state;
    assert_int_equal(bopt_parse_sources("127.0.0.1-127.0.0.20", a, BOPT_MAX_SOURCES), 20);
    inet_ntop(AF_INET, &a[19], s, sizeof(s));
    assert_string_equal(s, "127.0.0.20");
    assert_int_equal(bopt_parse_sources("127.0.0.255-127.0.1.1", a, BOPT_MAX_SOURCES), 3);
    inet_ntop(AF_INET, &a[1], s, sizeof(s));
    assert_string_equal(s, "127.0.1.0");
    assert_int_equal(bopt_parse_sources("10.0.0.5", a, BOPT_MAX_SOURCES), 1);
    assert_int_equal(bopt_parse_sources("127.0.0.1-127.0.255.255", a, BOPT_MAX_SOURCES), -EINVAL);
    assert_int_equal(bopt_parse_sources("127.0.0.1-", a, BOPT_MAX_SOURCES), -EINVAL);
    assert_int_equal(bopt_parse_sources("a-b", a, BOPT_MAX_SOURCES), -EINVAL);
}

/* Found by fuzz_bopt: an argument holding a newline or a terminal escape went into the error
 * verbatim, and the "one line" error printed as two. */
static void test_error_quoting_newline_is_one_line(void **state)
{
    (void)state;
    expect_error("-c: 'a?b'", parse("-c", "a\nb", "127.0.0.1:1", NULL));
    expect_error("--mode: '?[2Jx'", parse("--mode", "\x1b[2Jx", "127.0.0.1:1", NULL));
    expect_error("target 'h?:1'", parse("h\x7f:1", NULL));
}

/* The run features' options: each bad value refused with one line naming the option. */
static void test_run_options_bad(void **state)
{
    char past[32], far[32];
    time_t now = time(NULL);

    (void)state;
    snprintf(past, sizeof(past), "%lld", (long long)now - 60);
    snprintf(far, sizeof(far), "%lld", (long long)now + 86400 + 60);
    expect_error("--start-at: '", parse("--start-at", past, "127.0.0.1:1", NULL));
    expect_error("--start-at: '", parse("--start-at", far, "127.0.0.1:1", NULL));
    expect_error("--start-at: '+86401'", parse("--start-at", "+86401", "127.0.0.1:1", NULL));
    expect_error("--start-at: 'soon'", parse("--start-at", "soon", "127.0.0.1:1", NULL));
    expect_error("--start-at: '+'", parse("--start-at", "+", "127.0.0.1:1", NULL));
    expect_error("--start-at: '+-5'", parse("--start-at", "+-5", "127.0.0.1:1", NULL));
    expect_error("--start-at: '+5d'", parse("--start-at", "+5d", "127.0.0.1:1", NULL));
    expect_error("--start-at: ''", parse("--start-at", "", "127.0.0.1:1", NULL));
    expect_error("--start-at: '+nan'", parse("--start-at", "+nan", "127.0.0.1:1", NULL));
    expect_error("--reconnect-every: '0'", parse("--reconnect-every", "0", "127.0.0.1:1", NULL));
    expect_error("--reconnect-every: '2.5'",
                 parse("--reconnect-every", "2.5", "127.0.0.1:1", NULL));
    expect_error("--reconnect-every: '-1'", parse("--reconnect-every", "-1", "127.0.0.1:1", NULL));
    expect_error("--reconnect-every needs --mode long",
                 parse("--reconnect-every", "10", "--mode", "short", "127.0.0.1:1", NULL));
    expect_error("--reconnect-every needs --mode long",
                 parse("--mode", "short", "--reconnect-every", "10", "127.0.0.1:1", NULL));
    static const char *const sweeps[] = {
        "1000",         "1000:2000",  "a:b:c",    "2000:1000:100", "1000:2000:0",
        "1000:2000:-5", "0:100:10",   "1:2:3:4",  "1::1",          "",
        ":1:1",         "1:100000:1", "1:1001:1", "1:2:1x",        "inf:inf:1",
        "nan:1:1",
    };
    for (size_t i = 0; i < sizeof(sweeps) / sizeof(sweeps[0]); i++) {
        char want[64];
        snprintf(want, sizeof(want), "--rate-sweep: '%s' is not FROM:TO:STEP", sweeps[i]);
        expect_error(want, parse("--rate-sweep", sweeps[i], "127.0.0.1:1", NULL));
    }
    static const char *const finds[] = {
        "p99=1",   "p0=1ms",    "p101=1ms",  "p99=1xs",    "99=1ms",   "p99",     "p99=",
        "p=1ms",   "p99=ms",    "p99=-1ms",  "p99=0ms",    "p99=1 ms", "P99=1ms", "p99=0.5us",
        "p-1=1ms", "p99=infms", "p99=nanms", "p100.5=1ms", "p99=1msx",
    };
    for (size_t i = 0; i < sizeof(finds) / sizeof(finds[0]); i++) {
        char want[64];
        snprintf(want, sizeof(want), "--find-rate: '%s' is not pP=LATENCY", finds[i]);
        expect_error(want, parse("--find-rate", finds[i], "127.0.0.1:1", NULL));
    }
    static const char *const oks[] = {
        "",        "2xx,", ",2xx",    "6xx",      "0xx",  "99",       "600",  "2x",
        "2xxx",    "20x",  "300-200", "200-",     "-200", "200--300", "200 ", "abc",
        "2xx;404", "1e2",  "200-600", "2xx,,404", "+200", "0200x",
    };
    for (size_t i = 0; i < sizeof(oks) / sizeof(oks[0]); i++) {
        char want[96];
        snprintf(want, sizeof(want), "--ok-status: '%s' is not a list of HTTP statuses", oks[i]);
        expect_error(want, parse("--expect", "http", "--ok-status", oks[i], "127.0.0.1:1", NULL));
    }
    expect_error("--ok-status names the HTTP statuses that count as answers and needs --expect "
                 "http",
                 parse("--ok-status", "2xx", "127.0.0.1:1", NULL));
    expect_error("--open-timeout: '-1'", parse("--open-timeout", "-1", "127.0.0.1:1", NULL));
    expect_error("--open-timeout: 'x'", parse("--open-timeout", "x", "127.0.0.1:1", NULL));
    expect_error("--open-timeout: '3601'", parse("--open-timeout", "3601", "127.0.0.1:1", NULL));
    expect_error("--request is an HTTP request file and needs --expect http",
                 parse("--request", "req.txt", "127.0.0.1:1", NULL));
    expect_error("--request is an HTTP request file and needs --expect http",
                 parse("--request", "req.txt", "--expect", "echo", "127.0.0.1:1", NULL));
    expect_error("-R with --rate-sweep or --find-rate",
                 parse("-R", "100", "--rate-sweep", "100:200:100", "127.0.0.1:1", NULL));
    expect_error("-R with --rate-sweep or --find-rate",
                 parse("--find-rate", "p99=1ms", "-R", "100", "127.0.0.1:1", NULL));
    expect_error("-n with --rate-sweep or --find-rate",
                 parse("-n", "100", "--find-rate", "p99=1ms", "127.0.0.1:1", NULL));
    expect_error("-n with --rate-sweep or --find-rate",
                 parse("--rate-sweep", "100:200:100", "-n", "100", "127.0.0.1:1", NULL));
}

/* ... and good values parsed to what they say. */
static void test_run_options_good(void **state)
{
    struct timespec ts;
    double now;
    char at[32];

    (void)state;
    clock_gettime(CLOCK_REALTIME, &ts);
    now = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
    assert_int_equal(parse("--start-at", "+5", "127.0.0.1:1", NULL), BOPT_RUN);
    assert_true(o.start_at >= now + 5 && o.start_at < now + 6);
    assert_int_equal(parse("--start-at", "+0.25", "127.0.0.1:1", NULL), BOPT_RUN);
    assert_true(o.start_at >= now + 0.25 && o.start_at < now + 1.25);
    snprintf(at, sizeof(at), "%.3f", now + 3600.5);
    assert_int_equal(parse("--start-at", at, "127.0.0.1:1", NULL), BOPT_RUN);
    assert_true(fabs(o.start_at - (now + 3600.5)) < 0.01);
    assert_int_equal(parse("127.0.0.1:1", NULL), BOPT_RUN);
    assert_true(o.start_at == 0 && o.reconnect_every == 0 && o.sweep_step == 0 && o.find_pct == 0 &&
                o.open_timeout < 0 && o.json_stream == NULL);

    assert_int_equal(parse("--reconnect-every", "10", "127.0.0.1:1", NULL), BOPT_RUN);
    assert_int_equal(o.reconnect_every, 10);
    assert_int_equal(parse("--reconnect-every", "1", "--pipeline", "4", "127.0.0.1:1", NULL),
                     BOPT_RUN);
    assert_int_equal(o.reconnect_every, 1);

    assert_int_equal(parse("--rate-sweep", "500:1500:500", "-d", "2", "127.0.0.1:1", NULL),
                     BOPT_RUN);
    assert_true(o.sweep_from == 500 && o.sweep_to == 1500 && o.sweep_step == 500);
    assert_true(o.duration == 2 && o.rate == 0);
    assert_int_equal(parse("--rate-sweep", "0.5:2.5:0.25", "127.0.0.1:1", NULL), BOPT_RUN);
    assert_true(o.sweep_from == 0.5 && o.sweep_to == 2.5 && o.sweep_step == 0.25);
    assert_int_equal(parse("--rate-sweep", "700:700:1", "127.0.0.1:1", NULL), BOPT_RUN);
    assert_true(o.sweep_from == 700 && o.sweep_to == 700);
    assert_int_equal(parse("--rate-sweep", "1:1000:1", "127.0.0.1:1", NULL), BOPT_RUN);
    assert_int_equal(parse("--rate-sweep", "1e3:2e3:1e2", "127.0.0.1:1", NULL), BOPT_RUN);
    assert_true(o.sweep_from == 1000 && o.sweep_to == 2000 && o.sweep_step == 100);

    assert_int_equal(parse("--find-rate", "p99.9=500us", "127.0.0.1:1", NULL), BOPT_RUN);
    assert_true(o.find_pct == 99.9 && o.find_bound_us == 500);
    assert_int_equal(parse("--find-rate", "p99=2ms", "127.0.0.1:1", NULL), BOPT_RUN);
    assert_true(o.find_pct == 99 && o.find_bound_us == 2000);
    assert_int_equal(parse("--find-rate", "p50=250µs", "127.0.0.1:1", NULL), BOPT_RUN);
    assert_true(o.find_pct == 50 && o.find_bound_us == 250);
    assert_int_equal(parse("--find-rate", "p100=1.5s", "127.0.0.1:1", NULL), BOPT_RUN);
    assert_true(o.find_pct == 100 && o.find_bound_us == 1.5e6);
    assert_int_equal(parse("--find-rate", "p99=1500ns", "127.0.0.1:1", NULL), BOPT_RUN);
    assert_true(fabs(o.find_bound_us - 1.5) < 1e-9);
    assert_int_equal(
        parse("--find-rate", "p99=1ms", "--rate-sweep", "100:900:100", "127.0.0.1:1", NULL),
        BOPT_RUN);
    assert_true(o.find_pct == 99 && o.sweep_from == 100 && o.sweep_to == 900);

    /* --ok-status: 2xx unless it names others */
    assert_int_equal(parse("--expect", "http", "127.0.0.1:1", NULL), BOPT_RUN);
    for (unsigned c = 0; c < 700; c++)
        assert_int_equal(bopt_status_ok(&o, c), c >= 200 && c <= 299);
    assert_null(o.ok_status_arg);
    assert_int_equal(
        parse("--expect", "http", "--ok-status", "2xx,404,500-502,3XX", "127.0.0.1:1", NULL),
        BOPT_RUN);
    assert_string_equal(o.ok_status_arg, "2xx,404,500-502,3XX");
    for (unsigned c = 0; c < 700; c++)
        assert_int_equal(bopt_status_ok(&o, c),
                         (c >= 200 && c <= 399) || c == 404 || (c >= 500 && c <= 502));
    assert_int_equal(parse("--expect", "http", "--ok-status", "100-599", "127.0.0.1:1", NULL),
                     BOPT_RUN);
    assert_true(bopt_status_ok(&o, 100) && bopt_status_ok(&o, 599) && !bopt_status_ok(&o, 99) &&
                !bopt_status_ok(&o, 600));

    assert_int_equal(parse("--open-timeout", "2.5", "127.0.0.1:1", NULL), BOPT_RUN);
    assert_true(o.open_timeout == 2.5);
    assert_int_equal(parse("--json-stream", "-", "127.0.0.1:1", NULL), BOPT_RUN);
    assert_string_equal(o.json_stream, "-");
    assert_int_equal(parse("--expect", "http", "--request", "r.txt", "127.0.0.1:1", NULL),
                     BOPT_RUN);
    assert_string_equal(o.request, "r.txt");
}

/* Issue 25: lfbench's times take units as lfepolld's do (N, Nms, Ns, Nm, Nh: one parser);
 * issue 33 (B.9): a plain number is seconds in every one, --timeout too (it was milliseconds). */
static void test_durations_with_units(void **state)
{
    static const struct {
        const char *opt, *val;
        double want; /* in the option's field unit: seconds, or ms for --timeout */
    } good[] = {
        {"-d", "10", 10},
        {"-d", "2s", 2},
        {"-d", "2.5s", 2.5},
        {"-d", "500ms", 0.5},
        {"-d", "1ms", 0.001},
        {"-d", ".5s", 0.5},
        {"-d", "86400s", 86400},
        {"--warmup", "2", 2},
        {"--warmup", "250ms", 0.25},
        {"--warmup", "0", 0},
        {"--warmup", "1.5s", 1.5},
        {"--warmup", "1h", 3600},
        {"--warmup", "0.5m", 30},
        {"-d", "2m", 120},
        {"-d", "1.5m", 90},
        {"-d", "24h", 86400},
        {"--timeout", "250ms", 250},
        {"--timeout", "2", 2000},
        {"--timeout", "1.4", 1400},
        {"--timeout", "0.25", 250},
        {"--timeout", "1s", 1000},
        {"--timeout", "2.5s", 2500},
        {"--timeout", "40ms", 40},
        {"--timeout", "1m", 60000},
        {"--timeout", "1h", 3600000},
        {"--timeout", "3600", 3600000},
        {"--open-timeout", "3", 3},
        {"--open-timeout", "1500ms", 1.5},
        {"--open-timeout", "0s", 0},
        {"--open-timeout", "1m", 60},
    };
    static const struct {
        const char *opt, *val, *msg;
    } bad[] = {
        {"-d", "0", "-d: '0' is not a duration of 1ms to 86400s"},
        {"-d", "0.5ms", "-d: '0.5ms'"},
        {"-d", "86401s", "-d: '86401s'"},
        {"-d", "25h", "-d: '25h'"},
        {"-d", "1d", "-d: '1d'"},
        {"-d", "2us", "-d: '2us'"},
        {"-d", "2M", "-d: '2M'"},
        {"-d", "2min", "-d: '2min'"},
        {"-d", "2 s", "-d: '2 s'"},
        {"-d", "1e3", "-d: '1e3'"},
        {"-d", "0x10", "-d: '0x10'"},
        {"-d", "inf", "-d: 'inf'"},
        {"-d", "1..5s", "-d: '1..5s'"},
        {"-d", ".", "-d: '.'"},
        {"-d", "s", "-d: 's'"},
        {"-d", "5sms", "-d: '5sms'"},
        {"-d", "-2s", "-d: '-2s'"},
        {"--warmup", "3601s", "--warmup: '3601s' is not a duration of 0 to 3600s"},
        {"--warmup", "2h", "--warmup: '2h'"},
        {"--timeout", "0.4ms",
         "--timeout: '0.4ms' is not a duration of 1ms to 3600s; write 2 "
         "(seconds), 1.5s or 250ms"},
        {"--timeout", "3601s", "--timeout: '3601s'"},
        {"--timeout", "1us", "--timeout: '1us'"},
        {"--timeout", "2h", "--timeout: '2h'"},
        {"--timeout", "0", "--timeout: '0' is not a duration of 1ms to 3600s; write 2"},
        {"--timeout", "0.0001", "--timeout: '0.0001' is not a duration of 1ms to 3600s; write 2"},
        /* a bare number too large in seconds that was a good one in milliseconds: say so */
        {"--timeout", "5000",
         "--timeout: '5000' is not a duration of 1ms to 3600s: a bare number is seconds now (it "
         "was milliseconds); write 5000ms for the old meaning"},
        {"--timeout", "3600000", "write 3600000ms for the old meaning"},
        {"--timeout", "3600001", "--timeout: '3600001' is not a duration of 1ms to 3600s; write 2"},
        {"--open-timeout", "3600001ms", "--open-timeout: '3600001ms'"},
    };
    double now = (double)time(NULL);

    (void)state;
    for (size_t k = 0; k < sizeof(good) / sizeof(good[0]); k++) {
        double got;

        if (parse(good[k].opt, good[k].val, "127.0.0.1:1", NULL) != BOPT_RUN)
            fail_msg("%s %s refused: %s", good[k].opt, good[k].val, err);
        got = good[k].opt[1] == 'd'   ? o.duration
              : good[k].opt[2] == 'w' ? o.warmup
              : good[k].opt[2] == 't' ? o.timeout_ms
                                      : o.open_timeout;
        if (good[k].opt[2] != 't' && o.warning[0]) /* only --timeout's meaning changed */
            fail_msg("%s %s: a warning: %s", good[k].opt, good[k].val, o.warning);
        if (fabs(got - good[k].want) > 1e-9)
            fail_msg("%s %s: got %g, want %g", good[k].opt, good[k].val, got, good[k].want);
    }
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++)
        expect_error(bad[k].msg, parse(bad[k].opt, bad[k].val, "127.0.0.1:1", NULL));
    assert_int_equal(parse("--start-at", "+2s", "127.0.0.1:1", NULL), BOPT_RUN);
    assert_true(o.start_at >= now + 1 && o.start_at <= now + 4);
    assert_int_equal(parse("--start-at", "+500ms", "127.0.0.1:1", NULL), BOPT_RUN);
    assert_true(o.start_at >= now - 1 && o.start_at <= now + 2);
    assert_int_equal(parse("--start-at", "+1m", "127.0.0.1:1", NULL), BOPT_RUN);
    assert_true(o.start_at >= now + 59 && o.start_at <= now + 62);
}

/* Issue 33 (B.9): --timeout 250 was 250 ms where -d 10 was 10 s. A bare number is seconds now
 * in every option; where it was milliseconds before (--timeout), one that is more likely an old
 * command line's milliseconds (10 or more) draws a one-line warning naming the old meaning's
 * spelling; a unit, or a small number as wrk users write it, draws none. */
static void test_timeout_bare_number_is_seconds(void **state)
{
    static const struct {
        const char *val;
        int ms;
        bool warns;
    } cases[] = {
        {"250", 250000, true},   {"10", 10000, true},     {"9.99", 9990, false},
        {"2", 2000, false},      {"0.5", 500, false},     {"250ms", 250, false},
        {"250s", 250000, false}, {"3600", 3600000, true}, {"10.5", 10500, true},
    };

    (void)state;
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        char want[256];

        if (parse("--timeout", cases[k].val, "127.0.0.1:1", NULL) != BOPT_RUN)
            fail_msg("--timeout %s refused: %s", cases[k].val, err);
        if (o.timeout_ms != cases[k].ms)
            fail_msg("--timeout %s: %d ms, want %d", cases[k].val, o.timeout_ms, cases[k].ms);
        snprintf(want, sizeof(want),
                 "--timeout %s: a bare number is seconds now (was milliseconds); write %sms for "
                 "the old meaning",
                 cases[k].val, cases[k].val);
        if (cases[k].warns ? !strstr(o.warning, want) : o.warning[0] != '\0')
            fail_msg("--timeout %s: warning '%s'", cases[k].val, o.warning);
        assert_null(strchr(o.warning, '\n'));
    }
    /* the last --timeout given is the one, its warning too */
    assert_int_equal(parse("--timeout", "250", "--timeout", "2s", "127.0.0.1:1", NULL), BOPT_RUN);
    assert_int_equal(o.timeout_ms, 2000);
    assert_string_equal(o.warning, "");
    assert_int_equal(parse("--timeout", "2s", "--timeout=300", "127.0.0.1:1", NULL), BOPT_RUN);
    assert_int_equal(o.timeout_ms, 300000);
    assert_non_null(strstr(o.warning, "--timeout 300: a bare number is seconds now"));
    /* the default, and every other time option, warns of nothing */
    assert_int_equal(
        parse("-d", "100", "--warmup", "20", "--open-timeout", "30", "127.0.0.1:1", NULL),
        BOPT_RUN);
    assert_int_equal(o.timeout_ms, 5000);
    assert_string_equal(o.warning, "");
}

/* Issue 35: the TLS options: what the SNI and the certificate's name are for each kind of host,
 * what https:// implies, and every bad value and combination refused in one line. */
static void test_tls_options(void **state)
{
    (void)state;
    assert_int_equal(parse("127.0.0.1:1", NULL), BOPT_RUN);
    assert_false(o.tls);
    /* a name: sent and checked; an address: none sent (RFC 6066), checked as an address */
    assert_int_equal(parse("--tls", "localhost:443", NULL), BOPT_RUN);
    assert_true(o.tls);
    assert_string_equal(o.tls_sni, "localhost");
    assert_string_equal(o.tls_name, "localhost");
    assert_false(o.tls_name_ip);
    assert_null(o.tls_alpn); /* no ALPN unless asked, or HTTPS */
    assert_int_equal(parse("--tls", "127.0.0.1:443", NULL), BOPT_RUN);
    assert_null(o.tls_sni);
    assert_string_equal(o.tls_name, "127.0.0.1");
    assert_true(o.tls_name_ip);
    assert_int_equal(parse("--tls", "[::1]:443", NULL), BOPT_RUN);
    assert_null(o.tls_sni);
    assert_string_equal(o.tls_name, "::1");
    assert_true(o.tls_name_ip);
    assert_int_equal(parse("--tls", "--tls-sni", "example.com", "127.0.0.1:443", NULL), BOPT_RUN);
    assert_string_equal(o.tls_sni, "example.com");
    assert_string_equal(o.tls_name, "example.com");
    assert_false(o.tls_name_ip);
    /* https://: TLS, HTTP, ALPN http/1.1 unless --tls-alpn says otherwise */
    assert_int_equal(parse("https://localhost:8443/x", NULL), BOPT_RUN);
    assert_true(o.tls);
    assert_int_equal(o.expect, EXPECT_HTTP);
    assert_string_equal(o.tls_alpn, "http/1.1");
    assert_string_equal(o.tls_sni, "localhost");
    assert_int_equal(parse("--tls-alpn", "h2,http/1.1", "https://localhost/", NULL), BOPT_RUN);
    assert_string_equal(o.tls_alpn, "h2,http/1.1");
    /* versions and the resumption share */
    assert_int_equal(parse("--tls", "--tls-version", "1.2-1.3", "127.0.0.1:1", NULL), BOPT_RUN);
    assert_int_equal(o.tls_min, 0x0303);
    assert_int_equal(o.tls_max, 0x0304);
    assert_int_equal(parse("--tls", "--mode", "short", "--tls-resume", "0.25", "127.0.0.1:1", NULL),
                     BOPT_RUN);
    assert_true(o.tls_resume == 0.25);
    assert_int_equal(
        parse("--tls", "--reconnect-every", "10", "--tls-resume", "1", "127.0.0.1:1", NULL),
        BOPT_RUN);
    /* refused, each in one line */
    expect_error("--tls-version: '1.1' is not 1.2, 1.3 or 1.2-1.3",
                 parse("--tls", "--tls-version", "1.1", "127.0.0.1:1", NULL));
    expect_error("--tls-resume: '1.5' is not a share from 0 to 1",
                 parse("--tls", "--mode", "short", "--tls-resume", "1.5", "127.0.0.1:1", NULL));
    expect_error("--tls-resume: '-0.1' is not a share from 0 to 1",
                 parse("--tls", "--mode", "short", "--tls-resume", "-0.1", "127.0.0.1:1", NULL));
    expect_error("--tls-resume: 'half' is not a share",
                 parse("--tls", "--mode", "short", "--tls-resume", "half", "127.0.0.1:1", NULL));
    expect_error("--tls-resume shares out new connections: give --mode short or "
                 "--reconnect-every N",
                 parse("--tls", "--tls-resume", "0.5", "127.0.0.1:1", NULL));
    expect_error("--tls-ca is a TLS option, and this run has no TLS: give --tls, or an https:// "
                 "target",
                 parse("--tls-ca", "ca.pem", "127.0.0.1:1", NULL));
    expect_error("--tls-insecure is a TLS option, and this run has no TLS",
                 parse("--tls-insecure", "http://127.0.0.1:1/", NULL));
    expect_error("--tls-resume is a TLS option, and this run has no TLS",
                 parse("--mode", "short", "--tls-resume", "0", "127.0.0.1:1", NULL));
    expect_error("--tls-cert and --tls-key go together",
                 parse("--tls", "--tls-cert", "c.pem", "127.0.0.1:1", NULL));
    expect_error("--tls-cert and --tls-key go together",
                 parse("--tls", "--tls-key", "k.pem", "127.0.0.1:1", NULL));
    expect_error("--tls-ca with --tls-insecure",
                 parse("--tls", "--tls-ca", "a", "--tls-insecure", "127.0.0.1:1", NULL));
    expect_error("--tls-sni: 'a b' holds a space",
                 parse("--tls", "--tls-sni", "a b", "127.0.0.1:1", NULL));
    expect_error("--tls-sni: give a value of 1 to 255 bytes",
                 parse("--tls", "--tls-sni", "", "127.0.0.1:1", NULL));
    expect_error("--tls-alpn: 'h2,,x' has an empty name",
                 parse("--tls", "--tls-alpn", "h2,,x", "127.0.0.1:1", NULL));
    expect_error("--tls-alpn: 'h2,' has an empty name",
                 parse("--tls", "--tls-alpn", "h2,", "127.0.0.1:1", NULL));
    expect_error(
        "--tls-ciphers is TLS 1.2's list, and --tls-version 1.3 was given",
        parse("--tls", "--tls-version", "1.3", "--tls-ciphers", "AES128-SHA", "127.0.0.1:1", NULL));
    expect_error("--tls-ciphersuites is TLS 1.3's list, and --tls-version 1.2 was given",
                 parse("--tls", "--tls-version", "1.2", "--tls-ciphersuites",
                       "TLS_AES_128_GCM_SHA256", "127.0.0.1:1", NULL));
}

/* Issue 33 (B.10): a wrk user's target, http://HOST[:PORT][/PATH], is --expect http with that
 * path, its host and port as written the Host header, port 80 when it names none. */
static void test_url_targets(void **state)
{
    static const struct {
        const char *url, *target, *authority, *path;
        int family, port;
    } good[] = {
        {"http://127.0.0.1:9876/path?q=1&r", "127.0.0.1:9876", "127.0.0.1:9876", "/path?q=1&r",
         AF_INET, 9876},
        {"http://127.0.0.1/", "127.0.0.1:80", "127.0.0.1", "/", AF_INET, 80},
        {"http://127.0.0.1", "127.0.0.1:80", "127.0.0.1", "/", AF_INET, 80},
        {"HTTP://127.0.0.1:8080/A/b.html", "127.0.0.1:8080", "127.0.0.1:8080", "/A/b.html", AF_INET,
         8080},
        {"http://[::1]:9876/x", "[::1]:9876", "[::1]:9876", "/x", AF_INET6, 9876},
        {"http://[::1]/", "[::1]:80", "[::1]", "/", AF_INET6, 80},
        {"http://localhost:8080/a#frag", "localhost:8080", "localhost:8080", "/a", AF_INET, 8080},
        {"http://127.0.0.1:8080?x=1", "127.0.0.1:8080", "127.0.0.1:8080", "/?x=1", AF_INET, 8080},
        {"http://127.0.0.1:8080#top", "127.0.0.1:8080", "127.0.0.1:8080", "/", AF_INET, 8080},
        {"http://127.0.0.1/%20a%2Fb", "127.0.0.1:80", "127.0.0.1", "/%20a%2Fb", AF_INET, 80},
        /* https://: TLS, port 443 when it names none */
        {"https://127.0.0.1/", "127.0.0.1:443", "127.0.0.1", "/", AF_INET, 443},
        {"HTTPS://[::1]:8443/x", "[::1]:8443", "[::1]:8443", "/x", AF_INET6, 8443},
    };
    static const struct {
        const char *url, *msg;
    } bad[] = {
        {"https://u@127.0.0.1/", "is not http://ADDR[:PORT][/PATH]"},
        {"http://example.com/", "target 'http://example.com/' is not http://ADDR[:PORT][/PATH]; "
                                "write http://127.0.0.1:8080/path"},
        {"http://127.0.0.1:/", "is not http://ADDR[:PORT][/PATH]"},
        {"http://127.0.0.1:0/", "is not http://ADDR[:PORT][/PATH]"},
        {"http://127.0.0.1:99999/", "is not http://ADDR[:PORT][/PATH]"},
        {"http://127.0.0.1:80x/", "is not http://ADDR[:PORT][/PATH]"},
        {"http://127.0.0.1:-80/", "is not http://ADDR[:PORT][/PATH]"},
        {"http://u:p@127.0.0.1/", "is not http://ADDR[:PORT][/PATH]"},
        {"http:///x", "is not http://ADDR[:PORT][/PATH]"},
        {"http://", "is not http://ADDR[:PORT][/PATH]"},
        {"http://[::1/", "is not http://ADDR[:PORT][/PATH]"},
        {"http://[::1]x/", "is not http://ADDR[:PORT][/PATH]"},
        {"http://[nope]:80/", "is not http://ADDR[:PORT][/PATH]"},
        {"http://::1:80/", "is not http://ADDR[:PORT][/PATH]"},
        {"http://127.0.0.1/a b", "is not http://ADDR[:PORT][/PATH]"},
        {"http://127.0.0.1/a\tb", "is not http://ADDR[:PORT][/PATH]"},
        {"http://127.0.0.1/a\x7f", "is not http://ADDR[:PORT][/PATH]"},
        {"http://127.0.0.1/\xc3\xa9", "is not http://ADDR[:PORT][/PATH]"},
        /* Regression: the fragment's bytes went unchecked (it is not sent), and the opening
         * line printed the URL as given: a newline split it, an escape reached the terminal */
        {"http://127.0.0.1:1/#a\nb", "is not http://ADDR[:PORT][/PATH]"},
        {"http://127.0.0.1:1/x#\x1b[31m", "is not http://ADDR[:PORT][/PATH]"},
        {"http://127.0.0.1:1#a b", "is not http://ADDR[:PORT][/PATH]"},
        {"ftp://127.0.0.1:21/", "is not http://ADDR[:PORT][/PATH]"},
        {"127.0.0.1://x", "is not http://ADDR[:PORT][/PATH]"},
    };
    static char longpath[9000 + 32];

    (void)state;
    for (size_t k = 0; k < sizeof(good) / sizeof(good[0]); k++) {
        const struct sockaddr_in *a4 = (const struct sockaddr_in *)&o.addr;
        const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)&o.addr;

        if (parse(good[k].url, NULL) != BOPT_RUN)
            fail_msg("%s refused: %s", good[k].url, err);
        assert_int_equal(o.expect, EXPECT_HTTP);
        assert_string_equal(o.url, good[k].url);
        assert_string_equal(o.target, good[k].target);
        assert_string_equal(o.authority, good[k].authority);
        assert_string_equal(o.path, good[k].path);
        assert_int_equal(o.addr.ss_family, good[k].family);
        assert_int_equal(ntohs(good[k].family == AF_INET ? a4->sin_port : a6->sin6_port),
                         good[k].port);
    }
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++)
        expect_error(bad[k].msg, parse(bad[k].url, NULL));
    /* 8 KiB of path, and one byte more */
    memcpy(longpath, "http://127.0.0.1/", 17);
    memset(longpath + 17, 'a', 8191);
    assert_int_equal(parse(longpath, NULL), BOPT_RUN);
    assert_int_equal(strlen(o.path), 8192);
    longpath[17 + 8191] = 'a';
    expect_error("is not http://ADDR[:PORT][/PATH]", parse(longpath, NULL));

    /* with other options: the URL says HTTP, and so may --expect; no other framing */
    assert_int_equal(parse("--expect", "http", "-c", "3", "http://127.0.0.1:1/x", NULL), BOPT_RUN);
    assert_int_equal(o.conns, 3);
    expect_error("an http:// target is HTTP, but --expect line was given; drop --expect, or give "
                 "the target as 127.0.0.1:1",
                 parse("--expect", "line", "http://127.0.0.1:1/x", NULL));
    expect_error("--expect bytes N was given",
                 parse("--expect", "bytes", "3", "http://127.0.0.1:1/", NULL));
    expect_error("--size makes generated echo payloads",
                 parse("--size", "10", "http://127.0.0.1:1/", NULL));
    /* a request file holds its own path: a URL with a path is one request too many */
    expect_error("the URL's path /x with a request file (--request, --payload or --mix)",
                 parse("--request", "r.http", "http://127.0.0.1:1/x", NULL));
    expect_error("the URL's path /x?y with a request file",
                 parse("--mix", "a:1,b:2", "http://127.0.0.1:1/x?y", NULL));
    assert_int_equal(parse("--request", "r.http", "http://127.0.0.1:1/", NULL), BOPT_RUN);
    assert_int_equal(parse("--request", "r.http", "http://127.0.0.1:1", NULL), BOPT_RUN);
    expect_error("the URL's path /x with --script: lfbench does not give a script the URL's path "
                 "yet (wrk.path stays /); set wrk.path in the script and give "
                 "http://127.0.0.1:1/",
                 parse("--script", "s.lua", "http://127.0.0.1:1/x", NULL));
    assert_int_equal(parse("--script", "s.lua", "http://127.0.0.1:1/", NULL), BOPT_RUN);
    /* the script's arguments still follow "--" */
    assert_int_equal(parse("--script", "s.lua", "http://127.0.0.1:1/", "--", "a", NULL), BOPT_RUN);
    assert_int_equal(o.nscript_args, 1);
    expect_error("no target: give HOST:PORT or an http:// URL last", parse("-c", "1", NULL));
    /* bopt_parse_url on its own */
    {
        char hp[80], au[80], *path = NULL;

        assert_int_equal(bopt_parse_url("https://x/", hp, sizeof(hp), au, sizeof(au), &path), 1);
        assert_string_equal(hp, "x:443");
        free(path);
        path = NULL;
        assert_int_equal(bopt_parse_url("http://a:1/p", hp, 3, au, sizeof(au), &path), -EINVAL);
        assert_null(path);
        assert_int_equal(bopt_parse_url("http://a:1/p", hp, sizeof(hp), au, sizeof(au), &path), 0);
        assert_string_equal(hp, "a:1");
        assert_string_equal(path, "/p");
        free(path);
    }
}

/* The request lfbench makes without a request file, as sent. */
static const char *request_of(struct payloads *p)
{
    static char buf[128 * 1024];
    char perr[256];

    if (payload_load(p, &o, perr, sizeof(perr)) < 0)
        fail_msg("payload_load: %s", perr);
    assert_int_equal(p->n, 1);
    assert_true(p->cls[0].len < sizeof(buf));
    memcpy(buf, p->cls[0].data, p->cls[0].len);
    buf[p->cls[0].len] = '\0';
    return buf;
}

/* Issue 33 (B.10): wrk's -H "Name: value", repeatable, in lfbench's own GET; Host replaces the
 * default one; Connection: close makes each response a reconnect. Malformed, or without HTTP,
 * or beside a request that lfbench does not make: refused with one line. */
static void test_headers(void **state)
{
    static const struct {
        const char *h, *msg;
    } bad[] = {
        {"NoColon", "-H: 'NoColon' is not a header 'Name: value': it has no colon after the name"},
        {"Bad Name: x", "-H: 'Bad Name: x' is not a header 'Name: value': its name holds a byte "
                        "no field name has"},
        {"X-A : x", "its name holds a byte no field name has"},
        {": x", "its name is empty"},
        {"", "it does not start with a field name"},
        {" X: y", "it does not start with a field name"},
        {"X(y): z", "its name holds a byte no field name has"},
        {"X: a\r\nInjected: yes", "-H: 'X: a??Injected: yes' is not a header 'Name: value': its "
                                  "value holds a control byte"},
        {"X: a\nb", "its value holds a control byte"},
        {"X: \x7f", "its value holds a control byte"},
        {"Content-Length: 5", "-H: Content-Length frames a body, and lfbench's GET has none"},
        {"transfer-encoding: chunked", "-H: transfer-encoding frames a body"},
    };
    struct payloads p;
    const char *req;

    (void)state;
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++)
        expect_error(bad[k].msg, parse("-H", bad[k].h, "http://127.0.0.1:1/", NULL));

    assert_int_equal(parse("-H", "X-A: b", "--header", "X-Empty:", "--header=Accept:\t*/*",
                           "http://127.0.0.1:9876/p?q", NULL),
                     BOPT_RUN);
    assert_int_equal(o.nheaders, 3);
    req = request_of(&p);
    assert_string_equal(req, "GET /p?q HTTP/1.1\r\nHost: 127.0.0.1:9876\r\nX-A: b\r\nX-Empty:\r\n"
                             "Accept:\t*/*\r\n\r\n");
    assert_string_equal(p.cls[0].name, "GET /p?q");
    assert_false(p.cls[0].close);
    payload_free(&p);
    /* Host replaces the default, any case; the URL without a port: Host without one */
    assert_int_equal(parse("-H", "host: example.org", "http://127.0.0.1/", NULL), BOPT_RUN);
    assert_string_equal(request_of(&p), "GET / HTTP/1.1\r\nhost: example.org\r\n\r\n");
    payload_free(&p);
    assert_int_equal(parse("http://[::1]/", NULL), BOPT_RUN);
    assert_string_equal(request_of(&p), "GET / HTTP/1.1\r\nHost: [::1]\r\n\r\n");
    payload_free(&p);
    /* HOST:PORT with --expect http: Host the target as given, as before */
    assert_int_equal(parse("--expect", "http", "-H", "Connection: close", "localhost:7", NULL),
                     BOPT_RUN);
    assert_string_equal(request_of(&p),
                        "GET / HTTP/1.1\r\nHost: localhost:7\r\nConnection: close\r\n\r\n");
    assert_true(p.cls[0].close); /* the server closes after each: a reconnect, not an error */
    assert_string_equal(p.cls[0].name, "GET /");
    payload_free(&p);

    expect_error("-H adds a header to an HTTP request: give an http:// target or --expect http",
                 parse("-H", "X: y", "127.0.0.1:1", NULL));
    expect_error("-H adds a header to an HTTP request",
                 parse("-H", "X: y", "--expect", "line", "127.0.0.1:1", NULL));
    expect_error("-H adds headers to lfbench's own GET, and a --request, --payload or --mix file "
                 "holds its own: write them in the file",
                 parse("-H", "X: y", "--expect", "http", "--request", "r", "127.0.0.1:1", NULL));
    expect_error("-H adds headers to lfbench's own GET",
                 parse("-H", "X: y", "--payload", "r", "http://127.0.0.1:1/", NULL));
    expect_error("-H with --script: the script makes the requests, and lfbench does not give it "
                 "-H yet; set wrk.headers in the script",
                 parse("-H", "X: y", "--script", "s.lua", "http://127.0.0.1:1/", NULL));
    expect_error("-H needs a value", parse("-H", NULL));
    /* at most 64, and a head of at most 64 KiB */
    {
        static char *argv[200], big[2000];
        int argc = 0;
        FILE *out = fopen("/dev/null", "w");

        argv[argc++] = (char *)"lfbench";
        for (int k = 0; k < 65; k++) {
            argv[argc++] = (char *)"-H";
            argv[argc++] = (char *)"X: y";
        }
        argv[argc++] = (char *)"http://127.0.0.1:1/";
        bopt_free(&o);
        assert_int_equal(bopt_parse(&o, argc, argv, out, err, sizeof(err)), BOPT_ERROR);
        assert_non_null(strstr(err, "-H: at most 64 headers"));
        memset(big, 'v', sizeof(big) - 1);
        memcpy(big, "X: ", 3);
        argc = 1;
        for (int k = 0; k < 40; k++) {
            argv[argc++] = (char *)"-H";
            argv[argc++] = big;
        }
        argv[argc++] = (char *)"http://127.0.0.1:1/";
        bopt_free(&o);
        assert_int_equal(bopt_parse(&o, argc, argv, out, err, sizeof(err)), BOPT_ERROR);
        assert_non_null(strstr(err, "-H: the request's head would be about"));
        argc = 1;
        for (int k = 0; k < 30; k++) {
            argv[argc++] = (char *)"-H";
            argv[argc++] = big;
        }
        argv[argc++] = (char *)"http://127.0.0.1:1/";
        bopt_free(&o);
        assert_int_equal(bopt_parse(&o, argc, argv, out, err, sizeof(err)), BOPT_RUN);
        fclose(out);
        assert_true(strlen(request_of(&p)) > 30 * 2000);
        payload_free(&p);
    }
}

/* Issue 33 (B.10): wrk's --latency is taken (the summary has the percentiles anyway; with it
 * the distribution follows the summary). */
static void test_latency_flag(void **state)
{
    (void)state;
    assert_int_equal(parse("127.0.0.1:1", NULL), BOPT_RUN);
    assert_false(o.latency);
    assert_int_equal(parse("--latency", "http://127.0.0.1:1/", NULL), BOPT_RUN);
    assert_true(o.latency);
    expect_error("--latency takes no value", parse("--latency=yes", "127.0.0.1:1", NULL));
}

/* Issue 25: --version and --quiet are spelled as lfepolld spells them. */
static void test_version_quiet(void **state)
{
    char buf[64] = "";
    FILE *out = fmemopen(buf, sizeof(buf), "w");
    char *argv[] = {(char *)"lfbench", (char *)"--version", NULL};

    (void)state;
    assert_non_null(out);
    assert_int_equal(bopt_parse(&o, 2, argv, out, err, sizeof(err)), BOPT_EXIT);
    fclose(out);
    assert_string_equal(buf, "lfbench " LFE_VERSION "\n");
    assert_int_equal(parse("-V", NULL), BOPT_EXIT); /* no target needed */
    assert_int_equal(parse("--quiet", "127.0.0.1:1", NULL), BOPT_RUN);
    assert_true(o.quiet);
    assert_int_equal(parse("-q", "127.0.0.1:1", NULL), BOPT_RUN);
    assert_true(o.quiet);
    expect_error("--quiet takes no value", parse("--quiet=yes", "127.0.0.1:1", NULL));
}

/* Every row of the option table is an option the parser knows (a value-taking one asks for its
 * value by name, and a bad one is refused for what it is; a flag is taken), and a prefix of a long
 * name is not one: getopt_long would take "--conn" for --connect-rate, lfbench never did. */
static void test_table_is_the_parser(void **state)
{
    char want[96];

    (void)state;
    for (size_t k = 0; k < bopt_noptions; k++) {
        const struct bopt_option *op = &bopt_options[k];
        char lname[64], sname[4];

        if (!op->id)
            continue;
        snprintf(lname, sizeof(lname), "--%s", op->name ? op->name : "");
        snprintf(sname, sizeof(sname), "-%c", op->letter);
        for (int form = 0; form < 2; form++) {
            const char *arg = form ? sname : lname;
            enum bopt_result r;

            if ((form && !op->letter) || (!form && !op->name))
                continue;
            if (op->arg) {
                snprintf(want, sizeof(want), "%s needs a value", arg);
                expect_error(want, parse(arg, NULL));
                /* its row has a hook or a kind args_set applies to its field */
                if (parse(arg, "x", "127.0.0.1:1", NULL) == BOPT_ERROR && strstr(err, "unknown"))
                    fail_msg("%s x: %s", arg, err);
                continue;
            }
            /* a --tls-* flag is TLS's: it needs --tls */
            r = strncmp(arg, "--tls-", 6) ? parse(arg, "127.0.0.1:1", NULL)
                                          : parse("--tls", arg, "127.0.0.1:1", NULL);
            if (r == BOPT_ERROR)
                fail_msg("%s: %s", arg, err);
        }
    }
    expect_error("unknown option '--conn'", parse("--conn", "5", "127.0.0.1:1", NULL));
    expect_error("unknown option '--json-s'", parse("--json-s", "f", "127.0.0.1:1", NULL));
    expect_error("unknown option '--qui'", parse("--qui", "127.0.0.1:1", NULL));
    expect_error("unknown option '-x'", parse("-x", "127.0.0.1:1", NULL));
    expect_error("--linger0 takes no value (got '1')", parse("--linger0=1", "127.0.0.1:1", NULL));
    expect_error("--cpus needs a value", parse("--cpus", NULL));
    /* the target may come before options, and after "--" */
    assert_int_equal(parse("127.0.0.1:1", "-c", "7", NULL), BOPT_RUN);
    assert_int_equal(o.conns, 7);
    assert_int_equal(parse("-c", "8", "--", "127.0.0.1:2", NULL), BOPT_RUN);
    assert_int_equal(o.conns, 8);
    assert_string_equal(o.target, "127.0.0.1:2");
    assert_int_equal(parse("--expect", "bytes", "9", "127.0.0.1:1", "-c", "3", NULL), BOPT_RUN);
    assert_int_equal(o.expect_bytes, 9);
    assert_int_equal(o.conns, 3);
    assert_int_equal(parse("--timeout=2s", "127.0.0.1:1", NULL), BOPT_RUN);
    assert_int_equal(o.timeout_ms, 2000);
}

/* The escaped form a man page gives an option name: every '-' as "\-". */
static void man_escape(char *buf, size_t len, const char *prefix, const char *name)
{
    size_t n = 0;

    for (const char *s = prefix; *s && n + 3 < len; s++)
        buf[n++] = '\\', buf[n++] = *s;
    for (const char *s = name; *s && n + 3 < len; s++) {
        if (*s == '-')
            buf[n++] = '\\';
        buf[n++] = *s;
    }
    buf[n] = '\0';
}

/* Whether tok stands in line as a whole word: not followed by a letter, a digit, "-" or "\-". */
static bool has_token(const char *line, const char *tok)
{
    size_t len = strlen(tok);

    for (const char *p = line; (p = strstr(p, tok)); p++) {
        const char *e = p + len;
        if (!isalnum((unsigned char)*e) && *e != '-' && strncmp(e, "\\-", 2))
            return true;
    }
    return false;
}

/* Each option of --help stands apart from its words: a spec too long for its column goes on a
 * line of its own (--script-buffers-mb N ran into its text: "N--script: MiB lfbench"). */
static void test_help_keeps_each_option_apart(void **state)
{
    static char help[16 * 1024];
    FILE *out = fmemopen(help, sizeof(help) - 1, "w");
    char *argv[] = {(char *)"lfbench", (char *)"--help", NULL};

    (void)state;
    assert_non_null(out);
    assert_int_equal(bopt_parse(&o, 2, argv, out, err, sizeof(err)), BOPT_EXIT);
    fclose(out);
    for (size_t k = 0; k < bopt_noptions; k++) {
        const struct bopt_option *op = &bopt_options[k];
        char spec[96];
        const char *at;

        if (!op->name)
            continue;
        snprintf(spec, sizeof(spec), "--%s%s%s", op->name, op->arg ? " " : "",
                 op->arg ? op->arg : "");
        if (!(at = strstr(help, spec)))
            fail_msg("lfbench --help has no '%s'", spec);
        at += strlen(spec);
        if (*at != ' ' && *at != '\n')
            fail_msg("lfbench --help: '%s' runs into its words: '%.40s'", spec, at - strlen(spec));
    }
}

/* man/lfbench.1 and --help against the table: every option in it is documented in both, under
 * OPTIONS with a heading of its own, and every option a heading names is in the table. */
static void test_man_page_and_help_cover_the_table(void **state)
{
    static char man[64 * 1024], help[16 * 1024], heads[16 * 1024];
    FILE *f = fopen("man/lfbench.1", "r"), *out = fmemopen(help, sizeof(help) - 1, "w");
    char *argv[] = {(char *)"lfbench", (char *)"--help", NULL}, *line, *save = NULL;
    size_t n, hn = 0;
    bool in_options = false, after_tp = false;

    (void)state;
    if (!f)
        fail_msg("man/lfbench.1: %s (run from the top of the checkout)", strerror(errno));
    n = fread(man, 1, sizeof(man) - 1, f);
    fclose(f);
    man[n] = '\0';
    assert_non_null(out);
    assert_int_equal(bopt_parse(&o, 2, argv, out, err, sizeof(err)), BOPT_EXIT);
    fclose(out);
    /* the headings of the OPTIONS section: the line after each .TP */
    for (line = strtok_r(man, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (!strncmp(line, ".SH", 3))
            in_options = !strcmp(line, ".SH OPTIONS");
        else if (in_options && after_tp)
            hn += (size_t)snprintf(heads + hn, sizeof(heads) - hn, "%s\n", line);
        after_tp = !strcmp(line, ".TP");
        assert_true(hn < sizeof(heads));
    }
    assert_true(hn > 0);
    for (size_t k = 0; k < bopt_noptions; k++) {
        const struct bopt_option *op = &bopt_options[k];
        char tok[96], in_help[96];

        if (!op->id)
            continue;
        if (op->name) {
            man_escape(tok, sizeof(tok), "--", op->name);
            if (!has_token(heads, tok))
                fail_msg("lfbench(1) has no OPTIONS heading for --%s", op->name);
            snprintf(in_help, sizeof(in_help), "--%s", op->name);
            if (!has_token(help, in_help))
                fail_msg("lfbench --help does not list --%s", op->name);
        }
        if (op->letter) {
            snprintf(tok, sizeof(tok), "\\-%c", op->letter);
            if (!has_token(heads, tok))
                fail_msg("lfbench(1) has no OPTIONS heading for -%c", op->letter);
            snprintf(in_help, sizeof(in_help), "\n  -%c", op->letter);
            if (!strstr(help, in_help))
                fail_msg("lfbench --help does not list -%c", op->letter);
        }
    }
    /* and the other way: each option a heading names is one of the table's */
    for (const char *p = heads; (p = strstr(p, "\\-")); p++) {
        char name[64];
        size_t len = 0;
        bool dashdash = !strncmp(p, "\\-\\-", 4), found = false;
        const char *q = p + (dashdash ? 4 : 2);

        while (len + 1 < sizeof(name) && (isalnum((unsigned char)*q) || !strncmp(q, "\\-", 2))) {
            if (*q == '\\')
                q++;
            name[len++] = *q++;
        }
        name[len] = '\0';
        for (size_t k = 0; k < bopt_noptions && !found; k++) {
            const struct bopt_option *op = &bopt_options[k];
            found = op->id && (dashdash ? op->name && !strcmp(op->name, name)
                                        : op->letter && len == 1 && op->letter == name[0]);
        }
        if (!found)
            fail_msg("lfbench(1) documents %s%s, which lfbench does not take",
                     dashdash ? "--" : "-", name);
        p = q - 1;
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_every_flag),
        cmocka_unit_test(test_bad_values),
        cmocka_unit_test(test_sources),
        cmocka_unit_test(test_error_quoting_newline_is_one_line),
        cmocka_unit_test(test_run_options_bad),
        cmocka_unit_test(test_run_options_good),
        cmocka_unit_test(test_durations_with_units),
        cmocka_unit_test(test_timeout_bare_number_is_seconds),
        cmocka_unit_test(test_url_targets),
        cmocka_unit_test(test_tls_options),
        cmocka_unit_test(test_headers),
        cmocka_unit_test(test_latency_flag),
        cmocka_unit_test(test_version_quiet),
        cmocka_unit_test(test_table_is_the_parser),
        cmocka_unit_test(test_man_page_and_help_cover_the_table),
        cmocka_unit_test(test_help_keeps_each_option_apart),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);

    bopt_free(&o);
    return rc;
}
