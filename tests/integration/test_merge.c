/* Integration test of lfbench merge: two lfbench processes at once against one lfepolld, each
 * with --json; their merge must hold the sum of their counts and the percentiles of the union
 * of their histograms, computed here from the files' bucket lists and the layout's definition
 * (not with lfbench's code); a file that is not lfbench's JSON fails with one line; two agents
 * started half a second apart see one server stall in the same merged second. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "lfb_util.h"

#define NBUCKETS (2 * 128 + 33 * 128) /* layout "hdr-2" */

static const char *lfbench, *badserver;
static struct daemon srv;
static pid_t bad_pid; /* a badserver, killed by teardown_bad */

/* Starts lfbench with args (NULL-terminated), stdout and stderr into out_path. */
static pid_t start(const char *out_path, const char *const *args)
{
    const char *argv[32] = {lfbench};
    int n = 1, fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    pid_t pid;

    assert_true(fd >= 0);
    for (; *args && n < 31; args++)
        argv[n++] = *args;
    argv[n] = NULL;
    pid = lfb_spawn(argv, fd, fd, 60 * (unsigned)slow);
    close(fd);
    return pid;
}

/* The file's contents (malloc'd, NUL-terminated). */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *s;
    long n;

    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    rewind(f);
    s = malloc((size_t)n + 1);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = '\0';
    fclose(f);
    return s;
}

/* A top-level count ("\n  \"requests\": 123"). */
static unsigned long long top(const char *json, const char *key)
{
    char k[64];
    const char *p;

    snprintf(k, sizeof(k), "\n  \"%s\": ", key);
    p = strstr(json, k);
    if (!p)
        fail_msg("no top-level \"%s\" in:\n%.400s", key, json);
    return strtoull(p + strlen(k), NULL, 10);
}

/* A count inside the object that starts at obj ("\"name\": 123"). */
static unsigned long long in(const char *obj, const char *key)
{
    char k[64];
    const char *p;

    snprintf(k, sizeof(k), "\"%s\": ", key);
    p = strstr(obj, k);
    assert_non_null(p);
    return strtoull(p + strlen(k), NULL, 10);
}

/* The top-level latency's histogram: the buckets added into b, min and max. */
static void buckets(const char *json, unsigned long long *b, unsigned long long *min,
                    unsigned long long *max, unsigned long long *count)
{
    const char *lat = strstr(json, "\n  \"latency\": {"), *h, *p;
    unsigned long long sum = 0;

    assert_non_null(lat);
    h = strstr(lat, "\"hist\": {");
    assert_non_null(h);
    assert_non_null(strstr(h, "\"layout\": \"hdr-2\""));
    *count = in(h, "count");
    *min = in(h, "min");
    *max = in(h, "max");
    p = strstr(h, "\"buckets\": [") + strlen("\"buckets\": [");
    while (*p == '[') {
        char *e;
        unsigned long long idx = strtoull(p + 1, &e, 10), n;

        assert_true(e[0] == ',' && e[1] == ' ');
        n = strtoull(e + 2, &e, 10);
        assert_true(*e == ']' && idx < NBUCKETS);
        b[idx] += n;
        sum += n;
        p = e + 1;
        if (*p == ',')
            p += 2;
    }
    assert_true(*p == ']');
    assert_true(sum == *count);
}

/* The value at percentile pct of the buckets, by the layout's definition: exact below 256 ns,
 * then 128 buckets per power of two; the min at rank 1, the max at the last rank, else the
 * midpoint of what the bucket can hold within [min, max]. */
