/* Unit tests of json: valid documents, every kind of malformed input with its error position,
 * depth bombs, huge numbers, big integers exact. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

static struct json *parse(const char *s, char *err, size_t errlen)
{
    return json_parse(s, strlen(s), NULL, err, errlen);
}

/* s must be refused with an error that starts with pos ("L:C: ") and holds what. */
static void refused(const char *s, const char *pos, const char *what)
{
    char err[256];
    struct json *j = parse(s, err, sizeof(err));

    if (j)
        fail_msg("accepted: %s", s);
    if (strncmp(err, pos, strlen(pos)) || !strstr(err, what) || strchr(err, '\n'))
        fail_msg("for %s: error '%s', want '%s ...%s...'", s, err, pos, what);
}

static void test_valid(void **state)
{
    char err[256];
    struct json *j;
    const struct json *v;
    uint64_t u;
    double d;

    (void)state;
    j = parse(" {\"a\": [1, -2.5e3, true, false, null, \"x\"], \"b\": {}, \"c\": [],"
              "\n \"a\": 7}\r\n",
              err, sizeof(err));
    assert_non_null(j);
    assert_int_equal(j->type, JSON_OBJECT);
    assert_int_equal(j->len, 4);
    assert_true(json_u64(json_get(j, "a"), &u)); /* the last of two "a" */
    assert_int_equal(u, 7);
    v = &j->kid[0];
    assert_string_equal(v->key, "a");
    assert_int_equal(v->type, JSON_ARRAY);
    assert_int_equal(v->len, 6);
    assert_true(json_u64(&v->kid[0], &u) && u == 1);
    assert_false(json_u64(&v->kid[1], &u));
    assert_true(json_num(&v->kid[1], &d) && d == -2500.0);
    assert_int_equal(v->kid[2].type, JSON_TRUE);
    assert_int_equal(v->kid[3].type, JSON_FALSE);
    assert_int_equal(v->kid[4].type, JSON_NULL);
    assert_string_equal(v->kid[5].s, "x");
    assert_int_equal(json_get(j, "b")->type, JSON_OBJECT);
    assert_int_equal(json_get(j, "c")->len, 0);
    assert_null(json_get(j, "nope"));
    assert_null(json_get(v, "a")); /* not an object */
    /* positions: "b" starts on line 1, the second "a"'s value on line 2 */
    assert_int_equal(json_get(j, "a")->line, 2);
    assert_int_equal(json_get(j, "a")->col, 7);
    json_free(j);

    /* scalars at the top */
    j = parse("0", err, sizeof(err));
    assert_true(json_u64(j, &u) && u == 0);
    json_free(j);
    j = parse("-0", err, sizeof(err));
    assert_true(json_u64(j, &u) && u == 0);
    json_free(j);
    j = parse("\"\"", err, sizeof(err));
    assert_int_equal(j->len, 0);
    json_free(j);
}

static void test_strings(void **state)
{
    char err[256];
    struct json *j;

    (void)state;
    j = parse("\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\\u0041\\u00e9\\u20ac\\ud83d\\ude00é\"", err,
              sizeof(err));
    assert_non_null(j);
    assert_string_equal(j->s, "a\"b\\c/d\b\f\n\r\tA\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xc3\xa9");
    json_free(j);
    j = parse("\"x\\u0000y\"", err, sizeof(err)); /* a NUL inside: len says so */
    assert_non_null(j);
    assert_int_equal(j->len, 3);
    assert_memory_equal(j->s, "x\0y", 3);
    json_free(j);
    j = parse("\"\\uDBFF\\uDFFF\"", err, sizeof(err)); /* U+10FFFF, upper-case hex */
    assert_string_equal(j->s, "\xf4\x8f\xbf\xbf");
    json_free(j);
}

static void test_malformed(void **state)
{
    (void)state;
    refused("", "1:1: ", "expected a value, found the end");
    refused("   \n  ", "2:3: ", "the end of the input");
    refused("{", "1:2: ", "expected a member name");
    refused("{\"a\" 1}", "1:6: ", "expected ':'");
    refused("{\"a\": 1,}", "1:9: ", "trailing comma");
    refused("[1, 2,]", "1:7: ", "trailing comma");
    refused("[1 2]", "1:4: ", "expected ',' or ']'");
    refused("{\"a\": 1 \"b\": 2}", "1:9: ", "expected ',' or '}'");
    refused("[1,\n2,\n  x]", "3:3: ", "expected a value, found 'x'");
    refused("{1: 2}", "1:2: ", "member name");
    refused("[1] [2]", "1:5: ", "expected the end of the input");
    refused("tru", "1:1: ", "invalid literal");
    refused("nul", "1:1: ", "expected 'null'");
    refused("True", "1:1: ", "found 'T'");
    refused("01", "1:2: ", "leading zero");
    refused("-", "1:2: ", "needs a digit");
    refused("1.", "1:3: ", "digit after '.'");
    refused("1.e5", "1:3: ", "digit after '.'");
    refused("1e", "1:3: ", "exponent");
    refused("1e+", "1:4: ", "exponent");
    refused("+1", "1:1: ", "found '+'");
    refused(".5", "1:1: ", "found '.'");
    refused("NaN", "1:1: ", "found 'N'");
    refused("Infinity", "1:1: ", "found 'I'");
    refused("[1e400]", "1:2: ", "number out of range");
    refused("-1e999", "1:1: ", "out of range");
    refused("\"abc", "1:5: ", "unterminated string");
    refused("\"a\\", "1:4: ", "unterminated string");
    refused("\"a\tb\"", "1:3: ", "control character 0x09");
    refused("\"a\\x\"", "1:4: ", "invalid escape '\\x'");
    refused("\"\\u12\"", "1:6: ", "four hex digits");
    refused("\"\\u12g4\"", "1:6: ", "four hex digits");
    refused("\"\\udc00\"", "1:2: ", "lone low surrogate");
    refused("\"\\ud800\"", "1:2: ", "without its low half");
    refused("\"\\ud800x\"", "1:2: ", "without its low half");
    refused("\"\\ud800\\u0041\"", "1:8: ", "no low surrogate");
    refused("\"\xc3\"", "1:2: ", "invalid UTF-8");
    refused("\"\xc0\x80\"", "1:2: ", "invalid UTF-8");         /* overlong */
    refused("\"\xed\xa0\x80\"", "1:2: ", "invalid UTF-8");     /* a surrogate */
    refused("\"\xf4\x90\x80\x80\"", "1:2: ", "invalid UTF-8"); /* past U+10FFFF */
    refused("\xef\xbb\xbf{}", "1:1: ", "byte 0xef");           /* a BOM */
    refused("// c\n{}", "1:1: ", "found '/'");
    refused("{\"a\":1}\x01", "1:8: ", "byte 0x01");
    {
        char err[128];
        /* a NUL inside the given length is no end */
        assert_null(json_parse("[1]\0", 4, NULL, err, sizeof(err)));
        assert_string_equal(err,
                            "1:4: expected the end of the input after the value, found byte 0x00");
    }
}

