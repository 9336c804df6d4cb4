/* plot: `lfbench plot RUN.json... -o FILE.png`: reads --json runs, writes a gnuplot script with
 * the data inline ($name << EOD datablocks) and runs gnuplot on it as a child process.
 *
 * The script is built here, not by gnuplot: every number it plots is computed in C from the
 * histograms (per-second p50 and p99, the percentile spectrum, each sweep step's percentiles),
 * so `--script` shows exactly what is drawn and a test can check it without gnuplot. */
#include "plot.h"

#include "hist.h"
#include "result.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static const char usage[] =
    "usage: lfbench plot [options] RUN.json...\n"
    "Draws one PNG of one or more `lfbench --json` runs with gnuplot, each run in its own\n"
    "colour: latency (p50, p99, max) and throughput per second, latency by percentile over\n"
    "the measured window, the connections' phases (connect, TLS handshake, first byte) by\n"
    "percentile, and for --rate-sweep/--find-rate latency against throughput.\n"
    "  -o FILE.png       the image to write (default: beside the first run, its name with\n"
    "                    .png for .json: run.json draws run.png; an input is never\n"
    "                    overwritten; a first run that is no regular file needs -o)\n"
    "  --size WxH        its size in pixels (default: 1200 wide, as high as the panels need)\n"
    "  --label A,B,...   the runs' names in the legend, one per file (default: each file's name\n"
    "                    without its directory and .json)\n"
    "  --title TEXT      the title (default: the run and its settings, or the names compared)\n"
    "  --script FILE     write the gnuplot script to FILE (- for stdout) instead of running\n"
    "                    gnuplot; with -o it sets that output, without it writes the PNG to\n"
    "                    gnuplot's stdout\n"
    "Time runs from the start of the load (a --start-at wait and the opening of connections\n"
    "are left out); every warm-up, each sweep step's, is shaded.\n"
    "  -h, --help        this text\n"
    "Needs gnuplot 5.2 or later (Debian: apt-get install gnuplot-nox); $GNUPLOT overrides the\n"
    "program. It prints the file it wrote (wrote run.png). Exit status: 0 drawn, 1 gnuplot\n"
    "missing or failed, 2 bad usage or input.\n";

