/* Unit tests of topo: CPU lists, reading fake sysfs trees, and the pinning plan built on them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "topo.h"

static char root[64];
static char err[256];

static void put(const char *rel, const char *text)
{
    char path[256], dir[256];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", root, rel);
    snprintf(dir, sizeof(dir), "%s", path);
    for (char *p = dir + strlen(root) + 1; (p = strchr(p, '/')); p++) {
        *p = '\0';
        mkdir(dir, 0755);
        *p = '/';
    }
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* A fake /sys/devices/system/cpu: online list, and for each cpu its package and core. */
static void fake_tree(const char *online, int ncpu, const int *pkg, const int *core)
{
    char rel[64], v[16];

    snprintf(root, sizeof(root), "/tmp/lfe-topo-XXXXXX");
    assert_non_null(mkdtemp(root));
    put("online", online);
    for (int c = 0; c < ncpu; c++) {
        if (!pkg)
            continue;
        snprintf(rel, sizeof(rel), "cpu%d/topology/core_id", c);
        snprintf(v, sizeof(v), "%d\n", core[c]);
        put(rel, v);
        snprintf(rel, sizeof(rel), "cpu%d/topology/physical_package_id", c);
        snprintf(v, sizeof(v), "%d\n", pkg[c]);
        put(rel, v);
    }
}

static int teardown(void **state)
{
    char cmd[128];

    (void)state;
    if (root[0]) {
        snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
        if (system(cmd) != 0)
            return -1;
        root[0] = '\0';
    }
    return 0;
}

static const char *fmt(const cpu_set_t *s)
{
    static char buf[8][128];
    static int i;

    i = (i + 1) % 8;
    cpulist_format(s, buf[i], sizeof(buf[i]));
    return buf[i];
}

static cpu_set_t set_of(const char *list)
{
    cpu_set_t s;

    assert_int_equal(cpulist_parse(list, &s), 0);
    return s;
}

static void test_cpulist(void **state)
{
    cpu_set_t s;

    (void)state;
    assert_int_equal(cpulist_parse("0-3,8,10-11\n", &s), 0);
    assert_int_equal(CPU_COUNT(&s), 7);
    assert_string_equal(fmt(&s), "0-3,8,10-11");
    assert_int_equal(cpulist_parse("5", &s), 0);
    assert_string_equal(fmt(&s), "5");
    assert_int_equal(cpulist_parse("", &s), -EINVAL);
    assert_int_equal(cpulist_parse("1-", &s), -EINVAL);
    assert_int_equal(cpulist_parse("-1", &s), -EINVAL);
    assert_int_equal(cpulist_parse("2-1", &s), -EINVAL);
    assert_int_equal(cpulist_parse("1,x", &s), -EINVAL);
    assert_int_equal(cpulist_parse("1024", &s), -EINVAL);
}

/* 4 cores x 2 hyperthreads, Intel numbering: cpu N and N+4 are siblings. */
static const int ht_pkg[8] = {0, 0, 0, 0, 0, 0, 0, 0};
static const int ht_core[8] = {0, 1, 2, 3, 0, 1, 2, 3};

static void test_hyperthreads_default(void **state)
{
    struct topo t;
    struct plan p;
    cpu_set_t all = set_of("0-7");

    (void)state;
    fake_tree("0-7\n", 8, ht_pkg, ht_core);
    assert_int_equal(topo_read(root, &t), 0);
    assert_int_equal(CPU_COUNT(&t.online), 8);
    assert_int_equal(t.core[5], 1);
    assert_int_equal(plan_make(&t, &all, NULL, 0, 0, true, &p, err, sizeof(err)), 0);
    /* 8 CPUs: two groups of 4, each made of two whole physical cores (siblings together). */
    assert_int_equal(p.ngroups, 2);
    assert_int_equal(p.nworkers[0], 4);
    assert_int_equal(p.nworkers[1], 4);
    assert_string_equal(fmt(&p.cpus[0]), "0-1,4-5");
    assert_string_equal(fmt(&p.cpus[1]), "2-3,6-7");
    plan_free(&p);
}

static void test_hyperthreads_physical_first(void **state)
{
    struct topo t;
    struct plan p;
    cpu_set_t all = set_of("0-7");

    (void)state;
    fake_tree("0-7\n", 8, ht_pkg, ht_core);
    assert_int_equal(topo_read(root, &t), 0);
    /* 4 workers on 8 hyperthreads: one per physical core, no siblings. */
    assert_int_equal(plan_make(&t, &all, NULL, 4, 1, true, &p, err, sizeof(err)), 0);
    assert_string_equal(fmt(&p.cpus[0]), "0");
    assert_string_equal(fmt(&p.cpus[1]), "1");
    assert_string_equal(fmt(&p.cpus[2]), "2");
    assert_string_equal(fmt(&p.cpus[3]), "3");
    plan_free(&p);
    /* 6 workers: the four cores first, then two siblings; one group keeps them all. */
    assert_int_equal(plan_make(&t, &all, NULL, 1, 6, true, &p, err, sizeof(err)), 0);
    assert_string_equal(fmt(&p.cpus[0]), "0-5");
    plan_free(&p);
    /* 2 groups x 3 workers over those 6 CPUs: siblings stay in one group. */
    assert_int_equal(plan_make(&t, &all, NULL, 2, 3, true, &p, err, sizeof(err)), 0);
    assert_string_equal(fmt(&p.cpus[0]), "0-1,4");
    assert_string_equal(fmt(&p.cpus[1]), "2-3,5");
    plan_free(&p);
}

