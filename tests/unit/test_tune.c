/* Unit tests of tune: sysctl.conf parsing and reading, the checks, the ceilings, and the report,
 * apply and the exposed-port warning against a fixture /proc/sys tree. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "net.h"
#include "tune.h"

static struct tune_key keys[TUNE_MAX_KEYS];

static const struct tune_key *find(int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(keys[i].name, name))
            return &keys[i];
    return NULL;
}

static void test_shipped_conf(void **state)
{
    char err[256] = "";
    int n = tune_parse(tune_default_conf, keys, TUNE_MAX_KEYS, err, sizeof(err));
    const struct tune_key *k;

    (void)state;
    if (n < 0)
        fail_msg("sysctl.conf does not parse: %s", err);
    assert_true(n >= 15);
    k = find(n, "net.core.somaxconn");
    assert_non_null(k);
    assert_string_equal(k->value, "65535");
    assert_int_equal(k->scope, TUNE_NETNS);
    assert_int_equal(k->check, TUNE_MIN);
    assert_true(k->apply);
    k = find(n, "net.core.netdev_max_backlog");
    assert_non_null(k);
    assert_int_equal(k->scope, TUNE_HOST);
    k = find(n, "net.ipv4.ip_local_port_range");
    assert_non_null(k);
    assert_string_equal(k->value, "1024 65535");
    assert_int_equal(k->check, TUNE_RANGE);
    k = find(n, "net.ipv4.tcp_max_tw_buckets"); /* checked, never lowered by the file */
    assert_non_null(k);
    assert_false(k->apply);
    assert_null(find(n, "net.ipv4.tcp_tw_recycle")); /* gone since 4.12: must not appear */
    for (int i = 0; i < n; i++) {
        assert_true(strlen(keys[i].why) > 20);
        if (!strncmp(keys[i].name, "fs.", 3)) /* never applied: sysctl -p could lower them */
            assert_false(keys[i].apply);
    }
}

static void parse_fails(const char *text, const char *want)
{
    char err[256] = "";

    if (tune_parse(text, keys, TUNE_MAX_KEYS, err, sizeof(err)) >= 0)
        fail_msg("parsed, want an error '%s' for:\n%s", want, text);
    if (!strstr(err, want))
        fail_msg("error '%s', want '%s'", err, want);
}

static void test_parse_errors(void **state)
{
    (void)state;
    parse_fails("net.core.somaxconn = 1\n", "line 1: a key needs a '# @ SCOPE CHECK: why' line");
    parse_fails("# comment\n# @ netns min: why\n", "line 2: a '# @' line with no key after it");
    parse_fails("# @ netns min: why\n\nnet.core.somaxconn = 1\n",
                "line 2: a '# @' line must be followed by its key (line 1)");
    parse_fails("# @ netns min: why\n# @ netns min: why\na = 1\n", "line 2: a '# @' line must");
    parse_fails("# @ galaxy min: why\na = 1\n", "line 1: write '# @ SCOPE CHECK: why'");
    parse_fails("# @ netns most: why\na = 1\n", "line 1: write");
    parse_fails("# @ netns min:\na = 1\n", "line 1: write"); /* no reason */
    parse_fails("# @ netns min: why\nnet.core.somaxconn 1\n", "line 2: not 'key = value'");
    parse_fails("# @ netns min: why\nnet.core.somaxconn =\n", "line 2: not 'key = value'");
}

/* Found by fuzz_tune: a name or value longer than struct tune_key holds was cut without a word,
 * so a long ip_local_reserved_ports list was checked and applied cut in the middle of a port. */
static void test_parse_long_value_refused_not_cut(void **state)
{
    char text[512], err[256], list[160] = "9876";

    (void)state;
    while (strlen(list) + 6 <= 127)
        strcat(list, ",20000");
    snprintf(text, sizeof(text), "# @ netns has: why\nnet.ipv4.ip_local_reserved_ports = %s\n",
             list);
    assert_int_equal(tune_parse(text, keys, TUNE_MAX_KEYS, err, sizeof(err)), 1); /* 124 */
    strcat(list, ",20010-20020");
    snprintf(text, sizeof(text), "# @ netns has: why\nnet.ipv4.ip_local_reserved_ports = %s\n",
             list);
    parse_fails(text, "line 2: a key name over 95 characters or a value over 127");
    snprintf(text, sizeof(text), "# @ netns min: why\n-net.%0100d = 1\n", 0);
    parse_fails(text, "line 2: a key name over 95 characters");
    snprintf(text, sizeof(text), "# @ netns min: why\n-net.%090d = 1\n", 0); /* 94 and '-' */
    assert_int_equal(tune_parse(text, keys, TUNE_MAX_KEYS, err, sizeof(err)), 1);
    assert_int_equal(strlen(keys[0].name), 94);
}

