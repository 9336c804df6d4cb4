/* Unit tests of opt: every flag, its default, and each bad value rejected with its message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CONF_BIG ((1 << 20) + 16)

#include "opt.h"

static char err[512];
static struct opt o;

/* Parses a NULL-terminated argument list (argv[0] is supplied). */
static enum opt_result parse(const char *first, ...)
{
    char *argv[64] = {(char *)"lfepolld"};
    int argc = 1;
    va_list ap;
    FILE *out = fopen("/dev/null", "w");
    enum opt_result r;

    va_start(ap, first);
    for (const char *a = first; a; a = va_arg(ap, const char *))
        argv[argc++] = (char *)a;
    va_end(ap);
    err[0] = '\0';
    r = opt_parse(&o, argc, argv, out, err, sizeof(err));
    fclose(out);
    return r;
}

static void expect_error(const char *needle, enum opt_result r)
{
    assert_int_equal(r, OPT_ERROR);
    if (!strstr(err, needle))
        fail_msg("error '%s' lacks '%s'", err, needle);
    assert_null(strchr(err, '\n')); /* one line */
}

static void test_defaults(void **state)
{
    (void)state;
    assert_int_equal(parse(NULL), OPT_RUN);
    assert_int_equal(o.nlisten, 1);
    assert_string_equal(o.listen[0], "127.0.0.1:9876");
    assert_int_equal(o.backlog, 65535);
    assert_int_equal(o.groups, 0);
    assert_int_equal(o.workers, 0);
    assert_false(o.have_cpus);
    assert_true(o.pin);
    assert_int_equal(o.max_conns, 0);
    assert_int_equal(o.max_pending, 1 << 20);
    assert_int_equal(o.drain_ms, 5000);
    assert_int_equal(o.proxy_ms, 5000); /* a PROXY header is never waited for without end */
    assert_int_equal(o.batch, 16);
    assert_int_equal(o.dispatch, DISPATCH_RR);
    assert_false(o.oneshot_always); /* --oneshot auto: groups of one level-triggered */
    assert_int_equal(o.verbosity, 1);
}

static void test_every_flag(void **state)
{
    (void)state;
    assert_int_equal(parse("--listen", "127.0.0.1:1", "--listen=[::1]:2", "--backlog", "128",
                           "--groups", "3", "--workers=2", "--cpus", "0,2-3", "--no-pin",
                           "--max-conns", "500", "--max-pending", "64K", "--drain-timeout", "250ms",
                           "--batch", "1", "--dispatch", "least", "-q", NULL),
                     OPT_RUN);
    assert_int_equal(o.nlisten, 2);
    assert_string_equal(o.listen[0], "127.0.0.1:1");
    assert_string_equal(o.listen[1], "[::1]:2");
    assert_int_equal(o.backlog, 128);
    assert_int_equal(o.groups, 3);
    assert_int_equal(o.workers, 2);
    assert_true(o.have_cpus);
    assert_int_equal(CPU_COUNT(&o.cpus), 3);
    assert_true(CPU_ISSET(0, &o.cpus) && CPU_ISSET(2, &o.cpus) && CPU_ISSET(3, &o.cpus));
    assert_false(o.pin);
    assert_int_equal(o.max_conns, 500);
    assert_int_equal(o.max_pending, 65536);
    assert_int_equal(o.drain_ms, 250);
    assert_int_equal(o.batch, 1);
    assert_int_equal(o.dispatch, DISPATCH_LEAST);
    assert_int_equal(o.verbosity, 0);
    assert_int_equal(
        parse("-v", "--dispatch", "rr", "--drain-timeout", "2.5", "--proxy-timeout", "750ms", NULL),
        OPT_RUN);
    assert_int_equal(o.proxy_ms, 750);
    assert_int_equal(o.verbosity, 2);
    assert_int_equal(o.dispatch, DISPATCH_RR);
    assert_int_equal(o.drain_ms, 2500);
    assert_int_equal(parse("--oneshot", "always", NULL), OPT_RUN);
    assert_true(o.oneshot_always);
    assert_int_equal(parse("--oneshot=always", "--oneshot", "auto", NULL), OPT_RUN);
    assert_false(o.oneshot_always); /* the last one given wins */
}

