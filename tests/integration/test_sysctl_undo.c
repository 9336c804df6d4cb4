/* Integration tests of sysrestore and lfepolld --apply-sysctl's dry run and undo, against the
 * real /proc/sys: per-namespace keys only inside a network namespace each test makes (a forked
 * child after unshare(CLONE_NEWNET)), one harmless host-wide key (net.core.message_cost) on the
 * host, put back; lfbench tune --write-sysctl's file read by sysctl -p; the suite compares every
 * writable key under the host's /proc/sys/net before and after and fails if one moved. Root only
 * (skipped otherwise). Run from the repository root. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sysrestore.h"
#include "tunewrite.h"

static const char *lfepolld;
static char dir[] = "/tmp/lfe-sysrestore-XXXXXX";
static char *host_before; /* the host's /proc/sys/net, from the group's setup */
static char host[64];     /* the test's network namespace ("net:[N]"): it lives throughout */

#define RANGE "net.ipv4.ip_local_port_range"
#define UNPRIV "net.ipv4.ip_unprivileged_port_start"
#define RMEM "net.ipv4.tcp_rmem"

/* A failure inside a forked child: its text goes up the pipe, the child exits 1. */
static char why[4096];
#define CHECK(c, ...)                                                                              \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            snprintf(why, sizeof(why), "line %d: ", __LINE__);                                     \
            snprintf(why + strlen(why), sizeof(why) - strlen(why), __VA_ARGS__);                   \
            return why;                                                                            \
        }                                                                                          \
    } while (0)

/* --- snapshots of /proc/sys/net ----------------------------------------------------------- */

static char *snap;
static size_t snap_len, snap_cap;

static int add_key(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    char buf[4096];
    ssize_t n;
    int fd;

    (void)st, (void)ftw;
    if (type != FTW_F || access(path, W_OK) < 0) /* read-only ones are counters, not settings */
        return 0;
    fd = open(path, O_RDONLY);
    if (fd < 0)
        return 0; /* write-only (route.flush) */
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n < 0)
        return 0;
    buf[n] = '\0';
    if (snap_len + strlen(path) + (size_t)n + 3 > snap_cap) {
        snap_cap = (snap_cap + strlen(path) + (size_t)n + 3) * 2;
        snap = realloc(snap, snap_cap);
    }
    snap_len += (size_t)sprintf(snap + snap_len, "%s=%s\n", path, buf);
    return 0;
}

/* Every writable key under /proc/sys/net of this process's namespace, "path=value" lines. */
static char *net_snapshot(void)
{
    snap = NULL;
    snap_len = snap_cap = 0;
    nftw("/proc/sys/net", add_key, 16, FTW_PHYS);
    return snap ? snap : strdup("");
}

/* The first line where a and b differ, for a failure message. */
static const char *first_difference(const char *a, const char *b)
{
    static char out[600];
    const char *p = a, *q = b;

    while (*p && *p == *q)
        p++, q++;
    while (p > a && p[-1] != '\n')
        p--;
    while (q > b && q[-1] != '\n')
        q--;
    snprintf(out, sizeof(out), "before: %.*s, after: %.*s", (int)strcspn(p, "\n"), p,
             (int)strcspn(q, "\n"), q);
    return out;
}

/* --- children ----------------------------------------------------------------------------- */

/* Runs fn in a forked child, in a network namespace of its own when netns, bounded by an alarm;
 * fails the test with what it returned. */
static void in_child(const char *(*fn)(void), bool netns)
{
    char msg[4096] = "";
    int p[2], st;
    ssize_t n, got = 0;
    pid_t pid;

    assert_int_equal(pipe(p), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        const char *w;

        close(p[0]);
        alarm(30);
        w = netns && unshare(CLONE_NEWNET) < 0 ? "unshare(CLONE_NEWNET) failed" : fn();
        if (w && write(p[1], w, strlen(w)) < 0)
            _exit(2);
        _exit(w ? 1 : 0);
    }
    close(p[1]);
    while ((n = read(p[0], msg + got, sizeof(msg) - 1 - (size_t)got)) > 0)
        got += n;
    msg[got] = '\0';
    close(p[0]);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("%s", msg[0] ? msg : "the child died");
}

/* The exact text of a key (less its newline), or "" when it cannot be read. */
static const char *raw(const char *key, char *buf, size_t len)
{
    char e[256];

    return sysrestore_get(key, buf, len, e, sizeof(e)) == 0 ? buf : "";
}

static const char *slurp(const char *path)
{
    static char buf[8192];
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

    if (f)
        fclose(f);
    buf[n] = '\0';
    return buf;
}

static bool exists(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0;
}

/* A child that begins a session at path, changes RANGE, UNPRIV (which rests on RANGE's new low
 * end) and RMEM (tabs), says so on fd ready, and waits to be killed. catch: with the signal
 * handlers; spawn: it forks a grandchild first (its pid written after the byte). */
