/* Unit tests of hist: percentiles against an exact sorted array, within 1%. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>

#include "hist.h"

static int cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The exact percentile by the same definition: smallest v with at least p% of values <= v. */
static uint64_t exact(const uint64_t *sorted, size_t n, double p)
{
    size_t rank = (size_t)ceil(p / 100.0 * (double)n);
    return sorted[rank ? rank - 1 : 0];
}

static void check_against_exact(uint64_t *v, size_t n)
{
    static const double ps[] = {1, 10, 50, 90, 99, 99.9, 99.99, 100};
    struct hist *h = malloc(sizeof(*h));

    hist_init(h);
    for (size_t i = 0; i < n; i++)
        hist_record(h, v[i]);
    qsort(v, n, sizeof(*v), cmp);
    assert_int_equal(h->count, n);
    assert_int_equal(h->min, v[0]);
    assert_int_equal(h->max, v[n - 1]);
    for (size_t k = 0; k < sizeof(ps) / sizeof(ps[0]); k++) {
        double want = (double)exact(v, n, ps[k]), got = (double)hist_percentile(h, ps[k]);
        if (fabs(got - want) > 0.01 * want + 0.5)
            fail_msg("p%g: got %.0f, exact %.0f (over 1%%)", ps[k], got, want);
    }
    free(h);
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void test_uniform(void **state)
{
    static uint64_t v[100000];

    (void)state;
    for (size_t i = 0; i < 100000; i++)
        v[i] = 1000 + next() % 9000000; /* 1 µs to 9 ms */
    check_against_exact(v, 100000);
}

static void test_log_spread(void **state)
{
    static uint64_t v[100000];

    (void)state;
    for (size_t i = 0; i < 100000; i++) /* 1 ns to ~1000 s, log-uniform */
        v[i] = (uint64_t)exp((double)(next() % 1000000) / 1000000.0 * log(1e12));
    check_against_exact(v, 100000);
}

static void test_bimodal_tail(void **state)
{
    static uint64_t v[20000];

    (void)state;
    for (size_t i = 0; i < 20000; i++) /* 1% very slow: the tail must show */
        v[i] = i % 100 == 0 ? 50000000 + next() % 1000000 : 140000 + next() % 10000;
    check_against_exact(v, 20000);
}

static void test_small_exact_and_edges(void **state)
{
    uint64_t v[] = {5, 1, 3, 2, 4};
    struct hist h;

    (void)state;
    hist_init(&h);
    assert_int_equal(hist_percentile(&h, 50), 0); /* empty */
    check_against_exact(v, 5);
    for (uint64_t x = 0; x < 256; x++) { /* exact below 256 */
        uint64_t lo, hi;
        hist_range(hist_index(x), &lo, &hi);
        assert_int_equal(lo, x);
        assert_int_equal(hi, x);
    }
    for (uint64_t x = 256; x < (1ull << 40); x = x * 3 + 7) { /* buckets hold their values */
        uint64_t lo, hi;
        hist_range(hist_index(x), &lo, &hi);
        assert_true(lo <= x && x <= hi);
        assert_true((double)(hi - lo) <= (double)lo / 128.0);
    }
    hist_init(&h);
    hist_record(&h, UINT64_MAX); /* clamped, not out of bounds */
    assert_int_equal(h.max, UINT64_MAX);
}

static void test_merge(void **state)
{
    struct hist *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));

    (void)state;
    hist_init(a);
    hist_init(b);
    for (int i = 1; i <= 100; i++)
        hist_record(i % 2 ? a : b, (uint64_t)i * 1000);
    hist_merge(a, b);
    assert_int_equal(a->count, 100);
    assert_int_equal(a->min, 1000);
    assert_int_equal(a->max, 100000);
    assert_in_range(hist_percentile(a, 50), 49500, 50500);
    free(a);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uniform),      cmocka_unit_test(test_log_spread),
        cmocka_unit_test(test_bimodal_tail), cmocka_unit_test(test_small_exact_and_edges),
        cmocka_unit_test(test_merge),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