static void test_help_version(void **state)
{
    (void)state;
    assert_int_equal(parse("--help", NULL), OPT_EXIT);
    assert_int_equal(parse("-h", NULL), OPT_EXIT);
    assert_int_equal(parse("--version", NULL), OPT_EXIT);
}

static void test_bad_values(void **state)
{
    (void)state;
    expect_error("unknown option '--bogus'", parse("--bogus", NULL));
    expect_error("--dry-run goes with --apply-sysctl", parse("--dry-run", NULL));
    expect_error("--dry-run goes with --apply-sysctl", parse("--dry-run", "--check-sysctl", NULL));
    expect_error("--undo-sysctl puts back what --apply-sysctl set: give it alone",
                 parse("--undo-sysctl", "--apply-sysctl", NULL));
    expect_error("--undo-sysctl puts back", parse("--check-sysctl", "--undo-sysctl", NULL));
    expect_error("--undo-file goes with --apply-sysctl or --undo-sysctl",
                 parse("--undo-file", "/tmp/u", NULL));
    expect_error("unexpected argument 'extra'", parse("extra", NULL));
    expect_error("--groups needs a value", parse("--groups", NULL));
    expect_error("--no-pin takes no value", parse("--no-pin=1", NULL));
    expect_error("--groups: 'x' is not an integer from 1 to 1024", parse("--groups", "x", NULL));
    expect_error("--groups: '0'", parse("--groups", "0", NULL));
    expect_error("--workers: '2000'", parse("--workers", "2000", NULL));
    expect_error("--workers: '3x'", parse("--workers", "3x", NULL));
    expect_error("--backlog: '-1'", parse("--backlog", "-1", NULL));
    expect_error("--backlog: ''", parse("--backlog=", NULL));
    expect_error("--listen: '9876' is not HOST:PORT", parse("--listen", "9876", NULL));
    expect_error("--listen: 'localhost:99999'", parse("--listen", "localhost:99999", NULL));
    expect_error("--listen: '::1:80'", parse("--listen", "::1:80", NULL));
    expect_error("--listen: 'h:'", parse("--listen", "h:", NULL));
    expect_error("--cpus: 'a-b' is not a CPU list", parse("--cpus", "a-b", NULL));
    expect_error("--cpus: '3-1'", parse("--cpus", "3-1", NULL));
    expect_error("--cpus: '0,,1'", parse("--cpus", "0,,1", NULL));
    expect_error("--cpus: '5000'", parse("--cpus", "5000", NULL));
    expect_error("--max-conns: '0'", parse("--max-conns", "0", NULL));
    expect_error("--max-pending: '12'", parse("--max-pending", "12", NULL));
    expect_error("--max-pending: '2G'", parse("--max-pending", "2G", NULL));
    expect_error("--max-pending: '1Q'", parse("--max-pending", "1Q", NULL));
    expect_error("--drain-timeout: 'soon'", parse("--drain-timeout", "soon", NULL));
    expect_error("--drain-timeout: '25h' is not a duration of 0 to 86400s; write 5 (seconds)",
                 parse("--drain-timeout", "25h", NULL));
    expect_error("--drain-timeout: '-1'", parse("--drain-timeout", "-1", NULL));
    expect_error("--proxy-timeout: '0' is not a duration of 1ms to 86400s",
                 parse("--proxy-timeout", "0", NULL));
    expect_error("--tls-handshake-timeout: '0' is not a duration of 1ms to 86400s",
                 parse("--tls-handshake-timeout", "0", NULL));
    expect_error("--listen-tls: '9443' is not HOST:PORT", parse("--listen-tls", "9443", NULL));
    expect_error("--listen-tls needs --tls-cert FILE and --tls-key FILE (both missing)",
                 parse("--listen-tls", "127.0.0.1:0", NULL));
    expect_error("--listen-tls needs --tls-cert FILE and --tls-key FILE (--tls-key missing)",
                 parse("--listen-tls", "127.0.0.1:0", "--tls-cert", "c.pem", NULL));
    expect_error("--tls-key given without --listen-tls", parse("--tls-key", "k.pem", NULL));
#define TLS_ON "--listen-tls", "127.0.0.1:0", "--tls-cert", "c", "--tls-key", "k"
    expect_error("--tls-cert given 2 times and --tls-key 1: give each certificate its key",
                 parse(TLS_ON, "--tls-cert", "c2", NULL));
    expect_error("--tls-cert: at most 16 certificates",
                 parse(TLS_ON, "--tls-cert=1", "--tls-cert=2", "--tls-cert=3", "--tls-cert=4",
                       "--tls-cert=5", "--tls-cert=6", "--tls-cert=7", "--tls-cert=8",
                       "--tls-cert=9", "--tls-cert=10", "--tls-cert=11", "--tls-cert=12",
                       "--tls-cert=13", "--tls-cert=14", "--tls-cert=15", "--tls-cert=16", NULL));
    expect_error("--tls-key: give the path of a PEM file", parse(TLS_ON, "--tls-key=", NULL));
    expect_error("--tls-verify-client on needs --tls-client-ca FILE",
                 parse(TLS_ON, "--tls-verify-client", "on", NULL));
    expect_error("--tls-client-ca without --tls-verify-client",
                 parse(TLS_ON, "--tls-client-ca", "ca.pem", NULL));
    expect_error("--tls-verify-client: 'yes' is not a mode; use off, optional or on",
                 parse(TLS_ON, "--tls-verify-client", "yes", NULL));
    expect_error("--tls-min-version: '1.1' is not a TLS version; use 1.2 or 1.3",
                 parse(TLS_ON, "--tls-min-version", "1.1", NULL));
    expect_error("--tls-min-version 1.3 above --tls-max-version 1.2",
                 parse(TLS_ON, "--tls-min-version", "1.3", "--tls-max-version", "1.2", NULL));
    expect_error("--tls-tickets: 'no' is not a setting; use on or off",
                 parse(TLS_ON, "--tls-tickets", "no", NULL));
    expect_error("--tls-ticket-rotate: '0' is not a duration of 1s to 86400s",
                 parse(TLS_ON, "--tls-ticket-rotate", "0", NULL));
    expect_error("--tls-session-cache: '-1' is not an integer from 0 (off)",
                 parse(TLS_ON, "--tls-session-cache", "-1", NULL));
    expect_error("--tls-session-timeout: '500ms' is not a duration of 1s to 86400s",
                 parse(TLS_ON, "--tls-session-timeout", "500ms", NULL));
    expect_error("--tls-alpn given without --listen-tls", parse("--tls-alpn", "h2", NULL));
    expect_error("--tls-ciphers: give an OpenSSL cipher list",
                 parse(TLS_ON, "--tls-ciphers=", NULL));
#undef TLS_ON
    expect_error("--proxy-timeout: 'soon'", parse("--proxy-timeout", "soon", NULL));
    expect_error("--proxy-timeout: '2d'", parse("--proxy-timeout", "2d", NULL));
    expect_error("--batch: '0'", parse("--batch", "0", NULL));
    expect_error("--dispatch: 'random' is not a policy; use rr or least",
                 parse("--dispatch", "random", NULL));
    expect_error("--oneshot: 'never' is not a mode; use auto or always",
                 parse("--oneshot", "never", NULL));
    expect_error("--oneshot: 'Always' is not a mode; use auto or always",
                 parse("--oneshot", "Always", NULL));
    expect_error("--oneshot: '' is not a mode; use auto or always", parse("--oneshot=", NULL));
}