/* Found by fuzz_tune: "- = 1" (sysctl's ignore-errors prefix and no name) gave a key named "". */
static void test_parse_dash_alone_is_not_a_key(void **state)
{
    (void)state;
    parse_fails("# @ netns min: why\n- = 1\n", "line 2: not 'key = value'");
    parse_fails("# @ netns min: why\n#=  -=1\n", "line 2: not 'key = value'");
}

static void test_parse_forms(void **state)
{
    static const char text[] = "# header\n"
                               "\n"
                               "# @ netns min: the reason, in words\n"
                               "net.core.somaxconn=65535\n"
                               "  # @ host   max:   spaced   out  \n"
                               "-net.core.busy_poll = 0\n"
                               "# @ netns min: three fields\n"
                               "#= net.ipv4.tcp_rmem = 4096\t131072   6291456\n";
    char err[256] = "";
    int n = tune_parse(text, keys, TUNE_MAX_KEYS, err, sizeof(err));

    (void)state;
    assert_int_equal(n, 3);
    assert_string_equal(keys[0].name, "net.core.somaxconn");
    assert_string_equal(keys[0].value, "65535");
    assert_string_equal(keys[0].why, "the reason, in words");
    assert_int_equal(keys[0].line, 4);
    assert_string_equal(keys[1].name, "net.core.busy_poll"); /* "-": sysctl's ignore-errors */
    assert_int_equal(keys[1].scope, TUNE_HOST);
    assert_int_equal(keys[1].check, TUNE_MAX);
    assert_string_equal(keys[1].why, "spaced out");
    assert_true(keys[1].apply);
    assert_string_equal(keys[2].value, "4096 131072 6291456");
    assert_false(keys[2].apply);
}

static struct tune_key key(enum tune_check check, const char *value)
{
    struct tune_key k = {.check = check};

    snprintf(k.value, sizeof(k.value), "%s", value);
    return k;
}

/* Found by fuzz_tune: a has key walked its range a port at a time, so "1-3000000000" against a
 * list holding it ran for minutes, and a range up to LONG_MAX never ended (signed overflow). */
static void test_compare_has_range_beyond_ports(void **state)
{
    struct tune_key k = key(TUNE_HAS, "1-3000000000");

    (void)state;
    alarm(20); /* the walk, back: the test dies instead of hanging */
    assert_int_equal(tune_compare(&k, "0-9999999999", true), TUNE_LOW);
    k = key(TUNE_HAS, "5-9223372036854775807");
    assert_int_equal(tune_compare(&k, "0-9223372036854775807", true), TUNE_LOW);
    k = key(TUNE_HAS, "1-65535");
    assert_int_equal(tune_compare(&k, "0-70000", true), TUNE_OK);
    alarm(0);
}

