/* Unit tests of btune's command line: lfbench tune's options, --set's values, the names it
 * takes for sysctl keys, the host-wide keys it knows by name, and the words of each refusal. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btune.h"

static struct btune_opt o;
static char err[1024];

/* btune_parse on the words of line (at most 32), "tune" first. */
static int parse(const char *line)
{
    static char buf[2048], *argv[34];
    int argc = 0;

    snprintf(buf, sizeof(buf), "tune %s", line);
    for (char *save = NULL, *w = strtok_r(buf, " ", &save); w && argc < 33;
         w = strtok_r(NULL, " ", &save))
        argv[argc++] = w;
    argv[argc] = NULL;
    err[0] = 0;
    FILE *null = fopen("/dev/null", "w");
    int rc = btune_parse(argc, argv, &o, null, err, sizeof(err));
    fclose(null);
    return rc;
}

static void test_defaults_and_values(void **state)
{
    (void)state;
    assert_int_equal(parse("--set net.ipv4.tcp_tw_reuse=0,2 -- --mode short -c 50"), 0);
    assert_int_equal(o.nset, 1);
    assert_string_equal(o.set[0].key, "net.ipv4.tcp_tw_reuse");
    assert_int_equal(o.set[0].nvals, 2);
    assert_string_equal(o.set[0].vals[0], "0");
    assert_string_equal(o.set[0].vals[1], "2");
    assert_int_equal(o.rounds, 6); /* the fewest for a 95% interval */
    assert_true(o.round_s == 5 && o.port == 9876 && o.metric == BTUNE_RATE);
    assert_true(o.alpha > 0.0499 && o.alpha < 0.0501);
    assert_int_equal(o.nload, 4);
    assert_string_equal(o.load[0], "--mode");
    assert_null(o.conf);

    assert_int_equal(parse("--set net.core.somaxconn=default,65535 --set net.ipv4.tcp_fastopen=1,3 "
                           "--rounds 8 --round-seconds 2.5s --confidence 0.99 --metric p99 "
                           "--port 7000 --json x.json -q -- -c 4"),
                     0);
    assert_int_equal(o.nset, 2);
    assert_string_equal(o.set[0].vals[0], "default");
    assert_true(o.rounds == 8 && o.round_s == 2.5 && o.port == 7000 && o.quiet);
    assert_true(o.alpha > 0.0099 && o.alpha < 0.0101 && o.metric == BTUNE_P99);
    assert_string_equal(o.json, "x.json");

    assert_false(o.host || o.force);
    assert_null(o.write_sysctl);
    assert_string_equal(o.restore_file, "/run/lfepoll/sysctl-restore");

    assert_int_equal(parse("--host --restore-file r.txt --write-sysctl out.conf --force "
                           "--set net.core.netdev_max_backlog=default,16384 -- -c 2"),
                     0);
    assert_true(o.host && o.force);
    assert_string_equal(o.restore_file, "r.txt");
    assert_string_equal(o.write_sysctl, "out.conf");

    /* a key of one value is held there in every variant, beside one that varies */
    assert_int_equal(parse("--set net.ipv4.tcp_tw_reuse=0 --set net.ipv4.tcp_fin_timeout=60,5 "
                           "-- --mode short"),
                     0);
    assert_true(o.nset == 2 && o.set[0].nvals == 1 && o.set[1].nvals == 2);

    assert_int_equal(parse("--sysctl-conf sysctl.conf -- --mode short"), 0);
    assert_string_equal(o.conf, "sysctl.conf");
    assert_int_equal(parse("--help"), 1);
}

