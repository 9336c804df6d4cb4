/* Unit tests of sweep: --rate-sweep's staircase and --find-rate's search, run against synthetic
 * servers (a step's results made up from its rate), so every branch of the search is seen. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sweep.h"

#define GOOD_NS 200000ull  /* a server within its limit answers in 200 µs */
#define BAD_NS 20000000ull /* past it, in 20 ms */

/* A synthetic server: what a step at rate r gets. */
struct model {
    double limit;      /* latency breaks above this rate */
    double err_above;  /* errors above this rate (0: never) */
    double lost_above; /* lost responses above this rate (0: never) */
    double unsent_above;
    double non2xx_above; /* HTTP 503s above this rate, answered fast (0: never) */
    double cpu_per_krps; /* client CPU % per 1,000 requests/s */
    bool silent;         /* no response at all above limit */
    double stall_at;     /* a transient stall: the first stall_tries steps at this rate are slow */
    int stall_tries, stalled;
};

static struct hist lat; /* the step's latencies (one step at a time) */

/* A step at rate, as m answers it; over_bound counted as the engine does, against s's bound. */
static void make_step(const struct sweep *s, struct model *m, double rate, struct bstep *st)
{
    bool stall = rate == m->stall_at && m->stalled < m->stall_tries;

    memset(st, 0, sizeof(*st));
    hist_init(&lat);
    st->rate = rate;
    st->measured = 1;
    st->lat = &lat;
    m->stalled += stall;
    if (!(m->silent && rate > m->limit))
        for (int i = 0; i < 1000; i++) {
            /* a stall: 2% of the step's responses wait for it */
            uint64_t v = rate > m->limit || (stall && i % 50 == 0) ? BAD_NS : GOOD_NS;
            hist_record(&lat, v);
            st->over_bound += (double)v > s->bound_ns;
        }
    st->c.requests = lat.count;
    if (m->non2xx_above > 0 && rate > m->non2xx_above)
        st->c.http_non2xx = lat.count / 2;
    if (m->err_above > 0 && rate > m->err_above)
        st->c.errors[ERR_RESET] = 3;
    if (m->lost_above > 0 && rate > m->lost_above)
        st->c.lost = 2;
    if (m->unsent_above > 0 && rate > m->unsent_above)
        st->unsent = 7;
    st->cpu_percent = rate / 1000 * m->cpu_per_krps;
}

static struct bopt opts(double from, double to, double step, double pct, double bound_us,
                        int threads)
{
    struct bopt o;

    memset(&o, 0, sizeof(o));
    o.sweep_from = from;
    o.sweep_to = to;
    o.sweep_step = step;
    o.find_pct = pct;
    o.find_bound_us = bound_us;
    o.threads = threads;
    return o;
}

/* Runs the search to its end against m; the rates tried land in rates[] (at most max). Returns
 * how many steps ran, and checks the contract of every step on the way: a step that broke the
 * bound is followed by a re-test of its rate (--find-rate; not when the client was busy). */
static int run(struct sweep *s, struct model *m, double *rates, int max)
{
    int n = 0, want_retest = 0;
    double r;

    while ((r = sweep_next(s)) > 0) {
        struct bstep st;

        if (n >= max)
            fail_msg("more than %d steps: %g", max, r);
        assert_true(r == s->last);
        if (want_retest && r != rates[n - 1])
            fail_msg("step %d at %g broke, and step %d is at %g: want it run again", n,
                     rates[n - 1], n + 1, r);
        rates[n++] = r;
        make_step(s, m, r, &st);
        sweep_judge(s, &st);
        want_retest = s->retest;
        if (s->pct > 0 && st.attempt < 1)
            fail_msg("step %d: attempt %d", n, st.attempt);
    }
    assert_false(s->retest && n < SWEEP_MAX_FIND);
    assert_true(s->done);
    assert_true(sweep_next(s) == 0); /* over is over */
    assert_null(strchr(s->why, '\n'));
    return n;
}

static void expect_why(const struct sweep *s, const char *needle)
{
    if (!strstr(s->why, needle))
        fail_msg("why '%s' lacks '%s'", s->why, needle);
}

/* The rates tried, each re-test dropped (a rate right after itself): the search's path. */
static int path(double *r, int n)
{
    int k = 0;

    for (int i = 0; i < n; i++)
        if (!i || r[i] != r[i - 1])
            r[k++] = r[i];
    return k;
}