static void test_too_many_listen(void **state)
{
    const char *a[2 * OPT_MAX_LISTEN + 3] = {"lfepolld"};
    int n = 1;
    FILE *out = fopen("/dev/null", "w");

    (void)state;
    for (int i = 0; i <= OPT_MAX_LISTEN; i++) {
        a[n++] = "--listen";
        a[n++] = "127.0.0.1:0";
    }
    assert_int_equal(opt_parse(&o, n, (char **)a, out, err, sizeof(err)), OPT_ERROR);
    assert_non_null(strstr(err, "at most 16"));
    fclose(out);
}

static void test_sizes_durations(void **state)
{
    size_t sz;
    long ms;

    (void)state;
    assert_int_equal(args_size("1024", &sz), 0);
    assert_int_equal(sz, 1024);
    assert_int_equal(args_size("4k", &sz), 0);
    assert_int_equal(sz, 4096);
    assert_int_equal(args_size("2MiB", &sz), 0);
    assert_int_equal(sz, 2 << 20);
    assert_int_equal(args_size("1G", &sz), 0);
    assert_int_equal(sz, 1 << 30);
    assert_int_equal(args_size("", &sz), -EINVAL);
    assert_int_equal(args_size("k", &sz), -EINVAL);
    assert_int_equal(args_size("1kk", &sz), -EINVAL);
    assert_int_equal(args_size("99999999999999999999", &sz), -EINVAL);
    assert_int_equal(args_time_ms("5", &ms), 0);
    assert_int_equal(ms, 5000);
    assert_int_equal(args_time_ms("0.5s", &ms), 0);
    assert_int_equal(ms, 500);
    assert_int_equal(args_time_ms("20ms", &ms), 0);
    assert_int_equal(ms, 20);
    assert_int_equal(args_time_ms("0", &ms), 0);
    assert_int_equal(ms, 0);
    assert_int_equal(args_time_ms("1m", &ms), 0); /* issue 33: minutes and hours */
    assert_int_equal(ms, 60000);
    assert_int_equal(args_time_ms("1.5h", &ms), 0);
    assert_int_equal(ms, 5400000);
    assert_int_equal(args_time_ms("24h", &ms), 0);
    assert_int_equal(ms, 86400000);
    assert_int_equal(args_time_ms("25h", &ms), -EINVAL);
    assert_int_equal(args_time_ms("1d", &ms), -EINVAL);
    assert_int_equal(args_time_ms("1M", &ms), -EINVAL);
    assert_int_equal(args_time_ms("1min", &ms), -EINVAL);
    assert_int_equal(args_time_ms("1us", &ms), -EINVAL);
    assert_int_equal(args_time_ms("", &ms), -EINVAL);
}