static void test_compare(void **state)
{
    struct tune_key k;

    (void)state;
    k = key(TUNE_MIN, "65535");
    assert_int_equal(tune_compare(&k, "4096", true), TUNE_LOW);
    assert_int_equal(tune_compare(&k, "65535", true), TUNE_OK);
    assert_int_equal(tune_compare(&k, "1000000", true), TUNE_OK);
    assert_int_equal(tune_compare(&k, "4096", false), TUNE_READONLY);
    assert_int_equal(tune_compare(&k, "65535", false),
                     TUNE_OK); /* right is right, writable or not */
    assert_int_equal(tune_compare(&k, NULL, true), TUNE_MISSING);
    k = key(TUNE_MIN, "4096 131072 6291456");
    assert_int_equal(tune_compare(&k, "4096 131072 33554432", true), TUNE_OK);
    assert_int_equal(tune_compare(&k, "4096 87380 33554432", true), TUNE_LOW);
    k = key(TUNE_MAX, "0");
    assert_int_equal(tune_compare(&k, "1", true), TUNE_HIGH);
    assert_int_equal(tune_compare(&k, "0", true), TUNE_OK);
    k = key(TUNE_EQ, "1");
    assert_int_equal(tune_compare(&k, "0", true), TUNE_LOW);
    assert_int_equal(tune_compare(&k, "2", true), TUNE_HIGH);
    assert_int_equal(tune_compare(&k, "1", true), TUNE_OK);
    k = key(TUNE_EQ, "bbr");
    assert_int_equal(tune_compare(&k, "bbr", true), TUNE_OK);
    assert_int_equal(tune_compare(&k, "cubic", true), TUNE_LOW);
    k = key(TUNE_RANGE, "1024 65535");
    assert_int_equal(tune_compare(&k, "32768 60999", true), TUNE_LOW);
    assert_int_equal(tune_compare(&k, "1024 60999", true), TUNE_LOW);
    assert_int_equal(tune_compare(&k, "1024 65535", true), TUNE_OK);
    assert_int_equal(tune_compare(&k, "1000 65535", true), TUNE_OK);
    k = key(TUNE_HAS, "9876");
    assert_int_equal(tune_compare(&k, "", true), TUNE_LOW);
    assert_int_equal(tune_compare(&k, "9876", true), TUNE_OK);
    assert_int_equal(tune_compare(&k, "80,9000-9999", true), TUNE_OK);
    assert_int_equal(tune_compare(&k, "80,9877-9999", true), TUNE_LOW);
    k = key(TUNE_HAS, "9876,20000-20001");
    assert_int_equal(tune_compare(&k, "9876,20000", true), TUNE_LOW);
    assert_int_equal(tune_compare(&k, "9876,19000-21000", true), TUNE_OK);
}

static void test_want_text(void **state)
{
    struct tune_key k = key(TUNE_RANGE, "1024 65535");
    char buf[64];

    (void)state;
    tune_want(&k, buf, sizeof(buf));
    assert_string_equal(buf, "covers 1024-65535");
    k = key(TUNE_MIN, "65535");
    tune_want(&k, buf, sizeof(buf));
    assert_string_equal(buf, ">= 65535");
    k = key(TUNE_HAS, "9876");
    tune_want(&k, buf, sizeof(buf));
    assert_string_equal(buf, "has 9876");
    k = key(TUNE_BITS, "3");
    tune_want(&k, buf, sizeof(buf));
    assert_string_equal(buf, "has bits 3");
}

static void test_ceilings(void **state)
{
    (void)state;
    /* the default range: 28,232 ports */
    assert_float_equal(tune_port_ceiling(32768, 60999, 2, 1000, true), 28232.0, 0.01);
    assert_float_equal(tune_port_ceiling(32768, 60999, 2, 1000, false), 28232.0 / 60, 0.01);
    assert_float_equal(tune_port_ceiling(32768, 60999, 0, 1000, true), 28232.0 / 60, 0.01);
    assert_float_equal(tune_port_ceiling(32768, 60999, 1, 1000, false), 28232.0, 0.01);
    assert_float_equal(tune_port_ceiling(1024, 65535, 2, 2000, true), 32256.0, 0.01);
    assert_true(tune_port_exposed(9876, "1024 65535", ""));
    assert_false(tune_port_exposed(9876, "1024 65535", "9876"));
    assert_false(tune_port_exposed(9876, "1024 65535", "80,9000-9999"));
    assert_false(tune_port_exposed(9876, "32768 60999", ""));
    assert_false(tune_port_exposed(0, "1024 65535", ""));
}

/* A fixture /proc/sys: each key a file under dir. */
static char dir[64];

static void put(const char *name, const char *value)
{
    char path[256];
    size_t o = (size_t)snprintf(path, sizeof(path), "%s/", dir);
    FILE *f;

    for (const char *s = name; *s; s++) {
        if (*s == '.') {
            path[o] = '\0';
            mkdir(path, 0755);
        }
        path[o++] = *s == '.' ? '/' : *s;
    }
    path[o] = '\0';
    f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "%s\n", value);
    fclose(f);
}

static void test_read_write(void **state)
{
    char buf[128];

    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/lfe-tune-XXXXXX");
    assert_non_null(mkdtemp(dir));
    put("net.ipv4.tcp_rmem", "4096\t131072\t6291456");
    assert_int_equal(tune_read(dir, "net.ipv4.tcp_rmem", buf, sizeof(buf)), 0);
    assert_string_equal(buf, "4096 131072 6291456");
    assert_int_equal(tune_read(dir, "net.ipv4.nothing", buf, sizeof(buf)), -ENOENT);
    assert_int_equal(tune_write(dir, "net.ipv4.tcp_rmem", "1 2 3"), 0);
    assert_int_equal(tune_read(dir, "net.ipv4.tcp_rmem", buf, sizeof(buf)), 0);
    assert_string_equal(buf, "1 2 3");
    assert_int_equal(tune_write(dir, "net.ipv4.nothing", "1"), -ENOENT);
}

