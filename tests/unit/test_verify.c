/* Unit tests of the response verifier, fed in every split: echo, line, len32, bytes N and
 * http (through client/http.c, whose own tests are test_http.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "payload.h"
#include "verify.h"

static struct payloads P;
static struct bopt O;

static int setup(void **state)
{
    char err[128];

    (void)state;
    memset(&O, 0, sizeof(O));
    O.size = 300;
    O.expect = EXPECT_ECHO;
    return payload_load(&P, &O, err, sizeof(err));
}

/* Feeds buf cut into pieces of `step` bytes; returns the status after the last piece and the
 * bytes consumed in all. */
static enum verify_status feed_split(struct verify *v, const uint8_t *buf, size_t n, size_t step,
                                     size_t *consumed)
{
    enum verify_status st = VERIFY_MORE;
    size_t used;

    *consumed = 0;
    for (size_t off = 0; off < n && st == VERIFY_MORE; off += step) {
        size_t len = n - off < step ? n - off : step;
        st = verify_feed(v, buf + off, len, &used);
        *consumed += used;
        if (st != VERIFY_MORE)
            break;
    }
    return st;
}

static void test_echo_any_split(void **state)
{
    uint8_t req[300];
    struct verify v;
    size_t used;

    (void)state;
    payload_bytes(&P, 0, 7, 42, 0, req, sizeof(req));
    assert_memory_equal(req, "000000000000002a", 16); /* the sequence number leads */
    for (size_t step = 1; step <= 300; step = step * 2 + 1) {
        verify_start(&v, EXPECT_ECHO, 0, &P, 0, 7, 42, sizeof(req));
        assert_int_equal(feed_split(&v, req, sizeof(req), step, &used), VERIFY_DONE);
        assert_int_equal(used, sizeof(req));
    }
    /* piecewise generation matches whole generation */
    uint8_t part[300];
    payload_bytes(&P, 0, 7, 42, 0, part, 100);
    payload_bytes(&P, 0, 7, 42, 100, part + 100, 200);
    assert_memory_equal(part, req, sizeof(req));
}

static void test_echo_detects_every_fault(void **state)
{
    uint8_t req[300], bad[300];
    struct verify v;
    size_t used;

    (void)state;
    payload_bytes(&P, 0, 7, 42, 0, req, sizeof(req));
    for (size_t pos = 0; pos < sizeof(req); pos += 37) { /* one flipped byte anywhere */
        memcpy(bad, req, sizeof(req));
        bad[pos] ^= 0x20;
        verify_start(&v, EXPECT_ECHO, 0, &P, 0, 7, 42, sizeof(req));
        assert_int_equal(feed_split(&v, bad, sizeof(bad), 64, &used), VERIFY_BAD);
    }
    /* a dropped byte shifts the rest */
    verify_start(&v, EXPECT_ECHO, 0, &P, 0, 7, 42, sizeof(req));
    memcpy(bad, req, 150);
    memcpy(bad + 150, req + 151, 149);
    assert_int_equal(feed_split(&v, bad, 299, 300, &used), VERIFY_BAD);
    /* another request's bytes (stale or foreign) do not pass */
    payload_bytes(&P, 0, 7, 41, 0, bad, sizeof(bad));
    verify_start(&v, EXPECT_ECHO, 0, &P, 0, 7, 42, sizeof(req));
    assert_int_equal(feed_split(&v, bad, sizeof(bad), 300, &used), VERIFY_BAD);
    payload_bytes(&P, 0, 8, 42, 0, bad, sizeof(bad));
    verify_start(&v, EXPECT_ECHO, 0, &P, 0, 7, 42, sizeof(req));
    assert_int_equal(feed_split(&v, bad, sizeof(bad), 300, &used), VERIFY_BAD);
}

static void test_echo_stops_at_boundary(void **state)
{
    uint8_t two[600];
    struct verify v;
    size_t used;

    (void)state;
    payload_bytes(&P, 0, 1, 0, 0, two, 300);
    payload_bytes(&P, 0, 1, 1, 0, two + 300, 300);
    verify_start(&v, EXPECT_ECHO, 0, &P, 0, 1, 0, 300);
    assert_int_equal(verify_feed(&v, two, sizeof(two), &used), VERIFY_DONE);
    assert_int_equal(used, 300); /* the rest is the next response's */
    verify_start(&v, EXPECT_ECHO, 0, &P, 0, 1, 1, 300);
    assert_int_equal(verify_feed(&v, two + used, sizeof(two) - used, &used), VERIFY_DONE);
}

