/* verify: where one response ends, and whether it is right, fed bytes as they arrive. */
#include "verify.h"

#include <string.h>

void verify_start(struct verify *v, enum expect kind, size_t expect_bytes, const struct payloads *p,
                  int cls, uint64_t stream, uint64_t seq, size_t req_len)
{
    v->kind = kind;
    v->got = 0;
    v->p = p;
    v->cls = cls;
    v->stream = stream;
    v->seq = seq;
    v->need = kind == EXPECT_ECHO ? req_len : kind == EXPECT_BYTES ? expect_bytes : 0;
    v->status = 0;
    v->close_after = false;
    v->req = NULL;
    v->close_req = kind == EXPECT_HTTP && p->cls[cls].close;
    if (kind == EXPECT_HTTP)
        http_start(&v->http, p->cls[cls].head);
}

void verify_bytes(struct verify *v, const uint8_t *req, bool head, bool close)
{
    v->req = req;
    v->close_req = close;
    if (v->kind == EXPECT_HTTP)
        http_start(&v->http, head);
}

/* The HTTP response is whole: what it said. */
static enum verify_status http_done(struct verify *v)
{
    v->status = v->http.status;
    v->close_after = v->http.close || v->close_req;
    return VERIFY_DONE;
}

enum verify_status verify_feed(struct verify *v, const uint8_t *buf, size_t n, size_t *used)
{
    *used = 0;
    switch (v->kind) {
    case EXPECT_LINE: {
        const uint8_t *nl = memchr(buf, '\n', n);
        *used = nl ? (size_t)(nl - buf) + 1 : n;
        v->got += *used;
        return nl ? VERIFY_DONE : VERIFY_MORE;
    }
    case EXPECT_LEN32:
        while (v->got < 4 && *used < n)
            v->hdr[v->got++] = buf[(*used)++];
        if (v->got < 4)
            return VERIFY_MORE;
        if (v->got == 4 && v->need == 0) {
            uint32_t len = (uint32_t)v->hdr[0] << 24 | (uint32_t)v->hdr[1] << 16 |
                           (uint32_t)v->hdr[2] << 8 | v->hdr[3];
            if (len > VERIFY_MAX_FRAME)
                return VERIFY_BAD;
            v->need = 4 + (uint64_t)len;
        }
        break;
    case EXPECT_ECHO:
    case EXPECT_BYTES:
        break;
    case EXPECT_HTTP: {
        enum http_result r = http_feed(&v->http, buf, n, used);
        v->got += *used;
        return r == HTTP_DONE ? http_done(v) : r == HTTP_BAD ? VERIFY_BAD : VERIFY_MORE;
    }
    }
    /* echo, bytes N, the body of len32: take what belongs to this response */
    while (*used < n && v->got < v->need) {
        size_t take = n - *used;
        if (take > v->need - v->got)
            take = (size_t)(v->need - v->got);
        if (v->kind == EXPECT_ECHO && (v->req ? memcmp(v->req + v->got, buf + *used, take) != 0
                                              : !payload_equal(v->p, v->cls, v->stream, v->seq,
                                                               (size_t)v->got, buf + *used, take)))
            return VERIFY_BAD;
        *used += take;
        v->got += take;
    }
    return v->got == v->need && (v->kind != EXPECT_LEN32 || v->got >= 4) ? VERIFY_DONE
                                                                         : VERIFY_MORE;
}

enum verify_status verify_eof(struct verify *v)
{
    if (v->kind == EXPECT_HTTP && http_eof(&v->http) == HTTP_DONE)
        return http_done(v);
    return VERIFY_BAD;
}
