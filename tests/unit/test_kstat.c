/* Unit tests of kstat: the /proc/net parsers on fixture files (a real 6.18 kernel's, and the same
 * with known counters moved), deltas, and the hints. Run from the repository root. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kstat.h"
#include "tune.h"

#define BEFORE "tests/fixtures/proc-net"
#define AFTER "tests/fixtures/proc-net-after"
#define SYSCTL "tests/fixtures/proc-sys" /* somaxconn 4096, tw_buckets 262144, ... */
/* a host tuned as sysctl.conf says: somaxconn 65535, the port range 1024-65535, ... */
#define TUNED "tests/fixtures/proc-sys-tuned"

static void test_read_fixture(void **state)
{
    struct kstat k;

    (void)state;
    assert_int_equal(kstat_read(BEFORE, &k), KS_N);
    for (int i = 0; i < KS_N; i++)
        if (!k.have[i])
            fail_msg("%s not found in the fixture", kstat_name[i]);
    /* values from the fixture files, read by eye */
    assert_int_equal(k.v[KS_TW_RECYCLED], 67319);
    assert_int_equal(k.v[KS_ACTIVE_OPENS], 892218);
    assert_int_equal(k.v[KS_PASSIVE_OPENS], 892061);
    assert_int_equal(k.v[KS_RETRANS_SEGS], 4154);
    assert_int_equal(k.v[KS_ESTAB_RESETS], 13848);
    assert_int_equal(k.v[KS_SOFTNET_SQUEEZED], 7 + 10); /* hex 7 and a, two CPUs */
    assert_int_equal(k.v[KS_TCP_INUSE], 1);
}

static void test_delta(void **state)
{
    struct kstat a, b, d;

    (void)state;
    kstat_read(BEFORE, &a);
    kstat_read(AFTER, &b);
    kstat_delta(&a, &b, &d);
    assert_int_equal(d.v[KS_LISTEN_OVERFLOWS], 120);
    assert_int_equal(d.v[KS_LISTEN_DROPS], 125);
    assert_int_equal(d.v[KS_SYNCOOKIES_SENT], 7);
    assert_int_equal(d.v[KS_TW_OVERFLOW], 3);
    assert_int_equal(d.v[KS_TW_RECYCLED], 28000);
    assert_int_equal(d.v[KS_ABORT_ON_DATA], 0);
    assert_int_equal(d.v[KS_ACTIVE_OPENS], 30000);
    assert_int_equal(d.v[KS_PASSIVE_OPENS], 29990);
    assert_int_equal(d.v[KS_RETRANS_SEGS], 42);
    assert_int_equal(d.v[KS_ESTAB_RESETS], 5);
    assert_int_equal(d.v[KS_SOFTNET_DROPPED], 32); /* 0x10 on each of two CPUs */
    assert_int_equal(d.v[KS_SOFTNET_SQUEEZED], 2);
    assert_int_equal(d.v[KS_TCP_TW], 27123); /* a level: the value after */
    /* a counter that went backwards (a reset namespace) reads 0, not 2^64 - x */
    kstat_delta(&b, &a, &d);
    assert_int_equal(d.v[KS_TW_RECYCLED], 0);
}

static void test_parse_edges(void **state)
{
    struct kstat k;

    (void)state;
    memset(&k, 0, sizeof(k));
    /* the names line without its values line: nothing, no crash */
    assert_int_equal(kstat_parse_pairs("TcpExt: ListenOverflows ListenDrops\n", "TcpExt", &k), 0);
    assert_int_equal(
        kstat_parse_pairs("TcpExt: ListenOverflows ListenDrops\nTcpExt: 5 6\n", "TcpExt", &k), 2);
    assert_int_equal(k.v[KS_LISTEN_OVERFLOWS], 5);
    assert_int_equal(k.v[KS_LISTEN_DROPS], 6);
    /* "Tcp" must not match "TcpExt" lines */
    memset(&k, 0, sizeof(k));
    assert_int_equal(kstat_parse_pairs("TcpExt: ActiveOpens\nTcpExt: 9\n", "Tcp", &k), 0);
    assert_int_equal(kstat_parse_sockstat("TCP: inuse 3 orphan 0 tw 12 alloc 4 mem 1\n", &k), 2);
    assert_int_equal(k.v[KS_TCP_TW], 12);
    assert_int_equal(kstat_parse_sockstat("sockets: used 1\n", &k), 0);
    assert_int_equal(kstat_parse_softnet("", &k), 0);
}

