/* btune_out: lfbench tune's results: the verdicts, the report, --json and --plot. */
#include "btune.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tunewrite.h"

/* The counters a verdict names when they moved: the namespace's own (softnet_stat is the
 * machine's, and the opens move with the rate itself). */
static const enum kstat_id telling[] = {
    KS_LISTEN_OVERFLOWS, KS_LISTEN_DROPS, KS_SYNCOOKIES_SENT, KS_TW_OVERFLOW, KS_TW_RECYCLED,
    KS_ABORT_ON_DATA,    KS_RETRANS_SEGS, KS_ESTAB_RESETS,    KS_TCP_TW,
};
#define NTELLING (sizeof(telling) / sizeof(telling[0]))

double btune_figure(const struct btune_round *r, enum btune_metric m)
{
    switch (m) {
    case BTUNE_RATE:
        return r->rate;
    case BTUNE_P50:
        return r->p50_us;
    case BTUNE_P99:
        return r->p99_us;
    case BTUNE_CPU:
        return r->srv_us;
    }
    return 0;
}

bool btune_more_is_better(enum btune_metric m)
{
    return m == BTUNE_RATE;
}

void btune_levels(struct btune *t)
{
    int k = t->nvar - 1;

    t->alpha_each = t->o.per_variant || k <= 1 ? t->o.alpha : t->o.alpha / k;
    if (!t->o.rounds_given) {
        t->o.rounds = btune_rounds_for(t->alpha_each);
        if (t->o.rounds > BTUNE_MAX_ROUNDS)
            t->o.rounds = BTUNE_MAX_ROUNDS;
    }
}

void btune_judge_all(struct btune *t)
{
    double ratio[BTUNE_MAX_ROUNDS];

    for (int v = 1; v < t->nvar; v++) {
        struct btune_judged *j = &t->j[v];
        int n = 0;
        memset(j, 0, sizeof(*j));
        for (int r = 0; r < t->o.rounds; r++) {
            double b = btune_figure(&t->r[r][0], t->o.metric);
            double x = btune_figure(&t->r[r][v], t->o.metric);
            if (t->r[r][0].ok && t->r[r][v].ok && b > 0 && x > 0)
                ratio[n++] = x / b;
            else
                j->pairs_dropped++;
        }
        if (n == 0 || btune_interval(ratio, n, t->alpha_each, &j->ci) < 0) {
            j->v = BTUNE_TOO_FEW;
            continue;
        }
        j->v = btune_judge(&j->ci, btune_more_is_better(t->o.metric));
    }
}

/* The median over the rounds of variant v of counter id (is_err: error kind id). */
static double median_of(const struct btune *t, int v, int id, bool is_err)
{
    double x[BTUNE_MAX_ROUNDS];
    int n = 0;

    for (int r = 0; r < t->o.rounds; r++)
        if (t->r[r][v].ok)
            x[n++] = (double)(is_err ? t->r[r][v].errors[id] : t->r[r][v].kd.v[id]);
    return btune_median(x, n);
}

/* The median over the rounds of variant v of the figure judged. */
static double median_figure(const struct btune *t, int v)
{
    double x[BTUNE_MAX_ROUNDS];
    int n = 0;

    for (int r = 0; r < t->o.rounds; r++)
        if (t->r[r][v].ok)
            x[n++] = btune_figure(&t->r[r][v], t->o.metric);
    return btune_median(x, n);
}

/* Whether a counter's medians a (baseline) and b differ enough to name: one at least twice the
 * other, and the larger 10 or more per round. */
static bool moved(double a, double b)
{
    double lo = a < b ? a : b, hi = a < b ? b : a;
    return hi >= 10 && hi >= 2 * lo;
}

static const char *counter_name(int id)
{
    return id == KS_TCP_TW ? "TIME_WAIT at the end" : kstat_name[id];
}

/* The line of counters and errors that moved with variant v. */
static void print_moved(FILE *f, const struct btune *t, int v)
{
    int n = 0;

    for (size_t i = 0; i < NTELLING; i++) {
        double a = median_of(t, 0, (int)telling[i], false),
               b = median_of(t, v, (int)telling[i], false);
        if (moved(a, b))
            fprintf(f, "%s%s %.0f -> %.0f",
                    n++ ? ", "
                        : "    moved with it (median per round, "
                          "baseline -> this): ",
                    counter_name((int)telling[i]), a, b);
    }
    for (int k = 0; k < ERR_KINDS; k++) {
        double a = median_of(t, 0, k, true), b = median_of(t, v, k, true);
        if (moved(a, b))
            fprintf(f, "%s%s errors %.0f -> %.0f",
                    n++ ? ", "
                        : "    moved with it (median per "
                          "round, baseline -> this): ",
                    berr_name[k], a, b);
    }
    fprintf(f, "%s\n", n ? "" : "    no kernel counter or error moved with it");
}