static void test_limits(void **state)
{
    size_t n = 100000;
    char *s = malloc(2 * n + 2), err[128];
    struct json *j;
    struct json_limits lim = {.max_depth = 5, .max_nodes = 4, .max_bytes = 16};

    (void)state;
    /* a depth bomb is refused at the first level too deep, not by the stack */
    memset(s, '[', n);
    memset(s + n, ']', n);
    s[2 * n] = '\0';
    assert_null(parse(s, err, sizeof(err)));
    assert_string_equal(err, "1:65: nested deeper than 64");
    assert_null(
        json_parse("[[[[[[1]]]]]]", 13, &(struct json_limits){.max_depth = 5}, err, sizeof(err)));
    assert_string_equal(err, "1:6: nested deeper than 5");
    j = json_parse("[[[[[1]]]]]", 11, &(struct json_limits){.max_depth = 5}, err, sizeof(err));
    assert_non_null(j);
    json_free(j);
    assert_null(json_parse("[1, 2, 3, 4]", 12, &lim, err, sizeof(err)));
    assert_string_equal(err, "1:11: more than 4 values");
    assert_null(json_parse("[1, 2, 3,     4]", 17, &lim, err, sizeof(err)));
    assert_non_null(strstr(err, "more than the 16 allowed"));
    /* a long array of numbers: fine within the defaults */
    for (size_t i = 0; i < n; i++)
        s[2 * i] = i ? ',' : '[', s[2 * i + 1] = '7';
    s[2 * n] = ']';
    s[2 * n + 1] = '\0';
    j = parse(s, err, sizeof(err));
    assert_non_null(j);
    assert_int_equal(j->len, n);
    json_free(j);
    free(s);
}

static void test_numbers(void **state)
{
    char err[256], buf[64];
    struct json *j;
    uint64_t u;
    double d;

    (void)state;
    /* counts past 2^53 stay exact */
    j = parse(
        "[9007199254740993, 18446744073709551615, 18446744073709551616, 12345678901234567890]", err,
        sizeof(err));
    assert_non_null(j);
    assert_true(json_u64(&j->kid[0], &u));
    assert_true(u == 9007199254740993ull);
    assert_true(json_u64(&j->kid[1], &u));
    assert_true(u == UINT64_MAX);
    assert_false(json_u64(&j->kid[2], &u)); /* 2^64: a number, not a count */
    assert_true(json_num(&j->kid[2], &d) && d == 18446744073709551616.0);
    assert_true(json_u64(&j->kid[3], &u) && u == 12345678901234567890ull);
    json_free(j);
    /* many digits, tiny and huge magnitudes */
    j = parse("[1e308, 1e-400, -12.5E-1, 0.000001, 123456789012345678901234567890]", err,
              sizeof(err));
    assert_non_null(j);
    assert_true(j->kid[0].d == 1e308);
    assert_true(j->kid[1].d == 0.0);
    assert_true(j->kid[2].d == -1.25);
    assert_false(json_u64(&j->kid[2], &u));
    assert_true(j->kid[3].d == 0.000001);
    assert_false(json_u64(&j->kid[4], &u));
    assert_true(j->kid[4].d > 1.2e29);
    json_free(j);
    /* a double written with %.17g comes back the same */
    d = 40178006381.123456;
    snprintf(buf, sizeof(buf), "%.17g", d);
    j = parse(buf, err, sizeof(err));
    assert_true(j->d == d);
    json_free(j);
    /* a number longer than the parser's small buffer */
    memset(buf, '9', 60);
    strcpy(buf + 60, ".5");
    j = parse(buf, err, sizeof(err));
    assert_non_null(j);
    assert_true(j->d > 9e59);
    json_free(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid),     cmocka_unit_test(test_strings),
        cmocka_unit_test(test_malformed), cmocka_unit_test(test_limits),
        cmocka_unit_test(test_numbers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