static void test_port_of(void **state)
{
    (void)state;
    assert_int_equal(tune_port_of("127.0.0.1:9876"), 9876);
    assert_int_equal(tune_port_of("[::1]:80"), 80);
    assert_int_equal(tune_port_of("[::]:0"), 0);
    assert_int_equal(tune_port_of(":7"), 7);
    assert_int_equal(tune_port_of("localhost"), 0);
}

/* A file of n bytes ("# " then blanks) at dir/name; returns its path. */
static const char *conf_file(const char *name, size_t n)
{
    static char path[128];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "w");
    assert_non_null(f);
    for (size_t i = 0; i < n; i++)
        fputc(i == 0 ? '#' : i % 64 == 63 ? '\n' : ' ', f);
    assert_int_equal(fclose(f), 0);
    return path;
}

static void test_conf_read(void **state)
{
    char why[128] = "", missing[128];
    char *text;

    (void)state;
    text = tune_conf_read(conf_file("max.conf", TUNE_CONF_MAX), why, sizeof(why));
    assert_non_null(text);
    assert_int_equal(strlen(text), TUNE_CONF_MAX);
    free(text);
    errno = 0;
    assert_null(tune_conf_read(conf_file("big.conf", TUNE_CONF_MAX + 1), why, sizeof(why)));
    assert_int_equal(errno, EFBIG);
    assert_string_equal(why, "over 1 MiB");
    snprintf(missing, sizeof(missing), "%s/none.conf", dir);
    assert_null(tune_conf_read(missing, why, sizeof(why)));
    assert_int_equal(errno, ENOENT);
    assert_string_equal(why, strerror(ENOENT));
    assert_null(tune_conf_read(dir, why, sizeof(why)));
    assert_string_equal(why, strerror(EISDIR));
}

/* What tune_warn_exposed logs, with the fixture tree as /proc/sys. */
static char *warnings(const char *listen, int lfd)
{
    static char out[2048];
    const char *const list[] = {listen};
    int saved = dup(STDERR_FILENO), fd;
    ssize_t n;
    FILE *f = tmpfile();

    assert_non_null(f);
    fd = fileno(f);
    assert_true(saved >= 0);
    assert_true(dup2(fd, STDERR_FILENO) >= 0);
    tune_warn_exposed(dir, list, &lfd, 1);
    assert_true(dup2(saved, STDERR_FILENO) >= 0);
    close(saved);
    n = pread(fd, out, sizeof(out) - 1, 0);
    assert_true(n >= 0);
    out[n] = '\0';
    fclose(f);
    return out;
}

static void test_warn_exposed(void **state)
{
    char err[256], name[64], listen[80], want[256];
    int lfd = net_listen("127.0.0.1:0", 16, err, sizeof(err)), port;

    (void)state;
    assert_true(lfd >= 0);
    net_local_name(lfd, name, sizeof(name));
    port = tune_port_of(name);
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
    assert_string_equal(warnings(listen, lfd), ""); /* no range in the tree: nothing to say */
    put("net.ipv4.ip_local_port_range", "1024\t65535");
    snprintf(
        want, sizeof(want),
        "listen port %d is inside the ephemeral port range 1024 65535 and not reserved: ", port);
    assert_non_null(strstr(warnings(listen, lfd), want));
    snprintf(want, sizeof(want), "net.ipv4.ip_local_reserved_ports=%d\n", port);
    assert_non_null(strstr(warnings(listen, lfd), want));
    assert_string_equal(warnings("127.0.0.1:0", lfd), ""); /* the kernel's pick: ephemeral */
    snprintf(want, sizeof(want), "80,%d", port);
    put("net.ipv4.ip_local_reserved_ports", want);
    assert_string_equal(warnings(listen, lfd), "");
    put("net.ipv4.ip_local_reserved_ports", "80");
    snprintf(want, sizeof(want), "net.ipv4.ip_local_reserved_ports=80,%d\n", port);
    assert_non_null(strstr(warnings(listen, lfd), want));
    put("net.ipv4.ip_local_port_range", "1024 1025");
    assert_string_equal(warnings(listen, lfd), "");
    close(lfd);
}

