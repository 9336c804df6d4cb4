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
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
