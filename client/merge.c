/* merge: `lfbench merge`, one result from the --json files of runs made at the same time (agents
 * on several hosts, or several processes on one), exact: histograms are merged bucket by
 * bucket, so the merged percentiles are those of all the samples together. */
#include "merge.h"

#include "result.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* --- merging two results ------------------------------------------------------------------- */

/* *dst += src, where either may be NULL (no histogram yet). */
static int hist_add(struct hist **dst, const struct hist *src)
{
    if (!src)
        return 0;
    if (!*dst) {
        if (!(*dst = malloc(sizeof(**dst))))
            return -ENOMEM;
        hist_init(*dst);
    }
    hist_merge(*dst, src);
    return 0;
}

/* The run's time 0, seconds since the epoch: where its series starts. */
static double series_origin(const struct bresult *r)
{
    return r->nseries ? r->series[0].wall - r->series[0].t : r->start_wall;
}

/* A second's bucket: the whole second of the epoch (K, K+1] its end falls in. lfbench's seconds
 * are the wall clock's (engine.c publishes at each whole second), so each is a bucket of its
 * own, and a stall seen by every agent at one instant lands in one merged second whenever each
 * agent started; only a run's first and last seconds are shorter. A merged second's wall is
 * K+1 exactly, so merging again keeps it in K: the merge stays associative. The microsecond of
 * slack keeps a whole second that went through %.6f in its own bucket. (Files from an lfbench
 * before the alignment have seconds that end anywhere: each goes to the second it ends in.) */
static long long bucket_of(double wall)
{
    return (long long)ceil(wall - 1e-6) - 1;
}

struct sref {
    long long key;
    int from; /* 0: dst, 1: src */
    size_t i;
};

