/* Unit tests of the HTTP/1.1 response framer and the request file checks: every response shape
 * fed whole, a byte at a time and split at every point (each piece in its own heap block, so
 * ASan sees a read past it), pipelined responses, and hostile input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"

/* Feeds buf[from, to) as its own heap block; returns the result, adds what was used. */
static enum http_result feed_piece(struct http_resp *h, const char *buf, size_t from, size_t to,
                                   size_t *total)
{
    uint8_t *piece = malloc(to - from + 1); /* +1: malloc(0) may be NULL */
    size_t used = 0;
    enum http_result r;

    assert_non_null(piece);
    memcpy(piece, buf + from, to - from);
    r = http_feed(h, piece, to - from, &used);
    free(piece);
    assert_true(used <= to - from);
    if (r == HTTP_MORE)
        assert_int_equal(used, to - from); /* MORE takes all it was given */
    *total += used;
    return r;
}

/* Feeds s in the pieces cut at the points in cuts (ascending, ncuts of them); stops at the
 * first result that is not MORE. */
static enum http_result feed_cuts(struct http_resp *h, const char *s, size_t len,
                                  const size_t *cuts, size_t ncuts, size_t *used)
{
    enum http_result r = HTTP_MORE;
    size_t from = 0;

    *used = 0;
    for (size_t k = 0; k <= ncuts && r == HTTP_MORE; k++) {
        size_t to = k < ncuts ? cuts[k] : len;
        r = feed_piece(h, s, from, to, used);
        from = to;
    }
    return r;
}

struct want {
    enum http_result r;
    size_t used; /* bytes of the response (0: all of s) */
    int status;
    bool close, eof_body;
    bool head_req;
    bool eof; /* then http_eof() must say DONE */
};

static void check_result(struct http_resp *h, enum http_result r, size_t used, const char *s,
                         size_t len, const struct want *w, const char *how, size_t cut)
{
    if (r != w->r)
        fail_msg("%s %zu: result %d, want %d for:\n%s", how, cut, r, w->r, s);
    if (w->r == HTTP_BAD)
        return;
    if (w->r == HTTP_MORE && w->eof) {
        if (http_eof(h) != HTTP_DONE)
            fail_msg("%s %zu: EOF did not end the close-delimited response:\n%s", how, cut, s);
    }
    if (w->r == HTTP_DONE || w->eof) {
        assert_int_equal(h->status, w->status);
        assert_int_equal(h->close, w->close);
        assert_int_equal(h->eof_body, w->eof_body);
        assert_int_equal(h->head_bytes + h->body_bytes, used);
    }
    assert_int_equal(used, w->used ? w->used : len);
}

/* s whole, a byte at a time, and split in two at every point. */
static void check_splits(const char *s, size_t len, const struct want *w)
{
    struct http_resp h;
    static size_t cuts[1 << 17];
    size_t used;
    enum http_result r;

    assert_true(len < sizeof(cuts) / sizeof(cuts[0]));
    http_start(&h, w->head_req);
    r = feed_cuts(&h, s, len, NULL, 0, &used);
    check_result(&h, r, used, s, len, w, "whole", 0);
    for (size_t i = 0; i + 1 < len; i++)
        cuts[i] = i + 1;
    http_start(&h, w->head_req);
    r = feed_cuts(&h, s, len, cuts, len ? len - 1 : 0, &used);
    check_result(&h, r, used, s, len, w, "bytewise", 1);
    for (size_t cut = 0; cut <= len; cut++) {
        http_start(&h, w->head_req);
        r = feed_cuts(&h, s, len, &cut, 1, &used);
        check_result(&h, r, used, s, len, w, "split at", cut);
    }
}

#define CHECK(str, ...)                                                                            \
    do {                                                                                           \
        static const char s_[] = str;                                                              \
        check_splits(s_, sizeof(s_) - 1, &(struct want){__VA_ARGS__});                             \
    } while (0)