/* Found by fuzz_kstat: strtoul skips a '\n' like a blank, so an empty line in softnet_stat
 * made the next CPU count twice, and a value that was only blanks took the next line's number. */
static void test_parse_numbers_stay_on_their_line(void **state)
{
    struct kstat k;

    (void)state;
    memset(&k, 0, sizeof(k));
    assert_int_equal(kstat_parse_softnet("\n00000001 00000002 00000003\n", &k), 2);
    assert_int_equal(k.v[KS_SOFTNET_DROPPED], 2);
    assert_int_equal(k.v[KS_SOFTNET_SQUEEZED], 3);
    memset(&k, 0, sizeof(k));
    assert_int_equal(kstat_parse_softnet("00000001\n00000002 00000003 00000004\n", &k), 2);
    assert_int_equal(k.v[KS_SOFTNET_DROPPED], 3); /* the short line is not a CPU */
    memset(&k, 0, sizeof(k));
    kstat_parse_pairs("TcpExt: ListenOverflows ListenDrops\nTcpExt: 5 \t\n77\n", "TcpExt", &k);
    assert_int_equal(k.v[KS_LISTEN_OVERFLOWS], 5);
    assert_int_equal(k.v[KS_LISTEN_DROPS], 0);
}

static char *hints(const struct kstat *d, const struct kstat_run *r, bool json, int *n)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    *n = kstat_hints(f, d, r, json);
    fclose(f);
    return text;
}

static void test_hints(void **state)
{
    struct kstat d = {0};
    struct kstat_run r = {0};
    char *t;
    int n;

    (void)state;
    t = hints(&d, &r, false, &n);
    assert_int_equal(n, 0);
    assert_string_equal(t, "hint         none: no kernel queue overflowed and no port ran out\n");
    free(t);
    d.v[KS_LISTEN_OVERFLOWS] = 17;
    d.v[KS_LISTEN_DROPS] = 17;
    r.addrnotavail = 3;
    t = hints(&d, &r, false, &n);
    assert_int_equal(n, 2);
    assert_non_null(strstr(t, "hint         the accept queue overflowed 17 times"));
    assert_non_null(strstr(t, "small backlog (lfepolld --backlog); raise net.core.somaxconn"));
    assert_non_null(strstr(t, "no free ephemeral port 3 times (EADDRNOTAVAIL)"));
    free(t);
    /* resets: a surprise without --linger0, expected with it */
    memset(&d, 0, sizeof(d));
    memset(&r, 0, sizeof(r));
    d.v[KS_ESTAB_RESETS] = 4;
    d.v[KS_ABORT_ON_DATA] = 4;
    t = hints(&d, &r, false, &n);
    assert_non_null(strstr(t, "4 established connections were reset"));
    assert_null(strstr(t, "--linger0"));
    free(t);
    /* short mode: data after lfbench's close is what the run could not check itself */
    r.short_mode = true;
    t = hints(&d, &r, false, &n);
    assert_non_null(strstr(t, "4 connections were reset for data that came after their close"));
    free(t);
    r.linger0 = true;
    t = hints(&d, &r, true, &n);
    assert_int_equal(n, 1);
    assert_string_equal(t, "[\"4 closes sent a reset (TCPAbortOnData): what --linger0 does; the "
                           "server sees ECONNRESET where it expected an end of file\"]");
    free(t);
}

/* The status word of key's row in a --check-sysctl report: the word before its scope. */
static void row_status(const char *report, const char *key, char *st, size_t len)
{
    for (const char *p = report; (p = strstr(p, key)); p++) {
        const char *nl = strchr(p, '\n');
        char line[256], *scope, *end;

        if ((p != report && p[-1] != '\n') || p[strlen(key)] != ' ')
            continue;
        snprintf(line, sizeof(line), "%.*s", (int)(nl ? nl - p : (long)strlen(p)), p);
        scope = strstr(line, " netns");
        if (!scope)
            scope = strstr(line, " host");
        assert_non_null(scope);
        while (scope > line && scope[-1] == ' ')
            scope--;
        *scope = '\0';
        end = strrchr(line, ' ');
        assert_non_null(end);
        snprintf(st, len, "%s", end + 1);
        return;
    }
    fail_msg("no row for %s in:\n%s", key, report);
}