static int sref_cmp(const void *a, const void *b)
{
    const struct sref *x = a, *y = b;

    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    if (x->from != y->from)
        return x->from - y->from;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* The two series on the common grid of whole epoch seconds: counts and histograms summed per
 * bucket; "open" the sum over the two sides of each side's last second in the bucket. */
static int merge_series(struct bresult *dst, const struct bresult *src)
{
    size_t n = dst->nseries + src->nseries, m = 0;
    double origin = floor(fmin(series_origin(dst), series_origin(src)));
    struct sref *ref;
    struct bsecond *out;

    if (!n)
        return 0;
    ref = malloc(n * sizeof(*ref));
    out = calloc(n, sizeof(*out));
    if (!ref || !out) {
        free(ref);
        free(out);
        return -ENOMEM;
    }
    for (size_t i = 0; i < dst->nseries; i++)
        ref[i] = (struct sref){bucket_of(dst->series[i].wall), 0, i};
    for (size_t i = 0; i < src->nseries; i++)
        ref[dst->nseries + i] = (struct sref){bucket_of(src->series[i].wall), 1, i};
    qsort(ref, n, sizeof(*ref), sref_cmp);
    for (size_t a = 0; a < n;) {
        struct bsecond *o = &out[m++];
        int open[2] = {0, 0};
        size_t b;

        o->lat.min = UINT64_MAX;
        o->wall = (double)ref[a].key + 1;
        o->t = o->wall - origin;
        for (b = a; b < n && ref[b].key == ref[a].key; b++) {
            const struct bsecond *s = ref[b].from ? &src->series[ref[b].i] : &dst->series[ref[b].i];
            bcount_add(&o->c, &s->c);
            if (hcompact_merge(&o->lat, &s->lat) < 0)
                goto oom;
            open[ref[b].from] = s->open; /* the side's last second in this bucket */
        }
        o->open = open[0] + open[1];
        a = b;
    }
    for (size_t i = 0; i < dst->nseries; i++)
        hcompact_free(&dst->series[i].lat);
    free(dst->series);
    free(ref);
    dst->series = out;
    dst->nseries = m;
    return 0;
oom:
    for (size_t i = 0; i < m; i++)
        hcompact_free(&out[i].lat);
    free(out);
    free(ref);
    return -ENOMEM;
}

/* Whether the two staircases are the same: as many steps, at the same rates. */
static bool same_steps(const struct bresult *dst, const struct bresult *src)
{
    if (dst->nsteps != src->nsteps)
        return false;
    for (size_t i = 0; i < dst->nsteps; i++)
        if (fabs(dst->steps[i].rate - src->steps[i].rate) > 1e-6 * fmax(1, dst->steps[i].rate))
            return false;
    return true;
}

/* Steps index by index: the same staircase (rates) on both sides, or no merge. */
static int merge_steps(struct bresult *dst, const struct bresult *src)
{
    if (!same_steps(dst, src))
        return -EINVAL;
    for (size_t i = 0; i < dst->nsteps; i++) {
        struct bstep *d = &dst->steps[i];
        const struct bstep *s = &src->steps[i];

        if (hist_add(&d->lat, s->lat) < 0)
            return -ENOMEM;
        bcount_add(&d->c, &s->c);
        d->measured = fmax(d->measured, s->measured);
        d->intended += s->intended;
        d->behind += s->behind;
        d->unsent += s->unsent;
        d->over_bound += s->over_bound;
        /* the busiest agent: a client that limits the step shows in one of them */
        d->cpu_percent = fmax(d->cpu_percent, s->cpu_percent);
        d->kept = d->kept && s->kept;
        /* the first agent's start: the step's load began then (0, unknown, is no start) */
        if (s->start_wall > 0 && (d->start_wall <= 0 || s->start_wall < d->start_wall))
            d->start_wall = s->start_wall;
    }
    return 0;
}

/* Adds target t to dst's ", "-separated list unless it is in it. */
static int add_targets(struct bresult *dst, const char *list)
{
    const char *p = list ? list : "";

    while (*p) {
        const char *e = strstr(p, ", ");
        size_t len = e ? (size_t)(e - p) : strlen(p), have = dst->target ? strlen(dst->target) : 0;
        bool found = false;

        for (const char *q = dst->target; q && *q;) {
            const char *qe = strstr(q, ", ");
            size_t ql = qe ? (size_t)(qe - q) : strlen(q);
            if (ql == len && !memcmp(q, p, len))
                found = true;
            q += ql + (qe ? 2 : 0);
        }
        if (!found) {
            char *t = realloc(dst->target, have + 2 + len + 1);
            if (!t)
                return -ENOMEM;
            if (have)
                memcpy(t + have, ", ", 2), have += 2;
            memcpy(t + have, p, len);
            t[have + len] = '\0';
            dst->target = t;
        }
        p += len + (e ? 2 : 0);
    }
    return 0;
}

static bool same_str(const char *a, const char *b)
{
    return !strcmp(a ? a : "", b ? b : "");
}

/* Whether src holds a run dst holds already (by its id). */
static bool holds_a_run_of(const struct bresult *dst, const struct bresult *src)
{
    for (size_t i = 0; i < src->nrun_ids; i++)
        for (size_t k = 0; k < dst->nrun_ids; k++)
            if (src->run_ids[i] == dst->run_ids[k])
                return true;
    return false;
}

/* dst's run ids followed by src's. 0 or -ENOMEM. */
static int add_run_ids(struct bresult *dst, const struct bresult *src)
{
    uint64_t *ids;

    if (!src->nrun_ids)
        return 0;
    if (!(ids = realloc(dst->run_ids, (dst->nrun_ids + src->nrun_ids) * sizeof(*ids))))
        return -ENOMEM;
    memcpy(ids + dst->nrun_ids, src->run_ids, src->nrun_ids * sizeof(*ids));
    dst->run_ids = ids;
    dst->nrun_ids += src->nrun_ids;
    return 0;
}

/* Whether the latencies of the two are of the same things: the same --mode, --expect and
 * --ok-status, the same classes, the same staircase. */
static bool mergeable(const struct bresult *dst, const struct bresult *src)
{
    if (!same_str(dst->mode, src->mode) || !same_str(dst->expect, src->expect) ||
        strcmp(result_ok_status(dst), result_ok_status(src)) || dst->nclasses != src->nclasses)
        return false;
    for (int k = 0; k < dst->nclasses; k++)
        if (!same_str(dst->cls[k].name, src->cls[k].name))
            return false;
    return same_steps(dst, src);
}

/* The histograms, the series, the steps, the run ids and the targets. 0 or -ENOMEM. */
static int merge_parts(struct bresult *dst, const struct bresult *src)
{
    int rc;

    if ((rc = add_run_ids(dst, src)) < 0 || (rc = merge_steps(dst, src)) < 0 ||
        (rc = merge_series(dst, src)) < 0 || (rc = add_targets(dst, src->target)) < 0 ||
        (rc = hist_add(&dst->lat, src->lat)) < 0)
        return rc;
    for (int k = 0; k < CP_N; k++)
        if ((rc = hist_add(&dst->ph[k], src->ph[k])) < 0)
            return rc;
    for (int k = 0; dst->nclasses > 1 && k < dst->nclasses; k++)
        if ((rc = hist_add(&dst->cls[k].lat, src->cls[k].lat)) < 0)
            return rc;
    return 0;
}

/* The configuration: summed where agents add up, the larger (or either flag) kept otherwise.
 * 0 or -EOVERFLOW. */
static int merge_config(struct bresult *dst, const struct bresult *src)
{
    if (__builtin_add_overflow(dst->conns, src->conns, &dst->conns) ||
        __builtin_add_overflow(dst->threads, src->threads, &dst->threads) ||
        __builtin_add_overflow(dst->agents, src->agents, &dst->agents) ||
        __builtin_add_overflow(dst->open_at_start, src->open_at_start, &dst->open_at_start))
        return -EOVERFLOW;
    dst->rate += src->rate;
    dst->requests_asked += src->requests_asked;
    dst->pipeline = dst->pipeline > src->pipeline ? dst->pipeline : src->pipeline;
    dst->timeout_ms = dst->timeout_ms > src->timeout_ms ? dst->timeout_ms : src->timeout_ms;
    dst->duration = fmax(dst->duration, src->duration);
    dst->warmup = fmax(dst->warmup, src->warmup);
    dst->kr.linger0 = dst->kr.linger0 || src->kr.linger0;
    dst->kr.nsources = dst->kr.nsources > src->kr.nsources ? dst->kr.nsources : src->kr.nsources;
    dst->busy_poll = dst->busy_poll || src->busy_poll;
    return 0;
}

/* The windows: from the first start to the last end. */
static void merge_window(struct bresult *dst, const struct bresult *src)
{
    double start, end;

    /* The spread: the two sides' own spreads and the distance between their earliest and
     * latest starts (each side's starts lie in [start_wall, start_wall + window_spread]). */
    start = fmin(dst->start_wall, src->start_wall);
    dst->window_spread =
        fmax(dst->start_wall + dst->window_spread, src->start_wall + src->window_spread) - start;
    end = fmax(dst->end_wall, src->end_wall);
    /* The whole runs' span as the windows' below, each run taken to start its wall before its
     * window's end (a little early: it ran on after it, draining), so that the client's CPU is
     * over the time the agents ran, not over the longest of them; a merge of its own result
     * keeps it. */
    dst->wall = end - fmin(dst->end_wall - dst->wall, src->end_wall - src->wall);
    dst->start_wall = start;
    dst->end_wall = end;
    /* QPS over the union of the windows, from the first start to the last end: what the
     * server saw from all agents together. Dividing by the longest window instead would
     * count two agents that ran one after the other as twice the rate (merge_main refuses
     * runs whose windows have no instant in common, unless asked). */
    dst->measured = end - start;
}

/* What was counted, summed; the first script, failure and mismatch kept. */
static void merge_counts(struct bresult *dst, const struct bresult *src)
{
    dst->open_s = fmax(dst->open_s, src->open_s);
    dst->connect_busy += src->connect_busy;
    dst->open_connects += src->open_connects;
    dst->connect_s += src->connect_s;
    dst->connect_calls += src->connect_calls;
    bcount_add(&dst->total, &src->total);
    dst->intended += src->intended;
    dst->behind += src->behind;
    dst->unsent += src->unsent;
    dst->conn_min = dst->conn_min < src->conn_min ? dst->conn_min : src->conn_min;
    dst->conn_max = dst->conn_max > src->conn_max ? dst->conn_max : src->conn_max;
    dst->reconnects += src->reconnects;
    dst->http_non2xx += src->http_non2xx;
    dst->all_requests += src->all_requests;
    dst->resumed += src->resumed;
    if (!dst->script && src->script)
        dst->script = strdup(src->script);
    if (!dst->script_failure && src->script_failure)
        dst->script_failure = strdup(src->script_failure);
    if (!dst->mismatch && src->mismatch)
        dst->mismatch = strdup(src->mismatch);
    dst->tls |= src->tls; /* TLS: the handshakes summed, the first words kept */
    dst->tls_insecure |= src->tls_insecure;
    dst->tls_resume = fmax(dst->tls_resume, src->tls_resume);
    dst->tls_full += src->tls_full;
    dst->tls_resumed += src->tls_resumed;
    dst->tls_offered += src->tls_offered;
    if (!dst->tls_protocol && src->tls_protocol)
        dst->tls_protocol = strdup(src->tls_protocol);
    if (!dst->tls_cipher && src->tls_cipher)
        dst->tls_cipher = strdup(src->tls_cipher);
    if (!dst->tls_error && src->tls_error)
        dst->tls_error = strdup(src->tls_error);
    dst->cpu_s += src->cpu_s;
    dst->poll_idle_s += src->poll_idle_s;
}

/* The kernel's counters are summed: right for agents on different hosts; two agents on one
 * host (one network namespace) count that host's counters twice (the summary says so). A
 * counter is kept where both sides have it. */
static void merge_kernel(struct bresult *dst, const struct bresult *src)
{
    dst->have_k = dst->have_k && src->have_k;
    for (int i = 0; i < KS_N; i++) {
        dst->kd.have[i] = dst->kd.have[i] && src->kd.have[i];
        dst->kd.v[i] = dst->kd.have[i] ? dst->kd.v[i] + src->kd.v[i] : 0;
    }
    dst->kr.addrnotavail = dst->total.errors[ERR_ADDRNOTAVAIL];
    dst->kr.short_mode = result_is_mode(dst, "short");
}

/* --find-rate's answer: the lowest, the rate every agent kept. 0 or -ENOMEM. */
static int merge_found(struct bresult *dst, const struct bresult *src)
{
    char *w;

    if (!src->found_why || (dst->found_why && !(src->found_rate < dst->found_rate)))
        return 0;
    if (!(w = strdup(src->found_why)))
        return -ENOMEM;
    free(dst->found_why);
    dst->found_why = w;
    dst->found_rate = src->found_rate;
    return 0;
}

/* Merging is exact for what is counted (counts, bytes, errors by kind, histograms bucket by
 * bucket); what is a configuration is summed where agents add up (connections, threads, rates,
 * -n) and kept otherwise. Refused (-EINVAL, nothing changed): a different --mode or --expect
 * (the latencies are of different things), different classes, or different sweeps; -EEXIST,
 * nothing changed: src holds a run dst holds already (by its id). */
int merge_result(struct bresult *dst, const struct bresult *src)
{
    int rc;

    if (holds_a_run_of(dst, src))
        return -EEXIST;
    if (!mergeable(dst, src))
        return -EINVAL;
    if ((rc = merge_parts(dst, src)) < 0 || (rc = merge_config(dst, src)) < 0)
        return rc;
    merge_window(dst, src);
    merge_counts(dst, src);
    merge_kernel(dst, src);
    return merge_found(dst, src);
}

/* --- lfbench merge ------------------------------------------------------------------------- */

static const char usage[] =
    "usage: lfbench merge [--json OUT] [-q] [--allow-disjoint] A.json B.json ...";

/* When the runs measured: the latest start and the earliest end (their common time), the
 * earliest start and the latest end (the span merge divides by), and which file gave each. */
struct windows {
    double late_start, early_end, first, last;
    const char *late_start_file, *early_end_file;
};

static void windows_add(struct windows *w, const struct bresult *r, const char *path, bool first)
{
    if (first || r->start_wall > w->late_start)
        w->late_start = r->start_wall, w->late_start_file = path;
    if (first || r->end_wall < w->early_end)
        w->early_end = r->end_wall, w->early_end_file = path;
    w->first = first ? r->start_wall : fmin(w->first, r->start_wall);
    w->last = first ? r->end_wall : fmax(w->last, r->end_wall);
}

/* Merge adds up agents that loaded the server at one time: runs with no instant in common
 * (one after the other) would give a rate over a span that belongs to none of them, so they
 * are refused unless allowed, and then said; runs that share less than half of their span are
 * said too. Returns 0, or -1 (refused) with the line said. */
static int windows_check(const struct windows *w, bool allow)
{
    double common = w->early_end - w->late_start, span = w->last - w->first;

    if (common <= 0 && !allow) {
        fprintf(stderr,
                "lfbench merge: %s and %s did not run at the same time: %s's window starts "
                "%.2f s after %s's ended; merge adds up agents that load a server together "
                "(start them at one instant: --start-at), and --allow-disjoint merges these "
                "anyway, over the %.2f s span of both\n",
                w->early_end_file, w->late_start_file, w->late_start_file, -common,
                w->early_end_file, span);
        return -1;
    }
    if (common <= 0)
        fprintf(stderr,
                "lfbench merge: warning: the runs did not measure at the same time (%s's "
                "window starts %.2f s after %s's ended): the rates below are over the %.2f s "
                "span of all, its gaps included\n",
                w->late_start_file, -common, w->early_end_file, span);
    else if (common < span / 2)
        fprintf(stderr,
                "lfbench merge: warning: the runs measured at the same time for %.2f s of the "
                "%.2f s span of all (the rates below are over the span: fewer agents loaded "
                "the server in the rest); start them at one instant with --start-at\n",
                common, span);
    return 0;
}

/* A file given twice (by any name: the same device and inode) would count its runs twice, and
 * OUT among the files would be overwritten by a merge that holds it. Returns 0, or -1 with the
 * line said. */
static int same_files(char **paths, int n, const char *out)
{
    struct stat a, b;

    for (int i = 0; i < n; i++) {
        if (stat(paths[i], &a) < 0)
            continue; /* said by the reader */
        for (int k = 0; k < i; k++)
            if (stat(paths[k], &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
                fprintf(stderr,
                        "lfbench merge: %s and %s are the same file: it would count its "
                        "requests twice; give each run once\n",
                        paths[k], paths[i]);
                return -1;
            }
        if (out && stat(out, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
            fprintf(stderr,
                    "lfbench merge: --json %s is %s, one of the files merged: the merge would "
                    "overwrite it; write it to another file\n",
                    out, paths[i]);
            return -1;
        }
    }
    return 0;
}

struct merge_args {
    const char *out; /* --json OUT, or NULL */
    bool quiet, allow_disjoint;
    int nfiles; /* the file names, gathered at argv[1..nfiles] */
};

/* The options, the file names gathered at the front of argv[1..] as they are read. Returns -1
 * to go on, or the exit status (--help, or bad usage with the line said). */
static int read_args(int argc, char **argv, struct merge_args *a)
{
    for (int i = 1, dashes = 0; i < argc; i++) {
        if (dashes || argv[i][0] != '-' || !argv[i][1]) {
            argv[1 + a->nfiles++] = argv[i];
        } else if (!strcmp(argv[i], "--")) {
            dashes = 1;
        } else if (!strcmp(argv[i], "--json")) {
            if (++i == argc) {
                fprintf(stderr, "lfbench merge: --json needs a file name; %s\n", usage);
                return 2;
            }
            a->out = argv[i];
        } else if (!strcmp(argv[i], "-q") || !strcmp(argv[i], "--quiet")) {
            a->quiet = true;
        } else if (!strcmp(argv[i], "--allow-disjoint")) {
            a->allow_disjoint = true;
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("%s\n  Merges the --json files of lfbench runs made at the same time into one "
                   "result:\n  counts summed, latency histograms merged bucket by bucket (exact "
                   "percentiles),\n  per-second series aligned by wall clock, rates over the "
                   "span of all windows. Writes the\n  merged --json to OUT (it can be merged "
                   "again). Runs whose windows have no instant in\n  common (one after the "
                   "other) are refused: --allow-disjoint merges them anyway, with a\n  "
                   "warning.\n",
                   usage);
            return 0;
        } else {
            fprintf(stderr, "lfbench merge: unknown option '%.60s'; %s\n", argv[i], usage);
            return 2;
        }
    }
    if (a->nfiles < 1) {
        fprintf(stderr, "lfbench merge: no file to merge; %s\n", usage);
        return 2;
    }
    if (a->nfiles > 1024) { /* each count read is at most 2^53: 1,024 of them cannot wrap 2^64 */
        fprintf(stderr,
                "lfbench merge: %d files; at most 1024 at once (merge the merged files "
                "again)\n",
                a->nfiles);
        return 2;
    }
    return -1;
}

/* Why merge_result refused a file, from what it returned. */
static const char *refusal(int rc)
{
    return rc == -EEXIST      ? "holds a run that the files before it hold already (a run "
                                "given twice, or a merged file with one of its parts): it "
                                "would count its requests twice; give each run once"
           : rc == -ENOMEM    ? "out of memory"
           : rc == -EOVERFLOW ? "too many connections, threads or agents in all (over "
                                "2^31)"
                              : "cannot be merged with the files before it: a different "
                                "--mode, --expect, --ok-status, request classes or "
                                "--rate-sweep steps";
}

/* The n files at paths read and merged into all (result_init'ed), their windows into win.
 * Returns 0, or -1 with the line said. */
static int merge_files(char **paths, int n, struct bresult *all, struct windows *win)
{
    struct bresult one;
    char err[512];
    int rc;

    for (int i = 0; i < n; i++) {
        if (result_read_json(paths[i], i ? &one : all, err, sizeof(err)) < 0) {
            fprintf(stderr, "lfbench merge: %s\n", err);
            return -1;
        }
        windows_add(win, i ? &one : all, paths[i], i == 0);
        if (i == 0)
            continue;
        rc = merge_result(all, &one);
        result_free(&one);
        if (rc < 0) {
            fprintf(stderr, "lfbench merge: %s: %s\n", paths[i], refusal(rc));
            return -1;
        }
    }
    return 0;
}

/* The merged result as --json to out. Returns 0, or 1 with the line said. */
static int write_out(const char *out, const struct bresult *all)
{
    FILE *f = fopen(out, "we");
    int rc;

    if (!f) {
        fprintf(stderr, "lfbench merge: cannot write --json %s: %s\n", out, strerror(errno));
        return 1;
    }
    rc = result_write_json(f, all);
    if (fclose(f) != 0 && rc == 0)
        rc = -errno;
    if (rc < 0) {
        fprintf(stderr, "lfbench merge: cannot write --json %s: %s\n", out, strerror(-rc));
        return 1;
    }
    return 0;
}

int merge_main(int argc, char **argv)
{
    struct merge_args a = {NULL, false, false, 0};
    struct windows win = {0, 0, 0, 0, NULL, NULL};
    struct bresult all;
    int rc;

    if ((rc = read_args(argc, argv, &a)) >= 0)
        return rc;
    if (same_files(argv + 1, a.nfiles, a.out) < 0)
        return 2;
    result_init(&all);
    rc = 2;
    if (merge_files(argv + 1, a.nfiles, &all, &win) < 0 ||
        (a.nfiles > 1 && windows_check(&win, a.allow_disjoint) < 0))
        goto out;
    if (!a.quiet)
        result_print(stdout, &all);
    rc = a.out ? write_out(a.out, &all) : 0;
out:
    result_free(&all);
    return rc;
}
