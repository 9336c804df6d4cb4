/* Unit tests of dispatch: round-robin order and the power-of-two-choices pick. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dispatch.h"

static long loads[8];
static unsigned asked[8];

static long load_of(void *ctx, unsigned g)
{
    (void)ctx;
    asked[g]++;
    return loads[g];
}

static void test_round_robin(void **state)
{
    struct dispatch d;

    (void)state;
    dispatch_init(&d, DISPATCH_RR, 3, 1);
    for (int round = 0; round < 4; round++)
        for (unsigned g = 0; g < 3; g++)
            assert_int_equal(dispatch_pick(&d, load_of, NULL), g);
}

static void test_one_group(void **state)
{
    struct dispatch d;

    (void)state;
    dispatch_init(&d, DISPATCH_LEAST, 1, 7);
    for (int i = 0; i < 10; i++)
        assert_int_equal(dispatch_pick(&d, load_of, NULL), 0);
    dispatch_init(&d, DISPATCH_RR, 0, 7); /* 0 groups is treated as 1 */
    assert_int_equal(dispatch_pick(&d, load_of, NULL), 0);
}

static void test_least_prefers_lighter(void **state)
{
    struct dispatch d;
    unsigned hits[4] = {0};

    (void)state;
    dispatch_init(&d, DISPATCH_LEAST, 4, 12345);
    for (int g = 0; g < 4; g++)
        loads[g] = 100;
    loads[2] = 0; /* one idle group: it wins every pick that draws it */
    for (int i = 0; i < 4000; i++)
        hits[dispatch_pick(&d, load_of, NULL)]++;
    /* Group 2 is drawn in half of all pairs of distinct groups out of 4. */
    assert_in_range(hits[2], 1700, 2300);
    assert_true(hits[0] > 0 && hits[1] > 0 && hits[3] > 0);
}

static void test_least_balances(void **state)
{
    struct dispatch d;

    (void)state;
    dispatch_init(&d, DISPATCH_LEAST, 8, 99);
    for (int g = 0; g < 8; g++)
        loads[g] = 0;
    /* Simulate connections arriving: spread stays within a few of perfect. */
    for (int i = 0; i < 8000; i++)
        loads[dispatch_pick(&d, load_of, NULL)]++;
    for (int g = 0; g < 8; g++)
        assert_in_range(loads[g], 990, 1010);
}

static void test_least_pairs_distinct(void **state)
{
    struct dispatch d;

    (void)state;
    dispatch_init(&d, DISPATCH_LEAST, 2, 5);
    for (int i = 0; i < 100; i++) {
        asked[0] = asked[1] = 0;
        dispatch_pick(&d, load_of, NULL);
        assert_int_equal(asked[0], 1); /* two groups: both are always compared */
        assert_int_equal(asked[1], 1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_robin),           cmocka_unit_test(test_one_group),
        cmocka_unit_test(test_least_prefers_lighter), cmocka_unit_test(test_least_balances),
        cmocka_unit_test(test_least_pairs_distinct),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