/* Distinct at a glance, and for the common kinds of colour blindness (Tableau 10). */
static const char *const colour[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                     "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
#define NCOLOURS (sizeof(colour) / sizeof(colour[0]))
#define COLOUR(i) colour[(size_t)(i) % NCOLOURS]

/* Percentile axis ticks: 1/(1 - p) and their labels (HdrHistogram's plots). */
static const struct {
    double x;
    const char *label;
} pct_tick[] = {{1, "0"},          {2, "50"},          {10, "90"},         {100, "99"},
                {1e3, "99.9"},     {1e4, "99.99"},     {1e5, "99.999"},    {1e6, "99.9999"},
                {1e7, "99.99999"}, {1e8, "99.999999"}, {1e9, "99.9999999"}};

struct popt {
    const char *out, *script, *title, *labels;
    int w, h; /* 0: the default */
};

/* One run read back, with its name in the legend. */
struct prun {
    struct bresult r;
    char *label; /* owned */
    double t0;   /* where the load began on its series' clock: drawn at 0 (load_start) */
};

/* What the panels need, computed once: units and ranges over every run. */
struct scale {
    double lat_div; /* ns per latency unit */
    const char *lat_unit;
    double qps_div; /* requests/s per throughput unit */
    const char *qps_unit;
    bool series, spectrum, sweep; /* some run has data for the panel */
    bool phases;                  /* ... a connection phase's samples (cphase.h) */
    double t_max;                 /* the longest series, seconds */
    double x_max;                 /* the spectrum's largest 1/(1 - p) */
};

/* Writes s as a gnuplot single-quoted string: nothing is processed inside one (a double-quoted
 * one would run `command` substitution and backslash escapes), a quote becomes U+2019 (below).
 * Control characters, which would end the command, and bytes that are not UTF-8, which cairo draws
 * as garbage, become '?'. A quote is drawn as ’ (U+2019): doubling it, the documented escape, fails
 * at the start of a string in gnuplot 5.4.4 ('''x' reads as '' and a new string). The text itself
 * is drawn noenhanced: @, &, ^ and _ stay as they are. */
static void gp_str(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");

    putc('\'', f);
    while (*p) {
        unsigned n = *p < 0x80             ? 0
                     : (*p & 0xe0) == 0xc0 ? 1
                     : (*p & 0xf0) == 0xe0 ? 2
                     : (*p & 0xf8) == 0xf0 ? 3
                                           : 4;
        unsigned k = 1;

        if (n == 0) {
            if (*p == '\'')
                fputs("\xe2\x80\x99", f); /* U+2019: gnuplot 5.4 misreads '' at a string's start */
            else
                putc(*p < 0x20 || *p == 0x7f ? '?' : *p, f);
            p++;
            continue;
        }
        while (n < 4 && k <= n && (p[k] & 0xc0) == 0x80)
            k++;
        if (n == 4 || k <= n || (n == 1 && *p < 0xc2)) {
            putc('?', f); /* invalid or overlong lead byte, or a sequence cut short */
            p++;
            continue;
        }
        fwrite(p, 1, n + 1, f);
        p += n + 1;
    }
    putc('\'', f);
}

/* The legend's name of a file: its base name without ".json". */
static char *label_of(const char *path)
{
    const char *b = strrchr(path, '/');
    size_t n;

    b = b && b[1] ? b + 1 : path;
    n = strlen(b);
    if (n > 5 && !strcmp(b + n - 5, ".json"))
        n -= 5;
    return strndup(b, n);
}

/* A bucket's value as hist_percentile reports it between the extremes: the midpoint of what the
 * bucket can hold, the bucket cut to [min, max]. */
static uint64_t bucket_value(const struct hist *h, unsigned i)
{
    uint64_t lo, hi;

    hist_range(i, &lo, &hi);
    if (lo < h->min)
        lo = h->min;
    if (hi > h->max)
        hi = h->max;
    return lo <= hi ? lo + (hi - lo) / 2 : hi;
}

/* HdrHistogram's outputPercentileDistribution with 5 ticks per half distance: percentiles
 * 0, 10 .. 50, 55 .. 75, 77.5 .. , each halving of the distance to 100% in 10 steps, a point
 * at every level the recorded values reach, the last bucket's first, then the maximum. The
 * maximum, at 100% (1/(1 - p) infinite), is drawn at x = count: the one value in count above
 * all others. Calls emit(percentile, x, value ns); returns the largest x. */
static double spectrum(const struct hist *h, void (*emit)(void *, double, double, uint64_t),
                       void *arg)
{
    double level = 0, x = 1, cur;
    uint64_t cum = 0;

    if (!h || h->count == 0)
        return 0;
    for (unsigned i = 0; i < HIST_BUCKETS && cum < h->count; i++) {
        if (h->b[i] == 0)
            continue;
        cum += h->b[i];
        cur = 100.0 * (double)cum / (double)h->count;
        while (level <= cur) {
            x = 1.0 / (1.0 - level / 100.0);
            emit(arg, level, x, bucket_value(h, i));
            if (cum == h->count)
                break; /* HdrHistogram's iterator: one level in the last bucket, then 100% */
            /* ilogb is floor(log2) exactly; log2 of a power of two may not round to it */
            level += 100.0 / (5.0 * (double)(2L << ilogb(100.0 / (100.0 - level))));
        }
    }
    if ((double)h->count > x)
        x = (double)h->count;
    emit(arg, 100.0, x, h->max);
    return x;
}

struct emit_ctx {
    FILE *f;
    double div;
    double lat_max; /* ns */
};

static void emit_row(void *arg, double p, double x, uint64_t v)
{
    struct emit_ctx *e = arg;

    if (e->f)
        fprintf(e->f, "%.10g %.10g %.6g\n", p, x, (double)v / e->div);
    if ((double)v > e->lat_max)
        e->lat_max = (double)v;
}

/* The j-th step in the order of its intended rate: --find-rate's search goes back and forth, and
 * a line through the steps in their order would too. Quadratic, over a few dozen steps. */
static const struct bstep *step_sorted(const struct bresult *r, size_t j)
{
    for (size_t i = 0; i < r->nsteps; i++) {
        size_t below = 0;

        for (size_t k = 0; k < r->nsteps; k++)
            below += r->steps[k].rate < r->steps[i].rate ||
                     (r->steps[k].rate == r->steps[i].rate && k < i);
        if (below == j)
            return &r->steps[i];
    }
    return &r->steps[j];
}

static double step_qps(const struct bstep *s)
{
    return s->measured > 0 ? (double)s->c.requests / s->measured : 0;
}

/* Where the load began on r's series clock (seconds since lfbench began opening connections):
 * its first step's start, the beginning of its warm-up. The seconds before it hold no request
 * (the connections opening, a --start-at wait): drawn, they made a run a ramp up from 0 and put
 * its warm-up in the wrong place. 0 when the file cannot say. */
static double load_start(const struct bresult *r)
{
    double t0;

    if (!r->nseries)
        return 0;
    t0 = r->start_wall - r->warmup - (r->series[0].wall - r->series[0].t);
    return t0 > 0 && t0 < r->series[r->nseries - 1].t ? t0 : 0;
}

/* Second i of run p as drawn, in seconds since its load began: from *from to *to. False when it
 * ended before the load began; the one it began in is cut to its part after that. */
static bool second_span(const struct prun *p, size_t i, double *from, double *to)
{
    const struct bresult *r = &p->r;
    double b = i ? r->series[i - 1].t : 0;

    if (r->series[i].t <= p->t0)
        return false;
    *from = (b > p->t0 ? b : p->t0) - p->t0;
    *to = r->series[i].t - p->t0;
    return true;
}

/* A second too short to give a rate (the tail of the run) is left out of the throughput, unless
 * the run has none longer (a run over in a fraction of a second): its rates are all it has. */
#define MIN_SECOND 0.2

/* The seconds of run p drawn, and whether each is shorter than MIN_SECOND (*all_short). */
static size_t drawn_seconds(const struct prun *p, bool *all_short)
{
    size_t n = 0;
    double from, to;

    *all_short = true;
    for (size_t i = 0; i < p->r.nseries; i++)
        if (second_span(p, i, &from, &to)) {
            n++;
            if (to - from >= MIN_SECOND)
                *all_short = false;
        }
    return n;
}

/* Second i's rate, requests per second, from its length len: false when it gives none (too short
 * while the run has longer ones, or of no length). */
static bool second_rate(const struct bsecond *b, double len, bool all_short, double *qps)
{
    if (len <= 0 || (len < MIN_SECOND && !all_short))
        return false;
    *qps = (double)b->c.requests / len;
    return true;
}

/* Something of h to draw on a log axis: a value above 0 (a 0 is no point there, and a curve of
 * none fails the whole plot: gnuplot's "all points y value undefined"). */
static bool drawable(const struct hist *h)
{
    return h && h->count && h->max > 0;
}

static bool second_drawable(const struct bsecond *b)
{
    return b->lat.count && b->lat.max > 0;
}

/* Units and ranges over all runs. */
static void measure(struct scale *s, const struct prun *runs, int n)
{
    struct emit_ctx e = {NULL, 1, 0};
    double qps_max = 0;

    memset(s, 0, sizeof(*s));
    for (int k = 0; k < n; k++) {
        const struct bresult *r = &runs[k].r;
        bool all_short;

        drawn_seconds(&runs[k], &all_short);
        for (size_t i = 0; i < r->nseries; i++) {
            const struct bsecond *b = &r->series[i];
            double from, to, qps;

            if (!second_span(&runs[k], i, &from, &to))
                continue;
            if (b->lat.count && (double)b->lat.max > e.lat_max)
                e.lat_max = (double)b->lat.max;
            if (second_rate(b, to - from, all_short, &qps) && qps > qps_max)
                qps_max = qps;
            if (to > s->t_max)
                s->t_max = to;
            if (second_drawable(b))
                s->series = true;
        }
        if (drawable(r->lat)) {
            double x = spectrum(r->lat, emit_row, &e);

            if (x > s->x_max)
                s->x_max = x;
            s->spectrum = true;
        }
        for (int p = 0; p < CP_N; p++)
            if (drawable(r->ph[p])) {
                double x = spectrum(r->ph[p], emit_row, &e);

                if (x > s->x_max)
                    s->x_max = x;
                s->phases = true;
            }
        for (size_t i = 0; i < r->nsteps; i++) {
            const struct bstep *st = &r->steps[i];

            if (st->lat && st->lat->count && (double)hist_percentile(st->lat, 99.9) > e.lat_max)
                e.lat_max = (double)hist_percentile(st->lat, 99.9);
            if (step_qps(st) > qps_max)
                qps_max = step_qps(st);
            if (r->found_rate > qps_max)
                qps_max = r->found_rate;
            if (st->lat && st->lat->count && hist_percentile(st->lat, 99.9) > 0)
                s->sweep = true;
        }
    }
    /* One unit for the whole figure: µs unless that takes six digits */
    s->lat_div = e.lat_max >= 1e8 ? 1e6 : 1e3;
    s->lat_unit = e.lat_max >= 1e8 ? "ms" : "µs";
    s->qps_div = qps_max >= 1e4 ? 1e3 : 1;
    s->qps_unit = qps_max >= 1e4 ? "thousand requests/s" : "requests/s";
}

static void print_lat(FILE *f, uint64_t v, const struct scale *s)
{
    if (v == 0)
        fputs(" NaN", f); /* nothing on a log axis */
    else
        fprintf(f, " %.6g", (double)v / s->lat_div);
}

static void datablocks(FILE *f, const struct prun *runs, int n, const struct scale *s,
                       struct hist *h)
{
    for (int k = 0; k < n; k++) {
        const struct bresult *r = &runs[k].r;
        struct emit_ctx e = {f, s->lat_div, 0};

        fprintf(f, "\n# run %d: ", k);
        gp_str(f, runs[k].label);
        fprintf(f, "\n");
        if (r->nseries) {
            bool all_short;

            drawn_seconds(&runs[k], &all_short);
            fprintf(f,
                    "# the second's middle (s since the load began), p50, p99, max (%s), "
                    "throughput (%s), connections open, its end (s)\n",
                    s->lat_unit, s->qps_unit);
            if (all_short)
                fprintf(f, "# every second shorter than %g s: each one's rate drawn all the same\n",
                        MIN_SECOND);
            fprintf(f, "$series%d << EOD\n", k);
            for (size_t i = 0; i < r->nseries; i++) {
                const struct bsecond *b = &r->series[i];
                double from, to, len, qps;

                if (!second_span(&runs[k], i, &from, &to))
                    continue;
                len = to - from;
                /* drawn at its middle: the warm-up's last second inside the shaded part */
                fprintf(f, "%.4f", from + len / 2);
                if (b->lat.count) {
                    hist_init(h);
                    hcompact_add_to(&b->lat, h);
                    print_lat(f, hist_percentile(h, 50), s);
                    print_lat(f, hist_percentile(h, 99), s);
                    print_lat(f, h->max, s);
                } else {
                    fputs(" NaN NaN NaN", f);
                }
                if (second_rate(b, len, all_short, &qps))
                    fprintf(f, " %.6g", qps / s->qps_div);
                else
                    fputs(" NaN", f);
                fprintf(f, " %d %.4f\n", b->open, to);
            }
            fprintf(f, "EOD\n");
        }
        if (r->lat && r->lat->count) {
            fprintf(f, "# percentile (%%), 1/(1 - p), latency (%s)\n", s->lat_unit);
            fprintf(f, "$spectrum%d << EOD\n", k);
            spectrum(r->lat, emit_row, &e);
            fprintf(f, "EOD\n");
        }
        for (int p = 0; p < CP_N; p++)
            if (r->ph[p] && r->ph[p]->count) {
                fprintf(f, "# %s: percentile (%%), 1/(1 - p), time (%s)\n", cphase_label[p],
                        s->lat_unit);
                fprintf(f, "$phase%d_%s << EOD\n", k, cphase_tag[p]);
                spectrum(r->ph[p], emit_row, &e);
                fprintf(f, "EOD\n");
            }
        if (r->nsteps) {
            fprintf(f, "# achieved (%s), p50, p99, p99.9 (%s), intended (%s), kept\n", s->qps_unit,
                    s->lat_unit, s->qps_unit);
            fprintf(f, "$sweep%d << EOD\n", k);
            for (size_t j = 0; j < r->nsteps; j++) {
                const struct bstep *st = step_sorted(r, j);

                fprintf(f, "%.6g", step_qps(st) / s->qps_div);
                if (st->lat && st->lat->count) {
                    print_lat(f, hist_percentile(st->lat, 50), s);
                    print_lat(f, hist_percentile(st->lat, 99), s);
                    print_lat(f, hist_percentile(st->lat, 99.9), s);
                } else {
                    fputs(" NaN NaN NaN", f);
                }
                fprintf(f, " %.6g %d\n", st->rate / s->qps_div, st->kept);
            }
            fprintf(f, "EOD\n");
        }
    }
}

/* The default title: the one run and how it was run, or the runs compared. */
static void title(FILE *f, const struct popt *o, const struct prun *runs, int n)
{
    char buf[1024];
    size_t len = 0;

    if (o->title) {
        gp_str(f, o->title);
        return;
    }
    if (n == 1) {
        const struct bresult *r = &runs[0].r;

        len = (size_t)snprintf(buf, sizeof(buf), "%s: %s, %s, %d connections", runs[0].label,
                               r->target ? r->target : "?", r->mode ? r->mode : "?", r->conns);
        if (len < sizeof(buf) && r->rate > 0)
            len += (size_t)snprintf(buf + len, sizeof(buf) - len, ", -R %.0f/s", r->rate);
        if (len < sizeof(buf) && r->measured > 0)
            snprintf(buf + len, sizeof(buf) - len, ", %.0f s measured", r->measured);
        gp_str(f, buf);
        return;
    }
    for (int k = 0; k < n && len < sizeof(buf); k++)
        len +=
            (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%s", k ? " vs " : "", runs[k].label);
    gp_str(f, buf);
}

/* Writes style, the c-th curve's "with" part; lone (a curve of one point, which a line would not
 * draw: a run over within its first second, a spectrum of one sample) marks its point, a
 * different shape for each curve. */
static void with_style(FILE *f, const char *style, int c, bool lone)
{
    static const int pt[] = {7, 5, 9};

    if (lone && !strncmp(style, "lines", 5) && strncmp(style, "linespoints", 11))
        fprintf(f, "linespoints%s pt %d ps 1.2", style + 5, pt[c % 3]);
    else
        fputs(style, f);
}

/* A black key entry that says what the c-th curve's line style is: style is the plot's "with"
 * part, marked as with_style marks a lone curve when every curve drawn is one (lone). */
static void key_entry(FILE *f, const char *name, const char *style, int c, bool lone)
{
    fputs(", \\\n     keyentry with ", f);
    with_style(f, style, c, lone);
    fprintf(f, " lc rgb 'black' title '%s'", name);
}

static void style_key(FILE *f, const char *const *names, const char *const *style, int n, bool lone)
{
    for (int i = 0; i < n; i++)
        key_entry(f, names[i], style[i], i, lone);
}

/* Shades every warm-up on the time axis: each sweep step has its own, and each run its steps (one
 * grey for all: some run was warming up there). A step from a file that lacks its start is not
 * placed: only the first, at the load's start. label: the first wide enough is named. */
static void warmups(FILE *f, const struct prun *runs, int n, const struct scale *s, bool label)
{
    for (int k = 0; k < n; k++) {
        const struct bresult *r = &runs[k].r;
        size_t m = r->nsteps ? r->nsteps : 1;
        double origin, a, b;

        if (!r->nseries || r->warmup <= 0)
            continue;
        origin = r->series[0].wall - r->series[0].t + runs[k].t0; /* the load's start */
        for (size_t i = 0; i < m; i++) {
            if (r->nsteps && r->steps[i].start_wall > 0)
                a = r->steps[i].start_wall - origin;
            else if (i == 0)
                a = 0;
            else
                continue;
            a = a > 0 ? a : 0;
            b = a + r->warmup < s->t_max ? a + r->warmup : s->t_max;
            if (a >= b)
                continue; /* after the last second (an interrupted run) */
            fprintf(f,
                    "set object rect from %.6g, graph 0 to %.6g, graph 1 behind "
                    "fc rgb '#eeeeee' fs solid noborder\n",
                    a, b);
            if (label && b - a > 0.1 * s->t_max) { /* narrower, the word would cross the axis */
                fprintf(f,
                        "set label 'warm-up' at %.6g, graph 0.04 center textcolor rgb "
                        "'#808080'\n",
                        (a + b) / 2);
                label = false;
            }
        }
    }
}

/* Pixels around the plots: the figure's title, a panel's, tick labels and xlabel */
#define TOP 50
#define TITLE 30
#define AXIS 62
/* A plot's height at the default size: a big panel's, and the throughput's under the latency */
#define PLOT_BIG 330
#define PLOT_SMALL 170

/* The time axis: from the first request on (the first step's warm-up) */
#define T_AXIS "seconds since the load began"

/* A time panel's x axis, its warm-ups shaded (the first labelled when label is set). */
static void time_axis(FILE *f, const struct prun *runs, int n, const struct scale *s, bool label)
{
    fprintf(f, "set xlabel '%s'\nset xrange [0:%.6g]\n", T_AXIS, s->t_max);
    warmups(f, runs, n, s, label);
}

/* Pixels of the figure, top to bottom; a panel's tmargin/bmargin in screen coordinates. */
struct layout {
    double w, h, y; /* y: pixels used from the top */
    double key;     /* pixels right of the plots, for the legend */
    double k;       /* the plots' heights against PLOT_BIG and PLOT_SMALL */
};

/* Starts the panel name below the one before: its plot plot_px high at the default size, title
 * above it. */
static void panel(FILE *f, struct layout *L, double plot_px, const char *name, const char *title)
{
    double top = L->y + TITLE, bottom = top + plot_px * L->k;

    fprintf(f, "\n# %s\nreset\n", name);
    fprintf(f, "set tmargin at screen %.4f\nset bmargin at screen %.4f\n", 1 - top / L->h,
            1 - bottom / L->h);
    fprintf(f, "set lmargin at screen %.4f\nset rmargin at screen %.4f\n", 80 / L->w,
            1 - L->key / L->w);
    fprintf(f,
            "set key at screen %.4f,%.4f left top Left reverse samplen 3 spacing 1.1 "
            "width -2\n",
            1 - (L->key - 10) / L->w, 1 - top / L->h);
    fprintf(f, "set grid xtics ytics mytics lc rgb '#e0e0e0' lw 1, lc rgb '#f0f0f0' lw 1\n");
    fprintf(f, "set border 3 lc rgb '#404040'\nset tics nomirror out\n");
    fprintf(f, "set title '%s' offset 0,-0.5\n", title);
    L->y = bottom + AXIS;
}

/* A latency y axis, logarithmic (logscale "y", or "xy" for the x axis too). */
static void latency_y(FILE *f, const struct scale *s, const char *logscale)
{
    fprintf(f, "set logscale %s\nset format y '%%g'\nset ylabel 'latency (%s)'\n", logscale,
            s->lat_unit);
}

/* The points of run p's curves in a panel: 0 when it has none there. */
static size_t series_points(const struct prun *p)
{
    bool all_short;

    return drawn_seconds(p, &all_short);
}

static size_t spectrum_points(const struct prun *p)
{
    return p->r.lat ? (size_t)p->r.lat->count : 0; /* one sample: both points at 0% */
}

static size_t step_points(const struct prun *p)
{
    return p->r.nsteps;
}

/* A panel's curves: for each run with points(), n of them from its datablock $<block><r>, x
 * from column x and curve c's y from column y0 + c, drawn with style[c] in the run's colour
 * and tail after it; the first is titled with the run's name, the others stay out of the
 * legend (style_key explains them). */
struct curves {
    const char *block;
    size_t (*points)(const struct prun *p);
    int x, y0, n;
    const char *const *style;
    const char *tail;
};

/* Whether every run's curves, of those with any, are of one point: the key marks them too. */
static bool all_lone(const struct prun *runs, int n, const struct curves *cv)
{
    for (int r = 0; r < n; r++)
        if (cv->points(&runs[r]) > 1)
            return false;
    return true;
}

/* A panel's plot command: the curves of every run. */
static void plot_runs(FILE *f, const struct prun *runs, int n, const struct curves *cv)
{
    fprintf(f, "plot");
    for (int r = 0, first = 1; r < n; r++) {
        size_t np = cv->points(&runs[r]);

        if (!np)
            continue;
        for (int c = 0; c < cv->n; c++) {
            fprintf(f, "%s \\\n     $%s%d using %d:%d with ", first ? "" : ",", cv->block, r, cv->x,
                    cv->y0 + c);
            with_style(f, cv->style[c], c, np < 2);
            fprintf(f, " lc rgb '%s'%s ", COLOUR(r), cv->tail);
            if (c == 0)
                fputs("title ", f), gp_str(f, runs[r].label);
            else
                fputs("notitle", f);
            first = 0;
        }
    }
}

static const char *const one_line[] = {"lines"};

/* The figure's size: --size, or 1200 wide and as high as its panels want; --size scales the
 * plots, not the text around them. The legend's column fits the longest name (about 7 pixels a
 * character at 10 points, and the line sample), within half the width. */
static void lay_out(struct layout *L, const struct popt *o, const struct scale *s,
                    const struct prun *runs, int n)
{
    double fixed, want;

    fixed = TOP + (s->series ? 2 * (TITLE + AXIS) : 0) + (s->spectrum ? TITLE + AXIS : 0) +
            (s->phases ? TITLE + AXIS : 0) + (s->sweep ? TITLE + AXIS : 0);
    want = (s->series ? PLOT_BIG + PLOT_SMALL : 0) + (s->spectrum ? PLOT_BIG : 0) +
           (s->phases ? PLOT_BIG : 0) + (s->sweep ? PLOT_BIG : 0);
    L->w = o->w ? o->w : 1200;
    L->h = o->h ? o->h : (int)(fixed + want);
    L->y = TOP;
    L->k = (L->h - fixed) / want;
    if (L->k < 0.2)
        L->k = 0.2;
    L->key = 6 * 7 + 70;
    for (int r = 0; r < n; r++)
        if ((double)strlen(runs[r].label) * 7 + 70 > L->key)
            L->key = (double)strlen(runs[r].label) * 7 + 70;
    if (s->phases && (double)strlen(cphase_label[CP_FIRST_BYTE]) * 7 + 70 > L->key)
        L->key = (double)strlen(cphase_label[CP_FIRST_BYTE]) * 7 + 70; /* the phases' key */
    if (L->key > L->w / 2.0)
        L->key = L->w / 2.0;
}

/* The PNG terminal (cairo's where gnuplot has it) and where its image goes: output, or
 * gnuplot's stdout when NULL. */
static void terminal(FILE *f, const struct layout *L, const char *output)
{
    fprintf(f, "\nset encoding utf8\n");
    fprintf(f,
            "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
            "    set terminal pngcairo size %d,%d font 'sans,10' noenhanced\n"
            "} else {\n"
            "    set terminal png size %d,%d noenhanced\n"
            "}\n",
            (int)L->w, (int)L->h, (int)L->w, (int)L->h);
    if (output) {
        fprintf(f, "set output ");
        gp_str(f, output);
        fprintf(f, "\n");
    } else {
        fprintf(f, "set output # stdout: gnuplot THIS > FILE.png\n");
    }
}

static void latency_panel(FILE *f, struct layout *L, const struct prun *runs, int n,
                          const struct scale *s)
{
    static const char *const names[] = {"p50", "p99", "max"};
    static const char *const style[] = {"lines lw 1.5 dt 1", "lines lw 1.5 dt 2",
                                        "lines lw 1 dt 3"};
    struct curves cv = {"series", series_points, 1, 2, 3, style, ""};

    panel(f, L, PLOT_BIG, "latency per second", "latency per second, warm-up included");
    latency_y(f, s, "y");
    time_axis(f, runs, n, s, true);
    plot_runs(f, runs, n, &cv);
    style_key(f, names, style, 3, all_lone(runs, n, &cv));
    fprintf(f, "\n");
}

static void throughput_panel(FILE *f, struct layout *L, const struct prun *runs, int n,
                             const struct scale *s)
{
    panel(f, L, PLOT_SMALL, "throughput per second", "throughput per second");
    fprintf(f, "set format y '%%g'\nset ylabel '%s'\nset yrange [0:*]\n", s->qps_unit);
    time_axis(f, runs, n, s, false);
    plot_runs(f, runs, n, &(struct curves){"series", series_points, 1, 5, 1, one_line, " lw 1.5"});
    fprintf(f, "\n");
}

/* The percentile axis of a spectrum: 0% to the largest 1/(1 - p) of any run, HdrHistogram's
 * ticks. */
static void percentile_x(FILE *f, const struct scale *s)
{
    fprintf(f, "set xlabel 'percentile'\nset xrange [1:%.6g]\nset xtics (", s->x_max * 1.5);
    for (size_t i = 0; i < sizeof(pct_tick) / sizeof(pct_tick[0]); i++) {
        /* a tic label is a format: %% is a percent sign */
        fprintf(f, "%s'%s%%%%' %g", i ? ", " : "", pct_tick[i].label, pct_tick[i].x);
        if (pct_tick[i].x >= s->x_max)
            break;
    }
    fprintf(f, ")\nset mxtics 10\n");
}

static void spectrum_panel(FILE *f, struct layout *L, const struct prun *runs, int n,
                           const struct scale *s)
{
    panel(f, L, PLOT_BIG, "percentile spectrum", "latency by percentile, measured window");
    latency_y(f, s, "xy");
    percentile_x(f, s);
    plot_runs(f, runs, n,
              &(struct curves){"spectrum", spectrum_points, 2, 3, 1, one_line, " lw 1.5"});
    fprintf(f, "\n");
}

/* Each run's connection phases by percentile: a curve per phase with samples, in the run's
 * colour, one dash type per phase (the black key says which). */
static void phases_panel(FILE *f, struct layout *L, const struct prun *runs, int n,
                         const struct scale *s)
{
    static const char *const style[CP_N] = {"lines lw 1.5 dt 1", "lines lw 1.5 dt 2",
                                            "lines lw 1.5 dt 3"};
    bool seen[CP_N] = {false}, lone = true;

    panel(f, L, PLOT_BIG, "connection phases",
          "connect, TLS handshake and first byte of each connection, by percentile");
    latency_y(f, s, "xy");
    percentile_x(f, s);
    fprintf(f, "plot");
    for (int r = 0, first = 1; r < n; r++)
        for (int p = 0, titled = 0; p < CP_N; p++) {
            const struct hist *h = runs[r].r.ph[p];

            if (!h || !h->count)
                continue;
            fprintf(f, "%s \\\n     $phase%d_%s using 2:3 with ", first ? "" : ",", r,
                    cphase_tag[p]);
            with_style(f, style[p], p, h->count < 2); /* one sample: both points at 0% */
            fprintf(f, " lc rgb '%s' ", COLOUR(r));
            lone = lone && h->count < 2;
            if (!titled++)
                fputs("title ", f), gp_str(f, runs[r].label);
            else
                fputs("notitle", f);
            first = 0;
            seen[p] = true;
        }
    for (int p = 0; p < CP_N; p++)
        if (seen[p])
            key_entry(f, cphase_label[p], style[p], p, lone);
    fprintf(f, "\n");
}

/* Latency against throughput, a point per step, and each --find-rate's rate found marked. */
static void sweep_panel(FILE *f, struct layout *L, const struct prun *runs, int n,
                        const struct scale *s)
{
    static const char *const names[] = {"p50", "p99", "p99.9"};
    static const char *const style[] = {"linespoints lw 1.5 dt 1 pt 7 ps 0.8",
                                        "linespoints lw 1.5 dt 2 pt 5 ps 0.8",
                                        "linespoints lw 1.5 dt 3 pt 9 ps 0.8"};

    panel(f, L, PLOT_BIG, "rate sweep", "latency against throughput, one point per step");
    latency_y(f, s, "y");
    fprintf(f, "set format x '%%g'\nset xlabel 'achieved throughput (%s)'\n", s->qps_unit);
    fprintf(f, "set xrange [0:*]\n");
    for (int r = 0; r < n; r++) {
        double fr = runs[r].r.found_rate / s->qps_div;

        if (runs[r].r.nsteps == 0 || fr <= 0)
            continue;
        fprintf(f, "set arrow from %.6g, graph 0 to %.6g, graph 1 nohead lc rgb '%s' dt 4\n", fr,
                fr, COLOUR(r));
        fprintf(f,
                "set label 'found %.0f/s' at %.6g, graph 0.04 left offset 0.5,%d "
                "textcolor rgb '%s'\n",
                runs[r].r.found_rate, fr, r, COLOUR(r));
    }
    plot_runs(f, runs, n, &(struct curves){"sweep", step_points, 1, 2, 3, style, ""});
    style_key(f, names, style, 3, false);
    fprintf(f, "\n");
}

/* The whole script. output: the PNG's name for `set output`, or NULL for gnuplot's stdout. */
static void script(FILE *f, const struct popt *o, const struct prun *runs, int n,
                   const char *output, struct hist *h)
{
    struct scale s;
    struct layout L;

    measure(&s, runs, n);
    lay_out(&L, o, &s, runs, n);
    fprintf(f, "# lfbench plot: %d run%s; gnuplot 5.2 or later\n", n, n == 1 ? "" : "s");
    fprintf(f, "# latencies in %s, throughput in %s\n", s.lat_unit, s.qps_unit);
    datablocks(f, runs, n, &s, h);
    terminal(f, &L, output);
    fprintf(f, "set multiplot title ");
    title(f, o, runs, n);
    fprintf(f, " font ',13'\n");
    if (s.series) {
        latency_panel(f, &L, runs, n, &s);
        throughput_panel(f, &L, runs, n, &s);
    }
    if (s.spectrum)
        spectrum_panel(f, &L, runs, n, &s);
    if (s.phases)
        phases_panel(f, &L, runs, n, &s);
    if (s.sweep)
        sweep_panel(f, &L, runs, n, &s);
    fprintf(f, "\nunset multiplot\n");
}

/* A new file beside out, to be renamed over it once the image is whole: a failure then leaves
 * whatever was there. Only a regular file (or a new one) is replaced: a rename over a FIFO, a
 * device or a symlink would put a PNG where they were. Returns its descriptor, its name in *tmp
 * (malloc'd), or -1 with err said. */
static int temp_beside(const char *out, char **tmp, char *err, size_t errlen)
{
    struct stat st;
    mode_t mask;
    int fd;

    *tmp = NULL;
    if (lstat(out, &st) == 0 && !S_ISREG(st.st_mode)) {
        snprintf(err, errlen,
                 "cannot write %s: not a regular file (a PNG goes to a new or a "
                 "regular file)",
                 out);
        return -1;
    }
    if (asprintf(tmp, "%s.XXXXXX", out) < 0) {
        *tmp = NULL;
        snprintf(err, errlen, "%s", strerror(ENOMEM));
        return -1;
    }
    fd = mkostemp(*tmp, O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "cannot write %s: %s", out, strerror(errno));
        free(*tmp);
        *tmp = NULL;
        return -1;
    }
    mask = umask(0); /* mkostemp makes it 0600: give it the mode open(2) would */
    umask(mask);
    fchmod(fd, 0666 & ~mask);
    return fd;
}

/* Runs prog with in, out and errf as its stdin, stdout and stderr, and waits for it. Returns 0
 * with its wait status in *status, or -1 with err said. */
static int spawn_wait(const char *prog, int in, int out, int errf, int *status, char *err,
                      size_t errlen)
{
    char name[] = "gnuplot", *argv[] = {name, NULL};
    posix_spawn_file_actions_t fa;
    pid_t pid;
    int e;

    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in, 0);
    posix_spawn_file_actions_adddup2(&fa, out, 1);
    posix_spawn_file_actions_adddup2(&fa, errf, 2);
    e = posix_spawnp(&pid, prog, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (e == ENOENT) {
        snprintf(err, errlen,
                 "%s not found: install gnuplot (Debian: apt-get install gnuplot-nox), or use "
                 "--script",
                 prog);
        return -1;
    }
    if (e) {
        snprintf(err, errlen, "cannot run %s: %s", prog, strerror(e));
        return -1;
    }
    while (waitpid(pid, status, 0) < 0)
        if (errno != EINTR) {
            snprintf(err, errlen, "waitpid: %s", strerror(errno));
            return -1;
        }
    return 0;
}

/* Says in err how prog ended (status), with the line of its stderr ef that names the error:
 * gnuplot echoes the offending command first, then "line N: what". */
static void say_failure(const char *prog, int status, FILE *ef, char *err, size_t errlen)
{
    char line[512] = "", first[512] = "";

    if (!WIFEXITED(status)) {
        snprintf(err, errlen, "%s killed by signal %d", prog, WTERMSIG(status));
        return;
    }
    rewind(ef);
    while (fgets(line, sizeof(line), ef)) {
        line[strcspn(line, "\n")] = '\0';
        if (!first[0] && line[strspn(line, " \t^")])
            snprintf(first, sizeof(first), "%s", line + strspn(line, " \t"));
        if (strstr(line, "line ") && strchr(line, ':'))
            break;
        line[0] = '\0';
    }
    snprintf(err, errlen, "%s failed (exit %d): %s", prog, WEXITSTATUS(status),
             line[0]    ? line + strspn(line, " \t")
             : first[0] ? first
                        : "no message");
}

/* Runs gnuplot with the script on stdin and the PNG on stdout; err gets one line on failure.
 * Returns 0, 1 (gnuplot missing or failed) or 2 (the output cannot be written). */
static int run_gnuplot(FILE *sf, const char *out, char *err, size_t errlen)
{
    const char *prog = getenv("GNUPLOT");
    char *tmp;
    FILE *ef;
    int ofd, rc = 1, status;
    struct stat st;

    if (!prog || !*prog)
        prog = "gnuplot";
    ofd = temp_beside(out, &tmp, err, errlen);
    if (ofd < 0)
        return 2;
    /* from here on, what fails is not the user's doing */
    ef = tmpfile();
    if (!ef || fflush(sf) != 0 || fseek(sf, 0, SEEK_SET) != 0) {
        snprintf(err, errlen, "temporary file: %s", strerror(errno));
        goto out_unlink;
    }
    if (spawn_wait(prog, fileno(sf), ofd, fileno(ef), &status, err, errlen) < 0)
        goto out_unlink;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        say_failure(prog, status, ef, err, errlen);
        goto out_unlink;
    }
    if (fstat(ofd, &st) == 0 && st.st_size == 0) {
        snprintf(err, errlen, "%s wrote no image", prog);
        goto out_unlink;
    }
    if (fsync(ofd) != 0 || rename(tmp, out) != 0) {
        snprintf(err, errlen, "cannot write %s: %s", out, strerror(errno));
        goto out_unlink;
    }
    rc = 0;
    goto out_close;
out_unlink:
    unlink(tmp);
out_close:
    if (ef)
        fclose(ef);
    close(ofd);
    free(tmp);
    return rc;
}

