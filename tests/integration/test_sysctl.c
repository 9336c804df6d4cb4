/* Integration tests of the kernel tuning: lfepolld --check-sysctl on this machine, and
 * sysctl.conf applied inside a network namespace made for the test (root only), leaving the
 * host's values as they were. Run from the repository root. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *lfepolld;

struct key {
    char name[96];
    bool netns, applied;
};

static struct key keys[64];
static int nkeys;

/* The keys of sysctl.conf, read here independently of lfepolld's parser. */
static void read_conf(void)
{
    FILE *f = fopen("sysctl.conf", "r");
    char line[1024];
    bool netns = false;

    assert_non_null(f);
    nkeys = 0;
    while (fgets(line, sizeof(line), f)) {
        char *s = line, *eq;
        bool check_only = !strncmp(s, "#= ", 3);

        if (!strncmp(s, "# @ ", 4)) {
            netns = !strncmp(s + 4, "netns", 5);
            continue;
        }
        if (check_only)
            s += 3;
        else if (*s == '#' || *s == '\n')
            continue;
        eq = strstr(s, " = ");
        assert_non_null(eq);
        assert_true(nkeys < 64);
        snprintf(keys[nkeys].name, sizeof(keys[nkeys].name), "%.*s", (int)(eq - s), s);
        keys[nkeys].netns = netns;
        keys[nkeys].applied = !check_only;
        nkeys++;
    }
    fclose(f);
    assert_true(nkeys >= 15);
}