static void test_line(void **state)
{
    const uint8_t in[] = "VALUE 12\nNEXT\n";
    struct verify v;
    size_t used;

    (void)state;
    verify_start(&v, EXPECT_LINE, 0, &P, 0, 0, 0, 0);
    assert_int_equal(verify_feed(&v, in, 3, &used), VERIFY_MORE);
    assert_int_equal(used, 3);
    assert_int_equal(verify_feed(&v, in + 3, sizeof(in) - 4, &used), VERIFY_DONE);
    assert_int_equal(used, 6); /* "UE 12\n" */
    verify_start(&v, EXPECT_LINE, 0, &P, 0, 0, 0, 0);
    assert_int_equal(verify_feed(&v, in + 9, 5, &used), VERIFY_DONE);
}

static void test_len32(void **state)
{
    const uint8_t in[] = {0, 0, 0, 3, 'a', 'b', 'c', 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff};
    struct verify v;
    size_t used, total = 0;

    (void)state;
    for (size_t step = 1; step <= 7; step++) {
        verify_start(&v, EXPECT_LEN32, 0, &P, 0, 0, 0, 0);
        assert_int_equal(feed_split(&v, in, 7, step, &total), VERIFY_DONE);
        assert_int_equal(total, 7);
    }
    verify_start(&v, EXPECT_LEN32, 0, &P, 0, 0, 0, 0); /* an empty frame */
    assert_int_equal(verify_feed(&v, in + 7, 4, &used), VERIFY_DONE);
    verify_start(&v, EXPECT_LEN32, 0, &P, 0, 0, 0, 0); /* 4 GiB: garbage */
    assert_int_equal(verify_feed(&v, in + 11, 4, &used), VERIFY_BAD);
}

static void test_bytes(void **state)
{
    const uint8_t in[10] = {0};
    struct verify v;
    size_t used;

    (void)state;
    verify_start(&v, EXPECT_BYTES, 6, &P, 0, 0, 0, 999);
    assert_int_equal(verify_feed(&v, in, 4, &used), VERIFY_MORE);
    assert_int_equal(verify_feed(&v, in, 10, &used), VERIFY_DONE);
    assert_int_equal(used, 2);
}

static void test_line_payloads_end_in_newline(void **state)
{
    struct payloads lp;
    struct bopt lo = {.size = 50, .expect = EXPECT_LINE};
    char err[128];
    uint8_t req[50];

    (void)state;
    assert_int_equal(payload_load(&lp, &lo, err, sizeof(err)), 0);
    payload_bytes(&lp, 0, 3, 9, 0, req, sizeof(req));
    assert_int_equal(req[49], '\n');
    assert_null(memchr(req, '\n', 49));
    payload_free(&lp);
}

/* payload_equal is payload_bytes compared in place: they agree on every window of a generated
 * request (hex digits, the pattern, its wrap at 65521 bytes), of a line request (the final
 * '\n') and of a file, and any one changed byte is caught. */
static void check_equal(const struct payloads *p, size_t len)
{
    static uint8_t req[70000];
    uint64_t seq = 0x0123456789abcdefull;

    payload_bytes(p, 0, 5, seq, 0, req, len);
    for (size_t off = 0; off < len; off += off < 40 ? 1 : 997) {
        for (size_t n = 1; off + n <= len; n += n < 40 ? 1 : 4099) {
            assert_true(payload_equal(p, 0, 5, seq, off, req + off, n));
            req[off + n - 1] ^= 1;
            assert_false(payload_equal(p, 0, 5, seq, off, req + off, n));
            req[off + n - 1] ^= 1;
        }
    }
    assert_false(payload_equal(p, 0, 5, seq + 1, 0, req, len));        /* another request */
    assert_false(payload_equal(p, 0, 6, seq, 16, req + 16, len - 16)); /* another stream */
}