static void test_content_length(void **state)
{
    (void)state;
    CHECK("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", .r = HTTP_DONE, .status = 200);
    CHECK("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", .r = HTTP_DONE, .status = 200);
    /* names in any case, blanks around the value, the same length twice or as a list */
    CHECK("HTTP/1.1 201 Created\r\ncOnTeNt-LeNgTh:\t 3 \t\r\nContent-Length: 3\r\n\r\nabc",
          .r = HTTP_DONE, .status = 201);
    CHECK("HTTP/1.1 200 OK\r\nContent-Length: 3, 3\r\n\r\nabc", .r = HTTP_DONE, .status = 200);
    /* an empty reason phrase, with or without its space; bare LF line ends */
    CHECK("HTTP/1.1 200 \r\nContent-Length: 1\r\n\r\nx", .r = HTTP_DONE, .status = 200);
    CHECK("HTTP/1.1 200\r\nContent-Length: 1\r\n\r\nx", .r = HTTP_DONE, .status = 200);
    CHECK("HTTP/1.1 200 OK\nContent-Length: 2\n\nxy", .r = HTTP_DONE, .status = 200);
    /* names that start like the framing ones are other fields */
    CHECK("HTTP/1.1 200 OK\r\nContent-Length-X: 9\r\nContent-Lengt: 9\r\nContent-Length: 1\r\n"
          "Connectionx: close\r\nTransfer-Encodings: chunked\r\n\r\nx",
          .r = HTTP_DONE, .status = 200);
    /* not yet whole */
    CHECK("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhell", .r = HTTP_MORE);
    CHECK("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n", .r = HTTP_MORE);
}

static void test_status_is_reported_not_judged(void **state)
{
    (void)state;
    CHECK("HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found", .r = HTTP_DONE,
          .status = 404);
    CHECK("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n", .r = HTTP_DONE,
          .status = 503);
    CHECK("HTTP/1.1 302 Found\r\nLocation: /x\r\nContent-Length: 0\r\n\r\n", .r = HTTP_DONE,
          .status = 302);
}

static void test_chunked(void **state)
{
    (void)state;
    CHECK("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
          "5\r\nhello\r\n1a\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\n\r\n",
          .r = HTTP_DONE, .status = 200);
    /* extensions (quoted too), blanks before them, upper-case hex, leading zeros, trailers */
    CHECK("HTTP/1.1 200 OK\r\ntransfer-encoding: Chunked\r\n\r\n"
          "5;name=value;q=\"a;b\"\r\nhello\r\n00A \t;x\r\n0123456789\r\n000;last\r\n"
          "X-Checksum: abc\r\nExpires: never\r\n\r\n",
          .r = HTTP_DONE, .status = 200);
    /* a coding before chunked; an empty list element */
    CHECK("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked,\r\n\r\n1\r\nz\r\n0\r\n\r\n",
          .r = HTTP_DONE, .status = 200);
    /* over two fields, the last coding counts */
    CHECK("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n"
          "0\r\n\r\n",
          .r = HTTP_DONE, .status = 200);
    /* LF-only chunk framing */
    CHECK("HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n2\nab\n0\n\n", .r = HTTP_DONE,
          .status = 200);
    /* a trailer named like a framing field frames nothing */
    CHECK("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nContent-Length: 7\r\n"
          "Connection: close\r\n\r\n",
          .r = HTTP_DONE, .status = 200);
    /* the final CRLF not yet in */
    CHECK("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n", .r = HTTP_MORE);
    CHECK("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: y\r\n", .r = HTTP_MORE);
}

static void test_interim_1xx_skipped(void **state)
{
    (void)state;
    CHECK("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
          .r = HTTP_DONE, .status = 200);
    /* two interim responses, one with fields; the final one keeps the connection */
    CHECK("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n"
          "Connection: close\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
          .r = HTTP_DONE, .status = 204);
    /* a 1xx alone is not the response */
    CHECK("HTTP/1.1 100 Continue\r\n\r\n", .r = HTTP_MORE);
    /* 101 Switching Protocols: nothing lfbench asked for */
    CHECK("HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\n",
          .r = HTTP_BAD);
}