/* Each bad command line: refused with one line that names what is wrong. */
static void test_bad_input(void **state)
{
    static const struct {
        const char *line, *words;
    } bad[] = {
        {"--set net.ipv4.tcp_tw_reuse=0 -- -c 1", "holds one value in every variant"},
        {"--set a.b=0 --set c.d=1 -- -c 1", "nothing is compared"},
        {"--set net.ipv4.tcp_tw_reuse= -- -c 1", "has no value"},
        {"--set net.ipv4.tcp_tw_reuse -- -c 1", "write KEY=V1,V2"},
        {"--set =0,1 -- -c 1", "write KEY=V1,V2"},
        {"--set net/../x=0,1 -- -c 1", "is not a sysctl name"},
        {"--set net..x=0,1 -- -c 1", "is not a sysctl name"},
        {"--set a.b=0,1 --set a.b=1,2 -- -c 1", "given twice"},
        {"--set a.b=0,1 --sysctl-conf f -- -c 1", "give one of them"},
        {"--set a.b=0,1 --rounds 0 -- -c 1", "--rounds: '0'"},
        {"--set a.b=0,1 --rounds 101 -- -c 1", "--rounds: '101'"},
        {"--set a.b=0,1 --round-seconds 0.5 -- -c 1", "--round-seconds"},
        {"--set a.b=0,1 --confidence 1 -- -c 1", "--confidence"},
        {"--set a.b=0,1 --metric qps -- -c 1", "--metric: 'qps'"},
        {"--set a.b=0,1 --port 0 -- -c 1", "--port: '0'"},
        {"--set a.b=0,1 --server x --server-args y -- -c 1", "--server-args is for lfepolld"},
        {"--set a.b=0,1", "no load"},
        {"--set a.b=0,1 -- -c 1 -d 3", "may not hold -d"},
        {"--set a.b=0,1 -- -c 1 --duration=3", "may not hold --duration"},
        {"--set a.b=0,1 -- -n 100", "may not hold -n"},
        {"--set a.b=0,1 -- --json x", "may not hold --json"},
        {"--set a.b=0,1 --bogus -- -c 1", "unknown option '--bogus'"},
        {"--set a.b=0,1 --rounds", "--rounds needs a value"},
        {"--set a.b=0,1 stray -- -c 1", "'stray' is not an option"},
        {"--set a.b=0,1 --force -- -c 1", "--force is for --write-sysctl"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc = parse(bad[i].line);
        if (rc != -1 || !strstr(err, bad[i].words) || strchr(err, '\n'))
            fail_msg("'%s': want -1 and '%s', got %d: %s", bad[i].line, bad[i].words, rc, err);
    }
}

static void test_key_names(void **state)
{
    (void)state;
    assert_true(btune_key_ok("net.ipv4.tcp_tw_reuse"));
    assert_true(btune_key_ok("net.ipv4.conf.lo.rp_filter"));
    assert_true(btune_key_ok("fs.file-max"));
    assert_false(btune_key_ok("somaxconn")); /* no dot: not a path under /proc/sys */
    assert_false(btune_key_ok("net.ipv4."));
    assert_false(btune_key_ok(".net"));
    assert_false(btune_key_ok("net..ipv4"));
    assert_false(btune_key_ok("net/ipv4/tcp_tw_reuse"));
    assert_false(btune_key_ok("net.ipv4.x y"));
    assert_false(btune_key_ok(""));
}

static void test_host_wide_by_name(void **state)
{
    (void)state;
    assert_true(btune_host_wide("net.core.netdev_max_backlog"));
    assert_true(btune_host_wide("net.core.rmem_max"));
    assert_true(btune_host_wide("net.core.wmem_max"));
    assert_true(btune_host_wide("net.core.busy_poll"));
    assert_true(btune_host_wide("net.ipv4.tcp_mem"));
    assert_true(btune_host_wide("fs.nr_open"));
    assert_true(btune_host_wide("vm.swappiness"));
    assert_false(btune_host_wide("net.core.somaxconn"));
    assert_false(btune_host_wide("net.ipv4.tcp_tw_reuse"));
    assert_false(btune_host_wide("net.ipv4.ip_local_port_range"));
}

/* A run of nvar variants (the baseline and nvar - 1 others) parsed from line, every variant
 * of every round the same figure (each ratio 1), judged and printed into out. */
static struct btune *run_of(const char *line, int nvar, char *out, size_t outlen)
{
    static struct btune t;

    free(t.r);
    memset(&t, 0, sizeof(t));
    assert_int_equal(parse(line), 0);
    t.o = o;
    t.nvar = nvar;
    t.source = "--set";
    snprintf(t.server_desc, sizeof(t.server_desc), "lfepolld");
    for (int v = 0; v < nvar; v++)
        snprintf(t.var[v].name, sizeof(t.var[v].name), v ? "k.v%d=1" : "baseline", v);
    btune_levels(&t);
    t.r = calloc((size_t)t.o.rounds, sizeof(*t.r));
    assert_non_null(t.r);
    for (int r = 0; r < t.o.rounds; r++)
        for (int v = 0; v < nvar; v++)
            t.r[r][v] = (struct btune_round){.ok = true,
                                             .seconds = 1,
                                             .requests = 1000 + r,
                                             .rate = 1000 + r,
                                             .p50_us = 10,
                                             .p99_us = 20};
    btune_judge_all(&t);
    FILE *f = fmemopen(out, outlen, "w");
    assert_non_null(f);
    btune_print(f, &t);
    fclose(f);
    return &t;
}

/* Several variants: each interval at 1 - alpha / k (Bonferroni), and without --rounds the fewest
 * rounds for it; --rounds too few for it says so with the number; --per-variant takes alpha
 * alone. */
static void test_levels_of_several_variants(void **state)
{
    static char out[16384];
    struct btune *t;

    (void)state;
    assert_int_equal(btune_rounds_for(0.05), 6);
    assert_int_equal(btune_rounds_for(0.05 / 7), 9);
    assert_int_equal(btune_rounds_for(0.01), 8);

    t = run_of("--set a.b=0,1 -- -c 1", 2, out, sizeof(out));
    assert_true(t->alpha_each > 0.0499 && t->alpha_each < 0.0501 && t->o.rounds == 6);
    assert_null(strstr(out, "Bonferroni"));
    assert_int_equal(t->j[1].v, BTUNE_NONE);

    /* the built-in sysctl.conf's ablation: 7 variants against the baseline */
    t = run_of("-- -c 1", 8, out, sizeof(out));
    assert_true(fabs(t->alpha_each - 0.05 / 7) < 1e-12);
    assert_int_equal(t->o.rounds, 9);
    assert_true(t->j[7].ci.level >= 1 - 0.05 / 7);
    assert_int_equal(t->j[7].v, BTUNE_NONE);
    assert_non_null(strstr(out, "(99.29% or more each, so that the chance that any of the 7 "
                                "verdicts names an effect that is not there is 5% or less: "
                                "Bonferroni)"));

    t = run_of("--rounds 6 -- -c 1", 8, out, sizeof(out));
    assert_int_equal(t->o.rounds, 6);
    assert_int_equal(t->j[1].v, BTUNE_TOO_FEW);
    assert_non_null(strstr(out, "too few rounds: 6 rounds for a 99.29% interval; give --rounds 9 "
                                "or more"));

    t = run_of("--per-variant -- -c 1", 8, out, sizeof(out));
    assert_true(t->alpha_each > 0.0499 && t->alpha_each < 0.0501 && t->o.rounds == 6);
    assert_int_equal(t->j[1].v, BTUNE_NONE);
    assert_non_null(strstr(out, "(--per-variant: 95% or more each alone, so that, on average, "
                                "up to 0.35 of the 7 verdicts name an effect that is not there)"));
    free(t->r);
    t->r = NULL;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_and_values),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_key_names),
        cmocka_unit_test(test_host_wide_by_name),
        cmocka_unit_test(test_levels_of_several_variants),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