static unsigned long long percentile(const unsigned long long *b, unsigned long long count,
                                     unsigned long long min, unsigned long long max, double pct)
{
    unsigned long long rank = (unsigned long long)(pct / 100.0 * (double)count + 0.9999999),
                       seen = 0;

    if (rank <= 1)
        return min;
    if (rank >= count)
        return max;
    for (unsigned i = 0; i < NBUCKETS; i++) {
        unsigned long long lo, hi;

        seen += b[i];
        if (seen < rank)
            continue;
        if (i < 256) {
            lo = hi = i;
        } else {
            unsigned shift = (i - 256) / 128 + 1;
            unsigned long long sub = (i - 256) % 128 + 128;
            lo = sub << shift;
            hi = ((sub + 1) << shift) - 1;
        }
        lo = lo < min ? min : lo;
        hi = hi > max ? max : hi;
        return lo + (hi - lo) / 2;
    }
    return max;
}

/* The lines of merge's output that are its own words ("lfbench merge: ..."), a new string. */
static char *said_by_merge(const char *text)
{
    size_t n = 0, cap = strlen(text) + 1;
    char *s = malloc(cap);

    assert_non_null(s);
    for (const char *l = text; *l;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) + 1 : strlen(l);

        if (!strncmp(l, "lfbench merge: ", 15)) {
            memcpy(s + n, l, len);
            n += len;
        }
        l += len;
    }
    s[n] = '\0';
    return s;
}