/* Issue 33 (B.9): the TIME options take a bare number as seconds (as lfbench's do now), and
 * with a unit; the options named -ms keep a bare number in milliseconds, as their names say
 * (configs that set lua-timeout-ms = 1000 keep their meaning), and take a unit too. */
static void test_time_units(void **state)
{
    static const struct {
        const char *opt, *val;
        long ms;
    } good[] = {
        {"--idle-timeout", "300", 300000},
        {"--idle-timeout", "5m", 300000},
        {"--idle-timeout", "1h", 3600000},
        {"--proxy-timeout", "2", 2000},
        {"--drain-timeout", "0.5m", 30000},
        {"--lua-timeout-ms", "250", 250},
        {"--lua-timeout-ms", "2s", 2000},
        {"--lua-timeout-ms", "1.5s", 1500},
        {"--lua-timeout-ms", "0", 0},
        {"--lua-timeout-ms", "1m", 60000},
        {"--lua-timeout-ms", "1h", 3600000},
        {"--lua-timeout-ms", "0.6ms", 1},
        {"--lua-timeout-ms", "0.5ms", 1},
        {"--idle-timeout", "0.0005", 1},
        {"--idle-timeout", "0ms", 0},
        {"--lua-wall-timeout-ms", "0.0s", 0},
        {"--lua-wall-timeout-ms", "0s", 0},
        {"--lua-wall-timeout-ms", "10s", 10000},
        {"--lua-io-timeout-ms", "1", 1},
        {"--lua-io-timeout-ms", "500ms", 500},
        {"--lua-io-timeout-ms", "3600000", 3600000},
    };
    static const struct {
        const char *opt, *val, *msg;
    } bad[] = {
        {"--lua-timeout-ms", "1.5",
         "--lua-timeout-ms: '1.5' is not a whole number of milliseconds from 0 to 3600000, nor a "
         "time with a unit (2s, 250ms) up to 3600s"},
        {"--lua-timeout-ms", "2h", "--lua-timeout-ms: '2h' is not a whole number"},
        {"--lua-timeout-ms", "3600001", "--lua-timeout-ms: '3600001'"},
        {"--lua-timeout-ms", "-1", "--lua-timeout-ms: '-1'"},
        {"--lua-timeout-ms", "2x", "--lua-timeout-ms: '2x'"},
        {"--lua-timeout-ms", "s", "--lua-timeout-ms: 's'"},
        {"--lua-timeout-ms", "", "--lua-timeout-ms: ''"},
        {"--lua-io-timeout-ms", "0",
         "--lua-io-timeout-ms: '0' is not a whole number of "
         "milliseconds from 1 to 3600000, nor a time"},
        /* Regression: a time above 0 that rounds to 0 ms was taken as 0, which is "never"
         * for a timeout: --lua-timeout-ms 0.4ms or --idle-timeout 0.0001 turned it off */
        {"--lua-timeout-ms", "0.4ms",
         "--lua-timeout-ms: '0.4ms' is less than a millisecond, which would round to 0 (no "
         "timeout): give 1ms or more, or 0 for no timeout"},
        {"--lua-wall-timeout-ms", "0.0001s",
         "--lua-wall-timeout-ms: '0.0001s' is less than a millisecond"},
        {"--idle-timeout", "0.0001",
         "--idle-timeout: '0.0001' is less than a millisecond, which would round to 0 (never)"},
        {"--idle-timeout", "0.4ms", "--idle-timeout: '0.4ms' is less than a millisecond"},
        {"--drain-timeout", "0.1ms", "--drain-timeout: '0.1ms' is less than a millisecond"},
        {"--proxy-timeout", "0.2ms",
         "--proxy-timeout: '0.2ms' is less than a millisecond, which would round to 0: give 1ms "
         "or more"},
        {"--lua-io-timeout-ms", "0.4ms",
         "--lua-io-timeout-ms: '0.4ms' is less than a millisecond, which would round to 0: give "
         "1ms or more"},
        {"--lua-wall-timeout-ms", "soon",
         "--lua-wall-timeout-ms: 'soon' is not a whole number of "
         "milliseconds"},
        {"--idle-timeout", "2d",
         "--idle-timeout: '2d' is not a duration of 0 (never) to 86400s; "
         "write 300 (seconds)"},
        {"--proxy-timeout", "1 s",
         "--proxy-timeout: '1 s' is not a duration of 1ms to 86400s; "
         "write 5 (seconds)"},
    };

    (void)state;
    for (size_t k = 0; k < sizeof(good) / sizeof(good[0]); k++) {
        long got;

        if (parse(good[k].opt, good[k].val, NULL) != OPT_RUN)
            fail_msg("%s %s refused: %s", good[k].opt, good[k].val, err);
        got = !strcmp(good[k].opt, "--idle-timeout")          ? o.idle_ms
              : !strcmp(good[k].opt, "--proxy-timeout")       ? o.proxy_ms
              : !strcmp(good[k].opt, "--drain-timeout")       ? o.drain_ms
              : !strcmp(good[k].opt, "--lua-timeout-ms")      ? o.lua_timeout_ms
              : !strcmp(good[k].opt, "--lua-wall-timeout-ms") ? o.lua_wall_ms
                                                              : o.lua_io_ms;
        if (got != good[k].ms)
            fail_msg("%s %s: %ld ms, want %ld", good[k].opt, good[k].val, got, good[k].ms);
    }
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++)
        expect_error(bad[k].msg, parse(bad[k].opt, bad[k].val, NULL));
}