static pid_t changer(const char *path, int ready, bool catch, bool spawn)
{
    pid_t pid = fork();

    if (pid == 0) {
        char err[600];
        pid_t g = 0;

        alarm(30);
        if (sysrestore_begin(path, err, sizeof(err)) < 0 ||
            (catch && sysrestore_catch_signals(err, sizeof(err)) < 0) ||
            sysrestore_set(RANGE, "40000\t60999", err, sizeof(err)) < 0 ||
            sysrestore_set(UNPRIV, "35000", err, sizeof(err)) < 0 ||
            sysrestore_set(RMEM, "8192\t65536\t1048576", err, sizeof(err)) < 0) {
            fprintf(stderr, "changer: %s\n", err);
            _exit(1);
        }
        if (spawn && (g = fork()) == 0) {
            alarm(30);
            pause(); /* a server lfbench tune runs: the session is not its to undo */
            _exit(0);
        }
        if (write(ready, "x", 1) != 1 || write(ready, &g, sizeof(g)) != sizeof(g))
            _exit(1);
        for (;;)
            pause();
    }
    return pid;
}

static bool wait_ready(int fd, pid_t *grandchild)
{
    char c;

    return read(fd, &c, 1) == 1 && read(fd, grandchild, sizeof(*grandchild)) == sizeof(*grandchild);
}

/* --- the tests ---------------------------------------------------------------------------- */

/* A run killed with SIGKILL after its changes: the next begin puts every key back exactly (tabs
 * and all), newest first (in the other order UNPRIV 35000 would refuse RANGE's 32768 low end),
 * and says so in one line; while the run lived its record was refused to anyone else. */
static const char *crash_then_begin(void)
{
    char path[300], r0[256], u0[64], m0[256], buf[256], err[1024];
    int p[2];
    pid_t c, g;
    int rc;

    snprintf(path, sizeof(path), "%s/crash/restore", dir);
    snprintf(r0, sizeof(r0), "%s", raw(RANGE, buf, sizeof(buf)));
    snprintf(u0, sizeof(u0), "%s", raw(UNPRIV, buf, sizeof(buf)));
    snprintf(m0, sizeof(m0), "%s", raw(RMEM, buf, sizeof(buf)));
    CHECK(strchr(m0, '\t'), "tcp_rmem reads '%s': no tab", m0);
    CHECK(pipe(p) == 0, "pipe");
    c = changer(path, p[1], false, false);
    CHECK(wait_ready(p[0], &g), "the changer did not start");
    CHECK(!strcmp(raw(RMEM, buf, sizeof(buf)), "8192\t65536\t1048576"), "rmem is '%s'", buf);
    CHECK(!strcmp(raw(UNPRIV, buf, sizeof(buf)), "35000"), "unprivileged start is '%s'", buf);
    rc = sysrestore_begin(path, err, sizeof(err));
    CHECK(rc == -1 && strstr(err, "is held by another run (pid ") && !strchr(err, '\n'),
          "a live run's record was not refused: %d %s", rc, err);
    kill(c, SIGKILL);
    waitpid(c, NULL, 0);
    rc = sysrestore_begin(path, err, sizeof(err));
    CHECK(rc == 3, "begin after the crash returned %d: %s", rc, err);
    CHECK(strstr(err, "left 3 keys changed; put back from ") && !strchr(err, '\n'), "the line: %s",
          err);
    CHECK(!strcmp(raw(RANGE, buf, sizeof(buf)), r0), "range '%s', was '%s'", buf, r0);
    CHECK(!strcmp(raw(UNPRIV, buf, sizeof(buf)), u0), "unprivileged '%s', was '%s'", buf, u0);
    CHECK(!strcmp(raw(RMEM, buf, sizeof(buf)), m0), "rmem '%s', was '%s'", buf, m0);
    CHECK(sysrestore_undo(err, sizeof(err)) == 0 && !exists(path), "undo: %s", err);
    return NULL;
}

static void test_crash_is_put_back_at_begin(void **state)
{
    (void)state;
    in_child(crash_then_begin, true);
}

/* sysrestore_undo writes back newest first, exactly, and removes the record; a key set twice
 * keeps its first value; a rewind between rounds puts back and keeps the session. */