static void test_payload_equal(void **state)
{
    struct payloads gp, lp;
    struct bopt go = {.size = 70000, .expect = EXPECT_ECHO},
                lo = {.size = 300, .expect = EXPECT_LINE};
    char err[128];

    (void)state;
    assert_int_equal(payload_load(&gp, &go, err, sizeof(err)), 0);
    check_equal(&gp, 70000);
    payload_free(&gp);
    assert_int_equal(payload_load(&lp, &lo, err, sizeof(err)), 0);
    check_equal(&lp, 300);
    payload_free(&lp);
}

/* Regression (tests/fuzz/crashes/payload_len0.c): 0 bytes asked for at the end of a line
 * request wrote '\n' before the buffer (payload_bytes) and read the byte before it
 * (payload_equal). Nothing is touched now, and 0 bytes are always equal. */
static void test_payload_zero_bytes_at_the_end(void **state)
{
    struct payloads lp;
    struct bopt lo = {.size = 32, .expect = EXPECT_LINE};
    char err[128];
    uint8_t area[2] = {'X', 'Y'};

    (void)state;
    assert_int_equal(payload_load(&lp, &lo, err, sizeof(err)), 0);
    assert_true(payload_equal(&lp, 0, 1, 1, 32, area + 1, 0));
    payload_bytes(&lp, 0, 1, 1, 32, area + 1, 0);
    assert_int_equal(area[0], 'X');
    assert_int_equal(area[1], 'Y');
    payload_free(&lp);
}

/* Regression (tests/fuzz/crashes/payload_offset_wrap.c): the pattern position off + seq +
 * stream * 7 was taken modulo 65521 after the 64-bit sum wrapped, so a range starting past the
 * wrap was not the same bytes as that range of the whole request. */
static void test_payload_offset_wrap(void **state)
{
    static uint8_t whole[200], part[50];
    uint64_t seqs[] = {UINT64_MAX - 60, UINT64_MAX, 5}, streams[] = {0, UINT64_MAX, UINT64_MAX / 7};

    (void)state;
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 3; k++) {
            payload_bytes(&P, 0, streams[k], seqs[i], 0, whole, sizeof(whole));
            payload_bytes(&P, 0, streams[k], seqs[i], 100, part, sizeof(part));
            assert_memory_equal(part, whole + 100, sizeof(part));
            assert_true(payload_equal(&P, 0, streams[k], seqs[i], 100, whole + 100, 50));
        }
}