static void test_linear_siblings_two_packages(void **state)
{
    /* AMD-style numbering (siblings adjacent), two packages of 2 cores x 2 threads. */
    static const int pkg[8] = {0, 0, 0, 0, 1, 1, 1, 1};
    static const int core[8] = {0, 0, 1, 1, 0, 0, 1, 1};
    struct topo t;
    struct plan p;
    cpu_set_t all = set_of("0-7");

    (void)state;
    fake_tree("0-7\n", 8, pkg, core);
    assert_int_equal(topo_read(root, &t), 0);
    assert_int_equal(plan_make(&t, &all, NULL, 0, 4, true, &p, err, sizeof(err)), 0);
    assert_int_equal(p.ngroups, 2);
    assert_string_equal(fmt(&p.cpus[0]), "0-3");
    assert_string_equal(fmt(&p.cpus[1]), "4-7");
    plan_free(&p);
    /* 4 single workers: one per physical core, across both packages. */
    assert_int_equal(plan_make(&t, &all, NULL, 4, 1, true, &p, err, sizeof(err)), 0);
    assert_string_equal(fmt(&p.cpus[0]), "0");
    assert_string_equal(fmt(&p.cpus[1]), "2");
    assert_string_equal(fmt(&p.cpus[2]), "4");
    assert_string_equal(fmt(&p.cpus[3]), "6");
    plan_free(&p);
}

static void test_offline_cpus(void **state)
{
    static const int pkg[6] = {0, 0, 0, 0, 0, 0};
    static const int core[6] = {0, 1, 2, 3, 4, 5};
    struct topo t;
    struct plan p;
    cpu_set_t all = set_of("0-5"), want = set_of("3");

    (void)state;
    fake_tree("0-2,4-5\n", 6, pkg, core);
    assert_int_equal(topo_read(root, &t), 0);
    assert_string_equal(fmt(&t.online), "0-2,4-5");
    assert_int_equal(plan_make(&t, &all, NULL, 0, 0, true, &p, err, sizeof(err)), 0);
    assert_int_equal(p.ngroups, 2); /* 5 online CPUs, 5 workers: groups of 3 and 2 */
    assert_int_equal(p.nworkers[0] + p.nworkers[1], 5);
    assert_int_equal(CPU_COUNT(&p.cpus[0]), p.nworkers[0]);
    assert_int_equal(CPU_COUNT(&p.cpus[1]), p.nworkers[1]);
    for (int g = 0; g < p.ngroups; g++)
        assert_false(CPU_ISSET(3, &p.cpus[g]));
    plan_free(&p);
    assert_int_equal(plan_make(&t, &all, &want, 0, 0, true, &p, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "CPU 3 is not online (online CPUs: 0-2,4-5)"));
}

static void test_one_cpu_no_topology(void **state)
{
    struct topo t;
    struct plan p;
    cpu_set_t all = set_of("0");

    (void)state;
    fake_tree("0\n", 1, NULL, NULL); /* no topology/ files at all */
    assert_int_equal(topo_read(root, &t), 0);
    assert_int_equal(plan_make(&t, &all, NULL, 0, 0, true, &p, err, sizeof(err)), 0);
    assert_int_equal(p.ngroups, 1);
    assert_int_equal(p.nworkers[0], 1);
    assert_string_equal(fmt(&p.cpus[0]), "0");
    plan_free(&p);
    /* Two workers on the one CPU (the benchmark's "two workers on CPU 0"). */
    assert_int_equal(plan_make(&t, &all, NULL, 0, 2, true, &p, err, sizeof(err)), 0);
    assert_int_equal(p.ngroups, 1);
    assert_int_equal(p.nworkers[0], 2);
    assert_string_equal(fmt(&p.cpus[0]), "0");
    plan_free(&p);
    /* More groups than CPUs: they share it. */
    assert_int_equal(plan_make(&t, &all, NULL, 3, 1, true, &p, err, sizeof(err)), 0);
    for (int g = 0; g < 3; g++)
        assert_string_equal(fmt(&p.cpus[g]), "0");
    plan_free(&p);
}

static void test_affinity_mask(void **state)
{
    struct topo t;
    struct plan p;
    cpu_set_t allowed = set_of("2-3"), want = set_of("1");

    (void)state;
    fake_tree("0-7\n", 8, ht_pkg, ht_core);
    assert_int_equal(topo_read(root, &t), 0);
    /* Under taskset -c 2-3 the default plan stays inside 2-3. */
    assert_int_equal(plan_make(&t, &allowed, NULL, 0, 0, true, &p, err, sizeof(err)), 0);
    assert_int_equal(p.ngroups, 1);
    assert_int_equal(p.nworkers[0], 2);
    for (int g = 0; g < p.ngroups; g++) {
        cpu_set_t out;
        CPU_AND(&out, &p.cpus[g], &allowed);
        assert_true(CPU_EQUAL(&out, &p.cpus[g]));
    }
    plan_free(&p);
    assert_int_equal(plan_make(&t, &allowed, &want, 0, 0, true, &p, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "CPU 1 is outside this process's CPU affinity (allowed: 2-3)"));
}

static void test_read_errors(void **state)
{
    struct topo t;

    (void)state;
    assert_int_equal(topo_read("/nonexistent-lfe", &t), -ENOENT);
    fake_tree("garbage\n", 0, NULL, NULL);
    assert_int_equal(topo_read(root, &t), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpulist),
        cmocka_unit_test_teardown(test_hyperthreads_default, teardown),
        cmocka_unit_test_teardown(test_hyperthreads_physical_first, teardown),
        cmocka_unit_test_teardown(test_linear_siblings_two_packages, teardown),
        cmocka_unit_test_teardown(test_offline_cpus, teardown),
        cmocka_unit_test_teardown(test_one_cpu_no_topology, teardown),
        cmocka_unit_test_teardown(test_affinity_mask, teardown),
        cmocka_unit_test_teardown(test_read_errors, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
