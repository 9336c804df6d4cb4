/* Unit tests of iplimit: the per-address limit, IPv4 and IPv4-mapped IPv6 as one address,
 * release, and the bound a flood of addresses meets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "iplimit.h"

static struct sockaddr_in v4(uint32_t host)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(1234)};

    a.sin_addr.s_addr = htonl(host);
    return a;
}

static void test_limit_and_release(void **state)
{
    struct iplimit *t = iplimit_new(100);
    struct sockaddr_in a = v4(0x7f000001), b = v4(0x7f000002);
    struct sockaddr_in6 m = {.sin6_family = AF_INET6};
    int32_t s[3];

    (void)state;
    assert_non_null(t);
    for (int i = 0; i < 3; i++)
        assert_true((s[i] = iplimit_acquire(t, (struct sockaddr *)&a, 3)) >= 0);
    assert_int_equal(iplimit_acquire(t, (struct sockaddr *)&a, 3), IPLIMIT_OVER);
    /* ::ffff:127.0.0.1 is the same client */
    inet_pton(AF_INET6, "::ffff:127.0.0.1", &m.sin6_addr);
    assert_int_equal(iplimit_acquire(t, (struct sockaddr *)&m, 3), IPLIMIT_OVER);
    assert_int_equal(iplimit_count(t, (struct sockaddr *)&m), 3);
    /* another address is counted apart */
    assert_true(iplimit_acquire(t, (struct sockaddr *)&b, 3) >= 0);
    iplimit_release(t, s[0]);
    assert_int_equal(iplimit_count(t, (struct sockaddr *)&a), 2);
    assert_true(iplimit_acquire(t, (struct sockaddr *)&a, 3) >= 0);
    assert_int_equal(iplimit_acquire(t, (struct sockaddr *)&a, 0), IPLIMIT_OVER);
    iplimit_free(t);
}

/* The table never grows: with every slot holding a live address a new one is refused (FULL),
 * and a slot freed by a close is taken by the next new address. */
static void test_flood_is_bounded(void **state)
{
    struct iplimit *t = iplimit_new(1); /* the smallest table: 64 slots */
    int32_t first = -1;
    int ok = 0, full = 0;

    (void)state;
    for (uint32_t i = 0; i < 1000; i++) {
        struct sockaddr_in a = v4(0x0a000000 + i);
        int32_t s = iplimit_acquire(t, (struct sockaddr *)&a, 5);

        if (s >= 0) {
            ok++;
            if (first < 0)
                first = s;
        } else {
            assert_int_equal(s, IPLIMIT_FULL);
            full++;
        }
    }
    assert_int_equal(ok, 64);
    assert_int_equal(full, 1000 - 64);
    iplimit_release(t, first);
    {
        struct sockaddr_in a = v4(0x0b000001);
        assert_int_equal(iplimit_acquire(t, (struct sockaddr *)&a, 5), first);
    }
    iplimit_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_limit_and_release),
        cmocka_unit_test(test_flood_is_bounded),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