static const char *set_then_undo(void)
{
    char path[300], r0[256], u0[64], m0[256], buf[256], err[1024];

    snprintf(path, sizeof(path), "%s/undo/restore", dir);
    snprintf(r0, sizeof(r0), "%s", raw(RANGE, buf, sizeof(buf)));
    snprintf(u0, sizeof(u0), "%s", raw(UNPRIV, buf, sizeof(buf)));
    snprintf(m0, sizeof(m0), "%s", raw(RMEM, buf, sizeof(buf)));
    CHECK(sysrestore_begin(path, err, sizeof(err)) == 0 && !err[0], "begin: %s", err);
    CHECK(sysrestore_set(RANGE, "40000 60999", err, sizeof(err)) == 0, "%s", err);
    CHECK(sysrestore_set(UNPRIV, "35000", err, sizeof(err)) == 0, "%s", err);
    CHECK(sysrestore_set(RMEM, "8192\t65536\t1048576", err, sizeof(err)) == 0, "%s", err);
    CHECK(sysrestore_set(RMEM, "4096 87380 2097152", err, sizeof(err)) == 0, "%s", err);
    CHECK(!strcmp(raw(RMEM, buf, sizeof(buf)), "4096\t87380\t2097152"), "rmem '%s'", buf);
    CHECK(sysrestore_count() == 3, "%d keys saved, want 3", sysrestore_count());
    /* a round's end: all back, the record emptied, the session still open */
    CHECK(sysrestore_rewind(err, sizeof(err)) == 0, "rewind: %s", err);
    CHECK(sysrestore_count() == 0 && !strcmp(raw(RANGE, buf, sizeof(buf)), r0) &&
              !strcmp(raw(RMEM, buf, sizeof(buf)), m0),
          "after rewind: %d keys, range %s", sysrestore_count(), buf);
    CHECK(exists(path) && !strchr(strchr(slurp(path), '\n') + 1, '='), "the record after rewind");
    CHECK(sysrestore_set(RANGE, "40000 60999", err, sizeof(err)) == 0, "%s", err);
    CHECK(sysrestore_set(UNPRIV, "35000", err, sizeof(err)) == 0, "%s", err);
    CHECK(sysrestore_set(RMEM, "4096 87380 2097152", err, sizeof(err)) == 0, "%s", err);
    CHECK(sysrestore_undo(err, sizeof(err)) == 0, "undo: %s", err);
    CHECK(!exists(path), "the record is still there after undo");
    CHECK(!strcmp(raw(RANGE, buf, sizeof(buf)), r0), "range '%s', was '%s'", buf, r0);
    CHECK(!strcmp(raw(UNPRIV, buf, sizeof(buf)), u0), "unprivileged '%s', was '%s'", buf, u0);
    CHECK(!strcmp(raw(RMEM, buf, sizeof(buf)), m0), "rmem '%s', was '%s'", buf, m0);
    return NULL;
}

static void test_undo_newest_first_exactly(void **state)
{
    (void)state;
    in_child(set_then_undo, true);
}

/* Keys that are not there, not keys, read-only, or not names; a value the kernel refuses: one
 * line each, nothing recorded, nothing changed. */
static const char *refusals(void)
{
    static const struct {
        const char *key, *value, *says;
    } bad[] = {
        {"net.ipv4.no_such_key", "1", "no such key"},
        {"net.ipv4.tcp_available_congestion_control", "reno", "read-only"},
        {"net.ipv4", "1", "a directory of keys"},
        {"net..core.somaxconn", "1", "not a sysctl name"},
        {"net.core./../../etc", "1", "not a sysctl name"},
        {"net.core.somaxconn\n", "1", "not a sysctl name"},
        {"", "1", "not a sysctl name"},
        {"net.core.somaxconn", "", "empty"},
        {"net.core.somaxconn", "-5", "the kernel refused '-5'"},
    };
    char path[300], before[64], buf[256], err[1024];
    struct stat st;

    snprintf(path, sizeof(path), "%s/refuse/restore", dir);
    snprintf(before, sizeof(before), "%s", raw("net.core.somaxconn", buf, sizeof(buf)));
    CHECK(sysrestore_set("net.core.somaxconn", "100", err, sizeof(err)) < 0 &&
              strstr(err, "no sysctl record is open"),
          "a set without a session: %s", err);
    CHECK(sysrestore_begin(path, err, sizeof(err)) == 0, "begin: %s", err);
    CHECK(stat(path, &st) == 0, "no record");
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        CHECK(sysrestore_set(bad[i].key, bad[i].value, err, sizeof(err)) < 0,
              "'%s' = '%s' was taken", bad[i].key, bad[i].value);
        CHECK(strstr(err, bad[i].says) && !strchr(err, '\n'), "'%s': said '%s', want '%s'",
              bad[i].key, err, bad[i].says);
    }
    CHECK(!strcmp(raw("net.core.somaxconn", buf, sizeof(buf)), before), "somaxconn moved: %s", buf);
    CHECK(sysrestore_count() <= 1, "%d keys saved", sysrestore_count()); /* -5's old value */
    CHECK(sysrestore_undo(err, sizeof(err)) == 0 && !exists(path), "undo: %s", err);
    CHECK(!strcmp(raw("net.core.somaxconn", buf, sizeof(buf)), before), "somaxconn moved: %s", buf);
    return NULL;
}