static void test_no_body(void **state)
{
    (void)state;
    /* HEAD: the fields describe the body a GET would have had */
    CHECK("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", .r = HTTP_DONE, .status = 200,
          .head_req = true);
    CHECK("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", .r = HTTP_DONE, .status = 200,
          .head_req = true);
    CHECK("HTTP/1.1 200 OK\r\n\r\n", .r = HTTP_DONE, .status = 200, .head_req = true);
    /* the same head to a GET: a body follows */
    CHECK("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", .r = HTTP_MORE);
    CHECK("HTTP/1.1 204 No Content\r\nContent-Length: 7\r\n\r\n", .r = HTTP_DONE, .status = 204);
    CHECK("HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\nContent-Length: 50\r\n\r\n", .r = HTTP_DONE,
          .status = 304);
    CHECK("HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n", .r = HTTP_DONE,
          .status = 304);
}

static void test_close_delimited(void **state)
{
    (void)state;
    CHECK("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nto the end", .r = HTTP_MORE,
          .eof = true, .status = 200, .close = true, .eof_body = true);
    CHECK("HTTP/1.0 200 OK\r\n\r\n", .r = HTTP_MORE, .eof = true, .status = 200, .close = true,
          .eof_body = true);
    /* chunked not the final coding: the body runs to the close (RFC 9112 §6.3) */
    CHECK("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\nxyz", .r = HTTP_MORE,
          .eof = true, .status = 200, .close = true, .eof_body = true);
}

/* An EOF ends only a close-delimited body whose head is whole. */
static void test_eof_elsewhere_is_bad(void **state)
{
    static const char *const cut[] = {
        "",
        "HTTP/1.1 200 OK\r\n",
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
        "HTTP/1.1 100 Continue\r\n\r\n",
    };
    struct http_resp h;
    size_t used;

    (void)state;
    for (size_t i = 0; i < sizeof(cut) / sizeof(cut[0]); i++) {
        http_start(&h, false);
        assert_int_equal(http_feed(&h, (const uint8_t *)cut[i], strlen(cut[i]), &used), HTTP_MORE);
        assert_int_equal(http_eof(&h), HTTP_BAD);
    }
    /* and after a whole response, EOF changes nothing */
    http_start(&h, false);
    assert_int_equal(http_feed(&h, (const uint8_t *)"HTTP/1.1 204 x\r\n\r\n", 18, &used),
                     HTTP_DONE);
    assert_int_equal(http_eof(&h), HTTP_DONE);
}

static void test_connection_close_and_versions(void **state)
{
    (void)state;
    CHECK("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx", .r = HTTP_DONE,
          .status = 200, .close = true);
    CHECK("HTTP/1.1 200 OK\r\nconnection: Upgrade, CLOSE\r\nContent-Length: 1\r\n\r\nx",
          .r = HTTP_DONE, .status = 200, .close = true);
    CHECK("HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\nx", .r = HTTP_DONE,
          .status = 200);
    CHECK("HTTP/1.1 200 OK\r\nConnection: closed\r\nContent-Length: 1\r\n\r\nx", .r = HTTP_DONE,
          .status = 200); /* "closed" is not "close" */
    CHECK("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx", .r = HTTP_DONE, .status = 200,
          .close = true);
    CHECK("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 1\r\n\r\nx", .r = HTTP_DONE,
          .status = 200);
    CHECK("HTTP/1.0 200 OK\r\nConnection: keep-alive, close\r\nContent-Length: 1\r\n\r\nx",
          .r = HTTP_DONE, .status = 200, .close = true);
}

