/* Unit tests of the open-loop schedule: due counts, intended times, no drift. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "rate.h"

static void test_due_and_take(void **state)
{
    struct rate r;

    (void)state;
    rate_init(&r, 1000, 1000000000ull); /* 1000/s: one every 1 ms from t = 1 s */
    assert_int_equal(rate_due(&r, 999999999ull), 0);
    assert_int_equal(rate_due(&r, 1000000000ull), 1); /* send 0 at exactly 1 s */
    assert_int_equal(rate_due(&r, 1000999999ull), 1);
    assert_int_equal(rate_due(&r, 1001000000ull), 2);
    assert_int_equal(rate_take(&r), 1000000000ull);
    assert_int_equal(rate_due(&r, 1001000000ull), 1);
    assert_int_equal(rate_next_time(&r), 1001000000ull);
    /* a stall of 50 ms: 50 sends are due, each keeps its own intended time */
    assert_int_equal(rate_due(&r, 1050500000ull), 50);
    for (uint64_t k = 1; k <= 50; k++)
        assert_int_equal(rate_take(&r), 1000000000ull + k * 1000000ull);
    assert_int_equal(rate_due(&r, 1050500000ull), 0);
}

static void test_no_drift(void **state)
{
    struct rate r;

    (void)state;
    rate_init(&r, 3, 0); /* a period that is not a whole number of ns */
    for (int i = 0; i < 3000000; i++)
        rate_take(&r);
    /* after 3,000,000 sends at 3/s: 1,000,000 s, to the nanosecond */
    assert_int_equal(rate_next_time(&r), 1000000000000000ull);
    assert_int_equal(rate_due(&r, 1000000000000000ull), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_due_and_take),
        cmocka_unit_test(test_no_drift),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
