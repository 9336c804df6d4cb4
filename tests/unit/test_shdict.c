/* Unit tests of shdict: values and types, incr, delete, LRU eviction, limits, and atomicity
 * under threads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shdict.h"

static char *buf;
static size_t cap;

static struct shval str(const char *s)
{
    return (struct shval){.type = SHV_STR, .s = s, .len = strlen(s)};
}

static struct shval integer(int64_t i)
{
    return (struct shval){.type = SHV_INT, .i = i};
}

static struct shval get(struct shdict *d, const char *k)
{
    struct shval v;

    assert_int_equal(shdict_get(d, k, strlen(k), &v, &buf, &cap), 0);
    return v;
}

static void test_set_get_types(void **state)
{
    struct shdict *d = shdict_new(1 << 20);
    struct shval v, f = {.type = SHV_NUM, .d = 2.5}, none = {.type = SHV_NONE};

    (void)state;
    assert_int_equal(get(d, "a").type, SHV_NONE);
    assert_int_equal(shdict_set(d, "a", 1, &(struct shval){.type = SHV_STR, .s = "x\0y", .len = 3}),
                     0);
    v = get(d, "a");
    assert_int_equal(v.type, SHV_STR);
    assert_int_equal(v.len, 3);
    assert_memory_equal(v.s, "x\0y", 3); /* binary-safe */
    assert_int_equal(shdict_set(d, "a", 1, &(struct shval){.type = SHV_INT, .i = -7}), 0);
    v = get(d, "a");
    assert_int_equal(v.type, SHV_INT);
    assert_int_equal(v.i, -7);
    assert_int_equal(shdict_set(d, "b", 1, &f), 0);
    v = get(d, "b");
    assert_int_equal(v.type, SHV_NUM);
    assert_true(v.d == 2.5);
    assert_int_equal(shdict_set(d, "b", 1, &none), 0); /* nil deletes */
    assert_int_equal(get(d, "b").type, SHV_NONE);
    assert_int_equal(shdict_delete(d, "a", 1), 1);
    assert_int_equal(shdict_delete(d, "a", 1), 0);
    shdict_free(d);
}

static void test_incr(void **state)
{
    struct shdict *d = shdict_new(1 << 20);
    struct shval out, one = integer(1), half = {.type = SHV_NUM, .d = 0.5}, zero = integer(0);
    struct shval s = str("text"), big = integer(INT64_MAX);

    (void)state;
    assert_int_equal(shdict_incr(d, "n", 1, &one, NULL, &out), -ENOENT);
    assert_int_equal(shdict_incr(d, "n", 1, &one, &zero, &out), 0);
    assert_int_equal(out.i, 1);
    assert_int_equal(shdict_incr(d, "n", 1, &one, &zero, &out), 0);
    assert_int_equal(out.type, SHV_INT);
    assert_int_equal(out.i, 2);
    assert_int_equal(shdict_incr(d, "n", 1, &half, NULL, &out), 0);
    assert_int_equal(out.type, SHV_NUM);
    assert_true(out.d == 2.5);
    assert_int_equal(shdict_set(d, "s", 1, &s), 0);
    assert_int_equal(shdict_incr(d, "s", 1, &one, NULL, &out), -EINVAL);
    assert_int_equal(shdict_set(d, "m", 1, &big), 0);
    assert_int_equal(shdict_incr(d, "m", 1, &one, NULL, &out), 0);
    assert_true(out.i == INT64_MIN); /* wraps, as Lua integers do */
    shdict_free(d);
}

static void test_lru_eviction(void **state)
{
    /* One shard holds 1/SHDICT_SHARDS of this: room for a handful of 100-byte values. */
    struct shdict *d = shdict_new(SHDICT_SHARDS * 1024);
    char key[16], val[101];
    int evicted = 0, present = 0;
    size_t keys, bytes, capacity;
    uint64_t ev;

    (void)state;
    memset(val, 'v', 100);
    val[100] = '\0';
    for (int i = 0; i < 1000; i++) {
        int rc;
        snprintf(key, sizeof(key), "k%d", i);
        rc =
            shdict_set(d, key, strlen(key), &(struct shval){.type = SHV_STR, .s = val, .len = 100});
        assert_true(rc >= 0);
        evicted += rc;
        get(d, "k0"); /* k0 stays the most recently used: never evicted */
    }
    shdict_usage(d, &keys, &bytes, &capacity, &ev);
    assert_true(bytes <= capacity);
    assert_int_equal(ev, (uint64_t)evicted);
    assert_int_equal(keys + (size_t)evicted, 1000);
    assert_int_equal(get(d, "k0").type, SHV_STR);
    for (int i = 990; i < 1000; i++) { /* the newest survive */
        snprintf(key, sizeof(key), "k%d", i);
        present += get(d, key).type == SHV_STR;
    }
    assert_int_equal(present, 10);
    shdict_free(d);
}

static void test_too_big(void **state)
{
    struct shdict *d = shdict_new(SHDICT_SHARDS * 256);
    char val[300];

    (void)state;
    memset(val, 'x', sizeof(val));
    assert_int_equal(shdict_set(d, "k", 1, &(struct shval){.type = SHV_STR, .s = val, .len = 300}),
                     -E2BIG);
    assert_int_equal(get(d, "k").type, SHV_NONE);
    shdict_free(d);
}

struct hammer {
    struct shdict *d;
    int n;
};

static void *hammer_main(void *arg)
{
    struct hammer *h = arg;
    struct shval one = integer(1), zero = integer(0), out;
    char key[16];

    for (int i = 0; i < h->n; i++) {
        snprintf(key, sizeof(key), "c%d", i % 7);
        if (shdict_incr(h->d, key, strlen(key), &one, &zero, &out) != 0)
            return (void *)1;
    }
    return NULL;
}

static void test_incr_is_atomic(void **state)
{
    struct hammer h = {shdict_new(1 << 20), 70000};
    pthread_t t[4];
    int64_t sum = 0;

    (void)state;
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&t[i], NULL, hammer_main, &h), 0);
    for (int i = 0; i < 4; i++) {
        void *rv;
        pthread_join(t[i], &rv);
        assert_null(rv);
    }
    for (int i = 0; i < 7; i++) {
        char key[16];
        snprintf(key, sizeof(key), "c%d", i);
        sum += get(h.d, key).i;
    }
    assert_int_equal(sum, 4 * 70000);
    shdict_free(h.d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_set_get_types),  cmocka_unit_test(test_incr),
        cmocka_unit_test(test_lru_eviction),   cmocka_unit_test(test_too_big),
        cmocka_unit_test(test_incr_is_atomic),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);

    free(buf);
    return rc;
}