static void test_staircase(void **state)
{
    struct bopt o = opts(500, 1500, 500, 0, 0, 1);
    struct model m = {.limit = 1e12};
    struct sweep s;
    double r[BOPT_MAX_STEPS + 2];
    int n;

    (void)state;
    sweep_init(&s, &o);
    n = run(&s, &m, r, 10);
    assert_int_equal(n, 3);
    assert_true(r[0] == 500 && r[1] == 1000 && r[2] == 1500);
    assert_string_equal(s.why, ""); /* the staircase has no verdict */
    /* float steps, TO inclusive though 0.1 has no exact binary form */
    o = opts(0.1, 0.5, 0.1, 0, 0, 1);
    sweep_init(&s, &o);
    n = run(&s, &m, r, 10);
    assert_int_equal(n, 5);
    for (int i = 0; i < n; i++)
        assert_true(fabs(r[i] - 0.1 * (i + 1)) < 1e-9);
    o = opts(2.5, 10, 2.5, 0, 0, 1);
    sweep_init(&s, &o);
    assert_int_equal(run(&s, &m, r, 10), 4);
    assert_true(r[3] == 10);
    /* a single step: FROM == TO */
    o = opts(700, 700, 100, 0, 0, 1);
    sweep_init(&s, &o);
    assert_int_equal(run(&s, &m, r, 10), 1);
    assert_true(r[0] == 700);
    /* STEP past TO: FROM alone */
    o = opts(700, 750, 100, 0, 0, 1);
    sweep_init(&s, &o);
    assert_int_equal(run(&s, &m, r, 10), 1);
    /* the most bopt allows: exactly BOPT_MAX_STEPS, the last one TO */
    o = opts(1, BOPT_MAX_STEPS, 1, 0, 0, 1);
    sweep_init(&s, &o);
    assert_int_equal(run(&s, &m, r, BOPT_MAX_STEPS + 2), BOPT_MAX_STEPS);
    assert_true(r[BOPT_MAX_STEPS - 1] == BOPT_MAX_STEPS);
}

/* The staircase's verdict per step: failures are not kept, latency does not matter. */
static void test_staircase_kept(void **state)
{
    struct bopt o = opts(100, 300, 100, 0, 0, 1);
    struct model m = {.limit = 150, .err_above = 250};
    struct sweep s;
    struct bstep st;

    (void)state;
    sweep_init(&s, &o);
    make_step(&s, &m, sweep_next(&s), &st);
    sweep_judge(&s, &st);
    assert_true(st.kept);
    make_step(&s, &m, sweep_next(&s), &st); /* slow, no failure */
    sweep_judge(&s, &st);
    assert_true(st.kept);
    make_step(&s, &m, sweep_next(&s), &st); /* errors */
    sweep_judge(&s, &st);
    assert_false(st.kept);
    assert_int_equal(st.attempt, 0); /* no re-test in a staircase */
    assert_true(sweep_next(&s) == 0);
    assert_true(sweep_found(&s) == 0); /* no search, no answer */
    /* Regression (white-box review, defect 1): a step answered with 503s was kept */
    m = (struct model){.limit = 1e12, .non2xx_above = 150};
    sweep_init(&s, &o);
    make_step(&s, &m, sweep_next(&s), &st);
    sweep_judge(&s, &st);
    assert_true(st.kept);
    make_step(&s, &m, sweep_next(&s), &st);
    sweep_judge(&s, &st);
    assert_false(st.kept);
}

/* Every rate tried before the first broken one doubles from FROM; after it, each lies strictly
 * between the highest kept and the lowest broken so far (a bisection). */
static void check_shape(const double *r, int n, double first, const struct model *m)
{
    double lo = 0, hi = 0;
    int k = 0;

    assert_true(r[0] == first);
    for (; k < n && r[k] <= m->limit; k++) {
        if (k)
            assert_true(r[k] == r[k - 1] * 2);
        lo = r[k];
    }
    if (k < n)
        hi = r[k++];
    for (; k < n; k++) {
        if (!(r[k] > lo && r[k] < hi))
            fail_msg("step %d at %g is not inside (%g, %g)", k + 1, r[k], lo, hi);
        if (r[k] <= m->limit)
            lo = r[k];
        else
            hi = r[k];
    }
}