static void test_two_agents(void **state)
{
    char port[32], a[] = "/tmp/lfe-merge-a-XXXXXX", b[] = "/tmp/lfe-merge-b-XXXXXX",
                   m[] = "/tmp/lfe-merge-m-XXXXXX", m2[] = "/tmp/lfe-merge-m2-XXXXXX",
                   oa[] = "/tmp/lfe-merge-oa-XXXXXX", ob[] = "/tmp/lfe-merge-ob-XXXXXX",
                   om[] = "/tmp/lfe-merge-om-XXXXXX";
    unsigned long long *ub = calloc(NBUCKETS, sizeof(*ub)), mina, maxa, minb, maxb, ca, cb,
                       *mb = calloc(NBUCKETS, sizeof(*mb)), minm, maxm, cm;
    char *ja, *jb, *jm, *text, want[128], *said, *said2;
    pid_t pa, pb;
    int rc;

    (void)state;
    assert_int_equal(spawn(&srv, (const char *const[]){NULL}, 0, NULL), 0);
    snprintf(port, sizeof(port), "127.0.0.1:%d", srv.port);
    close(mkstemp(a));
    close(mkstemp(b));
    close(mkstemp(m));
    close(mkstemp(m2));
    close(mkstemp(oa));
    close(mkstemp(ob));
    close(mkstemp(om));
    pa = start(oa, (const char *const[]){"-q", "-d", "1", "-c", "4", "--json", a, port, NULL});
    pb = start(
        ob, (const char *const[]){"-q", "-d", "1", "-c", "6", "-t", "2", "--json", b, port, NULL});
    rc = lfb_wait(pa);
    if (rc)
        fail_msg("lfbench A exited %d:\n%s", rc, (text = slurp(oa)));
    rc = lfb_wait(pb);
    if (rc)
        fail_msg("lfbench B exited %d:\n%s", rc, (text = slurp(ob)));
    rc = lfb_wait(start(om, (const char *const[]){"merge", "--json", m, a, b, NULL}));
    text = slurp(om);
    if (rc)
        fail_msg("lfbench merge exited %d:\n%s", rc, text);
    said = said_by_merge(text);
    ja = slurp(a);
    jb = slurp(b);
    jm = slurp(m);
    assert_true(top(ja, "requests") > 0 && top(jb, "requests") > 0);
    assert_true(top(jm, "requests") == top(ja, "requests") + top(jb, "requests"));
    assert_true(top(jm, "all_requests") == top(ja, "all_requests") + top(jb, "all_requests"));
    assert_true(top(jm, "bytes_in") == top(ja, "bytes_in") + top(jb, "bytes_in"));
    assert_true(top(jm, "lost") == top(ja, "lost") + top(jb, "lost"));
    assert_true(in(strstr(jm, "\n  \"errors\": {"), "total") ==
                in(strstr(ja, "\n  \"errors\": {"), "total") +
                    in(strstr(jb, "\n  \"errors\": {"), "total"));
    assert_true(top(jm, "agents") == 2);
    assert_true(in(strstr(jm, "\"config\": {"), "connections") == 10);
    /* the connections' phases, as the latencies: long mode times the opening's connections, so
     * each agent's connects and first bytes are its connections, and the merged file's both */
    {
        static const char *const ph[] = {"connect_latency", "first_byte_latency"};
        for (size_t i = 0; i < 2; i++) {
            char k[64];
            snprintf(k, sizeof(k), "\n  \"%s\": {", ph[i]);
            assert_true(in(strstr(ja, k), "samples") == 4 && in(strstr(jb, k), "samples") == 6);
            assert_true(in(strstr(jm, k), "samples") == 10);
        }
        assert_true(in(strstr(jm, "\n  \"handshake_latency\": {"), "samples") == 0);
    }
    /* the union's histogram, and its percentiles, from the two files' bucket lists */
    buckets(ja, ub, &mina, &maxa, &ca);
    buckets(jb, ub, &minb, &maxb, &cb);
    buckets(jm, mb, &minm, &maxm, &cm);
    assert_memory_equal(ub, mb, NBUCKETS * sizeof(*ub));
    assert_true(cm == ca + cb && minm == (mina < minb ? mina : minb) &&
                maxm == (maxa > maxb ? maxa : maxb));
    {
        static const struct {
            double p;
            const char *key;
        } ps[] = {
            {50, "p50_us"}, {90, "p90_us"}, {99, "p99_us"}, {99.9, "p999_us"}, {99.99, "p9999_us"}};
        const char *lat = strstr(jm, "\n  \"latency\": {");

        for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++) {
            unsigned long long v = percentile(ub, cm, minm, maxm, ps[i].p);
            snprintf(want, sizeof(want), "\"%s\": %llu.%03llu,", ps[i].key, v / 1000, v % 1000);
            if (!strstr(lat, want))
                fail_msg("want %s in the merged latency: %.300s", want, lat);
        }
    }
    /* the summary: the merged line, and the sum */
    assert_non_null(strstr(text, "merged       2 runs: windows start within "));
    snprintf(want, sizeof(want), "\nrequests     %llu in ", top(jm, "requests"));
    assert_non_null(strstr(text, want));
    free(text);
    /* the merged file merges again, into another file: each of its runs once (beside A, A
     * would count twice: refused, test_each_run_counted_once) */
    rc = lfb_wait(start(om, (const char *const[]){"merge", "-q", "--json", m2, m, NULL}));
    assert_int_equal(rc, 0);
    text = slurp(m2);
    assert_true(top(text, "requests") == top(ja, "requests") + top(jb, "requests"));
    assert_true(top(text, "agents") == 2);
    free(text);
    /* Regression: a full disk was "Input/output error" (ferror's -EIO before fclose could say
     * why); the cause is said */
    rc = lfb_wait(start(om, (const char *const[]){"merge", "-q", "--json", "/dev/full", m, NULL}));
    text = slurp(om);
    if (rc != 1 || !strstr(text, "lfbench merge: cannot write --json /dev/full: No space left"))
        fail_msg("merge --json /dev/full exited %d:\n%s", rc, text);
    free(text);
    /* A's file as an lfbench before the handshake and first-byte phases wrote it (only
     * connect_latency): merged with B without a word, its connects summed, B's first bytes */
    {
        const char *from = strstr(ja, ",\n  \"handshake_latency\""),
                   *upto = from ? strstr(from, ",\n  \"schedule\"") : NULL;
        FILE *f = fopen(a, "w");

        assert_non_null(upto);
        assert_non_null(f);
        fprintf(f, "%.*s%s", (int)(from - ja), ja, upto);
        fclose(f);
        rc = lfb_wait(start(om, (const char *const[]){"merge", "--json", m2, a, b, NULL}));
        text = slurp(om);
        said2 = said_by_merge(text);
        /* what it says is what the same windows made it say above (a small overlap, under load),
         * nothing of the missing phases */
        if (rc || strcmp(said, said2))
            fail_msg("merge of an older file exited %d, saying\n%s\nnot\n%s", rc, said2, said);
        free(said2);
        free(text);
        text = slurp(m2);
        assert_true(in(strstr(text, "\n  \"connect_latency\": {"), "samples") == 10);
        assert_true(in(strstr(text, "\n  \"first_byte_latency\": {"), "samples") == 6);
        free(text);
    }
    free(said);
    free(ja);
    free(jb);
    free(jm);
    free(ub);
    free(mb);
    unlink(a);
    unlink(b);
    unlink(m);
    unlink(m2);
    unlink(oa);
    unlink(ob);
    unlink(om);
}