/* Responses back to back in one buffer: each ends exactly where the next begins. */
static void test_pipelined(void **state)
{
    static const char resp[] =
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n"
        "3\r\nabc\r\n0\r\n\r\n"
        "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" /* to a HEAD */
        "HTTP/1.1 204 No Content\r\n\r\n"
        "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok";
    static const int status[] = {200, 404, 200, 204, 200};
    static const bool head[] = {false, false, true, false, false};
    size_t len = sizeof(resp) - 1;

    (void)state;
    /* every split of the whole stream into two reads */
    for (size_t cut = 0; cut <= len; cut++) {
        struct http_resp h;
        size_t pos = 0, k = 0, used;
        size_t ends[] = {cut, len};

        http_start(&h, head[0]);
        for (int part = 0; part < 2; part++) {
            while (pos < ends[part]) {
                enum http_result r =
                    http_feed(&h, (const uint8_t *)resp + pos, ends[part] - pos, &used);
                pos += used;
                assert_int_not_equal(r, HTTP_BAD);
                if (r == HTTP_MORE)
                    break;
                assert_int_equal(h.status, status[k]);
                assert_int_equal(h.close, k == 4);
                if (++k < 5)
                    http_start(&h, head[k]);
            }
        }
        assert_int_equal(k, 5);
        assert_int_equal(pos, len);
    }
}

static void test_hostile_rejected(void **state)
{
    (void)state;
    CHECK("hello world\r\n\r\n", .r = HTTP_BAD);
    CHECK("\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", .r = HTTP_BAD);
    CHECK("HTTP/2 200\r\n\r\n", .r = HTTP_BAD);
    CHECK("http/1.1 200 OK\r\n\r\n", .r = HTTP_BAD);
    CHECK("HTTP/1.1 20 OK\r\n\r\n", .r = HTTP_BAD);
    CHECK("HTTP/1.1 2000 OK\r\n\r\n", .r = HTTP_BAD);
    CHECK("HTTP/1.1 600 Nope\r\n\r\n", .r = HTTP_BAD);
    CHECK("HTTP/1.1 099 Nope\r\n\r\n", .r = HTTP_BAD);
    CHECK("HTTP/1.1  200 OK\r\n\r\n", .r = HTTP_BAD);
    CHECK("HTTP/1.1 200 O\x01K\r\n\r\n", .r = HTTP_BAD);
    /* a bare CR; a NUL or DEL in a value; a blank before the colon; no name; obs-fold */
    CHECK("HTTP/1.1 200 OK\rContent-Length: 0\r\n\r\n", .r = HTTP_BAD);
    CHECK("HTTP/1.1 200 OK\r\nX: a\0b\r\nContent-Length: 0\r\n\r\n", .r = HTTP_BAD);
    CHECK("HTTP/1.1 200 OK\r\nX: a\x7f\r\nContent-Length: 0\r\n\r\n", .r = HTTP_BAD);
    CHECK("HTTP/1.1 200 OK\r\nContent-Length : 0\r\n\r\n", .r = HTTP_BAD);
    CHECK("HTTP/1.1 200 OK\r\n: 0\r\n\r\n", .r = HTTP_BAD);
    CHECK("HTTP/1.1 200 OK\r\nX-A: 1\r\n  folded\r\nContent-Length: 0\r\n\r\n", .r = HTTP_BAD);
    CHECK("HTTP/1.1 200 OK\r\nX-A: 1\r\n\tfolded\r\nContent-Length: 0\r\n\r\n", .r = HTTP_BAD);
    CHECK("HTTP/1.1 200 OK\r\nNo colon here\r\n\r\n", .r = HTTP_BAD);
    /* Content-Length: negative, not decimal, empty, overflowing, two values, with chunked */
    CHECK("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", .r = HTTP_BAD);
    CHECK("HTTP/1.1 200 OK\r\nContent-Length: +1\r\n\r\nx", .r = HTTP_BAD);
    CHECK("HTTP/1.1 200 OK\r\nContent-Length: 0x10\r\n\r\n", .r = HTTP_BAD);
    CHECK("HTTP/1.1 200 OK\r\nContent-Length: 1 2\r\n\r\n", .r = HTTP_BAD);
    CHECK("HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n", .r = HTTP_BAD);
    CHECK("HTTP/1.1 200 OK\r\nContent-Length: 5,,5\r\n\r\n", .r = HTTP_BAD);
    CHECK("HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551616\r\n\r\n", .r = HTTP_BAD);
    CHECK("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n", .r = HTTP_BAD);
    CHECK("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", .r = HTTP_BAD);
    CHECK("HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\nhello!", .r = HTTP_BAD);
    CHECK("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
          "0\r\n\r\n",
          .r = HTTP_BAD);
    /* chunk sizes: none, not hex, negative, overflowing; data not followed by CRLF */
    CHECK("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\n", .r = HTTP_BAD);
    CHECK("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", .r = HTTP_BAD);
    CHECK("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\nhello\r\n", .r = HTTP_BAD);
    CHECK("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n;x\r\n", .r = HTTP_BAD);
    CHECK("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\n",
          .r = HTTP_BAD);
    CHECK("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloX\r\n0\r\n\r\n",
          .r = HTTP_BAD);
    CHECK("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5 x\r\nhello\r\n0\r\n\r\n",
          .r = HTTP_BAD);
    CHECK("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX\r\n\r\n", .r = HTTP_BAD);
    CHECK("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n  x\r\n\r\n", .r = HTTP_BAD);
}