static void test_find_without_range(void **state)
{
    struct bopt o = opts(0, 0, 0, 99, 1000, 1); /* p99=1ms */
    struct model m = {.limit = 37000};
    struct sweep s;
    double r[SWEEP_MAX_FIND + 1], found;
    int n;

    (void)state;
    sweep_init(&s, &o);
    n = run(&s, &m, r, SWEEP_MAX_FIND);
    assert_true(n < 25);
    n = path(r, n);
    check_shape(r, n, SWEEP_FIRST, &m);
    assert_true(r[5] == 32000 && r[6] == 64000); /* 1000 doubled up to the first broken */
    found = sweep_found(&s);
    if (!(found <= m.limit && found >= m.limit * 0.95))
        fail_msg("found %g for a server that keeps up to %g", found, m.limit);
    assert_true(s.hi_bad > m.limit && s.hi_bad - s.lo_ok <= s.lo_ok * 0.05);
    assert_true(n < 15);                        /* a bisection, not a walk */
    expect_why(&s, "broke it on 2 of 2 tries"); /* each break confirmed by its re-test */
    assert_null(strstr(s.why, "not confirmed"));
    expect_why(&s, "kept it and");
    expect_why(&s, "broke it");
    expect_why(&s, "latency: p99 ");
}

static void test_find_within_range(void **state)
{
    struct bopt o = opts(1000, 50000, 500, 99, 1000, 1);
    struct model m = {.limit = 37000};
    struct sweep s;
    double r[SWEEP_MAX_FIND + 1], found;
    int n, k;

    (void)state;
    sweep_init(&s, &o);
    n = path(r, run(&s, &m, r, SWEEP_MAX_FIND));
    for (k = 0; r[k] <= m.limit; k++)
        assert_true(r[k] == 1000 * pow(2, k));
    assert_true(r[k] == 50000); /* 64,000 is past the range: its end instead */
    check_shape(r, k, 1000, &m);
    for (k++; k < n; k++) { /* the bisection stays on the range's grid */
        double g = (r[k] - 1000) / 500;
        if (g != floor(g))
            fail_msg("step %d at %g is off the grid 1000 + k x 500", k + 1, r[k]);
    }
    found = sweep_found(&s);
    if (!(found <= m.limit && found > m.limit - 500))
        fail_msg("found %g: want within one STEP under %g", found, m.limit);
    assert_true(s.hi_bad - s.lo_ok <= 500);
    expect_why(&s, "latency");
    /* every rate up to the end kept it */
    o = opts(200, 800, 200, 99, 50000, 1);
    sweep_init(&s, &o);
    n = run(&s, &m, r, SWEEP_MAX_FIND);
    assert_int_equal(n, 3);
    assert_true(r[0] == 200 && r[1] == 400 && r[2] == 800);
    assert_true(sweep_found(&s) == 800);
    expect_why(&s, "every rate up to the range's end (800/s) kept it");
    /* FROM == TO: one step */
    o = opts(800, 800, 100, 99, 50000, 1);
    sweep_init(&s, &o);
    assert_int_equal(run(&s, &m, r, SWEEP_MAX_FIND), 1);
    assert_true(sweep_found(&s) == 800);
}

/* A step with an error, a lost response or a send never sent broke the bound, however fast. */
static void test_failures_break(void **state)
{
    static const struct {
        struct model m;
        const char *why;
    } cases[] = {
        {{.limit = 1e12, .err_above = 5000}, "errors: 3 (0 lost) at "},
        {{.limit = 1e12, .lost_above = 5000}, "errors: 0 (2 lost) at "},
        {{.limit = 1e12, .unsent_above = 5000}, "7 sends never went out at "},
        {{.limit = 5000, .silent = true}, "no response at "},
        /* Regression (white-box review, defect 1): 503s, answered fast, kept any bound */
        {{.limit = 1e12, .non2xx_above = 5000},
         "500 of 1000 responses had a status other than 2xx at "},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct bopt o = opts(0, 0, 0, 99, 1000, 1);
        struct model m = cases[i].m;
        struct sweep s;
        double r[SWEEP_MAX_FIND + 1], found;

        sweep_init(&s, &o);
        run(&s, &m, r, SWEEP_MAX_FIND);
        found = sweep_found(&s);
        if (!(found <= 5000 && found >= 5000 * 0.95))
            fail_msg("case %zu: found %g, want just under 5000 (%s)", i, found, s.why);
        expect_why(&s, cases[i].why);
    }
}