static void test_bad_keys_refused(void **state)
{
    (void)state;
    in_child(refusals, true);
}

/* Whether pid (not ours to reap: a zombie of its parent) has died, within 10 s. */
static bool dead(pid_t pid)
{
    for (int i = 0; i < 1000; i++) {
        char path[64], stat[256] = "";
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        if (!(f = fopen(path, "r")))
            return true;
        if (!fgets(stat, sizeof(stat), f))
            stat[0] = '\0';
        fclose(f);
        if (strstr(stat, ") Z "))
            return true;
        usleep(10000);
    }
    return false;
}

/* SIGTERM to a run mid-change: it puts every key back and dies of the signal, its record gone;
 * the same signal to a child it forked (a server) puts nothing back. */
static const char *sigterm(void)
{
    char path[300], r0[256], u0[64], m0[256], buf[256];
    int p[2], st;
    pid_t c, g;

    snprintf(path, sizeof(path), "%s/term/restore", dir);
    snprintf(r0, sizeof(r0), "%s", raw(RANGE, buf, sizeof(buf)));
    snprintf(u0, sizeof(u0), "%s", raw(UNPRIV, buf, sizeof(buf)));
    snprintf(m0, sizeof(m0), "%s", raw(RMEM, buf, sizeof(buf)));
    CHECK(pipe(p) == 0, "pipe");
    c = changer(path, p[1], true, true);
    CHECK(wait_ready(p[0], &g) && g > 0, "the changer did not start");
    kill(g, SIGTERM);
    CHECK(dead(g), "the grandchild did not die of SIGTERM");
    CHECK(!strcmp(raw(UNPRIV, buf, sizeof(buf)), "35000"), "a forked child put back: %s", buf);
    CHECK(exists(path), "a forked child removed the record");
    kill(c, SIGTERM);
    CHECK(waitpid(c, &st, 0) == c, "waitpid");
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM, "the run did not die of SIGTERM (%#x)", st);
    CHECK(!strcmp(raw(RANGE, buf, sizeof(buf)), r0), "range '%s', was '%s'", buf, r0);
    CHECK(!strcmp(raw(UNPRIV, buf, sizeof(buf)), u0), "unprivileged '%s', was '%s'", buf, u0);
    CHECK(!strcmp(raw(RMEM, buf, sizeof(buf)), m0), "rmem '%s', was '%s'", buf, m0);
    CHECK(!exists(path), "the record is left after SIGTERM");
    return NULL;
}

static void test_sigterm_puts_back(void **state)
{
    (void)state;
    in_child(sigterm, true);
}

/* A record that is not one, one another user could have written, one from before a reboot, one
 * from a live namespace other than this: refused or dropped with one line, never replayed. */