/* The largest chunk size that fits is taken (and waited for), not refused. */
static void test_chunk_size_limits(void **state)
{
    (void)state;
    CHECK("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\nabc",
          .r = HTTP_MORE);
    CHECK("HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551615\r\n\r\nabc", .r = HTTP_MORE);
}

/* Heads over HTTP_MAX_HEAD, 1xx ones included, trailers and chunk lines likewise. */
static void test_size_bounds(void **state)
{
    static char big[HTTP_MAX_HEAD + 200];
    struct http_resp h;
    size_t used, n;
    const char *start = "HTTP/1.1 200 OK\r\nX: ", *end = "\r\nContent-Length: 0\r\n\r\n";

    (void)state;
    /* exactly HTTP_MAX_HEAD bytes of head: taken; one more: refused */
    for (int extra = 0; extra < 2; extra++) {
        n = HTTP_MAX_HEAD + (size_t)extra;
        memset(big, 'a', n);
        memcpy(big, start, strlen(start));
        memcpy(big + n - strlen(end), end, strlen(end));
        http_start(&h, false);
        assert_int_equal(http_feed(&h, (uint8_t *)big, n, &used), extra ? HTTP_BAD : HTTP_DONE);
        if (!extra)
            assert_int_equal(used, n);
    }
    /* a head that never ends is refused at the bound, in small reads too */
    memset(big, 'a', sizeof(big));
    memcpy(big, start, strlen(start));
    http_start(&h, false);
    n = 0;
    enum http_result r = HTTP_MORE;
    while (r == HTTP_MORE && n < sizeof(big)) {
        r = http_feed(&h, (uint8_t *)big + n, 100 < sizeof(big) - n ? 100 : sizeof(big) - n, &used);
        n += used;
    }
    assert_int_equal(r, HTTP_BAD);
    assert_true(n <= HTTP_MAX_HEAD);
    /* interim responses count toward it */
    http_start(&h, false);
    for (n = 0; n < HTTP_MAX_HEAD / 25 + 2; n++) {
        r = http_feed(&h, (const uint8_t *)"HTTP/1.1 100 Continue\r\n\r\n", 25, &used);
        if (r != HTTP_MORE)
            break;
    }
    assert_int_equal(r, HTTP_BAD);
    /* an endless chunk extension, an endless trailer */
    static const char *const heads[] = {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;",
                                        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                        "0\r\nX: "};
    for (int k = 0; k < 2; k++) {
        http_start(&h, false);
        assert_int_equal(http_feed(&h, (const uint8_t *)heads[k], strlen(heads[k]), &used),
                         HTTP_MORE);
        memset(big, 'e', sizeof(big));
        assert_int_equal(http_feed(&h, (uint8_t *)big, sizeof(big), &used), HTTP_BAD);
        assert_true(used <= HTTP_MAX_HEAD);
    }
}

/* Random bytes, and valid responses with a byte changed or cut anywhere: never a read out of
 * bounds (ASan), never more used than given, and a result that stays once reached. */