/* The client's CPU at 90% of its threads ends the search: past it, lfbench sets the latency. */
static void test_client_busy_ends_it(void **state)
{
    struct bopt o = opts(0, 0, 0, 99, 1000, 1);
    struct model m = {.limit = 1e12, .cpu_per_krps = 2.5}; /* 90% at 36,000/s */
    struct sweep s;
    double r[SWEEP_MAX_FIND + 1];
    int n;

    (void)state;
    sweep_init(&s, &o);
    n = run(&s, &m, r, SWEEP_MAX_FIND);
    assert_true(r[n - 1] == 64000); /* the first step at 90% or more is the last */
    for (int k = 0; k < n - 1; k++)
        assert_true(r[k] / 1000 * m.cpu_per_krps < SWEEP_CLIENT_BUSY);
    expect_why(&s, "the client");
    expect_why(&s, "CPU reached 160% of its 1 thread at 64000/s");
    /* the same load on two threads is 80% of their 200%: the search goes on, until 160,000/s */
    o = opts(0, 0, 0, 99, 1000, 2);
    m.limit = 100000;
    sweep_init(&s, &o);
    n = run(&s, &m, r, SWEEP_MAX_FIND);
    assert_true(r[6] == 64000);
    expect_why(&s, "the client");
    expect_why(&s, "of its 2 threads");
    /* a busy step that broke the bound: the answer is still the highest kept below it */
    assert_true(sweep_found(&s) <= m.limit);
}

/* The first step broke it: no range halves down; a range stops there. */
static void test_first_step_broken(void **state)
{
    struct bopt o = opts(0, 0, 0, 99.9, 500, 1);
    struct model m = {.limit = 300};
    struct sweep s;
    double r[SWEEP_MAX_FIND + 1], found;
    int n;

    (void)state;
    sweep_init(&s, &o);
    n = path(r, run(&s, &m, r, SWEEP_MAX_FIND));
    assert_true(r[0] == 1000 && r[1] == 500 && r[2] == 250);
    for (int k = 3; k < n; k++)
        assert_true(r[k] > 250 && r[k] < 500);
    found = sweep_found(&s);
    if (!(found <= 300 && found >= 300 * 0.95))
        fail_msg("found %g, want just under 300", found);
    expect_why(&s, "p99.9");
    /* nothing keeps it: down to 1/s, then an answer of none */
    m.limit = 0;
    sweep_init(&s, &o);
    n = path(r, run(&s, &m, r, SWEEP_MAX_FIND));
    assert_true(r[n - 1] <= 1 && r[n - 2] > 1);
    assert_true(sweep_found(&s) == 0);
    expect_why(&s, "even the lowest rate tried");
    /* with a range: FROM broke it, and below FROM is not the range */
    o = opts(1000, 5000, 500, 99, 1000, 1);
    m.limit = 300;
    sweep_init(&s, &o);
    assert_int_equal(run(&s, &m, r, SWEEP_MAX_FIND), 2); /* FROM, and its re-test */
    assert_true(r[0] == 1000 && r[1] == 1000);
    assert_true(sweep_found(&s) == 0);
    expect_why(&s, "latency: p99 ");
    expect_why(&s, "even the lowest rate tried (1000/s) broke the bound");
}

/* Regression (white-box review, defect 3): one transient stall at 2,000/s answered 1,900/s for
 * a server that keeps the bound up to 8,000/s. A rate that breaks is run again, and broken only
 * on the majority of its tries; the answer says which break was not confirmed. */
