/* Unit tests of obuf: append, consume, slide, growth, release when empty, and OOM. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "obuf.h"

void *__real_malloc(size_t n);
void *__wrap_malloc(size_t n);
static bool fail_malloc; /* the next malloc returns NULL */

void *__wrap_malloc(size_t n)
{
    if (fail_malloc) {
        fail_malloc = false;
        return NULL;
    }
    return __real_malloc(n);
}

static void test_append_consume(void **state)
{
    struct obuf b = {0};

    (void)state;
    assert_int_equal(obuf_append(&b, "hello", 5), 0);
    assert_int_equal(obuf_len(&b), 5);
    assert_memory_equal(b.data + b.off, "hello", 5);
    assert_int_equal(obuf_append(&b, " world", 6), 0);
    assert_memory_equal(b.data + b.off, "hello world", 11);
    obuf_consume(&b, 6);
    assert_int_equal(obuf_len(&b), 5);
    assert_memory_equal(b.data + b.off, "world", 5);
    obuf_consume(&b, 5);
    assert_int_equal(obuf_len(&b), 0);
    assert_null(b.data); /* empty: the memory is given back */
    assert_int_equal(obuf_append(&b, "", 0), 0);
    assert_null(b.data);
}

static void test_slide_and_grow(void **state)
{
    struct obuf b = {0};
    char big[10000];

    (void)state;
    for (size_t i = 0; i < sizeof(big); i++)
        big[i] = (char)(i * 7);
    assert_int_equal(obuf_append(&b, big, 3000), 0);
    assert_int_equal(b.size, 4096);
    obuf_consume(&b, 2000);
    /* 1000 live at offset 2000; 2500 more fit after sliding to the front: no new block. */
    assert_int_equal(obuf_append(&b, big + 3000, 2500), 0);
    assert_int_equal(b.size, 4096);
    assert_int_equal(b.off, 0);
    assert_memory_equal(b.data, big + 2000, 3500);
    /* Growing keeps the bytes in order. */
    assert_int_equal(obuf_append(&b, big + 5500, 4500), 0);
    assert_int_equal(b.size, 8192);
    assert_int_equal(obuf_len(&b), 8000);
    assert_memory_equal(b.data + b.off, big + 2000, 8000);
    obuf_free(&b);
    assert_null(b.data);
    assert_int_equal(obuf_len(&b), 0);
}

static void test_oom_leaves_buffer_intact(void **state)
{
    struct obuf b = {0};

    (void)state;
    fail_malloc = true;
    assert_int_equal(obuf_append(&b, "abc", 3), -ENOMEM);
    assert_null(b.data);
    assert_int_equal(obuf_len(&b), 0);
    assert_int_equal(obuf_append(&b, "abc", 3), 0);
    fail_malloc = true;
    char big[5000] = {0};
    assert_int_equal(obuf_append(&b, big, sizeof(big)), -ENOMEM); /* growth fails */
    assert_int_equal(obuf_len(&b), 3);
    assert_memory_equal(b.data + b.off, "abc", 3);
    obuf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_append_consume),
        cmocka_unit_test(test_slide_and_grow),
        cmocka_unit_test(test_oom_leaves_buffer_intact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