static void test_garbage_never_overruns(void **state)
{
    static const char good[] =
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 3\r\n"
        "Transfer-Encoding: chunked\r\nConnection: keep-alive, close\r\n\r\n"
        "5;a=b\r\nhello\r\n0\r\nT: v\r\n\r\n";
    static const char alphabet[] = "HTTP/1. 0123456789abcdefABCDEF:;,\r\n\t -chunkedclose";
    uint64_t x = 0x9e3779b97f4a7c15ull;
    size_t len = sizeof(good) - 1;

    (void)state;
    for (int round = 0; round < 20000; round++) {
        uint8_t *buf = malloc(len);
        struct http_resp h;
        size_t n = len, pos = 0, used;
        enum http_result r = HTTP_MORE;

        assert_non_null(buf);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if (round % 2) {
            for (size_t i = 0; i < len; i++) /* a random string of the parser's bytes */
                buf[i] = (uint8_t)alphabet[(x >> (i % 50)) % (sizeof(alphabet) - 1)] ^
                         (uint8_t)(i * 31 == x % 97 ? 0x80 : 0);
        } else {
            memcpy(buf, good, len);
            buf[x % len] = (uint8_t)(x >> 32);
            buf[(x >> 8) % len] = (uint8_t)alphabet[(x >> 40) % (sizeof(alphabet) - 1)];
            n = (x >> 20) % (len + 1);
        }
        http_start(&h, (x & 0x10000) != 0);
        while (pos < n && r == HTTP_MORE) {
            size_t step = 1 + (x >> (pos % 60)) % 16;
            if (step > n - pos)
                step = n - pos;
            uint8_t *piece = malloc(step);
            memcpy(piece, buf + pos, step);
            r = http_feed(&h, piece, step, &used);
            free(piece);
            assert_true(used <= step);
            pos += used;
        }
        if (r != HTTP_MORE) {
            assert_int_equal(http_feed(&h, buf, n, &used), r); /* it stays */
            assert_int_equal(used, 0);
        }
        free(buf);
    }
}