/* "WxH", each 100 to 20000 pixels. */
static bool parse_size(const char *s, int *w, int *h)
{
    char *end;
    long a, b;

    errno = 0;
    a = strtol(s, &end, 10);
    if (end == s || (*end != 'x' && *end != 'X'))
        return false;
    s = end + 1;
    b = strtol(s, &end, 10);
    if (end == s || *end || errno || a < 100 || b < 100 || a > 20000 || b > 20000)
        return false;
    *w = (int)a, *h = (int)b;
    return true;
}

/* The default image: beside the first run, .json replaced by .png (run.json: run.png), or .png
 * added to a name without it. NULL, with a line on stderr, when the first run is no regular file
 * (stdin, a pipe: there is no beside) or memory ran out. One that does not exist gets its name:
 * reading it says what is wrong. */
static char *default_out(const char *run)
{
    const char *base = strrchr(run, '/');
    size_t n = strlen(run);
    struct stat st;
    char *p;

    if (stat(run, &st) == 0 && !S_ISREG(st.st_mode)) {
        fprintf(stderr,
                "lfbench plot: %s is not a regular file, so the image has no default name "
                "beside it: name it with -o FILE.png\n",
                run);
        return NULL;
    }
    base = base ? base + 1 : run;
    if (strlen(base) > 5 && !strcmp(run + n - 5, ".json"))
        n -= 5;
    if (asprintf(&p, "%.*s.png", (int)n, run) < 0) {
        fprintf(stderr, "lfbench plot: %s\n", strerror(ENOMEM));
        return NULL;
    }
    return p;
}