static double wall(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_until(double t)
{
    double d = t - wall();

    if (d > 0)
        sleep_ms((long)(d * 1000));
}

static int teardown_bad(void **state)
{
    lfb_stop_server(&bad_pid);
    return teardown(state);
}

/* The walls of the seconds of json's series whose max latency is at least min_us, into w[]
 * (at most max); returns how many. *off: a second but the last that does not end at a whole
 * second of the wall clock (its wall), or 0. */
static int slow_seconds(const char *json, double min_us, double *w, int max, double *off)
{
    const char *p = strstr(json, "\"series\": [");
    int n = 0, k = 0, total = 0;

    assert_non_null(p);
    *off = 0;
    for (const char *q = p; (q = strstr(q + 1, "{\"t\": ")); total++)
        ;
    for (const char *q = p; (q = strstr(q + 1, "{\"t\": ")); k++) {
        double wall_s = lfb_jnum(q, "wall");

        if (k < total - 1 && fabs(wall_s - round(wall_s)) > 1e-6 && !*off)
            *off = wall_s;
        if (lfb_jnum(q, "max_us") >= min_us && n < max)
            w[n++] = wall_s;
    }
    return n;
}

/* Regression (white-box review, defect 4): merge put each agent's second into the epoch second
 * in which it ended, so agents whose seconds end at different points of a second were shifted
 * by up to a second: one 200 ms stall of the server landed in two merged seconds. Two agents,
 * started half a second apart, load a server that pauses 200 ms once, at a chosen wall-clock
 * instant: each agent's seconds are the wall clock's, and the stall is in one merged second,
 * the one it happened in. */
static void test_stall_lands_in_one_second(void **state)
{
    char a[] = "/tmp/lfe-merge-a-XXXXXX", b[] = "/tmp/lfe-merge-b-XXXXXX",
         m[] = "/tmp/lfe-merge-m-XXXXXX", o[] = "/tmp/lfe-merge-o-XXXXXX", at[32], port[16],
         target[32];
    double k = floor(wall()) + 2, wa[8], wb[8], wm[8], off;
    char *ja, *jb, *jm, *text;
    int rc, na, nb, nm, p = free_port();
    pid_t pa, pb;

    (void)state;
    /* the pause from K + 2.15 to K + 2.35: its slow answers all come just after K + 2.35 */
    snprintf(at, sizeof(at), "%.0f", (k + 2.15) * 1000);
    snprintf(port, sizeof(port), "%d", p);
    snprintf(target, sizeof(target), "127.0.0.1:%d", p);
    bad_pid = fork();
    assert_true(bad_pid >= 0);
    if (bad_pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);

        dup2(devnull, STDOUT_FILENO);
        alarm(60 * (unsigned)slow);
        execl(badserver, badserver, port, "pauseat", at, "200", (char *)NULL);
        _exit(127);
    }
    close(mkstemp(a));
    close(mkstemp(b));
    close(mkstemp(m));
    close(mkstemp(o));
    /* A's seconds would end near K + 0.1 + n, B's near K + 0.6 + n: the stall's answers, at
     * K + 2.35, in A's second that ends at K + 3.1 and in B's that ends at K + 2.6 */
    sleep_until(k + 0.05);
    pa = start(o, (const char *const[]){"-q", "-R", "400", "-c", "40", "-d", "3.3", "--json", a,
                                        target, NULL});
    sleep_until(k + 0.55);
    pb = start(o, (const char *const[]){"-q", "-R", "400", "-c", "40", "-d", "3.3", "--json", b,
                                        target, NULL});
    rc = lfb_wait(pa);
    if (rc)
        fail_msg("lfbench A exited %d", rc);
    rc = lfb_wait(pb);
    if (rc)
        fail_msg("lfbench B exited %d:\n%s", rc, (text = slurp(o)));
    rc = lfb_wait(start(o, (const char *const[]){"merge", "-q", "--json", m, a, b, NULL}));
    if (rc)
        fail_msg("lfbench merge exited %d:\n%s", rc, (text = slurp(o)));
    ja = slurp(a);
    jb = slurp(b);
    jm = slurp(m);
    /* merged: the stall in the wall clock's second (K + 2, K + 3], and nowhere else */
    nm = slow_seconds(jm, 150000, wm, 8, &off);
    if (nm != 1 || wm[0] != k + 3)
        fail_msg("merged: the stall ended at %.2f: want it in one second, ending at %.0f; got %d "
                 "(%.3f, %.3f)",
                 k + 2.35, k + 3, nm, nm ? wm[0] : 0, nm > 1 ? wm[1] : 0);
    /* each agent's seconds are the wall clock's, the stall in the same one */
    na = slow_seconds(ja, 150000, wa, 8, &off);
    if (na != 1 || wa[0] != k + 3 || off)
        fail_msg("A: %d slow seconds (%.3f); a second ends at %.6f", na, na ? wa[0] : 0, off);
    nb = slow_seconds(jb, 150000, wb, 8, &off);
    if (nb != 1 || wb[0] != k + 3 || off)
        fail_msg("B: %d slow seconds (%.3f); a second ends at %.6f", nb, nb ? wb[0] : 0, off);
    free(ja);
    free(jb);
    free(jm);
    unlink(a);
    unlink(b);
    unlink(m);
    unlink(o);
}