/* test_hints_agree_with_check_sysctl: a hint that names a sysctl gives the verdict
 * --check-sysctl prints for it from the same tree. The hint said "tcp_max_tw_buckets is too
 * low; raise it" where the checker called the key ok. */
static void test_hints_agree_with_check_sysctl(void **state)
{
    static const char *const keys[] = {"net.core.somaxconn", "net.ipv4.tcp_max_tw_buckets",
                                       "net.core.netdev_max_backlog",
                                       "net.ipv4.ip_local_port_range"};
    struct tune_ctx ctx = {.root = SYSCTL, .backlog = 65535, .port = 9876};
    struct kstat a, b, d;
    struct kstat_run r = {.addrnotavail = 2, .short_mode = true, .sysctl_root = SYSCTL};
    char err[256] = "", *rep = NULL, *t, st[32], want[256];
    size_t len = 0;
    FILE *f = open_memstream(&rep, &len);
    int n;

    (void)state;
    tune_report(f, tune_default_conf, &ctx, err, sizeof(err));
    fclose(f);
    kstat_read(BEFORE, &a);
    kstat_read(AFTER, &b);
    kstat_delta(&a, &b, &d); /* overflows, cookies, TIME_WAIT overflow, softnet drops, recycled */
    t = hints(&d, &r, false, &n);
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        struct tune_verdict v;
        row_status(rep, keys[i], st, sizeof(st));
        assert_int_equal(tune_judge(tune_default_conf, SYSCTL, keys[i], &v), 0);
        snprintf(want, sizeof(want), "%s is %s, which lfepolld --check-sysctl calls %s (", keys[i],
                 v.cur, st);
        if (!strstr(t, want))
            fail_msg("the hints do not say \"%s\" as the report does:\n%s\n%s", want, t, rep);
    }
    /* the key of the old contradiction: ok in both, so the hint does not call it too low */
    row_status(rep, "net.ipv4.tcp_max_tw_buckets", st, sizeof(st));
    assert_string_equal(st, "ok");
    assert_null(strstr(t, "too low"));
    assert_non_null(strstr(t, "calls ok (>= 65536), and was still not enough for this run"));
    free(t);
    free(rep);
}

/* test_hint_no_source_when_given: with --source given, no hint tells the user to use it. */
static void test_hint_no_source_when_given(void **state)
{
    struct kstat d = {0};
    struct kstat_run r = {.addrnotavail = 5, .short_mode = true};
    char *t;
    int n;

    (void)state;
    d.v[KS_TW_RECYCLED] = 1000;
    t = hints(&d, &r, false, &n);
    assert_int_equal(n, 2);
    assert_non_null(strstr(t, "spread over source addresses (--source)"));
    free(t);
    r.nsources = 3;
    t = hints(&d, &r, true, &n);
    assert_int_equal(n, 2);
    assert_null(strstr(t, "(--source)"));
    assert_null(strstr(t, "use --source"));
    assert_non_null(strstr(t, "add source addresses to the 3 --source gave"));
    free(t);
}

/* test_hint_ports_only_when_limited: the port range's hint (TWRecycled, short mode) only where
 * the ports limited the run: connect() found none, or the connections came at half the range's
 * ceiling or more. At 5,000 connections/s against a ceiling of 64,512/s it said to widen a range
 * already at 1024-65535, "past that". */
