/* Unit tests of frame: each framing on whole, partial and oversized input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "frame.h"

static long next(const struct framing *f, const char *p, size_t n, char *out)
{
    const char *fr = NULL;
    size_t fl = 0, scanned = 0;
    long r = frame_next(f, p, n, &scanned, &fr, &fl);

    if (r > 0) {
        memcpy(out, fr, fl);
        out[fl] = '\0';
    }
    return r;
}

static void test_raw(void **state)
{
    struct framing f = {.kind = FRAME_RAW, .max_frame = 4};
    char out[16];

    (void)state;
    assert_int_equal(next(&f, "", 0, out), 0);
    assert_int_equal(next(&f, "abc", 3, out), 3);
    assert_string_equal(out, "abc");
    assert_int_equal(next(&f, "abcdefg", 7, out), 4); /* max_frame bytes at a time */
    assert_string_equal(out, "abcd");
}

static void test_line_default(void **state)
{
    struct framing f = {
        .kind = FRAME_LINE, .dlen = 1, .strip_cr = true, .delim = "\n", .max_frame = 8};
    char out[16];

    (void)state;
    assert_int_equal(next(&f, "abc\ndef\n", 8, out), 4);
    assert_string_equal(out, "abc");
    assert_int_equal(next(&f, "abc\r\n", 5, out), 5); /* CR LF: the CR goes too */
    assert_string_equal(out, "abc");
    assert_int_equal(next(&f, "\n", 1, out), 1); /* an empty line is a frame */
    assert_string_equal(out, "");
    assert_int_equal(next(&f, "abc", 3, out), 0);        /* incomplete */
    assert_int_equal(next(&f, "12345678\n", 9, out), 9); /* exactly max_frame */
    assert_string_equal(out, "12345678");
    assert_int_equal(next(&f, "12345678\r\n", 10, out), 10);
    assert_int_equal(next(&f, "123456789\n", 10, out), -1); /* over */
    assert_int_equal(next(&f, "1234567890", 10, out), -1);  /* over, no delimiter yet */
    assert_int_equal(next(&f, "123456789", 9, out), 0);     /* 9 bytes: could be 8 and a CR */
}

static void test_line_delimiter(void **state)
{
    struct framing f = {.kind = FRAME_LINE, .dlen = 4, .delim = "\r\n\r\n", .max_frame = 64};
    char out[80];
    const char req[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /2";

    (void)state;
    assert_int_equal(next(&f, req, sizeof(req) - 1, out), 27);
    assert_string_equal(out, "GET / HTTP/1.1\r\nHost: x");
    assert_int_equal(next(&f, req + 27, sizeof(req) - 1 - 27, out), 0);
    assert_int_equal(next(&f, "a\r\n\r", 4, out), 0); /* a delimiter split across reads */
}

static void test_len32(void **state)
{
    struct framing f = {.kind = FRAME_LEN32, .max_frame = 5};
    char out[16];

    (void)state;
    assert_int_equal(next(&f, "\0\0", 2, out), 0);
    assert_int_equal(next(&f, "\0\0\0\3ab", 6, out), 0);
    assert_int_equal(next(&f, "\0\0\0\3abcX", 8, out), 7);
    assert_string_equal(out, "abc");
    assert_int_equal(next(&f, "\0\0\0\0", 4, out), 4); /* an empty frame */
    assert_string_equal(out, "");
    assert_int_equal(next(&f, "\0\0\0\6abcdef", 10, out), -1);
    assert_int_equal(next(&f, "\xff\0\0\0", 4, out), -1); /* huge: refused at the header */
}

static void test_fixed(void **state)
{
    struct framing f = {.kind = FRAME_FIXED, .size = 3, .max_frame = 3};
    char out[16];

    (void)state;
    assert_int_equal(next(&f, "ab", 2, out), 0);
    assert_int_equal(next(&f, "abcd", 4, out), 3);
    assert_string_equal(out, "abc");
    assert_int_equal(frame_max_partial(&f), 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_raw),
        cmocka_unit_test(test_line_default),
        cmocka_unit_test(test_line_delimiter),
        cmocka_unit_test(test_len32),
        cmocka_unit_test(test_fixed),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