/* A number of the summary: what follows the first "key" in text, e.g. "in " or "over ". */
static double after(const char *text, const char *key)
{
    const char *p = strstr(text, key);

    if (!p)
        fail_msg("no '%s' in:\n%s", key, text);
    return strtod(p + strlen(key), NULL);
}

/* Regression (issue 33, B.5): the docs' own example merged two runs made one after the other,
 * and merge said nothing: its QPS was over a span that belonged to neither run (two 3 s runs
 * over 6.18 s), and its client CPU "over 3.04 s", the longest run's. Runs with no instant in
 * common are refused now, in one line naming both files; --allow-disjoint merges them with a
 * warning, the rate over the span and the client CPU over the runs' span too. Agents started at
 * one instant (--start-at) merge without a word; agents that share less than half of their
 * span are warned of. */
static void test_disjoint_runs_are_refused(void **state)
{
    char port[32], at[32], a[] = "/tmp/lfe-merge-a-XXXXXX", b[] = "/tmp/lfe-merge-b-XXXXXX",
                           m[] = "/tmp/lfe-merge-m-XXXXXX", o[] = "/tmp/lfe-merge-o-XXXXXX";
    char *text, *ja, *jb;
    double span, in_s, over_s;
    pid_t pa, pb;
    int rc;

    (void)state;
    assert_int_equal(spawn(&srv, (const char *const[]){NULL}, 0, NULL), 0);
    snprintf(port, sizeof(port), "127.0.0.1:%d", srv.port);
    close(mkstemp(a));
    close(mkstemp(b));
    close(mkstemp(m));
    close(mkstemp(o));
    /* one after the other, as the docs' example did */
    assert_int_equal(lfb_wait(start(o, (const char *const[]){"-q", "-d", "0.5", "-c", "4", "--json",
                                                             a, port, NULL})),
                     0);
    assert_int_equal(lfb_wait(start(o, (const char *const[]){"-q", "-d", "0.5", "-c", "4", "--json",
                                                             b, port, NULL})),
                     0);
    rc = lfb_wait(start(o, (const char *const[]){"merge", "--json", m, a, b, NULL}));
    text = slurp(o);
    if (rc != 2 || count_lines(text) != 1 || !strstr(text, " did not run at the same time: ") ||
        !strstr(text, a) || !strstr(text, b) || !strstr(text, "--start-at") ||
        !strstr(text, "--allow-disjoint merges these anyway"))
        fail_msg("want the disjoint runs refused (exit 2, one line naming both), got %d:\n%s", rc,
                 text);
    free(text);
    text = slurp(m);
    assert_string_equal(text, ""); /* nothing written */
    free(text);
    /* asked for: merged, said, and each figure over the span of both */
    rc = lfb_wait(
        start(o, (const char *const[]){"merge", "--allow-disjoint", "--json", m, a, b, NULL}));
    text = slurp(o);
    ja = slurp(a);
    jb = slurp(b);
    span = lfb_jtop(jb, "end_wall") - lfb_jtop(ja, "start_wall");
    if (rc != 0 || !strstr(text, "lfbench merge: warning: the runs did not measure at the same "
                                 "time ("))
        fail_msg("want --allow-disjoint to merge with a warning, got %d:\n%s", rc, text);
    in_s = after(strstr(text, "\nrequests "), " in ");
    over_s = after(strstr(text, "\nclient CPU "), " over ");
    if (!(span > 1) || fabs(in_s - span) > 0.011 ||
        over_s < span - 0.011 /* the runs' span holds their windows' */ ||
        over_s < lfb_jtop(ja, "wall_s") + lfb_jtop(jb, "wall_s") - 0.011)
        fail_msg("want the rate over the %.2f s span and the CPU over at least it and both runs "
                 "(%.2f + %.2f s):\n%s",
                 span, lfb_jtop(ja, "wall_s"), lfb_jtop(jb, "wall_s"), text);
    free(text);
    free(ja);
    free(jb);
    text = slurp(m);
    assert_true(lfb_jtop(text, "agents") == 2);
    free(text);

    /* two agents started at one instant: merged without a word */
    snprintf(at, sizeof(at), "%.3f", wall() + 1.5 * slow);
    pa = start(o, (const char *const[]){"-q", "-d", "1", "-c", "4", "--start-at", at, "--json", a,
                                        port, NULL});
    pb = start(m, (const char *const[]){"-q", "-d", "1", "-c", "4", "--start-at", at, "--json", b,
                                        port, NULL});
    assert_int_equal(lfb_wait(pa), 0);
    assert_int_equal(lfb_wait(pb), 0);
    rc = lfb_wait(start(o, (const char *const[]){"merge", a, b, NULL}));
    text = slurp(o);
    if (rc != 0 || strstr(text, "warning") || !strstr(text, "merged       2 runs: "))
        fail_msg("want two agents at one instant merged without a warning, got %d:\n%s", rc, text);
    free(text);
    /* ... and one of 0.3 s inside another's 3 s: merged, but said */
    snprintf(at, sizeof(at), "%.3f", wall() + 1.5 * slow);
    pa = start(o, (const char *const[]){"-q", "-d", "0.3", "-c", "4", "--start-at", at, "--json", a,
                                        port, NULL});
    pb = start(m, (const char *const[]){"-q", "-d", "3", "-c", "4", "--start-at", at, "--json", b,
                                        port, NULL});
    assert_int_equal(lfb_wait(pa), 0);
    assert_int_equal(lfb_wait(pb), 0);
    rc = lfb_wait(start(o, (const char *const[]){"merge", a, b, NULL}));
    text = slurp(o);
    if (rc != 0 || !strstr(text, "lfbench merge: warning: the runs measured at the same time for "))
        fail_msg("want a warning for 0.3 s in common of 3 s, got %d:\n%s", rc, text);
    free(text);
    unlink(a);
    unlink(b);
    unlink(m);
    unlink(o);
}