static void test_hint_ports_only_when_limited(void **state)
{
    struct kstat d = {0};
    struct kstat_run r = {
        .short_mode = true, .sysctl_root = TUNED, .connects = 25000, .wall_s = 5, .loopback = true};
    char *t;
    int n;

    (void)state;
    d.v[KS_TW_RECYCLED] = 4595;
    d.v[KS_ACTIVE_OPENS] = d.v[KS_PASSIVE_OPENS] = 25000;
    d.have[KS_ACTIVE_OPENS] = d.have[KS_PASSIVE_OPENS] = true;
    t = hints(&d, &r, false, &n); /* 5,000/s of 64,512/s: not the limit */
    assert_int_equal(n, 0);
    assert_string_equal(t, "hint         none: no kernel queue overflowed and no port ran out\n");
    free(t);
    r.connects = 200000; /* 40,000/s: the ports limit, and the range is as wide as it goes */
    d.v[KS_ACTIVE_OPENS] = d.v[KS_PASSIVE_OPENS] = 200000;
    t = hints(&d, &r, false, &n);
    assert_int_equal(n, 1);
    assert_non_null(strstr(t, "4595 connect()s took over a TIME_WAIT port"));
    assert_non_null(strstr(t, "net.ipv4.ip_local_port_range is 1024 65535, already as wide as "
                              "it goes (1024-65535): more ports come only from more source "
                              "addresses; spread over source addresses (--source)"));
    assert_null(strstr(t, "widen"));
    assert_null(strstr(t, "past that"));
    assert_null(strstr(t, "sysctl -w"));
    free(t);
    /* to another host tcp_tw_reuse 2 reuses nothing: 64,512 / 60 s, so 5,000/s is past it */
    r.connects = 25000;
    d.v[KS_ACTIVE_OPENS] = d.v[KS_PASSIVE_OPENS] = 25000;
    r.loopback = false;
    t = hints(&d, &r, false, &n);
    assert_int_equal(n, 1);
    free(t);
    /* with --source, each address has its own range: 3 of them take 3 times the rate */
    r.loopback = true;
    r.connects = 200000;
    d.v[KS_ACTIVE_OPENS] = d.v[KS_PASSIVE_OPENS] = 200000;
    r.nsources = 3;
    t = hints(&d, &r, false, &n);
    assert_int_equal(n, 0);
    free(t);
    /* a stock range (32768-60999: 28,232/s on loopback) at 20,000/s: widen it, saying how */
    r.nsources = 0;
    r.connects = 100000;
    d.v[KS_ACTIVE_OPENS] = d.v[KS_PASSIVE_OPENS] = 100000;
    r.sysctl_root = SYSCTL;
    t = hints(&d, &r, false, &n);
    assert_int_equal(n, 1);
    assert_non_null(strstr(t, "net.ipv4.ip_local_port_range is 32768 60999, which lfepolld "
                              "--check-sysctl calls low (covers 1024-65535): widen it (sudo "
                              "sysctl -w net.ipv4.ip_local_port_range=\"1024 65535\")"));
    free(t);
    /* ... and not at 5,000/s, whatever TWRecycled says */
    r.connects = 25000;
    d.v[KS_ACTIVE_OPENS] = d.v[KS_PASSIVE_OPENS] = 25000;
    t = hints(&d, &r, false, &n);
    assert_int_equal(n, 0);
    free(t);
    /* no port found (EADDRNOTAVAIL) is the limit reached, whatever the rate */
    r.addrnotavail = 9;
    r.sysctl_root = TUNED;
    t = hints(&d, &r, false, &n);
    assert_int_equal(n, 2);
    assert_non_null(strstr(t, "no free ephemeral port 9 times (EADDRNOTAVAIL): "
                              "net.ipv4.ip_local_port_range is 1024 65535, already as wide"));
    assert_null(strstr(t, "widen"));
    free(t);
}

/* test_hint_never_proposes_what_is_set: on a host tuned as sysctl.conf says, an accept queue that
 * overflowed is the server's (its backlog, its accept rate), not somaxconn's: no "raise" of a key
 * the checker calls ok where going further gives nothing, no command that sets what is there. */
static void test_hint_never_proposes_what_is_set(void **state)
{
    struct kstat d = {0};
    struct kstat_run r = {.sysctl_root = TUNED, .connects = 100, .wall_s = 5, .root = true};
    char *t;
    int n;

    (void)state;
    d.v[KS_LISTEN_OVERFLOWS] = d.v[KS_LISTEN_DROPS] = 116;
    d.v[KS_SYNCOOKIES_SENT] = 3;
    t = hints(&d, &r, false, &n);
    assert_int_equal(n, 2);
    assert_non_null(strstr(t, "net.core.somaxconn is 65535, which lfepolld --check-sysctl calls "
                              "ok (>= 65535): not the limit here: the server's own backlog "
                              "(lfepolld --backlog) or how fast it accepts is"));
    assert_null(strstr(t, "raise net.core.somaxconn"));
    assert_null(strstr(t, "raise it"));
    assert_null(strstr(t, "sysctl -w"));
    free(t);
    /* the same counters on a stock host: raise it, with the command, bare for root */
    r.sysctl_root = SYSCTL;
    t = hints(&d, &r, false, &n);
    assert_non_null(strstr(t, "net.core.somaxconn is 4096, which lfepolld --check-sysctl calls "
                              "low (>= 65535): raise it (sysctl -w net.core.somaxconn=65535)"));
    assert_null(strstr(t, "sudo"));
    free(t);
    /* ... and with sudo for anyone else */
    r.root = false;
    t = hints(&d, &r, true, &n);
    assert_non_null(strstr(t, "raise it (sudo sysctl -w net.core.somaxconn=65535)"));
    free(t);
    /* drops at a listener without an overflow are no queue limit: nothing to raise */
    memset(&d, 0, sizeof(d));
    d.v[KS_LISTEN_DROPS] = 4;
    t = hints(&d, &r, false, &n);
    assert_int_equal(n, 1);
    assert_non_null(strstr(t, "4 SYNs or handshakes were dropped at a listener without an accept "
                              "queue overflow (ListenDrops)"));
    assert_null(strstr(t, "somaxconn"));
    free(t);
}