/* "timeout 3, addrnotavail 12", or "-". */
static void errors_text(const struct btune_round *r, char *buf, size_t len)
{
    size_t at = 0;

    buf[0] = 0;
    for (int k = 0; k < ERR_KINDS && at < len; k++)
        if (r->errors[k])
            at += (size_t)snprintf(buf + at, len - at, "%s%s %llu", at ? ", " : "", berr_name[k],
                                   (unsigned long long)r->errors[k]);
    if (!buf[0])
        snprintf(buf, len, "-");
}

/* The widest variant name: the tables' column, never cut. */
static int name_width(const struct btune *t)
{
    size_t w = 8;

    for (int v = 0; v < t->nvar; v++)
        if (strlen(t->var[v].name) > w)
            w = strlen(t->var[v].name);
    return (int)w;
}

static void print_rounds(FILE *f, const struct btune *t)
{
    char errs[256];
    bool shortm = t->r[0][0].short_mode;

    int w = name_width(t);

    fprintf(f, "%-5s %-*s %10s %9s %9s %10s %10s  %s\n", "round", w, "variant",
            shortm ? "conn/s" : "resp/s", "p50 us", "p99 us", "cli us/rq", "srv us/rq", "errors");
    for (int r = 0; r < t->o.rounds; r++)
        for (int v = 0; v < t->nvar; v++) {
            const struct btune_round *x = &t->r[r][v];
            errors_text(x, errs, sizeof(errs));
            fprintf(f, "%-5d %-*s %10.0f %9.1f %9.1f %10.2f %10.2f  %s\n", r + 1, w, t->var[v].name,
                    x->rate, x->p50_us, x->p99_us, x->cli_us, x->srv_us, errs);
        }
}

static uint64_t round_errors(const struct btune_round *r)
{
    uint64_t n = 0;

    for (int k = 0; k < ERR_KINDS; k++)
        n += r->errors[k];
    return n;
}

/* Rounds with errors, said per variant: not averaged away. */
static void print_error_rounds(FILE *f, const struct btune *t)
{
    for (int v = 0; v < t->nvar; v++) {
        int n = 0;
        for (int r = 0; r < t->o.rounds; r++)
            n += t->r[r][v].ok && round_errors(&t->r[r][v]) > 0;
        if (n)
            fprintf(f,
                    "errors: %d of %d rounds of %s had errors (the table above): its figures "
                    "count completed requests only; errors only in some variants are part of "
                    "their effect, errors everywhere point at the load or the server\n",
                    n, t->o.rounds, t->var[v].name);
    }
}

/* The order statistic's words: "" for 1 ("the smallest"), "2nd", "3rd", "4th"... */
static const char *ordinal(int k)
{
    static char buf[16];

    if (k <= 1)
        return "";
    snprintf(buf, sizeof(buf), "%d%s ", k, k == 2 ? "nd" : k == 3 ? "rd" : "th");
    return buf;
}