/* Found by fuzz_opt: an argument holding a newline or a terminal escape went into the error
 * verbatim, and the "one line" error printed as two. */
static void test_error_quoting_newline_is_one_line(void **state)
{
    (void)state;
    expect_error("unknown option '--li?sten'", parse("--li\nsten", NULL));
    expect_error("--listen: 'x??[31m'", parse("--listen", "x\n\x1b[31m", NULL));
    expect_error("takes no value (got 'a?b')", parse("--no-pin=a\rb", NULL));
}

/* Writes text (len bytes) to a fresh temporary file; returns its path (static). */
static const char *conf(const char *text, size_t len)
{
    static char path[64];
    FILE *f;

    snprintf(path, sizeof(path), "/tmp/lfe-opt-conf-%d", (int)getpid());
    f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    fclose(f);
    return path;
}
#define CONF(s) conf(s, sizeof(s) - 1)

static void test_config_file(void **state)
{
    const char *p;

    (void)state;
    p = CONF("# lfepolld.conf\n\nlisten = 127.0.0.1:1111\r\nworkers=3\n  backlog =  128  \n"
             "no-pin\nlua-unsafe = false\nadmin = 127.0.0.1:9877\n");
    assert_int_equal(parse("--config", p, NULL), OPT_RUN);
    assert_string_equal(o.listen[0], "127.0.0.1:1111");
    assert_int_equal(o.nlisten, 1);
    assert_false(o.listen_default);
    assert_int_equal(o.workers, 3);
    assert_int_equal(o.backlog, 128);
    assert_false(o.pin);
    assert_false(o.lua_unsafe);
    assert_string_equal(o.admin, "127.0.0.1:9877");
    assert_string_equal(o.config, p);
    /* the command line wins; its --listen replaces the file's */
    assert_int_equal(parse("--workers", "2",
                           "--config="
                           "/dev/null",
                           NULL),
                     OPT_ERROR);
    assert_int_equal(parse("--workers", "2", "--listen", "127.0.0.1:2222", "--config", p, NULL),
                     OPT_RUN);
    assert_int_equal(o.workers, 2);
    assert_int_equal(o.nlisten, 1);
    assert_string_equal(o.listen[0], "127.0.0.1:2222");
    assert_int_equal(o.backlog, 128);
    p = CONF("no-pin = true\nuser = nobody\n");
    assert_int_equal(parse("--config", p, NULL), OPT_RUN);
    assert_false(o.pin);
    assert_string_equal(o.user, "nobody");
}