/* test_hint_other_traffic: a namespace whose ActiveOpens (or PassiveOpens) moved far past
 * lfbench's own connect() calls carried other traffic: one line says so, instead of a hint about
 * this server. With 100 connections, ListenOverflows +116 and ActiveOpens +3425 (another test's
 * traffic) blamed the server's accept rate and somaxconn. */
static void test_hint_other_traffic(void **state)
{
    struct kstat d = {0};
    struct kstat_run r = {.sysctl_root = SYSCTL, .connects = 100, .wall_s = 5};
    char *t;
    int n;

    (void)state;
    d.v[KS_LISTEN_OVERFLOWS] = d.v[KS_LISTEN_DROPS] = 116;
    d.v[KS_RETRANS_SEGS] = 40;
    d.v[KS_ACTIVE_OPENS] = 3425;
    d.v[KS_PASSIVE_OPENS] = 3420;
    d.have[KS_ACTIVE_OPENS] = d.have[KS_PASSIVE_OPENS] = true;
    t = hints(&d, &r, false, &n);
    assert_int_equal(n, 1);
    assert_string_equal(t, "hint         the namespace's counters moved far more than this run "
                           "explains (ActiveOpens +3425, PassiveOpens +3420 for lfbench's 100 "
                           "connect() calls): other traffic in this network namespace moved "
                           "them, so they say nothing sure about this server; for hints, run "
                           "where lfbench and the server have the namespace to themselves\n");
    free(t);
    /* connections accepted from elsewhere count too */
    d.v[KS_ACTIVE_OPENS] = 100;
    t = hints(&d, &r, true, &n);
    assert_int_equal(n, 1);
    assert_non_null(strstr(t, "other traffic in this network namespace"));
    free(t);
    /* lfbench's own errors are its own still */
    r.addrnotavail = 2;
    t = hints(&d, &r, false, &n);
    assert_int_equal(n, 2);
    assert_non_null(strstr(t, "no free ephemeral port 2 times"));
    assert_null(strstr(t, "accept queue"));
    free(t);
    /* what lfbench explains (a proxying server: one connection out per one in) gets its hints */
    r.addrnotavail = 0;
    d.v[KS_ACTIVE_OPENS] = d.v[KS_PASSIVE_OPENS] = 200;
    t = hints(&d, &r, false, &n);
    assert_int_equal(n, 2);
    assert_non_null(strstr(t, "the accept queue overflowed 116 times"));
    assert_null(strstr(t, "other traffic"));
    free(t);
    /* a result read back without the calls: no judgement either way */
    r.connects = 0;
    d.v[KS_ACTIVE_OPENS] = 1000000;
    t = hints(&d, &r, false, &n);
    assert_int_equal(n, 2);
    assert_null(strstr(t, "other traffic"));
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_fixture),
        cmocka_unit_test(test_delta),
        cmocka_unit_test(test_parse_edges),
        cmocka_unit_test(test_parse_numbers_stay_on_their_line),
        cmocka_unit_test(test_hints),
        cmocka_unit_test(test_hints_agree_with_check_sysctl),
        cmocka_unit_test(test_hint_no_source_when_given),
        cmocka_unit_test(test_hint_ports_only_when_limited),
        cmocka_unit_test(test_hint_never_proposes_what_is_set),
        cmocka_unit_test(test_hint_other_traffic),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