static char *report_as(const char *conf, bool apply, bool not_root, int *rc)
{
    struct tune_ctx ctx = {
        .root = dir, .backlog = 65535, .port = 9876, .apply = apply, .not_root = not_root};
    char err[256] = "", *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    *rc = tune_report(f, conf, &ctx, err, sizeof(err));
    fclose(f);
    return text;
}

/* The report as root runs it. */
static char *report(const char *conf, bool apply, int *rc)
{
    return report_as(conf, apply, false, rc);
}

/* The line of the report that starts with name. */
static const char *row(const char *text, const char *name)
{
    const char *p = text;

    while ((p = strstr(p, name)) && p != text && p[-1] != '\n')
        p++;
    if (!p)
        fail_msg("no row for %s in:\n%s", name, text);
    return p;
}

static bool row_says(const char *text, const char *name, const char *what)
{
    const char *r = row(text, name), *nl = strchr(r, '\n');
    const char *hit = strstr(r, what);

    return hit && (!nl || hit < nl);
}

static void test_report_and_apply(void **state)
{
    static const char conf[] =
        "# @ netns min: accept queue\nnet.core.somaxconn = 65535\n"
        "# @ netns range: ports\nnet.ipv4.ip_local_port_range = 1024 65535\n"
        "# @ netns has: our port\nnet.ipv4.ip_local_reserved_ports = 9876\n"
        "# @ netns max: idle\nnet.ipv4.tcp_slow_start_after_idle = 0\n"
        "# @ netns min: checked only\n#= net.ipv4.tcp_max_tw_buckets = 65536\n"
        "# @ host min: not here\nnet.core.netdev_max_backlog = 16384\n";
    struct rlimit rl;
    char *out;
    int rc;

    (void)state;
    getrlimit(RLIMIT_NOFILE, &rl);
    put("net.core.somaxconn", "4096");
    put("net.ipv4.ip_local_port_range", "32768\t60999");
    put("net.ipv4.ip_local_reserved_ports", "");
    put("net.ipv4.tcp_slow_start_after_idle", "1");
    put("net.ipv4.tcp_max_tw_buckets", "5000");
    put("net.ipv4.tcp_tw_reuse", "2");
    out = report(conf, false, &rc);
    assert_int_equal(rc, 1);
    assert_true(row_says(out, "net.core.somaxconn", "low"));
    assert_true(row_says(out, "net.ipv4.ip_local_port_range", "low"));
    assert_true(row_says(out, "net.ipv4.ip_local_reserved_ports", "low"));
    assert_true(row_says(out, "net.ipv4.tcp_slow_start_after_idle", "high"));
    assert_true(row_says(out, "net.ipv4.tcp_max_tw_buckets", "low"));
    assert_true(row_says(out, "net.core.netdev_max_backlog", "missing"));
    assert_true(row_says(out, "RLIMIT_NOFILE", rl.rlim_max >= 65536 ? "ok" : "low"));
    assert_non_null(strstr(out, "min(--backlog 65535, somaxconn 4096) = 4096"));
    assert_non_null(strstr(out, "28232 ephemeral ports"));
    assert_non_null(strstr(out, "about 28232 new connections/s"));
    assert_null(strstr(out, "listen port 9876")); /* outside 32768-60999 */
    /* what to do: apply for the keys the file sets, sysctl -w for the ones it only checks */
    assert_non_null(strstr(out, "  4 that sysctl.conf sets: make sysctl-apply (or sysctl -p"));
    assert_non_null(strstr(out, "  1 that sysctl.conf only checks, changed from what it expects"));
    /* test_report_counts_agree: the total is the sum of its parts (it said "4 keys off" and
     * then "6 of 7 need attention", which read as two different counts) */
    assert_non_null(strstr(out, "  1 host-wide, read-only or absent here: set it on the host\n"));
    {
        char total[64];
        bool low = rl.rlim_max < 65536;
        snprintf(total, sizeof(total), "\n%d of 7 need attention:\n", 4 + 1 + 1 + low);
        assert_non_null(strstr(out, total));
        assert_true(!low || strstr(out, "  1 RLIMIT_NOFILE: raise the hard limit"));
    }
    free(out);

    /* apply: the applied keys that are not right are written; a key above its minimum stays */
    put("net.core.somaxconn", "100000");
    out = report(conf, true, &rc);
    assert_int_equal(rc, 1); /* tw_buckets (check only) and netdev_max_backlog (absent) remain */
    assert_null(strstr(out, "set net.core.somaxconn"));
    assert_non_null(strstr(out, "set net.ipv4.ip_local_port_range = 1024 65535 (was 32768 60999)"));
    assert_non_null(strstr(out, "set net.ipv4.ip_local_reserved_ports = 9876 (was empty)"));
    assert_non_null(strstr(out, "set net.ipv4.tcp_slow_start_after_idle = 0 (was 1)"));
    assert_null(strstr(out, "set net.ipv4.tcp_max_tw_buckets"));
    assert_true(row_says(out, "net.core.somaxconn", "100000"));
    assert_true(row_says(out, "net.core.somaxconn", "ok"));
    assert_true(row_says(out, "net.ipv4.ip_local_port_range", "ok"));
    assert_true(row_says(out, "net.ipv4.tcp_max_tw_buckets", "low"));
    assert_non_null(strstr(out, "64512 ephemeral ports"));
    free(out);

    /* a reserved list gets the port appended, not replaced */
    put("net.ipv4.ip_local_reserved_ports", "8000");
    put("net.ipv4.tcp_max_tw_buckets", "262144");
    put("net.core.netdev_max_backlog", "16384");
    out = report(conf, true, &rc);
    assert_non_null(strstr(out, "set net.ipv4.ip_local_reserved_ports = 8000,9876 (was 8000)"));
    assert_int_equal(rc, rl.rlim_max >= 65536 ? 0 : 1);
    free(out);

    put("net.ipv4.ip_local_reserved_ports", "");
    out = report(conf, false, &rc);
    assert_non_null(strstr(out, "listen port 9876 is inside the ephemeral range 1024 65535"));
    free(out);
}

