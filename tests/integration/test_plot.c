/* Integration tests of `lfbench plot`: the script's datablocks against numbers computed here from
 * the raw latencies (a synthetic run written with result_write_json) and from a real run's
 * --json; the PNG gnuplot draws (signature, IHDR size); bad input, a missing and a failing
 * gnuplot, each one line on stderr and its exit status. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "lfb_util.h"

#include "hist.h"
#include "result.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *lfbench, *lfepolld;
static char dir[] = "/tmp/lfe-plot-XXXXXX";
static char out[1 << 20], err[1 << 16]; /* the last command's stdout and stderr */
static int slow = 1;

/* A path in the test's directory; the last 16 stay valid. */
static const char *path_in(const char *name)
{
    static char buf[16][512];
    static int next;
    char *p = buf[next++ % 16];

    snprintf(p, sizeof(buf[0]), "%s/%s", dir, name);
    return p;
}

static void slurp_fd(int fd, char *buf, size_t size)
{
    ssize_t n = pread(fd, buf, size - 1, 0);

    buf[n > 0 ? n : 0] = '\0';
}

/* Runs lfbench with args (args[0] is lfbench, NULL-terminated), $GNUPLOT set to gnuplot unless
 * NULL; returns its exit status, its stdout in out and its stderr in err. */
static int run_v(const char *gnuplot, const char **args)
{
    char po[] = "/tmp/lfe-plot-out-XXXXXX", pe[] = "/tmp/lfe-plot-err-XXXXXX";
    int fo = mkstemp(po), fe = mkstemp(pe), status;
    pid_t pid;

    assert_true(fo >= 0 && fe >= 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fo, STDOUT_FILENO);
        dup2(fe, STDERR_FILENO);
        if (gnuplot)
            setenv("GNUPLOT", gnuplot, 1);
        else
            unsetenv("GNUPLOT");
        alarm(60 * (unsigned)slow); /* a hung child fails the test, not the suite */
        execv(lfbench, (char *const *)args);
        _exit(127);
    }
    waitpid(pid, &status, 0);
    slurp_fd(fo, out, sizeof(out));
    slurp_fd(fe, err, sizeof(err));
    close(fo);
    close(fe);
    unlink(po);
    unlink(pe);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* run_v with the NULL-terminated arguments after gnuplot. */
static int run(const char *gnuplot, ...)
{
    const char *args[32] = {lfbench};
    int n = 1;
    va_list ap;

    va_start(ap, gnuplot);
    for (const char *a = va_arg(ap, const char *); a && n < 31; a = va_arg(ap, const char *))
        args[n++] = a;
    va_end(ap);
    args[n] = NULL;
    return run_v(gnuplot, args);
}

/* stderr is exactly one line, and it says what. */
static void one_line(const char *what)
{
    char *nl = strchr(err, '\n');

    if (!nl || nl[1] || !strstr(err, what))
        fail_msg("want one line saying '%s' on stderr, got:\n%s", what, err);
}

static bool have_gnuplot(void)
{
    return system("command -v gnuplot >/dev/null 2>&1") == 0;
}

/* --- the synthetic run: latencies chosen here, so every plotted number is known ------------ */

static uint64_t lcg = 12345;

static uint64_t next_lat(uint64_t base)
{
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    /* spread over a decade, with one in 500 a tail of up to 8 ms */
    if ((lcg >> 33) % 500 == 0)
        return 1000000 + (lcg >> 40) % 7000000;
    return base + (lcg >> 35) % (9 * base);
}

struct raw {
    uint64_t *v;
    size_t n;
};

