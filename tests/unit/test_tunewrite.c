/* Unit tests of tunewrite (lfbench tune --write-sysctl): a fixture list of verdicts as a
 * sysctl.d file, written atomically, never over a file it did not write unless forced. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tunewrite.h"

static char dir[] = "/tmp/lfe-tunewrite-XXXXXX";

static const struct tunewrite_verdict fixture[] = {
    {"net.ipv4.ip_local_port_range", "1024 65535", TUNEWRITE_HELPS, 1.563, 1.48, 1.63, 10,
     "22.2k against 14.2k connections/s"},
    {"net.ipv4.tcp_slow_start_after_idle", "0", TUNEWRITE_NONE, 1.004, 0.98, 1.03, 10,
     "64.1k against 63.9k requests/s"},
    {"net.ipv4.tcp_tw_reuse", "0", TUNEWRITE_HURTS, 0.41, 0.37, 0.45, 10,
     "9.1k against 22.2k connections/s"},
    {"net.ipv4.tcp_rmem", "4096\t131072\t6291456", TUNEWRITE_HELPS, 1.08, 1.02, 1.11, 8,
     "p99 1.9 ms against 2.1 ms"},
    {"net.ipv4.ip_local_port_range", "16384 65535", TUNEWRITE_HELPS, 1.31, 1.2, 1.4, 10,
     "18.6k against 14.2k connections/s"},
};
#define NFIX ((int)(sizeof(fixture) / sizeof(fixture[0])))

static char *text_of(const struct tunewrite_verdict *v, int n, int *rc)
{
    char *text = NULL, err[256] = "";
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    *rc = tunewrite_sysctl(f, v, n, "lfbench tune --set ... -c 100 short, bootstrap 95%", err,
                           sizeof(err));
    fclose(f);
    return text;
}

/* Only the keys that helped are set, each under its figure; the others are named, unset; one
 * key that helped twice is written once (the first). */
static void test_only_helping_keys(void **state)
{
    int rc;
    char *t = text_of(fixture, NFIX, &rc);
    const char *a, *b;

    (void)state;
    assert_int_equal(rc, 2);
    assert_true(!strncmp(t, "# written by lfbench tune --write-sysctl: ", 42));
    assert_non_null(strstr(t, "\n# how: lfbench tune --set ... -c 100 short, bootstrap 95%\n"));
    a = strstr(t, "\n# net.ipv4.ip_local_port_range = 1024 65535 helps: 22.2k against 14.2k "
                  "connections/s; median ratio 1.563 to the baseline, interval 1.480-1.630, 10 "
                  "rounds\n");
    assert_non_null(a);
    b = strstr(t, "\nnet.ipv4.ip_local_port_range = 1024 65535\n");
    assert_non_null(b);
    assert_true(a < b);
    assert_non_null(strstr(t, "#   16384 65535 helped too (median ratio 1.310"));
    assert_null(strstr(t, "\nnet.ipv4.ip_local_port_range = 16384"));
    assert_non_null(strstr(t, "\nnet.ipv4.tcp_rmem = 4096\t131072\t6291456\n"));
    /* never set: no measurable effect, hurts */
    assert_null(strstr(t, "\nnet.ipv4.tcp_slow_start_after_idle ="));
    assert_null(strstr(t, "\nnet.ipv4.tcp_tw_reuse ="));
    assert_non_null(strstr(t, "#   net.ipv4.tcp_slow_start_after_idle = 0 (no measurable effect: "
                              "median ratio 1.004"));
    assert_non_null(strstr(t, "#   net.ipv4.tcp_tw_reuse = 0 (hurts: median ratio 0.410"));
    /* every line a comment or "key = value": what sysctl -p reads */
    for (const char *p = t; *p; p = strchr(p, '\n') + 1)
        assert_true(*p == '#' || *p == '\n' || strstr(p, " = ") < strchr(p, '\n'));
    free(t);
    t = text_of(fixture + 1, 2, &rc); /* nothing helped: comments only */
    assert_int_equal(rc, 0);
    assert_non_null(strstr(t, "# no key helped: nothing is set\n"));
    free(t);
}