/* A bit mask (net.ipv4.tcp_fastopen): every bit of the recommendation, others allowed; applying
 * adds the missing bits and clears none the admin set. */
static void test_bits(void **state)
{
    static const char conf[] = "# @ netns bits: TFO\nnet.ipv4.tcp_fastopen = 3\n";
    struct tune_key k = key(TUNE_BITS, "3");
    char *out;
    int rc;

    (void)state;
    assert_int_equal(tune_compare(&k, "1", true), TUNE_LOW);
    assert_int_equal(tune_compare(&k, "2", true), TUNE_LOW);
    assert_int_equal(tune_compare(&k, "514", true), TUNE_LOW); /* 0x202: no client bit */
    assert_int_equal(tune_compare(&k, "3", true), TUNE_OK);
    assert_int_equal(tune_compare(&k, "1027", true), TUNE_OK); /* 0x403: more bits, right */
    put("net.ipv4.tcp_fastopen", "1024");
    out = report(conf, true, &rc);
    assert_non_null(strstr(out, "set net.ipv4.tcp_fastopen = 1027 (was 1024)"));
    assert_true(row_says(out, "net.ipv4.tcp_fastopen", "ok"));
    free(out);
}

/* A key that cannot be written is reported with the reason, and the run goes on. */
static void test_apply_failure(void **state)
{
    static const char conf[] = "# @ netns min: a\nnet.core.somaxconn = 65535\n"
                               "# @ netns max: b\nnet.ipv4.tcp_slow_start_after_idle = 0\n";
    char path[128], *out;
    int rc;

    (void)state;
    put("net.ipv4.tcp_slow_start_after_idle", "1");
    put("net.core.somaxconn", "4096");
    /* a file that anyone may open for writing and that takes no write: /dev/full (reads give
     * an empty value, below the minimum) */
    snprintf(path, sizeof(path), "%s/net/core/somaxconn", dir);
    unlink(path);
    assert_int_equal(symlink("/dev/full", path), 0);
    out = report(conf, true, &rc);
    if (!strstr(out, "cannot set net.core.somaxconn = 65535: "))
        fail_msg("want the failed write reported:\n%s", out);
    assert_non_null(strstr(out, "set net.ipv4.tcp_slow_start_after_idle = 0 (was 1)"));
    /* test_apply_exit_says_what_failed: 3, a key it sets could not be, not the check's 1 (make
     * sysctl-apply then fails; it passes on 1, what is left that it does not set) */
    assert_int_equal(rc, 3);
    free(out);
    unlink(path);
}