static const char *foreign_records(void)
{
    char path[300], buf[256], err[1024], ns[64];
    ssize_t n;
    FILE *f;
    int rc;

    snprintf(path, sizeof(path), "%s/foreign", dir);
    f = fopen(path, "w");
    fputs("root:x:0:0:root:/root:/bin/bash\n", f);
    fclose(f);
    rc = sysrestore_begin(path, err, sizeof(err));
    CHECK(rc < 0 && strstr(err, "not a sysctl record of lfepoll"), "%d %s", rc, err);
    CHECK(!strcmp((f = fopen(path, "r"), fgets(buf, sizeof(buf), f), fclose(f), buf),
                  "root:x:0:0:root:/root:/bin/bash\n"),
          "the file was changed: %s", buf);
    n = readlink("/proc/self/ns/net", ns, sizeof(ns) - 1);
    ns[n > 0 ? n : 0] = '\0';
    f = fopen("/proc/sys/kernel/random/boot_id", "r");
    CHECK(f && fgets(buf, sizeof(buf), f), "boot_id");
    fclose(f);
    buf[strcspn(buf, "\n")] = '\0';
    f = fopen(path, "w"); /* a good record, planted by another user: never replayed */
    fprintf(f, "# lfepoll sysctl record v1 restore pid 1 boot %s netns %s\n%s=1\n", buf, ns,
            UNPRIV);
    fclose(f);
    CHECK(chown(path, 65534, 65534) == 0, "chown");
    rc = sysrestore_begin(path, err, sizeof(err));
    CHECK(rc < 0 && strstr(err, "belongs to uid 65534 or others may write it: not trusted"),
          "%d %s", rc, err);
    CHECK(chown(path, 0, 0) == 0 && chmod(path, 0666) == 0, "chmod");
    rc = sysrestore_begin(path, err, sizeof(err));
    CHECK(rc < 0 && strstr(err, "not trusted"), "a record others may write: %d %s", rc, err);
    CHECK(!strcmp(raw(UNPRIV, buf, sizeof(buf)), "1024"), "a planted record was replayed: %s", buf);
    unlink(path);
    f = fopen(path, "w");
    fprintf(f, "# lfepoll sysctl record v1 restore pid 1 boot 0-old-boot netns %s\n%s=1\n", ns,
            UNPRIV);
    fclose(f);
    rc = sysrestore_begin(path, err, sizeof(err));
    CHECK(rc == 0 && strstr(err, "written before the last reboot"), "%d %s", rc, err);
    CHECK(!strcmp(raw(UNPRIV, buf, sizeof(buf)), "1024"), "a stale record was replayed: %s", buf);
    CHECK(sysrestore_undo(err, sizeof(err)) == 0, "%s", err);
    f = fopen("/proc/sys/kernel/random/boot_id", "r");
    CHECK(f && fgets(buf, sizeof(buf), f), "boot_id");
    fclose(f);
    buf[strcspn(buf, "\n")] = '\0';
    f = fopen(path, "w");
    fprintf(f, "# lfepoll sysctl record v1 restore pid 1 boot %s netns %s\n%s=1\n", buf, host,
            UNPRIV);
    fclose(f);
    rc = sysrestore_begin(path, err, sizeof(err));
    CHECK(rc < 0 && strstr(err, "was written in network namespace net:[") && strstr(err, host),
          "%d %s", rc, err);
    f = fopen(path, "w"); /* a namespace that is gone, and its keys with it */
    fprintf(f, "# lfepoll sysctl record v1 restore pid 1 boot %s netns net:[1]\n%s=1\n", buf,
            UNPRIV);
    fclose(f);
    rc = sysrestore_begin(path, err, sizeof(err));
    CHECK(rc == 0 && strstr(err, "which is gone with the keys it changed"), "%d %s", rc, err);
    CHECK(sysrestore_undo(err, sizeof(err)) == 0, "%s", err);
    f = fopen(path, "w");
    fprintf(f, "# lfepoll sysctl record v1 undo pid 1 boot %s netns %s\n%s=1\n", buf, ns, UNPRIV);
    fclose(f);
    rc = sysrestore_begin(path, err, sizeof(err));
    CHECK(rc < 0 && strstr(err, "undo record, not a restore record"), "%d %s", rc, err);
    CHECK(!strcmp(raw(UNPRIV, buf, sizeof(buf)), "1024"), "a refused record was replayed: %s", buf);
    return NULL;
}

static void test_foreign_records(void **state)
{
    (void)state;
    in_child(foreign_records, true);
}

/* The host-wide key: a run on the host changes net.core.message_cost (how often the kernel may
 * log network warnings: harmless) and is killed; the next begin puts it back. */