/* The input that writing path would replace (the same file, under any name), or NULL. */
static const char *input_at(const char *path, char *const *inputs, int n)
{
    struct stat a, b;

    if (stat(path, &a) != 0)
        return NULL; /* a new file: none of them */
    for (int k = 0; k < n; k++)
        if (stat(inputs[k], &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
            return inputs[k];
    return NULL;
}

/* True, with a line said, when no panel has anything to draw (measure's conditions: a second's
 * latency, the spectrum, a connection phase, a sweep step's latency, each above 0): a run whose
 * every request failed, say. gnuplot would fail on it, or draw a picture of nothing. */
static bool nothing_drawn(const struct prun *runs, int n, char *const *paths)
{
    struct scale s;

    measure(&s, runs, n);
    if (s.series || s.spectrum || s.phases || s.sweep)
        return false;
    if (n == 1)
        fprintf(stderr, "lfbench plot: %s: no latencies to plot (no request completed)\n",
                paths[0]);
    else
        fprintf(stderr,
                "lfbench plot: none of the %d runs has a latency to plot (no request "
                "completed)\n",
                n);
    return true;
}

/* The runs to plot: each file read, named by --label's LIST (or by its file name), and each
 * with something to draw. Returns 0, or -1 with one line said. */
static int read_runs(struct prun *runs, int n, char *const *paths, const char *label_list)
{
    char err[1024], *labels = NULL, *save = NULL, *tok = NULL;
    int k = 0, rc = -1;

    if (label_list) {
        labels = strdup(label_list);
        for (tok = labels ? strtok_r(labels, ",", &save) : NULL; tok && k < n;
             tok = strtok_r(NULL, ",", &save))
            runs[k++].label = strdup(tok);
        if (k != n || tok) {
            fprintf(stderr, "lfbench plot: --label has %d name%s for %d file%s\n",
                    k + (tok != NULL), k + (tok != NULL) == 1 ? "" : "s", n, n == 1 ? "" : "s");
            goto out;
        }
    }
    for (k = 0; k < n; k++) {
        const char *path = paths[k];

        if (result_read_json(path, &runs[k].r, err, sizeof(err)) < 0) {
            fprintf(stderr, "lfbench plot: %s\n", err);
            goto out;
        }
        runs[k].t0 = load_start(&runs[k].r);
        if (!runs[k].label)
            runs[k].label = label_of(path);
        if (!runs[k].label) {
            fprintf(stderr, "lfbench plot: %s\n", strerror(ENOMEM));
            goto out;
        }
        if (!runs[k].r.nseries && !(runs[k].r.lat && runs[k].r.lat->count) && !runs[k].r.nsteps) {
            fprintf(stderr, "lfbench plot: %s: no latencies to plot (no request completed)\n",
                    path);
            goto out;
        }
    }
    rc = nothing_drawn(runs, n, paths) ? -1 : 0;
out:
    free(labels);
    return rc;
}

/* The command line into o. False when the run ends here, with *rc its exit status: 0 after
 * --help, 2 after an error said. */
static bool parse_args(int argc, char **argv, struct popt *o, int *rc)
{
    static const struct option lopt[] = {
        {"size", required_argument, NULL, 's'},  {"label", required_argument, NULL, 'l'},
        {"title", required_argument, NULL, 'T'}, {"script", required_argument, NULL, 'S'},
        {"help", no_argument, NULL, 'h'},        {NULL, 0, NULL, 0}};
    int c;

    *rc = 2;
    opterr = 0;
    optind = 0; /* a fresh getopt: nothing has parsed before, but say so */
    while ((c = getopt_long(argc, argv, ":o:h", lopt, NULL)) != -1) {
        switch (c) {
        case 'o':
            o->out = optarg;
            break;
        case 's':
            if (!parse_size(optarg, &o->w, &o->h)) {
                fprintf(stderr,
                        "lfbench plot: --size wants WxH in pixels (100 to 20000), not "
                        "'%s'\n",
                        optarg);
                return false;
            }
            break;
        case 'l':
            o->labels = optarg;
            break;
        case 'T':
            o->title = optarg;
            break;
        case 'S':
            o->script = optarg;
            break;
        case 'h':
            fputs(usage, stdout);
            *rc = 0;
            return false;
        case ':':
            fprintf(stderr, "lfbench plot: %s wants a value (lfbench plot --help)\n",
                    argv[optind - 1]);
            return false;
        default:
            fprintf(stderr, "lfbench plot: unknown option %s (lfbench plot --help)\n",
                    argv[optind - 1]);
            return false;
        }
    }
    if (argc - optind <= 0) {
        fprintf(stderr, "lfbench plot: no RUN.json given (lfbench plot --help)\n");
        return false;
    }
    return true;
}

/* Where the image and the script go: the image's default name beside the first input (into
 * *def_out, the caller frees it) unless -o or --script names one; neither may be one of the n
 * inputs (a typo such as `-o run.json run.json` would put a PNG where the run was). Returns 0,
 * or -1 with one line said. */
static int name_outputs(struct popt *o, char *const *inputs, int n, char **def_out)
{
    const char *in;

    if (!o->out && !o->script) {
        if (!(*def_out = default_out(inputs[0])))
            return -1;
        o->out = *def_out;
    }
    if (o->out && (in = input_at(o->out, inputs, n))) {
        fprintf(stderr, "lfbench plot: %s%s would overwrite the input %s: %s\n",
                *def_out ? "the default image " : "-o ", o->out, in,
                *def_out ? "name the image with -o FILE.png" : "name another FILE.png");
        return -1;
    }
    if (o->script && strcmp(o->script, "-") && (in = input_at(o->script, inputs, n))) {
        fprintf(stderr, "lfbench plot: --script %s would overwrite the input %s: name another\n",
                o->script, in);
        return -1;
    }
    return 0;
}

/* --script: the script to its file (- for stdout). Returns the exit status: 0, or 2 said. */
static int write_script(const struct popt *o, const struct prun *runs, int n, struct hist *h)
{
    bool std = !strcmp(o->script, "-");
    FILE *sf = std ? stdout : fopen(o->script, "we");

    if (!sf) {
        fprintf(stderr, "lfbench plot: cannot write %s: %s\n", o->script, strerror(errno));
        return 2;
    }
    script(sf, o, runs, n, o->out, h);
    if ((ferror(sf) | (std ? fflush(sf) : fclose(sf))) != 0) {
        fprintf(stderr, "lfbench plot: cannot write %s: %s\n", o->script, strerror(errno));
        return 2;
    }
    if (!std) /* what was written, and what it writes: the output is the user's to run */
        printf("wrote %s\n", o->script);
    return 0;
}

/* The image: the script into a temporary file, gnuplot run on it. Returns the exit status. */
static int draw(const struct popt *o, const struct prun *runs, int n, struct hist *h)
{
    char err[1024];
    FILE *sf = tmpfile();
    int rc = 2;

    if (!sf) {
        fprintf(stderr, "lfbench plot: temporary file: %s\n", strerror(errno));
        return 2;
    }
    script(sf, o, runs, n, NULL, h);
    if (ferror(sf)) {
        fprintf(stderr, "lfbench plot: temporary file: %s\n", strerror(errno));
        goto out;
    }
    rc = run_gnuplot(sf, o->out, err, sizeof(err));
    if (rc)
        fprintf(stderr, "lfbench plot: %s\n", err);
    else /* the name may be derived (a.json draws a.png): say it */
        printf("wrote %s\n", o->out);
out:
    fclose(sf);
    return rc;
}

int plot_main(int argc, char **argv)
{
    struct popt o = {0};
    struct prun *runs = NULL;
    struct hist *h = NULL;
    char *def_out = NULL, **inputs;
    int n, rc;

    if (!parse_args(argc, argv, &o, &rc))
        return rc;
    inputs = argv + optind;
    n = argc - optind;
    rc = 2;
    if (name_outputs(&o, inputs, n, &def_out) < 0)
        goto out;
    runs = calloc((size_t)n, sizeof(*runs));
    h = malloc(sizeof(*h));
    if (!runs || !h) {
        fprintf(stderr, "lfbench plot: %s\n", strerror(ENOMEM));
        goto out;
    }
    for (int k = 0; k < n; k++)
        result_init(&runs[k].r);
    if (read_runs(runs, n, inputs, o.labels) < 0)
        goto out;
    rc = o.script ? write_script(&o, runs, n, h) : draw(&o, runs, n, h);
out:
    for (int k = 0; runs && k < n; k++) {
        result_free(&runs[k].r);
        free(runs[k].label);
    }
    free(runs);
    free(h);
    free(def_out);
    return rc;
}