/* What is left after an apply that set every key it sets is not a failure: exit 1, the check's
 * "needs attention", never 3 (test_sysctl_apply_is_done in test_newcomer.sh: make sysctl-apply
 * said Error 1 after setting all six keys). */
static void test_apply_leaves_only_what_it_cannot_set(void **state)
{
    static const char conf[] =
        "# @ netns min: a\nnet.core.somaxconn = 65535\n"
        "# @ host min: not here\nnet.core.netdev_max_backlog = 16384\n"
        "# @ netns min: checked only\n#= net.ipv4.tcp_max_tw_buckets = 65536\n";
    char path[128], *out;
    int rc;

    (void)state;
    put("net.core.somaxconn", "4096");
    put("net.ipv4.tcp_max_tw_buckets", "5000");
    snprintf(path, sizeof(path), "%s/net/core/netdev_max_backlog", dir);
    unlink(path);
    out = report(conf, true, &rc);
    assert_non_null(strstr(out, "set net.core.somaxconn = 65535 (was 4096)"));
    assert_null(strstr(out, "cannot set"));
    assert_null(strstr(out, "that sysctl.conf sets"));
    assert_non_null(strstr(out, "  1 that sysctl.conf only checks"));
    assert_non_null(strstr(out, "  1 host-wide, read-only or absent here: set it on the host\n"));
    assert_int_equal(rc, 1);
    free(out);
    /* again: nothing to change, the same verdict */
    out = report(conf, true, &rc);
    assert_non_null(strstr(out, "nothing to change\n"));
    assert_int_equal(rc, 1);
    free(out);
    put("net.ipv4.tcp_max_tw_buckets", "262144");
}

/* The remedies are written for who runs the check: sudo only for a user other than root (root
 * on a host without sudo was told to run sudo); read-only keys for root are the host's or the
 * container's, for another user first root's. */
static void test_remedies_for_who_runs_it(void **state)
{
    static const char conf[] = "# @ netns min: a\nnet.core.somaxconn = 65535\n"
                               "# @ host min: not here\nnet.core.netdev_max_backlog = 16384\n";
    char path[128], *out;
    int rc;

    (void)state;
    put("net.core.somaxconn", "4096");
    snprintf(path, sizeof(path), "%s/net/core/netdev_max_backlog", dir);
    unlink(path);
    out = report_as(conf, false, false, &rc);
    assert_non_null(strstr(out, "  1 that sysctl.conf sets: make sysctl-apply (or sysctl -p "
                                "sysctl.conf), then check again\n"));
    assert_non_null(strstr(out, "  1 host-wide, read-only or absent here: set it on the host\n"));
    if (strstr(out, "sudo") || strstr(out, "as root"))
        fail_msg("a remedy for root says sudo or 'as root':\n%s", out);
    free(out);
    out = report_as(conf, false, true, &rc);
    assert_non_null(strstr(out, "  1 that sysctl.conf sets: sudo make sysctl-apply (or sudo "
                                "sysctl -p sysctl.conf), then check again\n"));
    assert_non_null(strstr(out, "  1 read-only or absent here: set it as root (sudo make "
                                "sysctl-apply), or on the host for a host-wide key\n"));
    free(out);
}

static void test_report_bad_conf(void **state)
{
    int rc;
    char *out;

    (void)state;
    out = report("net.core.somaxconn = 1\n", false, &rc);
    assert_int_equal(rc, 2);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shipped_conf),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_parse_forms),
        cmocka_unit_test(test_compare),
        cmocka_unit_test(test_parse_long_value_refused_not_cut),
        cmocka_unit_test(test_parse_dash_alone_is_not_a_key),
        cmocka_unit_test(test_compare_has_range_beyond_ports),
        cmocka_unit_test(test_want_text),
        cmocka_unit_test(test_bits),
        cmocka_unit_test(test_ceilings),
        cmocka_unit_test(test_read_write),
        cmocka_unit_test(test_port_of),
        cmocka_unit_test(test_conf_read),
        cmocka_unit_test(test_warn_exposed),
        cmocka_unit_test(test_report_and_apply),
        cmocka_unit_test(test_apply_failure),
        cmocka_unit_test(test_apply_leaves_only_what_it_cannot_set),
        cmocka_unit_test(test_remedies_for_who_runs_it),
        cmocka_unit_test(test_report_bad_conf),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);

    if (dir[0]) {
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", dir);
    }
    return rc;
}