static void print_verdicts(FILE *f, const struct btune *t)
{
    const struct btune_judged *j1 = t->nvar > 1 ? &t->j[1] : NULL;

    fprintf(f,
            "\nverdict on %s (%s), each variant against the baseline: the median of the "
            "rounds' ratios, with the sign test's distribution-free interval",
            btune_metric_name[t->o.metric],
            btune_more_is_better(t->o.metric) ? "more is better" : "less is better");
    if (j1 && j1->ci.k)
        fprintf(f, " at %.1f%%: from the %ssmallest to the %slargest of %d ratios",
                100 * j1->ci.level, ordinal(j1->ci.k), ordinal(j1->ci.k), j1->ci.n);
    if (t->nvar > 2 && !t->o.per_variant)
        fprintf(f,
                " (%.4g%% or more each, so that the chance that any of the %d verdicts names an "
                "effect that is not there is %.4g%% or less: Bonferroni)",
                100 * (1 - t->alpha_each), t->nvar - 1, 100 * t->o.alpha);
    else if (t->nvar > 2)
        fprintf(f,
                " (--per-variant: %.4g%% or more each alone, so that, on average, up to %.4g of "
                "the %d verdicts name an effect that is not there)",
                100 * (1 - t->o.alpha), (t->nvar - 1) * t->o.alpha, t->nvar - 1);
    fprintf(f, "\n");
    for (int v = 1; v < t->nvar; v++) {
        const struct btune_judged *j = &t->j[v];
        fprintf(f, "%-*s x%.3f [%.3f, %.3f]  %s", name_width(t), t->var[v].name, j->ci.median,
                j->ci.lo, j->ci.hi, btune_verdict_name[j->v]);
        if (j->v == BTUNE_TOO_FEW)
            fprintf(f, ": %d round%s for a %.4g%% interval; give --rounds %d or more", j->ci.n,
                    j->ci.n == 1 ? "" : "s", 100 * (1 - t->alpha_each),
                    btune_rounds_for(t->alpha_each) + j->pairs_dropped);
        fprintf(f, "\n");
        if (j->pairs_dropped)
            fprintf(f, "    %d round%s left out: no figure on one side (no response)\n",
                    j->pairs_dropped, j->pairs_dropped == 1 ? "" : "s");
        print_moved(f, t, v);
    }
}

/* Whether a variant before v sets key on the host. */
static bool named_before(const struct btune *t, int v, const char *key)
{
    for (int u = 0; u < v; u++)
        for (int i = 0; i < t->var[u].nhost; i++)
            if (!strcmp(t->var[u].host[i].key, key))
                return true;
    return false;
}

static int host_keys(const struct btune *t)
{
    int n = 0;

    for (int v = 0; v < t->nvar; v++)
        n += t->var[v].nhost;
    return n;
}

void btune_print(FILE *f, const struct btune *t)
{
    fprintf(f,
            "lfbench tune: %d variants of %s, %d round%s of %g s, each in a network namespace "
            "of its own\nserver: %s\nload:   lfbench",
            t->nvar, t->source, t->o.rounds, t->o.rounds == 1 ? "" : "s", t->o.round_s,
            t->server_desc);
    for (int i = 0; i < t->o.nload; i++)
        fprintf(f, " %s", t->o.load[i]);
    fprintf(f, " -d %gs 127.0.0.1:%d\n", t->o.round_s, t->o.port);
    for (int v = 0, n = 0; v < t->nvar; v++)
        for (int i = 0; i < t->var[v].nhost; i++)
            if (!named_before(t, v, t->var[v].host[i].key))
                fprintf(f, "%s%s",
                        n++ ? ", " : "host:   set on the host for their rounds only (--host): ",
                        t->var[v].host[i].key);
    fprintf(f, "%s\n", host_keys(t) ? "\n" : "");
    print_rounds(f, t);
    print_error_rounds(f, t);
    print_verdicts(f, t);
}

/* --- --json --------------------------------------------------------------------------------- */

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

static void json_round(FILE *f, const struct btune_round *x, int r)
{
    fprintf(f,
            "{\"round\": %d, \"measured\": %s, \"seconds\": %.6f, \"requests\": %llu, "
            "\"connects\": %llu, \"rate\": %.3f, \"p50_us\": %.3f, \"p99_us\": %.3f, "
            "\"client_cpu_us_per_request\": %.4f, \"server_cpu_us_per_request\": %.4f, "
            "\"errors\": {",
            r + 1, x->ok ? "true" : "false", x->seconds, (unsigned long long)x->requests,
            (unsigned long long)x->connects, x->rate, x->p50_us, x->p99_us, x->cli_us, x->srv_us);
    for (int k = 0; k < ERR_KINDS; k++)
        fprintf(f, "%s\"%s\": %llu", k ? ", " : "", berr_name[k], (unsigned long long)x->errors[k]);
    fprintf(f, "}, \"kernel\": {");
    for (int i = 0, n = 0; i < KS_N; i++)
        if (x->kd.have[i])
            fprintf(f, "%s\"%s\": %llu", n++ ? ", " : "", kstat_name[i],
                    (unsigned long long)x->kd.v[i]);
    fprintf(f, "}}");
}