/* Verdicts that would break the file's lines or name no key: refused, with one line. */
static void test_bad_verdicts(void **state)
{
    struct tunewrite_verdict v = fixture[0];
    char err[256], path[300];
    FILE *f = fopen("/dev/null", "w");

    (void)state;
    v.value = "1024 65535\nkernel.panic = 1";
    assert_int_equal(tunewrite_sysctl(f, &v, 1, "x", err, sizeof(err)), -1);
    assert_non_null(strstr(err, "holds a line break"));
    v = fixture[0];
    v.figure = "22k\n# fake";
    assert_int_equal(tunewrite_sysctl(f, &v, 1, "x", err, sizeof(err)), -1);
    v = fixture[0];
    v.key = "net.ipv4 = 1\nkernel";
    assert_int_equal(tunewrite_sysctl(f, &v, 1, "x", err, sizeof(err)), -1);
    assert_non_null(strstr(err, "is not a sysctl name"));
    assert_null(strchr(err, '\n'));
    v.key = "../etc";
    assert_int_equal(tunewrite_sysctl(f, &v, 1, "x", err, sizeof(err)), -1);
    v = fixture[0];
    assert_int_equal(tunewrite_sysctl(f, &v, 1, "two\nlines", err, sizeof(err)), -1);
    fclose(f);
    v.value = "";
    snprintf(path, sizeof(path), "%s/bad.conf", dir);
    assert_int_equal(tunewrite_file(path, &v, 1, "x", false, err, sizeof(err)), -1);
    assert_int_equal(access(path, F_OK), -1); /* nothing written */
}

static char *slurp(const char *path)
{
    static char buf[8192];
    FILE *f = fopen(path, "r");
    size_t n;

    assert_non_null(f);
    n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* No temporary file left beside it. */
static int files_in(const char *d)
{
    DIR *dh = opendir(d);
    struct dirent *e;
    int n = 0;

    while (dh && (e = readdir(dh)))
        n += e->d_name[0] != '.';
    if (dh)
        closedir(dh);
    return n;
}

/* The file: written whole (mode 0644), replaced when it is one of ours, refused when it is not
 * unless forced, and a directory refused even then. */
static void test_file_replace_rules(void **state)
{
    char path[400], sub[300], err[300];
    struct stat st;
    FILE *f;

    (void)state;
    snprintf(sub, sizeof(sub), "%s/d", dir);
    mkdir(sub, 0755);
    snprintf(path, sizeof(path), "%s/90-tuned.conf", sub);
    assert_int_equal(tunewrite_file(path, fixture, NFIX, "run 1", false, err, sizeof(err)), 2);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);
    assert_non_null(strstr(slurp(path), "# how: run 1\n"));
    assert_int_equal(files_in(sub), 1);
    /* ours: replaced */
    assert_int_equal(tunewrite_file(path, fixture, 1, "run 2", false, err, sizeof(err)), 1);
    assert_non_null(strstr(slurp(path), "# how: run 2\n"));
    assert_null(strstr(slurp(path), "tcp_rmem ="));
    /* not ours: refused, untouched, until forced */
    f = fopen(path, "w");
    fputs("# the admin's own\nnet.core.somaxconn = 1024\n", f);
    fclose(f);
    assert_int_equal(tunewrite_file(path, fixture, NFIX, "run 3", false, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "the file exists and lfbench tune did not write it: give "
                                "--force to replace it, or another name"));
    assert_string_equal(slurp(path), "# the admin's own\nnet.core.somaxconn = 1024\n");
    assert_int_equal(files_in(sub), 1);
    assert_int_equal(tunewrite_file(path, fixture, NFIX, "run 3", true, err, sizeof(err)), 2);
    assert_non_null(strstr(slurp(path), "# how: run 3\n"));
    /* an empty file is not ours either */
    fclose(fopen(path, "w"));
    assert_int_equal(tunewrite_file(path, fixture, NFIX, "run 4", false, err, sizeof(err)), -1);
    assert_int_equal(tunewrite_file(sub, fixture, NFIX, "run 5", true, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "a directory: name the file to write"));
    /* a directory that is not there: one line, nothing made */
    snprintf(path, sizeof(path), "%s/none/x.conf", dir);
    assert_int_equal(tunewrite_file(path, fixture, NFIX, "run 6", false, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "cannot make a file beside it"));
    assert_null(strchr(err, '\n'));
}

static int setup(void **state)
{
    (void)state;
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    char cmd[400];

    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_only_helping_keys),
        cmocka_unit_test(test_bad_verdicts),
        cmocka_unit_test(test_file_replace_rules),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