static void test_config_file_errors(void **state)
{
    char big[CONF_BIG];
    const char *p;

    (void)state;
    p = CONF("workers = 2\n\nlisen = 127.0.0.1:1\n");
    expect_error(":3: unknown option '--lisen'; see lfepolld --help", parse("--config", p, NULL));
    assert_non_null(strstr(err, p));
    expect_error(":1: --backlog: 'x' is not an integer",
                 parse("--config", CONF("backlog = x\n"), NULL));
    expect_error(":2: 'no-pin' is a flag: write 'no-pin' or 'no-pin = true'",
                 parse("--config", CONF("# x\nno-pin = maybe\n"), NULL));
    expect_error(":1: 'config' cannot be set in a config file",
                 parse("--config", CONF("config = /etc/lfepolld.conf\n"), NULL));
    expect_error(":1: '--listen' is not an option name",
                 parse("--config", CONF("--listen = 127.0.0.1:1\n"), NULL));
    expect_error(":1: --listen needs a value", parse("--config", CONF("listen\n"), NULL));
    expect_error("holds a NUL byte", parse("--config", conf("workers = 2\n\0\n", 14), NULL));
    memset(big, 'a', sizeof(big));
    big[sizeof(big) - 1] = '\n';
    expect_error(":1: line longer than 4096 bytes", parse("--config", conf(big, 5000), NULL));
    expect_error("(a config file is at most 1 MiB)",
                 parse("--config", conf(big, sizeof(big)), NULL));
    expect_error("--config /tmp: not a regular file", parse("--config", "/tmp", NULL));
    expect_error("--config: cannot open /nonexistent/lfepolld.conf",
                 parse("--config", "/nonexistent/lfepolld.conf", NULL));
    expect_error("--config: give one config file, not two",
                 parse("--config", "/dev/null", "--config", "/dev/null", NULL));
    expect_error("--config: give the path of a config file", parse("--config=", NULL));
    expect_error("--user: give a user name", parse("--user", "", NULL));
    /* a newline in the file name cannot split the message */
    expect_error("cannot open", parse("--config", "/no/such\nfile", NULL));
    unlink(conf("", 0));
}