static void json_variant(FILE *f, const struct btune *t, int v)
{
    const struct btune_variant *x = &t->var[v];

    fprintf(f, "    {\"name\": ");
    json_str(f, x->name);
    fprintf(f, ", \"baseline\": %s, \"key\": ", v == 0 ? "true" : "false");
    if (x->key)
        json_str(f, x->key);
    else
        fprintf(f, "null");
    fprintf(f, ", \"settings\": {");
    for (int i = 0; i < x->nset; i++) {
        fprintf(f, "%s", i ? ", " : "");
        json_str(f, x->set[i].key);
        fprintf(f, ": ");
        json_str(f, x->set[i].value);
    }
    fprintf(f, "}, \"host_settings\": {");
    for (int i = 0; i < x->nhost; i++) {
        fprintf(f, "%s", i ? ", " : "");
        json_str(f, x->host[i].key);
        fprintf(f, ": ");
        json_str(f, x->host[i].value);
    }
    fprintf(f, "},\n     \"rounds\": [");
    for (int r = 0; r < t->o.rounds; r++) {
        fprintf(f, "%s\n      ", r ? "," : "");
        json_round(f, &t->r[r][v], r);
    }
    fprintf(f, "]");
    if (v > 0) {
        const struct btune_judged *j = &t->j[v];
        fprintf(f,
                ",\n     \"verdict\": {\"words\": \"%s\", \"median_ratio\": %.6f, \"low\": %.6f, "
                "\"high\": %.6f, \"level\": %.6f, \"pairs\": %d, \"pairs_left_out\": %d, "
                "\"moved\": [",
                btune_verdict_name[j->v], j->ci.median, j->ci.lo, j->ci.hi, j->ci.level, j->ci.n,
                j->pairs_dropped);
        for (size_t i = 0, n = 0; i < NTELLING; i++) {
            double a = median_of(t, 0, (int)telling[i], false);
            double b = median_of(t, v, (int)telling[i], false);
            if (moved(a, b))
                fprintf(f, "%s{\"counter\": \"%s\", \"baseline\": %.1f, \"this\": %.1f}",
                        n++ ? ", " : "", kstat_name[telling[i]], a, b);
        }
        fprintf(f, "]}");
    }
    fprintf(f, "}");
}