static void test_request_check(void **state)
{
    static const struct {
        const char *req;
        int rc;
        bool head, close;
    } cases[] = {
        {"GET / HTTP/1.1\r\nHost: x\r\n\r\n", 0, false, false},
        {"HEAD /a?b=c HTTP/1.1\r\nHost: x\r\n\r\n", 0, true, false},
        {"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 0, false, true},
        {"GET / HTTP/1.1\r\nHost: x\r\nconnection: Upgrade,Close\r\n\r\n", 0, false, true},
        {"GET / HTTP/1.0\r\n\r\n", 0, false, true},
        {"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", 0, false, false},
        {"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", 0, false, false},
        {"POST /p HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 0, false, false},
        {"GET / HTTP/1.1\r\nHost: x\r\n", -EINVAL, false, false},       /* no empty line */
        {"GET / HTTP/1.1\r\nHost: x\r\n\r\n\n", -EINVAL, false, false}, /* a byte after */
        {"GET /\r\n\r\n", -EINVAL, false, false},
        {"GET / HTTP/2\r\n\r\n", -EINVAL, false, false},
        {"GET  / HTTP/1.1\r\n\r\n", -EINVAL, false, false},
        {" GET / HTTP/1.1\r\n\r\n", -EINVAL, false, false},
        {"hello\r\n\r\n", -EINVAL, false, false},
        {"GET / HTTP/1.1\nHost: x\r\n\r\n", -EINVAL, false, false}, /* bare LF, unconverted */
        {"GET / HTTP/1.1\r\nHost : x\r\n\r\n", -EINVAL, false, false},
        {"GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", -EINVAL, false, false},
        {"POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nhell", -EINVAL, false, false},
        {"POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n", -EINVAL, false, false},
        {"POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\nx", -EINVAL,
         false, false},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct http_req_info info;
        const char *why = NULL;
        size_t len = strlen(cases[i].req);
        uint8_t *req = malloc(len); /* exact size: ASan sees a read past the end */
        int rc;

        memcpy(req, cases[i].req, len);
        rc = http_request_check(req, len, &info, &why);
        free(req);
        if (rc != cases[i].rc)
            fail_msg("case %zu: rc %d, want %d (%s)", i, rc, cases[i].rc, why ? why : "");
        if (rc == 0) {
            assert_int_equal(info.head, cases[i].head);
            assert_int_equal(info.close, cases[i].close);
        } else {
            assert_non_null(why);
            assert_null(strchr(why, '\n'));
        }
    }
}

static void test_request_crlf(void **state)
{
    static const char lf[] = "POST / HTTP/1.1\nHost: x\nContent-Length: 3\n\na\nb";
    static const char want[] = "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\na\nb";
    static const char crlf[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    static const char mixed[] = "GET / HTTP/1.1\r\nHost: x\n\r\n";
    uint8_t out[128];
    struct http_req_info info;
    const char *why;
    size_t n;

    (void)state;
    n = http_request_crlf((const uint8_t *)lf, strlen(lf), NULL);
    assert_int_equal(n, strlen(want));
    assert_int_equal(http_request_crlf((const uint8_t *)lf, strlen(lf), out), n);
    assert_memory_equal(out, want, n); /* the body's LF stays */
    assert_int_equal(http_request_check(out, n, &info, &why), 0);
    assert_int_equal(http_request_crlf((const uint8_t *)crlf, strlen(crlf), out), 0);
    n = http_request_crlf((const uint8_t *)mixed, strlen(mixed), out);
    assert_int_equal(n, strlen(crlf));
    assert_memory_equal(out, crlf, n);
    /* an editor's file without the empty line: converted, and still refused */
    n = http_request_crlf((const uint8_t *)"GET / HTTP/1.1\nHost: x\n", 23, out);
    assert_int_equal(n, 25);
    assert_int_equal(http_request_check(out, n, &info, &why), -EINVAL);
    assert_non_null(strstr(why, "empty line"));
}

/* --script: a string of pipelined requests is split one request at a time (http_request_first):
 * each request's length is its head and its Content-Length, a chunked body cannot be told from
 * the next request, and a body cut short is refused. */
static void test_request_first(void **state)
{
    static const char two[] = "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
                              "HEAD /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    static const char te[] = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
    static const char cut[] = "POST / HTTP/1.1\r\nContent-Length: 9\r\n\r\nabc";
    struct http_req_info info;
    const char *why = NULL;
    size_t first;

    (void)state;
    assert_int_equal(http_request_first((const uint8_t *)two, sizeof(two) - 1, &info, &why), 0);
    first = info.len;
    assert_int_equal(first, strlen("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"));
    assert_false(info.head);
    assert_false(info.close);
    assert_int_equal(
        http_request_first((const uint8_t *)two + first, sizeof(two) - 1 - first, &info, &why), 0);
    assert_int_equal(info.len, sizeof(two) - 1 - first);
    assert_true(info.head);
    assert_true(info.close);
    /* the whole string is not one request */
    assert_int_equal(http_request_check((const uint8_t *)two, sizeof(two) - 1, &info, &why),
                     -EINVAL);
    assert_int_equal(http_request_first((const uint8_t *)te, sizeof(te) - 1, &info, &why), -EINVAL);
    assert_non_null(strstr(why, "Content-Length"));
    assert_int_equal(http_request_first((const uint8_t *)cut, sizeof(cut) - 1, &info, &why),
                     -EINVAL);
    assert_non_null(strstr(why, "shorter"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_content_length),
        cmocka_unit_test(test_status_is_reported_not_judged),
        cmocka_unit_test(test_chunked),
        cmocka_unit_test(test_interim_1xx_skipped),
        cmocka_unit_test(test_no_body),
        cmocka_unit_test(test_close_delimited),
        cmocka_unit_test(test_eof_elsewhere_is_bad),
        cmocka_unit_test(test_connection_close_and_versions),
        cmocka_unit_test(test_pipelined),
        cmocka_unit_test(test_hostile_rejected),
        cmocka_unit_test(test_chunk_size_limits),
        cmocka_unit_test(test_size_bounds),
        cmocka_unit_test(test_garbage_never_overruns),
        cmocka_unit_test(test_request_check),
        cmocka_unit_test(test_request_crlf),
        cmocka_unit_test(test_request_first),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