static void raw_add(struct raw *r, uint64_t v)
{
    r->v = realloc(r->v, (r->n + 1) * sizeof(*r->v));
    assert_non_null(r->v);
    r->v[r->n++] = v;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* The exact value at rank (1-based, clamped) of the sorted raw values. */
static double at_rank(const struct raw *r, long rank)
{
    if (rank < 1)
        rank = 1;
    if (rank > (long)r->n)
        rank = (long)r->n;
    return (double)r->v[rank - 1];
}

/* got (ns) is the p-th percentile of r as the histogram reports it: the value at rank
 * ceil(p * n / 100) within the histogram's 0.4%, allowing the neighbour ranks for the rounding
 * of p * n at a boundary. */
static void check_pct(const struct raw *r, double p, double got, const char *where)
{
    long rank = (long)ceil(p / 100.0 * (double)r->n - 1e-9);

    for (long k = rank - 1; k <= rank + 1; k++) {
        double want = at_rank(r, k);

        if (fabs(got - want) <= want * 0.004 + 1)
            return;
    }
    fail_msg("%s: p%g is %.0f ns, want about %.0f (rank %ld of %zu)", where, p, got,
             at_rank(r, rank), rank, r->n);
}

#define NSEC 4
#define NSTEP 3
static struct raw sec_raw[NSEC], total_raw, step_raw[NSTEP];
static const double sec_t[NSEC] = {1, 2, 3, 3.5};
static const int sec_n[NSEC] = {3000, 5000, 4000, 500};
static const int step_n[NSTEP] = {2000, 4000, 3000};
static const double step_rate[NSTEP] = {1000, 3000, 2000}; /* as --find-rate searches */

static struct hist *hist_of(const struct raw *r)
{
    struct hist *h = malloc(sizeof(*h));

    assert_non_null(h);
    hist_init(h);
    for (size_t i = 0; i < r->n; i++)
        hist_record(h, r->v[i]);
    return h;
}

/* Writes the synthetic run to path with result_write_json: 4 seconds (the last half of one),
 * the first a warm-up; 3 sweep steps of 2 s; found_rate 2000. */
static void write_synthetic(const char *path)
{
    struct bresult r;
    struct hist *h;
    FILE *f;

    lcg = 12345; /* the same run each time */
    for (int s = 0; s < NSEC; s++)
        free(sec_raw[s].v), sec_raw[s] = (struct raw){0};
    for (int s = 0; s < NSTEP; s++)
        free(step_raw[s].v), step_raw[s] = (struct raw){0};
    free(total_raw.v), total_raw = (struct raw){0};
    result_init(&r);
    r.target = strdup("127.0.0.1:9");
    r.mode = strdup("long");
    r.expect = strdup("echo");
    r.conns = 8, r.threads = 1, r.pipeline = 1, r.timeout_ms = 1000;
    r.duration = 2.5, r.warmup = 1, r.agents = 1;
    r.measured = 2.5, r.wall = 3.5;
    r.nseries = NSEC;
    r.series = calloc(NSEC, sizeof(*r.series));
    assert_non_null(r.series);
    for (int s = 0; s < NSEC; s++) {
        for (int i = 0; i < sec_n[s]; i++) {
            uint64_t v = next_lat(s == 2 ? 40000 : 10000); /* second 3 slower */

            raw_add(&sec_raw[s], v);
            if (s > 0)
                raw_add(&total_raw, v);
        }
        h = hist_of(&sec_raw[s]);
        r.series[s].t = sec_t[s];
        r.series[s].wall = 1.7e9 + sec_t[s];
        r.series[s].c.requests = (uint64_t)sec_n[s];
        r.series[s].open = 8;
        assert_int_equal(hcompact_from(&r.series[s].lat, h), 0);
        free(h);
    }
    r.lat = hist_of(&total_raw);
    r.ph[CP_CONNECT] = malloc(sizeof(*r.ph[CP_CONNECT]));
    assert_non_null(r.ph[CP_CONNECT]);
    hist_init(r.ph[CP_CONNECT]);
    r.total.requests = total_raw.n;
    r.nsteps = NSTEP;
    r.steps = calloc(NSTEP, sizeof(*r.steps));
    assert_non_null(r.steps);
    for (int s = 0; s < NSTEP; s++) {
        for (int i = 0; i < step_n[s]; i++)
            raw_add(&step_raw[s], next_lat(10000 * (uint64_t)(s + 1)));
        r.steps[s].rate = step_rate[s];
        r.steps[s].measured = 2;
        r.steps[s].c.requests = (uint64_t)step_n[s];
        r.steps[s].lat = hist_of(&step_raw[s]);
        r.steps[s].kept = step_rate[s] <= 2000;
    }
    r.found_rate = 2000;
    r.found_why = strdup("the next step missed the bound");
    f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(result_write_json(f, &r), 0);
    assert_int_equal(fclose(f), 0);
    result_free(&r);
    for (int s = 0; s < NSEC; s++)
        qsort(sec_raw[s].v, sec_raw[s].n, sizeof(uint64_t), cmp_u64);
    qsort(total_raw.v, total_raw.n, sizeof(uint64_t), cmp_u64);
    for (int s = 0; s < NSTEP; s++)
        qsort(step_raw[s].v, step_raw[s].n, sizeof(uint64_t), cmp_u64);
}

/* The rows of datablock name in the script (in out), up to max rows of up to 8 numbers;
 * "NaN" reads as NAN. Returns the number of rows; fails when the block is missing. */
static int block(const char *name, double rows[][8], int max, int *cols)
{
    char head[64];
    const char *p;
    int n = 0;

    snprintf(head, sizeof(head), "\n$%s << EOD\n", name);
    p = strstr(out, head);
    if (!p)
        fail_msg("no datablock $%s in the script:\n%.2000s", name, out);
    p += strlen(head);
    while (strncmp(p, "EOD\n", 4) && *p) {
        char *end;
        int c = 0;

        assert_true(n < max);
        while (*p != '\n' && *p && c < 8) {
            rows[n][c++] = strtod(p, &end);
            assert_true(end != p);
            p = end;
            while (*p == ' ')
                p++;
        }
        *cols = c;
        n++;
        p += *p == '\n';
    }
    return n;
}

static void test_script_numbers_synthetic(void **state)
{
    static double rows[4096][8];
    const char *json = path_in("synthetic.json");
    double prev_x = 0, prev_v = 0;
    int n, cols;

    (void)state;
    write_synthetic(json);
    assert_int_equal(run(NULL, "plot", json, "--script", "-", NULL), 0);
    assert_non_null(strstr(out, "# latencies in µs, throughput in requests/s\n"));

    /* per second: t, p50, p99, max (µs), requests/s, open */
    n = block("series0", rows, 4096, &cols);
    assert_int_equal(n, NSEC);
    assert_int_equal(cols, 7);
    for (int s = 0; s < NSEC; s++) {
        double len = sec_t[s] - (s ? sec_t[s - 1] : 0);

        assert_true(fabs(rows[s][0] - (sec_t[s] - len / 2)) < 1e-9); /* drawn at its middle */
        assert_true(fabs(rows[s][6] - sec_t[s]) < 1e-9);
        check_pct(&sec_raw[s], 50, rows[s][1] * 1000, "series p50");
        check_pct(&sec_raw[s], 99, rows[s][2] * 1000, "series p99");
        assert_true(fabs(rows[s][3] * 1000 - at_rank(&sec_raw[s], (long)sec_raw[s].n)) <
                    1e-5 * rows[s][3] * 1000); /* the exact max, to %.6g */
        assert_true(fabs(rows[s][4] - sec_n[s] / len) < 1e-3 * sec_n[s] / len);
        assert_true(rows[s][5] == 8);
    }
    assert_true(rows[2][1] > 3 * rows[1][1]); /* the slow second shows */

    /* the spectrum: HdrHistogram's percentile steps, then the maximum at x = count */
    n = block("spectrum0", rows, 4096, &cols);
    assert_int_equal(cols, 3);
    assert_true(n > 60);
    {
        static const double first[] = {0, 10, 20, 30, 40, 50, 55, 60, 65, 70, 75, 77.5, 80};

        for (size_t i = 0; i < sizeof(first) / sizeof(first[0]); i++)
            if (fabs(rows[i][0] - first[i]) > 1e-9)
                fail_msg("spectrum row %zu is at %g%%, want %g%%", i, rows[i][0], first[i]);
    }
    for (int i = 0; i < n; i++) {
        double p = rows[i][0], x = rows[i][1], v = rows[i][2] * 1000;

        if (i < n - 1) {
            assert_true(p < 100);
            assert_true(fabs(x - 1 / (1 - p / 100)) < 1e-6 * x);
            check_pct(&total_raw, p == 0 ? 1e-9 : p, v, "spectrum");
        } else {
            assert_true(p == 100);
            assert_true(x == fmax((double)total_raw.n, prev_x));
            assert_true(fabs(v - at_rank(&total_raw, (long)total_raw.n)) < 1e-5 * v);
        }
        if (i) {
            assert_true(x > prev_x || i == n - 1);
            assert_true(v >= prev_v);
        }
        prev_x = x, prev_v = v;
    }
    assert_true(rows[n - 2][0] > 99.9); /* 11,500 values reach past 99.9% */

    /* the sweep, in the order of the intended rate: achieved requests/s, p50, p99, p99.9 (µs),
     * intended, kept */
    n = block("sweep0", rows, 4096, &cols);
    assert_int_equal(n, NSTEP);
    assert_int_equal(cols, 6);
    for (int i = 0; i < NSTEP; i++) {
        static const int order[NSTEP] = {0, 2, 1};
        int s = order[i];

        assert_true(fabs(rows[i][0] - step_n[s] / 2.0) < 1e-6 * step_n[s]);
        check_pct(&step_raw[s], 50, rows[i][1] * 1000, "sweep p50");
        check_pct(&step_raw[s], 99, rows[i][2] * 1000, "sweep p99");
        check_pct(&step_raw[s], 99.9, rows[i][3] * 1000, "sweep p99.9");
        assert_true(rows[i][4] == step_rate[s]);
        assert_true(rows[i][5] == (step_rate[s] <= 2000));
    }
    assert_non_null(strstr(out, "set arrow from 2000, graph 0 to 2000, graph 1"));
    assert_non_null(strstr(out, "'found 2000/s'"));
    /* the warm-up, shaded; the steps have no start in this file: only the first is placed */
    assert_non_null(strstr(out, "set object rect from 0, graph 0 to 1, graph 1"));
    {
        int rects = 0; /* one in each of the two panels over time */

        for (const char *p = out; (p = strstr(p, "set object rect")); p++)
            rects++;
        assert_int_equal(rects, 2);
    }
}

/* Labels and titles reach gnuplot as single-quoted strings: a quote drawn as U+2019 (doubling
 * it failed at a string's start in gnuplot 5.4.4: a label "'quoted" made gnuplot fail), control
 * characters replaced, `command` substitution never run (double quotes would run it). */
static void test_labels_escaped(void **state)
{
    const char *json = path_in("synthetic.json"), *png = path_in("esc.png");
    char label[1024], pwned[256], want[1024];

    (void)state;
    write_synthetic(json);
    snprintf(pwned, sizeof(pwned), "%s/pwned", dir);
    snprintf(label, sizeof(label), "it's \"x\\y\" @a &b_c^d`touch %s`,second", pwned);
    assert_int_equal(
        run(NULL, "plot", json, json, "--label", label, "--title", "t\nx'", "--script", "-", NULL),
        0);
    snprintf(want, sizeof(want), "title 'it\u2019s \"x\\y\" @a &b_c^d`touch %s`'", pwned);
    if (!strstr(out, want))
        fail_msg("no %s in the script", want);
    assert_non_null(strstr(out, "title 'second'"));
    assert_non_null(strstr(out, "set multiplot title 't?x\u2019'"));
    if (!have_gnuplot()) {
        skip(); /* gnuplot-nox is in DEB_PKGS: make test installs it */
        return;
    }
    assert_int_equal(run(NULL, "plot", json, json, "--label", label, "-o", png, NULL), 0);
    assert_int_equal(access(png, F_OK), 0);
    assert_int_not_equal(access(pwned, F_OK), 0);
    assert_int_equal(run(NULL, "plot", json, "--label", "'quoted", "-o", png, NULL), 0);
}

/* The PNG gnuplot drew: the signature, then IHDR with the width and height asked (h 0: any). */
static void check_png(const char *path, uint32_t w, uint32_t h)
{
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    unsigned char b[24];
    int fd = open(path, O_RDONLY);
    uint32_t gw, gh;

    assert_true(fd >= 0);
    assert_int_equal(read(fd, b, sizeof(b)), sizeof(b));
    close(fd);
    assert_memory_equal(b, sig, 8);
    assert_memory_equal(b + 12, "IHDR", 4);
    gw = (uint32_t)b[16] << 24 | (uint32_t)b[17] << 16 | (uint32_t)b[18] << 8 | b[19];
    gh = (uint32_t)b[20] << 24 | (uint32_t)b[21] << 16 | (uint32_t)b[22] << 8 | b[23];
    if (gw != w || (h && gh != h))
        fail_msg("%s is %ux%u, want %ux%u", path, gw, gh, w, h);
}

static void test_png_synthetic(void **state)
{
    const char *json = path_in("synthetic.json"), *png = path_in("syn.png");
    struct stat st;

    (void)state;
    if (!have_gnuplot()) {
        skip();
        return;
    }
    write_synthetic(json);
    assert_int_equal(run(NULL, "plot", json, "-o", png, "--size", "900x1100", NULL), 0);
    assert_string_equal(err, "");
    check_png(png, 900, 1100);
    assert_int_equal(stat(png, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644); /* as open(2) under umask 022, not mkstemp's 0600 */
    /* the default size: 1200 wide, as high as the panels need */
    assert_int_equal(run(NULL, "plot", json, "-o", png, NULL), 0);
    check_png(png, 1200, 0);
}

/* --- a real run against lfepolld ------------------------------------------------------------ */

/* A percentile of a compact histogram, walked here rather than through hist_percentile: the min
 * at rank 1, the max at the last rank, else the midpoint of the bucket cut to [min, max]. */
static double compact_pct(const struct hcompact *c, double p)
{
    uint64_t rank = (uint64_t)ceil(p / 100.0 * (double)c->count - 1e-9), seen = 0, lo, hi;

    if (rank < 1)
        rank = 1;
    if (rank == 1)
        return (double)c->min;
    if (rank >= c->count)
        return (double)c->max;
    for (uint32_t i = 0; i < c->n; i++) {
        seen += c->cnt[i];
        if (seen >= rank) {
            hist_range(c->idx[i], &lo, &hi);
            lo = lo < c->min ? c->min : lo;
            hi = hi > c->max ? c->max : hi;
            return (double)(lo + (hi - lo) / 2);
        }
    }
    return (double)c->max;
}

/* Starts lfepolld on a free port of 127.0.0.1, its address in target; returns its pid. */
static pid_t start_server(char *target, size_t size)
{
    int port = 0;
    pid_t srv = lfb_start_server(
        (const char *[]){lfepolld, "--listen", "127.0.0.1:PORT", "-q", NULL}, &port, slow);

    snprintf(target, size, "127.0.0.1:%d", port);
    return srv;
}

/* lfbench with the NULL-terminated args against a fresh lfepolld, its --json read into r. */
static void real_run(const char *json, struct bresult *r, ...)
{
    const char *args[32] = {lfbench};
    char target[32], e[256];
    int n = 1, status;
    va_list ap;
    pid_t srv;

    va_start(ap, r);
    for (const char *a = va_arg(ap, const char *); a && n < 26; a = va_arg(ap, const char *))
        args[n++] = a;
    va_end(ap);
    srv = start_server(target, sizeof(target));
    args[n++] = "-q", args[n++] = "--json", args[n++] = json, args[n++] = target;
    args[n] = NULL;
    status = run_v(NULL, args);
    kill(srv, SIGKILL);
    waitpid(srv, NULL, 0);
    if (status != 0)
        fail_msg("lfbench exited %d:\n%s%s", status, out, err);
    result_init(r);
    if (result_read_json(json, r, e, sizeof(e)) < 0)
        fail_msg("%s", e);
}

/* Where r's load began on its series' clock: its first step's start, from the file's own
 * numbers (the plot draws that instant at 0) */
static double load_t0(const struct bresult *r)
{
    return r->start_wall - r->warmup - (r->series[0].wall - r->series[0].t);
}

/* The seconds of r that end at or before t0: not drawn */
static size_t seconds_before(const struct bresult *r, double t0)
{
    size_t k = 0;

    while (k < r->nseries && r->series[k].t <= t0)
        k++;
    return k;
}

static void test_real_run(void **state)
{
    static double rows[4096][8];
    const char *json = path_in("real.json"), *png = path_in("real.png");
    struct bresult r;
    double t0;
    size_t skip;
    int n, cols;

    (void)state;
    real_run(json, &r, "-c", "4", "-t", "1", "-d", "2", "--warmup", "0.5", NULL);
    assert_true(r.nseries >= 2);
    t0 = load_t0(&r);
    assert_true(t0 > 0 && t0 < 5); /* the connections opened first */
    skip = seconds_before(&r, t0);
    assert_int_equal(run(NULL, "plot", json, "--script", "-", NULL), 0);
    {
        /* the unit the script chose, and every second's numbers in it */
        double div = strstr(out, "# latencies in ms") ? 1e6 : 1e3;

        n = block("series0", rows, 4096, &cols);
        assert_int_equal(n, (int)(r.nseries - skip));
        for (int s = 0; s < n; s++) {
            const struct bsecond *b = &r.series[skip + (size_t)s];

            assert_true(fabs(rows[s][6] - (b->t - t0)) < 1e-3); /* on the load's clock */
            if (b->lat.count == 0) {
                assert_true(isnan(rows[s][1]));
                continue;
            }
            assert_true(fabs(rows[s][1] * div - compact_pct(&b->lat, 50)) <=
                        1e-5 * compact_pct(&b->lat, 50));
            assert_true(fabs(rows[s][2] * div - compact_pct(&b->lat, 99)) <=
                        1e-5 * compact_pct(&b->lat, 99));
            assert_true(fabs(rows[s][3] * div - (double)b->lat.max) <= 1e-5 * (double)b->lat.max);
        }
        n = block("spectrum0", rows, 4096, &cols);
        assert_true(rows[n - 1][0] == 100);
        assert_true(fabs(rows[n - 1][2] * div - (double)r.lat->max) <= 1e-5 * (double)r.lat->max);
        assert_true(fabs(rows[n - 1][1] - fmax((double)r.lat->count, rows[n - 2][1])) < 1e-6);
    }
    assert_null(strstr(out, "$sweep0")); /* no sweep, no panel */
    result_free(&r);
    if (!have_gnuplot()) {
        skip();
        return;
    }
    assert_int_equal(run(NULL, "plot", json, json, "-o", png, "--size", "640x480", NULL), 0);
    check_png(png, 640, 480);
}

/* The connections' phases: a short run's connects and first bytes each a spectrum of their own,
 * its last point the phase's maximum at 100%, drawn in a panel of their own with a key naming
 * the phases drawn (no handshake without TLS); a run without phases has no such panel. */
static void test_phases_drawn(void **state)
{
    static double rows[4096][8];
    const char *json = path_in("phases.json"), *png = path_in("phases.png");
    static const struct {
        enum cphase p;
        const char *block;
    } ph[] = {{CP_CONNECT, "phase0_connect"}, {CP_FIRST_BYTE, "phase0_first_byte"}};
    struct bresult r;
    const char *panel;
    int n, cols;

    (void)state;
    /* a second of it: connections enough for spectra of several points each */
    real_run(json, &r, "--mode", "short", "-c", "2", "-d", "1", NULL);
    assert_true(r.ph[CP_CONNECT]->count > 2 && r.ph[CP_CONNECT]->count == r.total.connects);
    assert_int_equal(run(NULL, "plot", json, "--script", "-", NULL), 0);
    {
        double div = strstr(out, "# latencies in ms") ? 1e6 : 1e3;

        for (size_t k = 0; k < 2; k++) {
            const struct hist *h = r.ph[ph[k].p];

            n = block(ph[k].block, rows, 4096, &cols);
            assert_true(n > 2 && cols == 3);
            assert_true(rows[n - 1][0] == 100);
            assert_true(fabs(rows[n - 1][2] * div - (double)h->max) <= 1e-5 * (double)h->max);
            assert_true(fabs(rows[n - 1][1] - fmax((double)h->count, rows[n - 2][1])) < 1e-6);
        }
    }
    assert_null(strstr(out, "$phase0_handshake"));
    panel = strstr(out, "\n# connection phases\n");
    if (!panel || !strstr(panel, "\nset xlabel 'percentile'") ||
        !strstr(panel, "$phase0_connect using 2:3 with lines lw 1.5 dt 1 ") ||
        !strstr(panel, "$phase0_first_byte using 2:3 with lines lw 1.5 dt 3 ") ||
        !strstr(panel, "title 'connect'") || !strstr(panel, "title 'first byte'") ||
        strstr(panel, "title 'handshake'"))
        fail_msg("want the phases' panel, a curve and a key entry each:\n%.3000s",
                 panel ? panel : out);
    result_free(&r);
    write_synthetic(path_in("synthetic.json"));
    assert_int_equal(run(NULL, "plot", path_in("synthetic.json"), "--script", "-", NULL), 0);
    assert_null(strstr(out, "connection phases"));
    if (!have_gnuplot()) {
        skip();
        return;
    }
    if (run(NULL, "plot", json, "-o", png, "--size", "640x480", NULL) != 0)
        fail_msg("plot of a short run failed:\n%s%s", out, err);
    check_png(png, 640, 480);
}

/* --- a run over within its first second ---------------------------------------------------- */

/* A run of one second t long (from the load's start), its requests all of latency v ns, each
 * connection's connect taking v too, with nph of them (regression: a second shorter than 0.2 s
 * had no throughput, so its panel had no point and gnuplot failed: "all points y value
 * undefined"). v 0: nothing a log axis can draw. */
static void write_short(const char *path, double t, int requests, uint64_t v, int nph)
{
    struct bresult r;
    struct hist *h = malloc(sizeof(*h));
    FILE *f;

    assert_non_null(h);
    result_init(&r);
    r.target = strdup("127.0.0.1:9");
    r.mode = strdup("short");
    r.expect = strdup("echo");
    r.conns = 4, r.threads = 1, r.pipeline = 1, r.timeout_ms = 1000, r.agents = 1;
    r.measured = t, r.wall = t;
    r.nseries = 1;
    r.series = calloc(1, sizeof(*r.series));
    assert_non_null(r.series);
    r.series[0].t = t;
    r.series[0].wall = 1.7e9 + t;
    r.series[0].c.requests = (uint64_t)requests;
    hist_init(h);
    for (int i = 0; i < requests; i++)
        hist_record(h, v);
    assert_int_equal(hcompact_from(&r.series[0].lat, h), 0);
    r.lat = h;
    r.total.requests = (uint64_t)requests;
    r.ph[CP_CONNECT] = malloc(sizeof(*r.ph[CP_CONNECT]));
    assert_non_null(r.ph[CP_CONNECT]);
    hist_init(r.ph[CP_CONNECT]);
    for (int i = 0; i < nph; i++)
        hist_record(r.ph[CP_CONNECT], v);
    f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(result_write_json(f, &r), 0);
    assert_int_equal(fclose(f), 0);
    result_free(&r);
}

/* The throughput panel's curve of run 0 in the script (in out), its "with" part onwards. */
static const char *curve(const char *panel_name, const char *using)
{
    char head[96], u[96];
    const char *panel, *c;

    snprintf(head, sizeof(head), "\n# %s\n", panel_name);
    snprintf(u, sizeof(u), "$series0 using %s with ", using);
    panel = strstr(out, head);
    c = panel ? strstr(panel, u) : NULL;
    if (!c)
        fail_msg("no curve %s in panel %s:\n%.3000s", u, panel_name, out);
    return c + strlen(u);
}

/* A run whose only second is shorter than 0.2 s still plots: that second's rate is drawn (what
 * it is: its requests over its length) and each one-point curve marks its point, a spectrum of
 * one sample too; a run with nothing a log axis can draw is one line, exit 2, and no image. */
static void test_short_run_plotted(void **state)
{
    static double rows[16][8];
    const char *json = path_in("short.json"), *png = path_in("short.png");
    const char *zero = path_in("zero.json"), *zpng = path_in("zero.png");
    struct bresult r;
    int n, cols;

    (void)state;
    write_short(json, 0.05, 300, 200000, 1);
    assert_int_equal(run(NULL, "plot", json, "--script", "-", NULL), 0);
    n = block("series0", rows, 16, &cols);
    assert_int_equal(n, 1);
    assert_true(fabs(rows[0][4] - 300 / 0.05) < 1e-3); /* requests/s: below 1e4, no thousands */
    assert_true(!strncmp(curve("throughput per second", "1:5"), "linespoints", 11));
    assert_true(!strncmp(curve("latency per second", "1:2"), "linespoints", 11));
    if (!strstr(out, "$phase0_connect using 2:3 with linespoints "))
        fail_msg("want the one connect marked:\n%.3000s", out);
    if (have_gnuplot()) {
        if (run(NULL, "plot", json, "-o", png, NULL) != 0)
            fail_msg("plot of a 0.05 s run failed:\n%s%s", out, err);
        assert_string_equal(err, "");
        check_png(png, 1200, 0);
        /* the report's case: a real run over in a fraction of a second */
        real_run(json, &r, "--mode", "short", "-c", "4", "-n", "300", NULL);
        result_free(&r);
        if (run(NULL, "plot", json, "-o", png, NULL) != 0)
            fail_msg("plot of a -n 300 run failed:\n%s%s", out, err);
        check_png(png, 1200, 0);
    }
    write_short(zero, 0.05, 3, 0, 3);
    assert_int_equal(run(NULL, "plot", zero, "-o", zpng, NULL), 2);
    one_line("no latencies to plot");
    assert_int_not_equal(access(zpng, F_OK), 0);
    assert_int_equal(run(NULL, "plot", zero, zero, "-o", zpng, NULL), 2);
    one_line("none of the 2 runs has a latency to plot");
    assert_int_equal(run(NULL, "plot", zero, json, "--script", "-", NULL), 0);
    if (have_gnuplot() && run(NULL, "plot", zero, json, "-o", zpng, NULL) != 0)
        fail_msg("plot of a run of zeros beside a short one failed:\n%s%s", out, err);
}

/* --- bad input: one line, exit 2; gnuplot missing or failing: one line, exit 1 -------------- */

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

/* A --json-stream file given to plot or merge (one progress line, and several): one line that
 * says what the file is and that the run's --json file is the one to give, not that it is of an
 * old version. */
static void test_json_stream_named(void **state)
{
    const char *json = path_in("stream-run.json"), *one = path_in("stream1.ndjson");
    const char *three = path_in("stream3.ndjson"), *png = path_in("stream.png");
    const char *files[] = {one, three};
    char line[4096], all[3 * sizeof(line)];
    struct bresult r;
    FILE *f;

    (void)state;
    real_run(json, &r, "-c", "2", "-n", "200", "--json-stream", one, NULL);
    result_free(&r);
    f = fopen(one, "r");
    assert_non_null(f);
    assert_non_null(fgets(line, sizeof(line), f));
    fclose(f);
    snprintf(all, sizeof(all), "%s%s%s", line, line, line); /* as a run of 3 s writes */
    write_file(three, all);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(run(NULL, "plot", files[k], "-o", png, NULL), 2);
        one_line("a --json-stream file (progress lines, no histograms), not a --json result: "
                 "give plot and merge the run's --json file instead");
        assert_int_equal(run(NULL, "merge", files[k], json, NULL), 2);
        one_line("lfbench merge: ");
        one_line("a --json-stream file");
        assert_null(strstr(err, "version 1"));
    }
    assert_int_not_equal(access(png, F_OK), 0);
}

static void test_bad_input(void **state)
{
    const char *json = path_in("synthetic.json"), *png = path_in("bad.png");
    const char *garbage = path_in("garbage.json"), *empty = path_in("empty.json");

    (void)state;
    write_synthetic(json);
    write_file(garbage, "{\"target\": [1, 2,, }");
    write_file(empty, "");

    assert_int_equal(run(NULL, "plot", NULL), 2);
    one_line("no RUN.json");
    assert_int_equal(run(NULL, "plot", "-o", png, NULL), 2);
    one_line("no RUN.json");
    assert_int_equal(run(NULL, "plot", path_in("missing.json"), "-o", png, NULL), 2);
    one_line("missing.json");
    assert_int_equal(run(NULL, "plot", dir, "-o", png, NULL), 2);
    one_line("lfbench plot: ");
    assert_int_equal(run(NULL, "plot", json, garbage, "-o", png, NULL), 2);
    one_line("garbage.json");
    assert_int_equal(run(NULL, "plot", empty, "-o", png, NULL), 2);
    one_line("empty.json");
    assert_int_equal(run(NULL, "plot", json, "-o", "/nonexistent-lfe-dir/x.png", NULL), 2);
    one_line("cannot write /nonexistent-lfe-dir/x.png");
    assert_int_equal(run(NULL, "plot", json, "--script", "/nonexistent-lfe-dir/x.gp", NULL), 2);
    one_line("cannot write /nonexistent-lfe-dir/x.gp");
    assert_int_equal(run(NULL, "plot", json, json, "--label", "a", "-o", png, NULL), 2);
    one_line("--label has 1 name for 2 files");
    assert_int_equal(run(NULL, "plot", json, "--label", "a,b", "-o", png, NULL), 2);
    one_line("--label has 2 names for 1 file");
    assert_int_equal(run(NULL, "plot", json, "--size", "12x", "-o", png, NULL), 2);
    one_line("--size");
    assert_int_equal(run(NULL, "plot", json, "--bogus", "-o", png, NULL), 2);
    one_line("unknown option --bogus");
    assert_int_equal(run(NULL, "plot", json, "-o", NULL), 2);
    one_line("wants a value");
    assert_int_not_equal(access(png, F_OK), 0);
    assert_int_equal(run(NULL, "plot", "--help", NULL), 0);
    assert_non_null(strstr(out, "usage: lfbench plot"));
    {
        /* Regression (attack on issue 11): -o a FIFO was renamed over, the FIFO gone */
        const char *fifo = path_in("fifo.png");
        struct stat st;

        assert_int_equal(mkfifo(fifo, 0644), 0);
        write_synthetic(path_in("ok.json"));
        assert_int_equal(run(NULL, "plot", "-o", fifo, path_in("ok.json"), NULL), 2);
        assert_non_null(strstr(err, "not a regular file"));
        assert_int_equal(lstat(fifo, &st), 0);
        assert_true(S_ISFIFO(st.st_mode));
        unlink(fifo);
    }
}

static void test_gnuplot_missing_or_failing(void **state)
{
    const char *json = path_in("synthetic.json"), *png = path_in("fail.png");
    const char *fake = path_in("fake-gnuplot");
    char buf[64] = "";
    int fd;

    (void)state;
    write_synthetic(json);
    assert_int_equal(run(path_in("no-such-gnuplot"), "plot", json, "-o", png, NULL), 1);
    one_line("apt-get install gnuplot-nox");
    assert_int_not_equal(access(png, F_OK), 0);

    /* gnuplot's way of failing: the command echoed, a caret, then the line that says why */
    write_file(fake, "#!/bin/sh\ncat >/dev/null\necho 'partial' \nprintf '\\nplot foo\\n     ^\\n"
                     "         line 0: undefined variable: foo\\n\\n' >&2\nexit 1\n");
    assert_int_equal(chmod(fake, 0755), 0);
    write_file(png, "was here");
    assert_int_equal(run(fake, "plot", json, "-o", png, NULL), 1);
    one_line("failed (exit 1): line 0: undefined variable: foo");
    fd = open(png, O_RDONLY); /* a failure leaves the old file, and no temporary beside it */
    assert_true(fd >= 0);
    assert_true(read(fd, buf, sizeof(buf) - 1) == 8);
    close(fd);
    assert_string_equal(buf, "was here");
    assert_int_equal(system("set -- /tmp/lfe-plot-*/fail.png.*; [ ! -e \"$1\" ]"), 0);
}

/* --- issue 25: the newcomer's path ----------------------------------------------------------- */

/* A stand-in gnuplot that writes a known image: which file lfbench puts it in is what is tested */
static const char *fake_gnuplot(void)
{
    const char *fake = path_in("png-gnuplot");

    write_file(fake, "#!/bin/sh\ncat >/dev/null\nprintf 'drawn'\n");
    assert_int_equal(chmod(fake, 0755), 0);
    return fake;
}

/* The file holds exactly text */
static void file_is(const char *path, const char *text)
{
    static char buf[1 << 20];
    int fd = open(path, O_RDONLY);

    if (fd < 0)
        fail_msg("%s: %s", path, strerror(errno));
    slurp_fd(fd, buf, sizeof(buf));
    close(fd);
    if (strcmp(buf, text))
        fail_msg("%s holds %.40s..., want %.40s...", path, buf, text);
}

static char *file_text(const char *path)
{
    static char buf[1 << 20];
    int fd = open(path, O_RDONLY);

    assert_true(fd >= 0);
    slurp_fd(fd, buf, sizeof(buf));
    close(fd);
    return strdup(buf);
}

/* Regression (issue 25): `lfbench plot run.json` said -o was required, though README and man page
 * show [-o FILE.png]. The image goes beside the first run: .json becomes .png, a name without it
 * gets .png added; a first run that is no regular file (a FIFO, stdin) has no beside: -o. */
static void test_default_output_name(void **state)
{
    const char *fake = fake_gnuplot(), *json = path_in("def.json"), *bare = path_in("defrun");
    const char *fifo = path_in("def-fifo.json");
    char want[600];

    (void)state;
    write_synthetic(json);
    write_synthetic(bare);
    assert_int_equal(run(fake, "plot", json, NULL), 0);
    assert_string_equal(err, "");
    file_is(path_in("def.png"), "drawn");
    /* test_plot_says_what_it_wrote: the name is derived, so it is said (it said nothing) */
    snprintf(want, sizeof(want), "wrote %s\n", path_in("def.png"));
    assert_string_equal(out, want);
    /* a script written to a file is said too; to stdout it is the output itself */
    assert_int_equal(run(fake, "plot", json, "--script", path_in("def.gp"), NULL), 0);
    snprintf(want, sizeof(want), "wrote %s\n", path_in("def.gp"));
    assert_string_equal(out, want);
    assert_int_equal(access(path_in("def.gp"), R_OK), 0);
    assert_int_equal(run(fake, "plot", json, "--script", "-", NULL), 0);
    assert_null(strstr(out, "wrote "));
    assert_int_not_equal(access(path_in("def.json.png"), F_OK), 0);
    /* the first run names it, whatever follows */
    assert_int_equal(run(fake, "plot", bare, json, NULL), 0);
    file_is(path_in("defrun.png"), "drawn");
    /* a real gnuplot draws a real PNG under that name */
    if (have_gnuplot()) {
        unlink(path_in("def.png"));
        assert_int_equal(run(NULL, "plot", json, NULL), 0);
        check_png(path_in("def.png"), 1200, 0);
    }
    /* no regular file: no default, and the FIFO is not opened (that would block) */
    assert_int_equal(mkfifo(fifo, 0644), 0);
    assert_int_equal(run(fake, "plot", fifo, json, NULL), 2);
    one_line("name it with -o FILE.png");
    assert_int_not_equal(access(path_in("def-fifo.png"), F_OK), 0);
    unlink(fifo);
}

/* Regression (issue 25): an image is never written over one of its inputs, by -o, by the default
 * name or by --script, under the same name or another one for the same file (a hard link). */
static void test_refuses_to_overwrite_input(void **state)
{
    const char *fake = fake_gnuplot(), *json = path_in("ow.json"), *alias = path_in("ow-link.png");
    const char *bare = path_in("ow"), *bare_png = path_in("ow.png");
    char *before;

    (void)state;
    write_synthetic(json);
    before = file_text(json);
    assert_int_equal(run(fake, "plot", "-o", json, json, NULL), 2);
    one_line("would overwrite the input");
    file_is(json, before);
    assert_int_equal(link(json, alias), 0);
    assert_int_equal(run(fake, "plot", json, "-o", alias, NULL), 2);
    one_line("would overwrite the input");
    file_is(json, before);
    assert_int_equal(run(fake, "plot", json, "--script", json, NULL), 2);
    one_line("--script");
    file_is(json, before);
    /* the default name of the first is the second: `lfbench plot ow ow.png` */
    write_synthetic(bare);
    write_synthetic(bare_png);
    assert_int_equal(run(fake, "plot", bare, bare_png, NULL), 2);
    one_line("the default image");
    file_is(bare_png, before);
    /* a name that is no input is written */
    assert_int_equal(run(fake, "plot", json, "-o", path_in("ow-new.png"), NULL), 0);
    file_is(path_in("ow-new.png"), "drawn");
    free(before);
}

/* The script's panels: the text from each "reset" up to the next (in out) */
static int panels(char sec[][16384], int max)
{
    const char *p = strstr(out, "\nreset\n"), *q;
    int n = 0;

    while (p && n < max) {
        q = strstr(p + 1, "\nreset\n");
        snprintf(sec[n++], sizeof(sec[0]), "%.*s", (int)(q ? q - p : (long)strlen(p)), p);
        p = q;
    }
    return n;
}

/* Regression (issue 25): the top panel had no x-axis label, and the next panel's title sat where
 * it would be. Every panel names its x axis, and below each there is room for the tick labels,
 * that name and the next one's title. */
static void test_each_panel_has_xlabel(void **state)
{
    static char sec[8][16384];
    const char *json = path_in("synthetic.json");
    double prev_b = -1, h;
    int n, w, hh;

    (void)state;
    write_synthetic(json);
    assert_int_equal(run(NULL, "plot", json, "--script", "-", NULL), 0);
    assert_non_null(strstr(out, "set terminal pngcairo size "));
    assert_int_equal(sscanf(strstr(out, "set terminal pngcairo size ") + 27, "%d,%d", &w, &hh), 2);
    h = hh;
    n = panels(sec, 8);
    assert_int_equal(n, 4); /* latency and throughput per second, the spectrum, the sweep */
    for (int i = 0; i < n; i++) {
        const char *xl = strstr(sec[i], "\nset xlabel '"), *pl = strstr(sec[i], "\nplot");
        double t, b;

        if (!xl || !pl || xl > pl || xl[13] == '\'')
            fail_msg("panel %d has no x-axis label before its plot:\n%.600s", i, sec[i]);
        assert_int_equal(sscanf(strstr(sec[i], "set tmargin at screen ") + 22, "%lf", &t), 1);
        assert_int_equal(sscanf(strstr(sec[i], "set bmargin at screen ") + 22, "%lf", &b), 1);
        /* tick labels, the xlabel and a title are three lines of about 15 pixels at 10 points */
        if (prev_b >= 0 && (prev_b - t) * h < 80)
            fail_msg("panel %d's title is %.0f px below panel %d: no room for an xlabel", i,
                     (prev_b - t) * h, i - 1);
        prev_b = b;
    }
}

/* The warm-up rectangles of the script's first panel: their from and to, up to max */
static int rects(const char *sec, double from[], double to[], int max)
{
    const char *p = sec;
    int n = 0;

    while ((p = strstr(p, "set object ")) && n < max) {
        p = strstr(p, "rect from ");
        assert_non_null(p);
        assert_int_equal(sscanf(p, "rect from %lf, graph 0 to %lf, graph 1", &from[n], &to[n]), 2);
        n++;
    }
    return n;
}

/* Regression (issue 25): of a --rate-sweep, only the first step's warm-up was shaded; each step
 * has one. Each step's start is in --json (steps[].start_wall), and the script shades each. */
static void test_every_warmup_shaded(void **state)
{
    static char sec[8][16384];
    const char *json = path_in("sweep.json");
    double from[16], to[16], origin, t0;
    struct bresult r;
    int n;

    (void)state;
    real_run(json, &r, "-c", "4", "-t", "1", "--rate-sweep", "200:600:200", "--warmup", "0.5", "-d",
             "1", NULL);
    assert_int_equal(r.nsteps, 3);
    t0 = load_t0(&r);
    origin = r.series[0].wall - r.series[0].t + t0;
    assert_int_equal(run(NULL, "plot", json, "--script", "-", NULL), 0);
    assert_true(panels(sec, 8) >= 2);
    for (int p = 0; p < 2; p++) { /* latency and throughput per second */
        n = rects(sec[p], from, to, 16);
        if (n != 3)
            fail_msg("panel %d shades %d warm-ups of 3 steps:\n%.1500s", p, n, sec[p]);
        for (int i = 0; i < 3; i++) {
            double a = r.steps[i].start_wall - origin;

            assert_true(r.steps[i].start_wall > 0);
            if (fabs(from[i] - a) > 1e-3 || fabs(to[i] - (a + 0.5)) > 1e-3)
                fail_msg("step %d's warm-up is shaded %g to %g, want %g to %g", i, from[i], to[i],
                         a, a + 0.5);
            if (i)
                assert_true(from[i] >= to[i - 1] + 0.9); /* each after a step of -d 1 */
        }
        assert_true(fabs(from[0]) < 1e-9); /* the first step began the load */
    }
    result_free(&r);
}

static double wall_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Regression (issue 25): a --start-at run was drawn from lfbench's start, its wait a run of empty
 * seconds and the load a ramp up from 0 (the second it began in counted whole), its warm-up
 * shaded where the wait was. Now the seconds before the load began are left out, the time axis
 * starts with it, and the second it began in is a rate over its part after that. WHEN is an
 * epoch time, half-way through a second: a +TIME counts from lfbench's own start, which under
 * load up to a second before its clock starts (t0 was 1.09 for +2), so only an epoch WHEN
 * says where the load begins: never before WHEN, the warm-up and -d done by its exit. */
static void test_start_at_drawn_from_start(void **state)
{
    static double rows[4096][8];
    static char sec[8][16384];
    const char *json = path_in("startat.json");
    double from[16], to[16], t0, len, origin, load, when = floor(wall_now()) + 3.5, after;
    char at[32];
    struct bresult r;
    size_t skip;
    int n, cols;

    (void)state;
    snprintf(at, sizeof(at), "%.3f", when);
    real_run(json, &r, "-c", "4", "-t", "1", "-R", "400", "--warmup", "0.5", "-d", "1",
             "--start-at", at, NULL);
    after = wall_now();
    t0 = load_t0(&r);
    origin = r.series[0].wall - r.series[0].t;
    load = origin + t0;
    if (origin >= floor(when))
        fail_msg("lfbench's clock started at %.3f, past WHEN's second %.0f: no wait to draw",
                 origin, floor(when));
    if (load < when || load + 0.5 + 1 > after)
        fail_msg("want the load begun at WHEN %.3f or after, its warm-up and -d done by %.3f: "
                 "begun at %.6f",
                 when, after, load);
    /* the wait was there: the wall clock's whole seconds up to the load's, each empty. A
     * second lfbench's main thread missed (held up on a loaded machine) is folded into the
     * next one (lfbench.c run_tick), so there may be fewer of them than whole seconds, never
     * more, and never none: WHEN is 3 s or more after the clock started */
    skip = seconds_before(&r, t0);
    if (skip < 1 || skip > (size_t)(floor(load) - floor(origin)) || skip >= r.nseries)
        fail_msg("want 1 to %.0f whole seconds from %.3f to the load's start (%.6f), of %zu: %zu",
                 floor(load) - floor(origin), origin, load, r.nseries, skip);
    for (size_t k = 0; k < skip; k++)
        if (r.series[k].c.requests || r.series[k].lat.count || r.series[k].wall > floor(load) ||
            r.series[k].wall != floor(r.series[k].wall))
            fail_msg("second %zu before the load (ending at %.3f) is not an empty whole second", k,
                     r.series[k].wall);
    assert_int_equal(run(NULL, "plot", json, "--script", "-", NULL), 0);
    n = block("series0", rows, 4096, &cols);
    if (n != (int)(r.nseries - skip))
        fail_msg("%d seconds drawn, want the %zu after the load began (of %zu)", n,
                 r.nseries - skip, r.nseries);
    for (int k = 0; k < n; k++)
        assert_true(fabs(rows[k][6] - (r.series[skip + (size_t)k].t - t0)) < 1e-3);
    /* the second the load began in: its middle and rate over its part after that */
    len = r.series[skip].t - t0;
    assert_true(fabs(rows[0][0] - len / 2) < 1e-3);
    if (len >= 0.2)
        assert_true(fabs(rows[0][4] - (double)r.series[skip].c.requests / len) <
                    1e-3 * rows[0][4] + 1e-3);
    assert_true(panels(sec, 8) >= 1);
    assert_int_equal(rects(sec[0], from, to, 16), 1);
    assert_true(fabs(from[0]) < 1e-9 && fabs(to[0] - 0.5) < 1e-9);
    {
        char want[64];

        snprintf(want, sizeof(want), "set xrange [0:%.6g]\n", r.series[r.nseries - 1].t - t0);
        if (!strstr(sec[0], want))
            fail_msg("no %s in the first panel", want);
    }
    result_free(&r);
}

static int cleanup(void)
{
    char cmd[600];

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_script_numbers_synthetic),
        cmocka_unit_test(test_labels_escaped),
        cmocka_unit_test(test_png_synthetic),
        cmocka_unit_test(test_real_run),
        cmocka_unit_test(test_phases_drawn),
        cmocka_unit_test(test_short_run_plotted),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_json_stream_named),
        cmocka_unit_test(test_gnuplot_missing_or_failing),
        cmocka_unit_test(test_default_output_name),
        cmocka_unit_test(test_refuses_to_overwrite_input),
        cmocka_unit_test(test_each_panel_has_xlabel),
        cmocka_unit_test(test_every_warmup_shaded),
        cmocka_unit_test(test_start_at_drawn_from_start),
    };
    int rc;

    lfbench = getenv("LFBENCH");
    lfepolld = getenv("LFEPOLLD");
    if (!lfbench || !lfepolld) {
        fprintf(stderr, "test_plot: set LFBENCH and LFEPOLLD (make integration does)\n");
        return 1;
    }
    if (getenv("TEST_SLOW"))
        slow = atoi(getenv("TEST_SLOW")) > 0 ? atoi(getenv("TEST_SLOW")) : 1;
    if (getenv("TEST_FILTER"))
        cmocka_set_test_filter(getenv("TEST_FILTER"));
    umask(022);
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    cleanup();
    return rc;
}