/* The option table is the one list: --help prints a line for each entry, and lfepolld(8) has
 * an item (.TP, then the name as --help spells it, with its value) for each entry and for no
 * other option. Run from the top of the tree (make test does). */
static void test_table_is_help_and_man_page(void **state)
{
    char *help = NULL, *man = NULL, *p;
    size_t hlen = 0, mlen = 0;
    FILE *f = open_memstream(&help, &hlen);
    int items = 0, n = 0;

    (void)state;
    assert_non_null(f);
    opt_usage(f);
    fclose(f);
    f = fopen("man/lfepolld.8", "r");
    if (!f)
        fail_msg("man/lfepolld.8: %s (run from the top of the tree)", strerror(errno));
    man = malloc(1 << 20);
    assert_non_null(man);
    mlen = fread(man, 1, (1 << 20) - 1, f);
    man[mlen] = '\0';
    fclose(f);
    for (const struct opt_def *d = opt_defs; d->name; d++, n++) {
        char line[160], esc[80], item[200];
        size_t k = 0;

        for (const char *c = d->name; *c && k + 2 < sizeof(esc); c++) {
            if (*c == '-')
                esc[k++] = '\\';
            esc[k++] = *c;
        }
        esc[k] = '\0';
        if (d->letter) {
            snprintf(line, sizeof(line), "\n  -%c, %s ", d->letter, d->name);
            snprintf(item, sizeof(item), "\n.TP\n.BR \\-%c \", \" %s\n", d->letter, esc);
        } else if (d->value) {
            snprintf(line, sizeof(line), "\n  %s %s ", d->name, d->value);
            snprintf(item, sizeof(item), " %s \" %s\"\n", esc, d->value);
        } else {
            snprintf(line, sizeof(line), "\n  %s ", d->name);
            snprintf(item, sizeof(item), "\n.TP\n.B %s\n", esc);
        }
        if (!strstr(help, line))
            fail_msg("--help has no line for %s", d->name);
        if (d->value && !d->letter) { /* .BI or .BR, right after a .TP */
            char bi[220], br[220];

            snprintf(bi, sizeof(bi), "\n.TP\n.BI%s", item);
            snprintf(br, sizeof(br), "\n.TP\n.BR%s", item);
            if (!strstr(man, bi) && !strstr(man, br))
                fail_msg("lfepolld(8) has no item for %s %s", d->name, d->value);
        } else if (!strstr(man, item)) {
            fail_msg("lfepolld(8) has no item for %s", d->name);
        }
    }
    /* ...and no item for an option the table does not have */
    for (p = man; (p = strstr(p, "\n.TP\n.B")); p += 5) {
        const char *q = strchr(p + 5, ' ');

        if (q && q[1] == '\\' && q[2] == '-')
            items++;
    }
    assert_int_equal(items, n);
    free(man);
    free(help);
}

/* Every row of the table is applied: its name, with a value when it takes one, parses or is
 * refused for its value, never because the row has neither a hook nor a kind that args_set
 * applies to its field (a kind stored in a field of another size). */
static void test_every_option_is_handled(void **state)
{
    (void)state;
    for (const struct opt_def *d = opt_defs; d->name; d++) {
        enum opt_result r = d->value ? parse(d->name, "x", NULL) : parse(d->name, NULL);

        if (r == OPT_ERROR && strstr(err, "does not handle"))
            fail_msg("%s: %s", d->name, err);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_every_flag),
        cmocka_unit_test(test_help_version),
        cmocka_unit_test(test_bad_values),
        cmocka_unit_test(test_too_many_listen),
        cmocka_unit_test(test_sizes_durations),
        cmocka_unit_test(test_time_units),
        cmocka_unit_test(test_error_quoting_newline_is_one_line),
        cmocka_unit_test(test_config_file),
        cmocka_unit_test(test_config_file_errors),
        cmocka_unit_test(test_table_is_help_and_man_page),
        cmocka_unit_test(test_every_option_is_handled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