static void test_transient_stall_is_retested(void **state)
{
    struct bopt o = opts(0, 0, 0, 99, 1000, 1);
    struct model m = {.limit = 8000, .stall_at = 2000, .stall_tries = 1};
    struct sweep s;
    double r[SWEEP_MAX_FIND + 1], found;
    int n;

    (void)state;
    sweep_init(&s, &o);
    n = run(&s, &m, r, SWEEP_MAX_FIND);
    /* 2,000/s broke, then kept it twice: three tries, then up */
    assert_true(r[0] == 1000 && r[1] == 2000 && r[2] == 2000 && r[3] == 2000 && r[4] == 4000);
    found = sweep_found(&s);
    if (!(found <= m.limit && found >= m.limit * 0.95))
        fail_msg("found %g for a server that keeps up to %g, one stall at 2000/s (%s)", found,
                 m.limit, s.why);
    expect_why(&s, "a break not confirmed on re-test: 2000/s (kept it on 2 of 3 tries)");
    (void)n;

    /* a break on two tries of three is the rate's: the stall that outlasts one step bounds it */
    m = (struct model){.limit = 8000, .stall_at = 2000, .stall_tries = 2};
    sweep_init(&s, &o);
    run(&s, &m, r, SWEEP_MAX_FIND);
    assert_true(r[1] == 2000 && r[2] == 2000 && r[3] != 2000);
    found = sweep_found(&s);
    if (!(found < 2000 && found >= 1000))
        fail_msg("found %g: 2000/s broke twice (%s)", found, s.why);
    expect_why(&s, "2000/s broke it (latency: p99 ");
    expect_why(&s, "broke it on 2 of 2 tries");
}

/* Regression (white-box review, defect 9): the bound was compared with the histogram's bucket
 * midpoint: 11 of 1,000 responses at 20.05 ms (bucket [19.92, 20.05] ms, midpoint 19.99) kept
 * p99=20ms. The engine's exact count of responses over the bound decides. */
static void test_exact_bound(void **state)
{
    struct bopt o = opts(0, 0, 0, 99, 20000, 1);
    struct sweep s;
    struct bstep st;
    struct hist *h = malloc(sizeof(*h));

    (void)state;
    for (int over = 10; over <= 11; over++) {
        sweep_init(&s, &o);
        memset(&st, 0, sizeof(st));
        hist_init(h);
        st.rate = sweep_next(&s);
        st.lat = h;
        for (int i = 0; i < 1000; i++) {
            uint64_t v = i < over ? 20050000 : 200000;
            hist_record(h, v);
            st.over_bound += (double)v > s.bound_ns;
        }
        st.c.requests = h->count;
        assert_true(hist_percentile(h, 99) <= 20000000); /* the estimate is within the bound */
        sweep_judge(&s, &st);
        if (st.kept != (over == 10))
            fail_msg("%d of 1000 over 20 ms: p99=20ms %s", over, st.kept ? "kept" : "broke");
        if (over == 11) {
            assert_true(s.retest);
            assert_non_null(strstr(s.broke_why, "latency: p99 over 20000.0 µs at 1000/s (11 of "
                                                "1000 responses took longer; p99 allows 10)"));
        }
    }
    /* p100: the max itself, against the bound: a value equal to it is within */
    o = opts(0, 0, 0, 100, 200, 1);
    sweep_init(&s, &o);
    memset(&st, 0, sizeof(st));
    hist_init(h);
    st.rate = sweep_next(&s);
    st.lat = h;
    hist_record(h, 200000);
    hist_record(h, 1000);
    st.c.requests = 2;
    sweep_judge(&s, &st);
    assert_true(st.kept);
    free(h);
}

/* A server that keeps every rate, without a range: the search gives up at SWEEP_MAX_FIND. */
static void test_gives_up(void **state)
{
    struct bopt o = opts(0, 0, 0, 99, 1000, 1);
    struct model m = {.limit = 1e300};
    struct sweep s;
    static double r[SWEEP_MAX_FIND + 1];

    (void)state;
    sweep_init(&s, &o);
    assert_int_equal(run(&s, &m, r, SWEEP_MAX_FIND), SWEEP_MAX_FIND);
    expect_why(&s, "gave up after 40 steps");
    assert_true(sweep_found(&s) == r[SWEEP_MAX_FIND - 1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_staircase),
        cmocka_unit_test(test_staircase_kept),
        cmocka_unit_test(test_find_without_range),
        cmocka_unit_test(test_find_within_range),
        cmocka_unit_test(test_failures_break),
        cmocka_unit_test(test_client_busy_ends_it),
        cmocka_unit_test(test_first_step_broken),
        cmocka_unit_test(test_gives_up),
        cmocka_unit_test(test_transient_stall_is_retested),
        cmocka_unit_test(test_exact_bound),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