/* Writes text to path. */
static void spit(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

/* Runs lfbench merge with args; its exit status, and its output in *text (malloc'd). */
static int merge(const char *o, const char *const *args, char **text)
{
    int rc = lfb_wait(start(o, args));

    *text = slurp(o);
    return rc;
}

/* Regression: merge added whatever it was given, so a run given twice counted its requests
 * twice without a word: the same file twice (lfbench merge a.json a.json), a copy of it, or a
 * merged file beside one of its parts (lfbench merge --json all.json *.json run again takes
 * all.json in). Now each run's --json carries an id (run_ids; a merged file holds its parts'),
 * and merge refuses, in one line, a file that holds a run merged already, the same file given
 * twice, and an --json OUT that is one of the files (it would be overwritten). */
static void test_each_run_counted_once(void **state)
{
    char port[32], at[32], a[] = "/tmp/lfe-merge-a-XXXXXX", b[] = "/tmp/lfe-merge-b-XXXXXX",
                           c[] = "/tmp/lfe-merge-c-XXXXXX", m[] = "/tmp/lfe-merge-m-XXXXXX",
                           o[] = "/tmp/lfe-merge-o-XXXXXX";
    const char *holds = "holds a run that the files before it hold already";
    char *text, *ja, *edited, *p;
    pid_t pa, pb;
    int rc;

    (void)state;
    assert_int_equal(spawn(&srv, (const char *const[]){NULL}, 0, NULL), 0);
    snprintf(port, sizeof(port), "127.0.0.1:%d", srv.port);
    close(mkstemp(a));
    close(mkstemp(b));
    close(mkstemp(c));
    close(mkstemp(m));
    close(mkstemp(o));
    snprintf(at, sizeof(at), "%.3f", wall() + 1.5 * slow);
    pa = start(o, (const char *const[]){"-q", "-d", "0.5", "-c", "2", "--start-at", at, "--json", a,
                                        port, NULL});
    pb = start(m, (const char *const[]){"-q", "-d", "0.5", "-c", "2", "--start-at", at, "--json", b,
                                        port, NULL});
    assert_int_equal(lfb_wait(pa), 0);
    assert_int_equal(lfb_wait(pb), 0);
    ja = slurp(a);
    if (!strstr(ja, "\n  \"run_ids\": [\""))
        fail_msg("want a run id in the run's --json:\n%.600s", ja);
    rc = merge(o, (const char *const[]){"merge", a, a, NULL}, &text);
    if (rc != 2 || count_lines(text) != 1 || !strstr(text, "are the same file"))
        fail_msg("want a file given twice refused, got %d:\n%s", rc, text);
    free(text);
    spit(c, ja); /* a copy: another file, the same run */
    rc = merge(o, (const char *const[]){"merge", a, c, NULL}, &text);
    if (rc != 2 || count_lines(text) != 1 || !strstr(text, c) || !strstr(text, holds))
        fail_msg("want a copy of a run refused, got %d:\n%s", rc, text);
    free(text);
    rc = merge(o, (const char *const[]){"merge", "-q", "--json", m, a, b, NULL}, &text);
    assert_int_equal(rc, 0);
    free(text);
    text = slurp(m);
    assert_true(lfb_jtop(text, "agents") == 2);
    free(text);
    /* the merged file beside a part of it, either way round */
    rc = merge(o, (const char *const[]){"merge", m, a, NULL}, &text);
    if (rc != 2 || count_lines(text) != 1 || !strstr(text, holds))
        fail_msg("want a merged file and its part refused, got %d:\n%s", rc, text);
    free(text);
    rc = merge(o, (const char *const[]){"merge", a, b, m, NULL}, &text);
    if (rc != 2 || count_lines(text) != 1 || !strstr(text, m) || !strstr(text, holds))
        fail_msg("want the parts and their merged file refused, got %d:\n%s", rc, text);
    free(text);
    /* merged again alone: its two runs */
    rc = merge(o, (const char *const[]){"merge", m, NULL}, &text);
    if (rc != 0 || !strstr(text, "merged       2 runs: "))
        fail_msg("want the merged file to merge again, got %d:\n%s", rc, text);
    free(text);
    /* OUT among the files: refused, the file left as it was */
    rc = merge(o, (const char *const[]){"merge", "--json", a, a, b, NULL}, &text);
    if (rc != 2 || count_lines(text) != 1 || !strstr(text, "one of the files merged"))
        fail_msg("want --json OUT among the files refused, got %d:\n%s", rc, text);
    free(text);
    text = slurp(a);
    assert_string_equal(text, ja);
    free(text);
    /* hand-edited ids: one line naming the key */
    edited = strdup(ja);
    p = strstr(edited, "\"run_ids\": [\"") + strlen("\"run_ids\": [\"");
    p[0] = 'X';
    spit(c, edited);
    rc = merge(o, (const char *const[]){"merge", c, NULL}, &text);
    if (rc != 2 || count_lines(text) != 1 || !strstr(text, "\"run_ids\": item 0 is not an id"))
        fail_msg("want a bad id refused, got %d:\n%s", rc, text);
    free(text);
    free(edited);
    free(ja);
    unlink(a);
    unlink(b);
    unlink(c);
    unlink(m);
    unlink(o);
}

/* Bad files and bad usage: exit 2, one line naming the file. */
static void test_bad_input(void **state)
{
    char g[] = "/tmp/lfe-merge-g-XXXXXX", o[] = "/tmp/lfe-merge-o-XXXXXX";
    int fd = mkstemp(g);
    char *text;

    (void)state;
    assert_int_equal(write(fd, "{\"version\": 2,\n  \"target\": [}", 29), 29);
    close(fd);
    close(mkstemp(o));
    assert_int_equal(lfb_wait(start(o, (const char *const[]){"merge", g, NULL})), 2);
    text = slurp(o);
    assert_int_equal(count_lines(text), 1);
    assert_non_null(strstr(text, g));
    assert_non_null(strstr(text, ":2:14: expected a value, found '}'"));
    free(text);
    assert_int_equal(lfb_wait(start(o, (const char *const[]){"merge", "/nonexistent.json", NULL})),
                     2);
    text = slurp(o);
    assert_int_equal(count_lines(text), 1);
    assert_non_null(strstr(text, "/nonexistent.json: No such file or directory"));
    free(text);
    assert_int_equal(lfb_wait(start(o, (const char *const[]){"merge", NULL})), 2);
    text = slurp(o);
    assert_int_equal(count_lines(text), 1);
    assert_non_null(strstr(text, "usage: lfbench merge"));
    free(text);
    assert_int_equal(lfb_wait(start(o, (const char *const[]){"merge", "--bogus", g, NULL})), 2);
    text = slurp(o);
    assert_int_equal(count_lines(text), 1);
    free(text);
    unlink(g);
    unlink(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_two_agents, teardown),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test_teardown(test_stall_lands_in_one_second, teardown_bad),
        cmocka_unit_test_teardown(test_disjoint_runs_are_refused, teardown),
        cmocka_unit_test_teardown(test_each_run_counted_once, teardown),
    };

    if (harness_init() < 0 || !(lfbench = getenv("LFBENCH")) ||
        !(badserver = getenv("BADSERVER"))) {
        fprintf(stderr, "test_merge: set LFEPOLLD, LFBENCH and BADSERVER\n");
        return 1;
    }
    if (getenv("TEST_FILTER"))
        cmocka_set_test_filter(getenv("TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