/* Runs a shell command; returns its exit status, its output in *out (malloc'd). */
static int run(const char *cmd, char **out)
{
    FILE *p = popen(cmd, "r");
    size_t cap = 1 << 16, n = 0;
    int st;

    assert_non_null(p);
    *out = malloc(cap);
    n = fread(*out, 1, cap - 1, p);
    (*out)[n] = '\0';
    st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* The report's row for name: the line that starts with it. */
static const char *row(const char *text, const char *name)
{
    size_t l = strlen(name);

    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (!strncmp(p, name, l) && p[l] == ' ')
            return p;
    return NULL;
}

static bool row_status(const char *text, const char *name, const char *status)
{
    const char *r = row(text, name), *nl;
    char want[32];

    if (!r)
        return false;
    nl = strchr(r, '\n');
    snprintf(want, sizeof(want), " %s ", status);
    r = strstr(r, want);
    return r && (!nl || r < nl);
}

static void test_check_prints_every_key(void **state)
{
    char cmd[512], *out;
    int rc;

    (void)state;
    read_conf();
    snprintf(cmd, sizeof(cmd), "%s --check-sysctl 2>&1", lfepolld);
    rc = run(cmd, &out);
    if (rc != 0 && rc != 1)
        fail_msg("--check-sysctl exited %d:\n%s", rc, out);
    for (int i = 0; i < nkeys; i++)
        if (!row(out, keys[i].name))
            fail_msg("no row for %s:\n%s", keys[i].name, out);
    assert_non_null(row(out, "RLIMIT_NOFILE"));
    assert_non_null(strstr(out, "accept queue: min(--backlog 65535, somaxconn "));
    assert_non_null(strstr(out, "client closes first: "));
    /* the exit status says whether anything needs attention, and so does the last line */
    assert_true(rc == 0 ? strstr(out, "ok\n") != NULL : strstr(out, "need attention") != NULL);
    free(out);
    /* the file given, not the built-in copy; a broken one is exit 2 with the line */
    snprintf(cmd, sizeof(cmd),
             "printf 'net.core.somaxconn = 1\\n' >/tmp/lfe-bad.conf; %s "
             "--check-sysctl --sysctl-conf /tmp/lfe-bad.conf 2>&1",
             lfepolld);
    assert_int_equal(run(cmd, &out), 2);
    assert_non_null(strstr(out, "line 1: a key needs a '# @ SCOPE CHECK: why' line"));
    free(out);
    unlink("/tmp/lfe-bad.conf");
    snprintf(cmd, sizeof(cmd), "%s --check-sysctl --sysctl-conf /nonexistent 2>&1", lfepolld);
    assert_int_equal(run(cmd, &out), 2);
    assert_non_null(strstr(out, "--sysctl-conf /nonexistent: cannot read it"));
    free(out);
}

static bool can_unshare(void)
{
    return geteuid() == 0 && system("unshare -n true 2>/dev/null") == 0;
}

/* Apply inside a fresh network namespace: every per-namespace key ends up right there, the
 * host's values do not move, and plain sysctl -p fails on host-wide keys only. */
static void test_apply_in_netns(void **state)
{
    char cmd[1024], *out, *host0, *host1;
    int rc;

    (void)state;
    if (!can_unshare())
        skip(); /* needs root and unshare(CLONE_NEWNET): CI has both */
    read_conf();
    run("cat /proc/sys/net/core/somaxconn /proc/sys/net/ipv4/ip_local_port_range "
        "/proc/sys/net/ipv4/ip_local_reserved_ports /proc/sys/net/ipv4/tcp_slow_start_after_idle",
        &host0);
    /* its undo file in /tmp: the default (/var/lib/lfepoll) is the host's, not a test's */
    snprintf(cmd, sizeof(cmd),
             "d=$(mktemp -d /tmp/lfe-sysctl-XXXXXX) && unshare -n sh -c '%s --apply-sysctl "
             "--undo-file '$d/undo; rc=$?; rm -rf $d; exit $rc",
             lfepolld);
    rc = run(cmd, &out);
    if (rc != 0 && rc != 1)
        fail_msg("--apply-sysctl in a namespace exited %d:\n%s", rc, out);
    for (int i = 0; i < nkeys; i++)
        if (keys[i].netns && !row_status(out, keys[i].name, "ok"))
            fail_msg("%s is not ok after --apply-sysctl in a fresh namespace:\n%s", keys[i].name,
                     out);
    assert_non_null(strstr(out, "set net.core.somaxconn = 65535"));
    if (strstr(out, "sudo")) /* as root: no remedy says sudo (test_remedies_for_who_runs_it) */
        fail_msg("--apply-sysctl as root says sudo:\n%s", out);
    if (rc != 1) /* netdev_max_backlog is absent in a namespace: left, not a failure (3) */
        fail_msg("--apply-sysctl in a namespace exited %d, want 1:\n%s", rc, out);
    free(out);

    snprintf(cmd, sizeof(cmd),
             "unshare -n sh -c 'sysctl -p sysctl.conf >/dev/null 2>/tmp/lfe-sysctl.err; "
             "%s --check-sysctl; cat /tmp/lfe-sysctl.err' 2>&1",
             lfepolld);
    run(cmd, &out);
    for (int i = 0; i < nkeys; i++) {
        char path[160];
        if (!keys[i].netns || !keys[i].applied)
            continue;
        if (!row_status(out, keys[i].name, "ok"))
            fail_msg("sysctl -p left %s not ok in a fresh namespace:\n%s", keys[i].name, out);
        snprintf(path, sizeof(path), "cannot stat /proc/sys/%s", keys[i].name);
        for (char *c = path + 22; *c; c++)
            *c = *c == '.' ? '/' : *c;
        assert_null(strstr(out, path)); /* only host-wide keys may be absent there */
    }
    free(out);
    unlink("/tmp/lfe-sysctl.err");

    run("cat /proc/sys/net/core/somaxconn /proc/sys/net/ipv4/ip_local_port_range "
        "/proc/sys/net/ipv4/ip_local_reserved_ports /proc/sys/net/ipv4/tcp_slow_start_after_idle",
        &host1);
    assert_string_equal(host0, host1); /* the host untouched */
    free(host0);
    free(host1);
}

/* Starts lfepolld with args for about a second where somaxconn is below the default backlog
 * 65535 (a fresh network namespace: the kernel's 4096), env ("VAR=value ..." or "") in its
 * environment, and returns what it logged. */
static char *start_briefly_env(const char *env, const char *args)
{
    char cmd[1024], *out, *host;
    long somaxconn;

    if (can_unshare()) {
        snprintf(cmd, sizeof(cmd),
                 "unshare -n sh -c 'ip link set lo up && %s timeout -k 10 -s TERM 1 %s "
                 "--listen 127.0.0.1:0 %s' 2>&1",
                 env, lfepolld, args);
    } else {
        run("cat /proc/sys/net/core/somaxconn", &host);
        somaxconn = atol(host);
        free(host);
        if (somaxconn <= 0 || somaxconn >= 65535)
            return NULL; /* nothing to cut here, and no namespace to make one in */
        snprintf(cmd, sizeof(cmd), "%s timeout -k 10 -s TERM 1 %s --listen 127.0.0.1:0 %s 2>&1",
                 env, lfepolld, args);
    }
    run(cmd, &out);
    return out;
}

static char *start_briefly(const char *args)
{
    return start_briefly_env("", args);
}

/* test_backlog_default_no_warning: a stock kernel's somaxconn (4096) cuts the default backlog
 * on every start; that was a warning each time, even with -q. Now it is one info line with the
 * remedy; a --backlog the user chose (command line or config file) still warns. */
static void test_backlog_default_no_warning(void **state)
{
    char *out, want[512];
    FILE *f;

    (void)state;
    if (!(out = start_briefly("")))
        skip();
    if (strstr(out, "warning:") || !strstr(out, "info: accept queue ") ||
        !strstr(out, "caps the default backlog 65535; for bursts of connects raise it"))
        fail_msg("want one info line and no warning for the default backlog:\n%s", out);
    assert_non_null(strstr(out, "listening on 127.0.0.1:"));
    /* the listening line says the queue the kernel gave: it said "(backlog 65535)" right after
     * the line that said 4096 (a fresh namespace's somaxconn; the host's otherwise) */
    if (!strstr(out, can_unshare() ? " (backlog 65535, cut to 4096 by somaxconn)\n"
                                   : " (backlog 65535, cut to "))
        fail_msg("the listening line does not say somaxconn's cut:\n%s", out);
    /* test_start_remedy_for_root: root (who may have no sudo) was told "sudo make sysctl-apply";
     * and not under make, the binary's own command (test_remedies_run_where_they_are) */
    snprintf(want, sizeof(want), "(%s --apply-sysctl, or sysctl -w net.core.somaxconn=65535)",
             lfepolld);
    if (geteuid() == 0 && (strstr(out, "sudo") || !strstr(out, want)))
        fail_msg("the remedy for root says sudo, or is not %s:\n%s", want, out);
    free(out);
    out = start_briefly("-q");
    if (strstr(out, "somaxconn"))
        fail_msg("-q still reports the default backlog:\n%s", out);
    free(out);
    out = start_briefly("--backlog 100000 -q");
    if (!strstr(out, "warning: --backlog 100000 exceeds net.core.somaxconn "))
        fail_msg("a chosen --backlog the kernel cuts must warn:\n%s", out);
    free(out);
    f = fopen("/tmp/lfe-backlog.conf", "w");
    assert_non_null(f);
    fputs("backlog = 70000\n", f);
    fclose(f);
    out = start_briefly("--config /tmp/lfe-backlog.conf -q");
    unlink("/tmp/lfe-backlog.conf");
    if (!strstr(out, "warning: --backlog 70000 exceeds net.core.somaxconn "))
        fail_msg("a backlog chosen in the config file must warn:\n%s", out);
    free(out);
}

/* test_remedies_run_where_they_are: every remedy said "make sysctl-apply (or sysctl -p
 * sysctl.conf)", a make target and a file that exist only at the top of a clone: an installed
 * lfepolld said it in any directory. Under make (make sysctl-check, make run: MAKELEVEL set) the
 * target; elsewhere the binary's own --apply-sysctl by the name it was run as, with the
 * --sysctl-conf it was given, and sysctl -p only of a file it was given. */
static void test_remedies_run_where_they_are(void **state)
{
    char cmd[2048], want[512], top[512], *out;

    (void)state;
    if (!(out = start_briefly_env("MAKELEVEL=1", "")))
        skip();
    if (!strstr(out, "raise it (make sysctl-apply, or ") &&
        !strstr(out, "raise it (sudo make sysctl-apply, or "))
        fail_msg("under make, the start's remedy is not make sysctl-apply:\n%s", out);
    free(out);
    /* root who starts it with --user reads it: no sudo (it said sudo, the uid after the drop) */
    if (geteuid() == 0 && getpwnam("nobody")) {
        out = start_briefly("--user nobody");
        if (strstr(out, "sudo") || !strstr(out, "raise it ("))
            fail_msg("root's start with --user nobody says sudo:\n%s", out);
        free(out);
    }
    /* from a directory without the clone's Makefile and sysctl.conf, as an installed one runs */
    snprintf(cmd, sizeof(cmd), "cd / && %s --check-sysctl 2>&1", lfepolld);
    run(cmd, &out);
    snprintf(want, sizeof(want), " that sysctl.conf sets: %s%s --apply-sysctl, then check again\n",
             geteuid() ? "sudo " : "", lfepolld);
    if (strstr(out, "make sysctl-apply") || strstr(out, "sysctl -p") ||
        (strstr(out, " that sysctl.conf sets: ") && !strstr(out, want)))
        fail_msg("outside a clone the remedy is not%s:\n%s", want, out);
    free(out);
    assert_non_null(getcwd(top, sizeof(top))); /* the checkout's top: make test runs there */
    snprintf(cmd, sizeof(cmd), "cd / && %s --check-sysctl --sysctl-conf %s/sysctl.conf 2>&1",
             lfepolld, top);
    run(cmd, &out);
    if (strstr(out, "make sysctl-apply") ||
        (strstr(out, " that sysctl.conf sets: ") &&
         (!strstr(out, "--apply-sysctl --sysctl-conf /") || !strstr(out, "sysctl -p /"))))
        fail_msg("with --sysctl-conf FILE the remedy names neither FILE nor make:\n%s", out);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_prints_every_key),
        cmocka_unit_test(test_apply_in_netns),
        cmocka_unit_test(test_backlog_default_no_warning),
        cmocka_unit_test(test_remedies_run_where_they_are),
    };

    lfepolld = getenv("LFEPOLLD");
    if (!lfepolld) {
        fprintf(stderr, "set LFEPOLLD (make test does)\n");
        return 1;
    }
    unsetenv("MAKELEVEL"); /* the daemon as a reader runs it: make test's recipes set it */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