static const char *host_key(void)
{
    char path[300], m0[64], want[64], buf[64], err[1024];
    int p[2];
    pid_t c;

    snprintf(path, sizeof(path), "%s/host/restore", dir);
    snprintf(m0, sizeof(m0), "%s", raw("net.core.message_cost", buf, sizeof(buf)));
    CHECK(m0[0], "no net.core.message_cost");
    snprintf(want, sizeof(want), "%d", atoi(m0) + 1);
    CHECK(pipe(p) == 0, "pipe");
    if ((c = fork()) == 0) {
        alarm(30);
        if (sysrestore_begin(path, err, sizeof(err)) < 0 ||
            sysrestore_set("net.core.message_cost", want, err, sizeof(err)) < 0)
            _exit(1);
        if (write(p[1], "x", 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    CHECK(read(p[0], buf, 1) == 1, "the changer did not start");
    CHECK(!strcmp(raw("net.core.message_cost", buf, sizeof(buf)), want), "not set: %s", buf);
    kill(c, SIGKILL);
    waitpid(c, NULL, 0);
    CHECK(sysrestore_begin(path, err, sizeof(err)) == 1, "begin: %s", err);
    CHECK(sysrestore_undo(err, sizeof(err)) == 0, "%s", err);
    CHECK(!strcmp(raw("net.core.message_cost", buf, sizeof(buf)), m0), "message_cost %s, was %s",
          buf, m0);
    return NULL;
}

static void test_host_key_put_back(void **state)
{
    (void)state;
    in_child(host_key, false);
}

/* Runs a shell command; its exit status, its output (stdout and stderr) in out. */
static int run(const char *cmd, char *out, size_t len)
{
    FILE *p = popen(cmd, "r");
    size_t n;
    int st;

    if (!p)
        return -1;
    n = fread(out, 1, len - 1, p);
    out[n] = '\0';
    st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* Whether every "set KEY = V (was" line of applied is a "would set KEY = V (now" line of dry. */
static bool same_keys(const char *applied, const char *dry)
{
    int n = 0;

    for (const char *p = applied; (p = strstr(p, "\nset ")); p++) {
        char want[300];
        const char *was = strstr(p, " (was ");

        snprintf(want, sizeof(want), "would %.*s (now ", (int)(was - p - 1), p + 1);
        if (!strstr(dry, want))
            return false;
        n++;
    }
    for (const char *p = dry; (p = strstr(p, "would set ")); p++)
        n--;
    return n == 0;
}

/* lfepolld --apply-sysctl --dry-run changes nothing and lists what the apply sets; the apply
 * says a reboot undoes it and how to keep it; applied twice, --undo-sysctl puts back what was
 * there before the first; a second undo has nothing to do. */
static const char *apply_dry_undo(void)
{
    static char dry[1 << 16], out[1 << 16];
    char cmd[1024], undo[300], printed[1024];
    const char *cut, *end;
    char *s0, *s1;
    int rc;

    snprintf(undo, sizeof(undo), "%s/apply/undo", dir);
    s0 = net_snapshot();
    snprintf(cmd, sizeof(cmd), "%s --apply-sysctl --dry-run --undo-file %s 2>&1", lfepolld, undo);
    rc = run(cmd, dry, sizeof(dry));
    s1 = net_snapshot();
    CHECK(rc == 1, "--dry-run exited %d:\n%s", rc, dry);
    CHECK(!strcmp(s0, s1), "--dry-run changed a key: %s", first_difference(s0, s1));
    CHECK(!exists(undo), "--dry-run wrote %s", undo);
    CHECK(strstr(dry, "would set net.core.somaxconn = 65535 (now ") &&
              strstr(dry, "dry run: nothing changed; "),
          "%s", dry);
    CHECK(!strstr(dry, "\nset "), "--dry-run says it set something:\n%s", dry);
    free(s1);
    snprintf(cmd, sizeof(cmd), "%s --apply-sysctl --undo-file %s 2>&1", lfepolld, undo);
    rc = run(cmd, out, sizeof(out) - 1);
    memmove(out + 1, out, strlen(out) + 1);
    out[0] = '\n';
    CHECK(rc == 1, "--apply-sysctl exited %d:\n%s", rc, out);
    CHECK(same_keys(out, dry), "the dry run's keys are not the apply's:\n%s\n---\n%s", dry, out);
    CHECK(strstr(out, "a value set with --apply-sysctl lasts until the next reboot; to keep "
                      "sysctl.conf's values, put the file in /etc/sysctl.d (read at boot): cp "
                      "sysctl.conf /etc/sysctl.d/60-lfepoll.conf\n"),
          "no reboot sentence:\n%s", out);
    CHECK((cut = strstr(out, "\nwhat it changed is saved in ")) && (cut = strstr(cut, ": ")) &&
              (end = strstr(cut, " puts it back\n")),
          "no undo line:\n%s", out);
    snprintf(printed, sizeof(printed), "%.*s 2>&1", (int)(end - cut - 2), cut + 2);
    s1 = net_snapshot();
    CHECK(strcmp(s0, s1), "--apply-sysctl changed nothing");
    free(s1);
    rc = run(cmd, out, sizeof(out)); /* again: nothing to change, the first values stay */
    CHECK(rc == 1 && strstr(out, "nothing to change"), "a second apply:\n%s", out);
    rc = run(printed, out, sizeof(out)); /* the undo the apply named, as it named it */
    s1 = net_snapshot();
    CHECK(rc == 0 && strstr(out, "put back net.core.somaxconn = 4096 (was 65535)") &&
              strstr(out, "put back net.ipv4.ip_local_reserved_ports = empty (was 9876)"),
          "--undo-sysctl exited %d:\n%s", rc, out);
    CHECK(!strcmp(s0, s1), "--undo-sysctl left a key changed: %s", first_difference(s0, s1));
    CHECK(!exists(undo), "the undo record is still there");
    rc = run(printed, out, sizeof(out));
    CHECK(rc == 0 && strstr(out, "nothing to undo: "), "a second undo %d:\n%s", rc, out);
    free(s0);
    free(s1);
    return NULL;
}

/* The undo file attacked: one that is not lfepolld's (the apply refuses it, exit 2, nothing set,
 * the file as it was), one from before a reboot (dropped, nothing replayed), one holding a value
 * the kernel refuses (exit 1, the file kept); the default directory's mode; a dry run as
 * nobody. */
static const char *undo_file_attacks(void)
{
    static char out[1 << 16];
    char cmd[1024], undo[300], buf[256], boot[64], ns[64];
    char *s0, *s1;
    struct stat st;
    ssize_t n;
    FILE *f;
    int rc;

    snprintf(undo, sizeof(undo), "%s/attack/undo", dir);
    snprintf(cmd, sizeof(cmd), "mkdir -p %s/attack && echo 'not a record' >%s", dir, undo);
    CHECK(system(cmd) == 0, "%s", cmd);
    s0 = net_snapshot();
    snprintf(cmd, sizeof(cmd), "%s --apply-sysctl --undo-file %s 2>&1", lfepolld, undo);
    rc = run(cmd, out, sizeof(out));
    s1 = net_snapshot();
    CHECK(rc == 2 && strstr(out, "lfepolld: --apply-sysctl: nothing set: the undo record: ") &&
              strstr(out, "is not a sysctl record of lfepoll"),
          "an apply over a foreign file exited %d:\n%s", rc, out);
    CHECK(!strcmp(s0, s1), "it changed a key: %s", first_difference(s0, s1));
    CHECK((f = fopen(undo, "r")) && fgets(buf, sizeof(buf), f) && !strcmp(buf, "not a record\n"),
          "the foreign file was changed");
    fclose(f);
    free(s1);

    f = fopen("/proc/sys/kernel/random/boot_id", "r");
    CHECK(f && fgets(boot, sizeof(boot), f), "boot_id");
    fclose(f);
    boot[strcspn(boot, "\n")] = '\0';
    n = readlink("/proc/self/ns/net", ns, sizeof(ns) - 1);
    ns[n > 0 ? n : 0] = '\0';
    f = fopen(undo, "w");
    fprintf(f, "# lfepoll sysctl record v1 undo pid 1 boot 0-old netns %s\n%s=100\n", ns,
            "net.core.somaxconn");
    fclose(f);
    snprintf(cmd, sizeof(cmd), "%s --undo-sysctl --undo-file %s 2>&1", lfepolld, undo);
    rc = run(cmd, out, sizeof(out));
    s1 = net_snapshot();
    CHECK(rc == 0 && strstr(out, "written before the last reboot") &&
              strstr(out, "nothing to undo"),
          "a stale undo file: %d\n%s", rc, out);
    CHECK(!strcmp(s0, s1), "a stale undo file was replayed: %s", first_difference(s0, s1));
    free(s1);

    f = fopen(undo, "w");
    fprintf(f, "# lfepoll sysctl record v1 undo pid 1 boot %s netns %s\n%s=-5\n", boot, ns,
            "net.core.somaxconn");
    fclose(f);
    rc = run(cmd, out, sizeof(out));
    CHECK(rc == 1 && strstr(out, "1 key not put back: net.core.somaxconn (Invalid argument)") &&
              stat(undo, &st) == 0,
          "a value the kernel refuses: %d\n%s", rc, out);

    snprintf(cmd, sizeof(cmd), "%s --apply-sysctl --undo-file %s/made/here/undo >/dev/null 2>&1",
             lfepolld, dir);
    CHECK(run(cmd, out, sizeof(out)) == 1, "an apply into a new directory");
    snprintf(buf, sizeof(buf), "%s/made/here", dir);
    CHECK(stat(buf, &st) == 0 && (st.st_mode & 0777) == 0700, "%s: mode %o", buf,
          st.st_mode & 0777);
    /* all right already: nothing to save, so an undo file that cannot be made is no matter */
    snprintf(cmd, sizeof(cmd), "%s --apply-sysctl --undo-file /proc/no/undo 2>&1", lfepolld);
    rc = run(cmd, out, sizeof(out));
    CHECK(rc == 1 && strstr(out, "nothing to change\n"), "an apply with nothing to do: %d\n%s", rc,
          out);
    snprintf(cmd, sizeof(cmd), "%s --undo-sysctl --undo-file %s/made/here/undo 2>&1", lfepolld,
             dir);
    CHECK(run(cmd, out, sizeof(out)) == 0, "undo:\n%s", out);
    snprintf(cmd, sizeof(cmd), "%s --apply-sysctl --undo-file /proc/no/undo 2>&1", lfepolld);
    rc = run(cmd, out, sizeof(out));
    CHECK(rc == 2 && strstr(out, "lfepolld: --apply-sysctl: nothing set: the undo record: "
                                 "/proc/no/undo: cannot make its directory"),
          "an apply that cannot save: %d\n%s", rc, out);

    snprintf(cmd, sizeof(cmd),
             "setpriv --reuid=65534 --regid=65534 --clear-groups %s --apply-sysctl --dry-run "
             "2>&1",
             lfepolld);
    rc = run(cmd, out, sizeof(out));
    CHECK(rc == 1 && strstr(out, "would set net.core.somaxconn = 65535") &&
              !strstr(out, "needs root"),
          "a dry run as nobody exited %d:\n%s", rc, out);
    s1 = net_snapshot();
    CHECK(!strcmp(s0, s1), "left a key changed: %s", first_difference(s0, s1));
    free(s0);
    free(s1);
    return NULL;
}

static void test_undo_file_attacks(void **state)
{
    (void)state;
    in_child(undo_file_attacks, true);
}

static void test_apply_dry_run_and_undo(void **state)
{
    (void)state;
    in_child(apply_dry_undo, true);
}

/* lfbench tune --write-sysctl's file as the real reader takes it: sysctl -p sets the keys that
 * helped (a tab value too) and none of the others. */
static const char *written_file_applies(void)
{
    static const struct tunewrite_verdict v[] = {
        {RANGE, "1024 65535", TUNEWRITE_HELPS, 1.56, 1.48, 1.63, 10, "22.2k against 14.2k/s"},
        {RMEM, "8192\t65536\t1048576", TUNEWRITE_HELPS, 1.1, 1.02, 1.2, 8, "p99 1.9 ms"},
        {"net.ipv4.tcp_fin_timeout", "5", TUNEWRITE_NONE, 1.0, 0.97, 1.02, 10, "flat"},
    };
    char path[300], cmd[400], out[4096], buf[256], fin[64], err[300];
    int rc;

    snprintf(path, sizeof(path), "%s/90-tuned.conf", dir);
    snprintf(fin, sizeof(fin), "%s", raw("net.ipv4.tcp_fin_timeout", buf, sizeof(buf)));
    rc = tunewrite_file(path, v, 3, "test", false, err, sizeof(err));
    CHECK(rc == 2, "tunewrite_file: %d %s", rc, err);
    snprintf(cmd, sizeof(cmd), "sysctl -p %s 2>&1", path);
    rc = run(cmd, out, sizeof(out));
    CHECK(rc == 0, "sysctl -p exited %d:\n%s", rc, out);
    CHECK(!strcmp(raw(RANGE, buf, sizeof(buf)), "1024\t65535"), "range %s", buf);
    CHECK(!strcmp(raw(RMEM, buf, sizeof(buf)), "8192\t65536\t1048576"), "rmem %s", buf);
    CHECK(!strcmp(raw("net.ipv4.tcp_fin_timeout", buf, sizeof(buf)), fin), "fin_timeout set: %s",
          buf);
    return NULL;
}

static void test_written_file_applies(void **state)
{
    (void)state;
    in_child(written_file_applies, true);
}

static int setup(void **state)
{
    ssize_t n;

    (void)state;
    if (geteuid() != 0)
        return 0;
    if (!mkdtemp(dir))
        return -1;
    host_before = net_snapshot();
    n = readlink("/proc/self/ns/net", host, sizeof(host) - 1);
    host[n > 0 ? n : 0] = '\0';
    return 0;
}

/* The host, last: every writable key under /proc/sys/net as it was before the first test (a
 * test, not the group's teardown, whose failure cmocka does not count in the exit status). */
static void test_host_unchanged(void **state)
{
    char *after;

    (void)state;
    if (!host_before)
        skip();
    after = net_snapshot();
    if (strcmp(host_before, after))
        fail_msg("the host's /proc/sys/net changed: %s", first_difference(host_before, after));
    free(after);
}

static int teardown(void **state)
{
    char cmd[400];

    (void)state;
    if (!host_before)
        return 0;
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static bool can_unshare(void)
{
    return geteuid() == 0 && system("unshare -n true 2>/dev/null") == 0;
}

#define ROOT_TEST(f)                                                                               \
    static void f##_as_root(void **state)                                                          \
    {                                                                                              \
        if (!can_unshare())                                                                        \
            skip(); /* needs root and unshare(CLONE_NEWNET): CI has both */                        \
        f(state);                                                                                  \
    }
ROOT_TEST(test_crash_is_put_back_at_begin)
ROOT_TEST(test_undo_newest_first_exactly)
ROOT_TEST(test_bad_keys_refused)
ROOT_TEST(test_sigterm_puts_back)
ROOT_TEST(test_foreign_records)
ROOT_TEST(test_host_key_put_back)
ROOT_TEST(test_apply_dry_run_and_undo)
ROOT_TEST(test_undo_file_attacks)
ROOT_TEST(test_written_file_applies)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crash_is_put_back_at_begin_as_root),
        cmocka_unit_test(test_undo_newest_first_exactly_as_root),
        cmocka_unit_test(test_bad_keys_refused_as_root),
        cmocka_unit_test(test_sigterm_puts_back_as_root),
        cmocka_unit_test(test_foreign_records_as_root),
        cmocka_unit_test(test_host_key_put_back_as_root),
        cmocka_unit_test(test_apply_dry_run_and_undo_as_root),
        cmocka_unit_test(test_undo_file_attacks_as_root),
        cmocka_unit_test(test_written_file_applies_as_root),
        cmocka_unit_test(test_host_unchanged), /* last */
    };

    lfepolld = getenv("LFEPOLLD");
    if (!lfepolld) {
        fprintf(stderr, "set LFEPOLLD (make test does)\n");
        return 1;
    }
    unsetenv("MAKELEVEL");
    return cmocka_run_group_tests(tests, setup, teardown);
}