/* A temporary file holding text; its path in path (size 32). */
static void temp_file(char *path, const char *text)
{
    int fd;

    strcpy(path, "/tmp/lfe-verify-XXXXXX");
    fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

/* --expect http: the default request names the target; request files give HEAD and close. */
static void test_http_requests(void **state)
{
    struct payloads hp;
    struct bopt ho = {.expect = EXPECT_HTTP, .target = "[::1]:8080"};
    char err[256], get[32], head[32], lf[32], bad[32];

    (void)state;
    assert_int_equal(payload_load(&hp, &ho, err, sizeof(err)), 0);
    assert_int_equal(hp.n, 1);
    assert_int_equal(hp.cls[0].len, strlen("GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n"));
    assert_memory_equal(hp.cls[0].data, "GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n",
                        hp.cls[0].len);
    assert_false(hp.cls[0].head);
    assert_false(hp.cls[0].close);
    payload_free(&hp);

    temp_file(get, "GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    temp_file(head, "HEAD / HTTP/1.1\r\nHost: x\r\n\r\n");
    temp_file(lf, "GET / HTTP/1.1\nHost: x\n\n");
    ho.nclasses = 3;
    ho.cls[0] = (struct bclass){get, 1};
    ho.cls[1] = (struct bclass){head, 1};
    ho.cls[2] = (struct bclass){lf, 1};
    assert_int_equal(payload_load(&hp, &ho, err, sizeof(err)), 0);
    assert_true(hp.cls[0].close);
    assert_false(hp.cls[0].head);
    assert_true(hp.cls[1].head);
    assert_int_equal(hp.cls[2].len, 27); /* LF made CRLF */
    assert_memory_equal(hp.cls[2].data, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 27);
    payload_free(&hp);

    temp_file(bad, "GET / HTTP/1.1\r\nHost: x\r\n");
    ho.nclasses = 1;
    ho.cls[0] = (struct bclass){bad, 1};
    assert_int_equal(payload_load(&hp, &ho, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, bad));
    assert_non_null(strstr(err, "empty line"));
    assert_null(strchr(err, '\n'));
    unlink(get);
    unlink(head);
    unlink(lf);
    unlink(bad);
}

/* verify reports the status and whether the server closes; a close-delimited body ends at EOF
 * (verify_eof), any other response cut by EOF is bad. */
static void test_http_verify(void **state)
{
    static const char resp[] = "HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\n\r\nabc"
                               "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
    struct payloads hp, gp; /* a HEAD request; the default GET */
    struct bopt ho = {.expect = EXPECT_HTTP, .target = "127.0.0.1:80"}, go = ho;
    char err[256], head[32];
    struct verify v;
    size_t used, first = sizeof(resp) - 1 - strlen(strstr(resp + 4, "HTTP/1.1 200"));

    (void)state;
    temp_file(head, "HEAD / HTTP/1.1\r\nHost: x\r\n\r\n");
    ho.nclasses = 1;
    ho.cls[0] = (struct bclass){head, 1};
    assert_int_equal(payload_load(&hp, &ho, err, sizeof(err)), 0);
    unlink(head);
    assert_int_equal(payload_load(&gp, &go, err, sizeof(err)), 0);

    for (size_t step = 1; step <= sizeof(resp); step++) {
        verify_start(&v, EXPECT_HTTP, 0, &gp, 0, 0, 0, gp.cls[0].len);
        assert_int_equal(feed_split(&v, (const uint8_t *)resp, sizeof(resp) - 1, step, &used),
                         VERIFY_DONE);
        assert_int_equal(used, first);
        assert_int_equal(v.got, first);
        assert_int_equal(v.status, 404);
        assert_false(v.close_after);
        verify_start(&v, EXPECT_HTTP, 0, &gp, 0, 0, 1, gp.cls[0].len);
        assert_int_equal(
            verify_feed(&v, (const uint8_t *)resp + first, sizeof(resp) - 1 - first, &used),
            VERIFY_DONE);
        assert_int_equal(v.status, 200);
        assert_true(v.close_after);
    }
    /* to the HEAD request, the 404's head alone is the response */
    verify_start(&v, EXPECT_HTTP, 0, &hp, 0, 0, 0, hp.cls[0].len);
    assert_int_equal(verify_feed(&v, (const uint8_t *)resp, sizeof(resp) - 1, &used), VERIFY_DONE);
    assert_int_equal(used, first - 3);
    /* close-delimited: EOF ends it and says the connection closes */
    verify_start(&v, EXPECT_HTTP, 0, &gp, 0, 0, 0, gp.cls[0].len);
    assert_int_equal(verify_feed(&v, (const uint8_t *)"HTTP/1.1 500 x\r\n\r\nbody", 22, &used),
                     VERIFY_MORE);
    assert_int_equal(verify_eof(&v), VERIFY_DONE);
    assert_int_equal(v.status, 500);
    assert_true(v.close_after);
    /* cut short by EOF */
    verify_start(&v, EXPECT_HTTP, 0, &gp, 0, 0, 0, gp.cls[0].len);
    assert_int_equal(verify_feed(&v, (const uint8_t *)resp, 30, &used), VERIFY_MORE);
    assert_int_equal(verify_eof(&v), VERIFY_BAD);
    /* malformed */
    verify_start(&v, EXPECT_HTTP, 0, &gp, 0, 0, 0, gp.cls[0].len);
    assert_int_equal(verify_feed(&v, (const uint8_t *)"HTTP/1.1 200 OK\r\n x\r\n\r\n", 22, &used),
                     VERIFY_BAD);
    /* other kinds never end at EOF */
    verify_start(&v, EXPECT_LINE, 0, &P, 0, 0, 0, 0);
    assert_int_equal(verify_eof(&v), VERIFY_BAD);
    payload_free(&hp);
    payload_free(&gp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_payload_zero_bytes_at_the_end),
        cmocka_unit_test(test_payload_offset_wrap),
        cmocka_unit_test(test_echo_any_split),
        cmocka_unit_test(test_echo_detects_every_fault),
        cmocka_unit_test(test_echo_stops_at_boundary),
        cmocka_unit_test(test_line),
        cmocka_unit_test(test_len32),
        cmocka_unit_test(test_bytes),
        cmocka_unit_test(test_line_payloads_end_in_newline),
        cmocka_unit_test(test_payload_equal),
        cmocka_unit_test(test_http_requests),
        cmocka_unit_test(test_http_verify),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
