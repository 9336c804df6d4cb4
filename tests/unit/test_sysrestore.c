/* Unit tests of sysrestore: the record's escaping, and sessions against a fixture /proc/sys
 * tree (no root needed): what the record holds, the first value kept, a torn last line, undo. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sysrestore.h"

static char dir[] = "/tmp/lfe-sysrestore-unit-XXXXXX";
static char root[300], rec[300];

static void test_escaping_round_trips(void **state)
{
    static const char *const values[] = {
        "4096\t131072\t6291456", "back\\slash", "two\nlines", "\x01\x1f\x7f", "", "plain 1 2",
        "\\t is not a tab"};
    char enc[256], dec[256];

    (void)state;
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        assert_true(sysrestore_encode(values[i], enc, sizeof(enc)) >= 0);
        assert_null(strpbrk(enc, "\t\n\x01\x1f\x7f")); /* one line, no control bytes */
        assert_int_equal(sysrestore_decode(enc, dec, sizeof(dec)), (int)strlen(values[i]));
        assert_string_equal(dec, values[i]);
    }
    assert_string_equal((sysrestore_encode("a\tb", enc, sizeof(enc)), enc), "a\\tb");
    /* too small: -1, never a cut value */
    assert_int_equal(sysrestore_encode("12345", enc, 5), -1);
    assert_int_equal(sysrestore_decode("12345", dec, 5), -1);
    /* malformed: an unknown escape, a NUL byte, a raw control character, a cut escape */
    assert_int_equal(sysrestore_decode("a\\qb", dec, sizeof(dec)), -1);
    assert_int_equal(sysrestore_decode("a\\x00", dec, sizeof(dec)), -1);
    assert_int_equal(sysrestore_decode("a\tb", dec, sizeof(dec)), -1);
    assert_int_equal(sysrestore_decode("a\\", dec, sizeof(dec)), -1);
    assert_int_equal(sysrestore_decode("a\\x4", dec, sizeof(dec)), -1);
}

static void put(const char *key, const char *value)
{
    char path[400], cmd[900];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", root, key);
    for (char *s = path + strlen(root) + 1; *s; s++)
        *s = *s == '.' ? '/' : *s;
    snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname %s)\"", path);
    assert_int_equal(system(cmd), 0);
    f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "%s\n", value);
    fclose(f);
}

/* The fixture's value of key, as sysrestore_get reads it (during a session, under its root). */
static const char *get(const char *key)
{
    static char buf[256];
    char path[400];
    FILE *f;
    size_t n;

    snprintf(path, sizeof(path), "%s/%s", root, key);
    for (char *s = path + strlen(root) + 1; *s; s++)
        *s = *s == '.' ? '/' : *s;
    f = fopen(path, "r");
    assert_non_null(f);
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    if (n && buf[n - 1] == '\n')
        buf[n - 1] = '\0';
    return buf;
}