int btune_write_json(FILE *f, const struct btune *t)
{
    fprintf(f, "{\n  \"lfbench_tune\": 1,\n  \"source\": ");
    json_str(f, t->source);
    fprintf(f,
            ",\n  \"metric\": \"%s\",\n  \"more_is_better\": %s,\n  \"confidence\": %.6f,\n"
            "  \"confidence_each\": %.6f,\n  \"correction\": \"%s\",\n"
            "  \"method\": \"median of the rounds' paired ratios to the baseline; the sign "
            "test's distribution-free interval (order statistics)\",\n"
            "  \"rounds\": %d,\n  \"round_seconds\": %g,\n  \"server\": ",
            btune_metric_name[t->o.metric], btune_more_is_better(t->o.metric) ? "true" : "false",
            1 - t->o.alpha, 1 - t->alpha_each, t->alpha_each < t->o.alpha ? "bonferroni" : "none",
            t->o.rounds, t->o.round_s);
    json_str(f, t->server_desc);
    fprintf(f, ",\n  \"load\": [");
    for (int i = 0; i < t->o.nload; i++) {
        fprintf(f, "%s", i ? ", " : "");
        json_str(f, t->o.load[i]);
    }
    fprintf(f, "],\n  \"variants\": [\n");
    for (int v = 0; v < t->nvar; v++) {
        json_variant(f, t, v);
        fprintf(f, "%s\n", v + 1 < t->nvar ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
    return ferror(f) ? -EIO : 0;
}

/* --- --plot --------------------------------------------------------------------------------- */

/* Writes the gnuplot script: each variant's rounds (points) and its median ratio with the
 * interval (error bars), against the baseline's line at 1. */
static void plot_script(FILE *f, const struct btune *t, const char *png)
{
    double lo = 1, hi = 1; /* the x range: every ratio drawn, and 1 */

    fprintf(f, "set terminal pngcairo size 1000,%d\nset output '%s'\n", 200 + 40 * t->nvar, png);
    fprintf(f, "set title 'lfbench tune: %s, ratio to the baseline (median, interval, rounds)'\n",
            btune_metric_name[t->o.metric]);
    fprintf(f, "set ytics ('' 0)\nset yrange [0:%d]\nset grid xtics\nset key off\n", t->nvar);
    for (int v = 1; v < t->nvar; v++) {
        fprintf(f, "set label %d '", v);
        for (const char *p = t->var[v].name; *p; p++) /* a gnuplot single-quoted string */
            fputs(*p == '\'' ? "''" : (char[]){*p, 0}, f);
        fprintf(f, " (%s)' at graph 0.01, first %d.35 font ',9' noenhanced\n",
                btune_verdict_name[t->j[v].v], v);
    }
    fprintf(f, "$ci << EOD\n");
    for (int v = 1; v < t->nvar; v++)
        fprintf(f, "%.6f %d %.6f %.6f\n", t->j[v].ci.median, v, t->j[v].ci.lo, t->j[v].ci.hi);
    fprintf(f, "EOD\n$rounds << EOD\n");
    for (int v = 1; v < t->nvar; v++)
        for (int r = 0; r < t->o.rounds; r++) {
            double b = btune_figure(&t->r[r][0], t->o.metric),
                   x = btune_figure(&t->r[r][v], t->o.metric);
            if (b > 0 && x > 0) {
                fprintf(f, "%.6f %d\n", x / b, v);
                lo = fmin(lo, x / b);
                hi = fmax(hi, x / b);
            }
        }
    fprintf(f, "EOD\nset xrange [%.6f:%.6f]\n", lo - (hi - lo) * 0.05, hi + (hi - lo) * 0.05);
    fprintf(f, "set arrow from 1, graph 0 to 1, graph 1 nohead dt 2\n");
    fprintf(f, "plot $ci using 1:2:3:4 with xerrorbars pt 7 lw 2, $rounds using 1:2 with points "
               "pt 1\n");
}

int btune_plot(const struct btune *t, const char *path, char *err, size_t errlen)
{
    char cmd[64];
    FILE *p;
    int st;

    if (t->nvar < 2)
        return snprintf(err, errlen, "nothing to draw"), -1;
    if (strchr(path, '\'') || strchr(path, '\n'))
        return snprintf(err, errlen, "'%s': a file name with a quote or a newline", path), -1;
    snprintf(cmd, sizeof(cmd), "exec \"${GNUPLOT:-gnuplot}\""); /* $GNUPLOT, as lfbench plot */
    if (!(p = popen(cmd, "w")))
        return snprintf(err, errlen, "cannot run gnuplot: %s", strerror(errno)), -1;
    plot_script(p, t, path);
    st = pclose(p);
    if (st != 0)
        return snprintf(err, errlen,
                        "gnuplot failed (status %d): install gnuplot (Debian: apt-get install "
                        "gnuplot-nox) or set $GNUPLOT",
                        WIFEXITED(st) ? WEXITSTATUS(st) : -1),
               -1;
    return 0;
}

/* --- --write-sysctl ------------------------------------------------------------------------- */

int btune_write_sysctl(const struct btune *t, char *err, size_t errlen)
{
    struct tunewrite_verdict v[BTUNE_MAX_VARIANTS];
    char figure[BTUNE_MAX_VARIANTS][160], how[1024];
    const char *unit = t->o.metric == BTUNE_RATE
                           ? (t->r[0][0].short_mode ? "connections/s" : "responses/s")
                       : t->o.metric == BTUNE_CPU ? "us of server CPU "
                                                    "per request"
                                                  : "us";
    size_t at;
    int n = 0;

    at = (size_t)snprintf(how, sizeof(how), "lfbench");
    for (int i = 0; i < t->o.argc && at < sizeof(how); i++)
        at += (size_t)snprintf(how + at, sizeof(how) - at, " %s", t->o.argv[i]);
    for (int i = 1; i < t->nvar; i++) {
        const struct btune_judged *j = &t->j[i];
        if (!t->var[i].key) /* "all keys together" is no one key's verdict */
            continue;
        snprintf(figure[n], sizeof(figure[n]), "%s %.6g against %.6g %s (medians of %d rounds)",
                 btune_metric_name[t->o.metric], median_figure(t, i), median_figure(t, 0), unit,
                 t->o.rounds);
        v[n] = (struct tunewrite_verdict){
            .key = t->var[i].key,
            .value = t->var[i].value,
            .effect = j->v == BTUNE_HELPS   ? TUNEWRITE_HELPS
                      : j->v == BTUNE_HURTS ? TUNEWRITE_HURTS
                                            : TUNEWRITE_NONE,
            .ratio = j->ci.median,
            .lo = j->ci.lo,
            .hi = j->ci.hi,
            .rounds = j->ci.n,
            .figure = figure[n],
        };
        n++;
    }
    return tunewrite_file(t->o.write_sysctl, v, n, how, t->o.force, err, errlen);
}