static char *slurp(const char *path)
{
    static char buf[4096];
    FILE *f = fopen(path, "r");
    size_t n;

    if (!f)
        return NULL;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* An undo session: each key's first value is recorded before the write, once; reopened, the
 * record keeps those first values; undo puts them back newest first and removes the record. */
static void test_keep_then_undo(void **state)
{
    char err[600];
    const char *text;

    (void)state;
    put("net.ipv4.tcp_rmem", "4096\t131072\t6291456");
    put("net.core.somaxconn", "4096");
    assert_int_equal(sysrestore_open(rec, root, true, err, sizeof(err)), 0);
    assert_int_equal(sysrestore_set("net.core.somaxconn", "65535", err, sizeof(err)), 0);
    assert_int_equal(sysrestore_set("net.ipv4.tcp_rmem", "8192 65536 1048576", err, sizeof(err)),
                     0);
    assert_int_equal(sysrestore_set("net.core.somaxconn", "100", err, sizeof(err)), 0);
    assert_string_equal(get("net.core.somaxconn"), "100");
    {
        char buf[64];
        assert_int_equal(sysrestore_get("net.core.somaxconn", buf, sizeof(buf), err, sizeof(err)),
                         0);
        assert_string_equal(buf, "100"); /* the session's root, not /proc/sys */
    }
    text = slurp(rec);
    assert_non_null(strstr(text, "\nnet.core.somaxconn=4096\nnet.ipv4.tcp_rmem=4096\\t131072\\t"
                                 "6291456\n"));
    assert_null(strstr(text, "=65535"));
    assert_int_equal(sysrestore_keep(err, sizeof(err)), 0);
    assert_int_equal(sysrestore_set("net.core.somaxconn", "7", err, sizeof(err)), -1);
    assert_non_null(strstr(err, "no sysctl record is open"));

    assert_int_equal(sysrestore_open(rec, root, true, err, sizeof(err)), 2); /* held: 2 keys */
    assert_int_equal(sysrestore_set("net.core.somaxconn", "200", err, sizeof(err)), 0);
    assert_int_equal(sysrestore_undo(err, sizeof(err)), 0);
    assert_string_equal(get("net.core.somaxconn"), "4096");
    assert_string_equal(get("net.ipv4.tcp_rmem"), "4096\t131072\t6291456");
    assert_null(slurp(rec));
}

/* A restore record whose last line has no newline: that write never finished, so its key was
 * never changed and is not replayed; the whole lines are, in one line of text. */
static void test_torn_last_line(void **state)
{
    char err[600], boot[64] = "", ns[64] = "";
    FILE *f;
    ssize_t n;

    (void)state;
    f = fopen("/proc/sys/kernel/random/boot_id", "r");
    assert_non_null(f);
    assert_non_null(fgets(boot, sizeof(boot), f));
    fclose(f);
    boot[strcspn(boot, "\n")] = '\0';
    n = readlink("/proc/self/ns/net", ns, sizeof(ns) - 1);
    ns[n > 0 ? n : 0] = '\0';
    put("net.core.somaxconn", "65535");
    put("net.ipv4.tcp_fin_timeout", "5");
    f = fopen(rec, "w");
    fprintf(f,
            "# lfepoll sysctl record v1 restore pid 42 boot %s netns %s\n"
            "net.core.somaxconn=4096\nnet.ipv4.tcp_fin_timeout=6",
            boot, ns);
    fclose(f);
    assert_int_equal(sysrestore_open(rec, root, false, err, sizeof(err)), 1);
    assert_non_null(strstr(err, "a run that did not finish (pid 42) left 1 key changed; put "
                                "back from "));
    assert_non_null(strstr(err, ": net.core.somaxconn = 4096"));
    assert_null(strchr(err, '\n'));
    assert_string_equal(get("net.core.somaxconn"), "4096");
    assert_string_equal(get("net.ipv4.tcp_fin_timeout"), "5");
    /* a second begin while this session holds it is another process's business only */
    assert_int_equal(sysrestore_open(rec, root, false, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "is open already"));
    assert_int_equal(sysrestore_undo(err, sizeof(err)), 0);
    assert_null(slurp(rec));
}

/* A record line that is not KEY=VALUE: refused, nothing replayed, the file kept. */
static void test_malformed_record(void **state)
{
    char err[600], boot[64] = "", ns[64] = "";
    FILE *f;
    ssize_t n;

    (void)state;
    f = fopen("/proc/sys/kernel/random/boot_id", "r");
    assert_non_null(fgets(boot, sizeof(boot), f));
    fclose(f);
    boot[strcspn(boot, "\n")] = '\0';
    n = readlink("/proc/self/ns/net", ns, sizeof(ns) - 1);
    ns[n > 0 ? n : 0] = '\0';
    put("net.core.somaxconn", "65535");
    f = fopen(rec, "w");
    fprintf(f,
            "# lfepoll sysctl record v1 restore pid 42 boot %s netns %s\n"
            "net.core.somaxconn=4096\ngarbage\n",
            boot, ns);
    fclose(f);
    assert_int_equal(sysrestore_open(rec, root, false, err, sizeof(err)), -1);
    assert_non_null(strstr(err, " line 3 is not KEY=VALUE: check those keys by hand"));
    assert_string_equal(get("net.core.somaxconn"), "65535");
    assert_non_null(slurp(rec));
    unlink(rec);
}

static int setup(void **state)
{
    (void)state;
    if (!mkdtemp(dir))
        return -1;
    snprintf(root, sizeof(root), "%s/proc", dir);
    snprintf(rec, sizeof(rec), "%s/run/lfepoll/record", dir);
    return 0;
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
        cmocka_unit_test(test_escaping_round_trips),
        cmocka_unit_test(test_keep_then_undo),
        cmocka_unit_test(test_torn_last_line),
        cmocka_unit_test(test_malformed_record),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
