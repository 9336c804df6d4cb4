/* verify: where one response ends, and whether it is right, fed bytes as they arrive. */
#ifndef LFE_VERIFY_H
#define LFE_VERIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bopt.h"
#include "http.h"
#include "payload.h"

/* The response being read on one connection. */
struct verify {
    enum expect kind;
    uint64_t need;  /* bytes the response has (echo, bytes N; len32 once the header is in) */
    uint64_t got;   /* bytes of it seen so far */
    uint8_t hdr[4]; /* len32 header */
    /* echo: the request this response must equal */
    const struct payloads *p;
    int cls;
    uint64_t stream, seq;
    const uint8_t *req; /* --script: the request's bytes, which an echo must equal (NULL: the
                         * payload class makes them) */
    bool close_req;     /* HTTP: the request asked the server to close */
    /* http: the framer, and on VERIFY_DONE what the response said */
    struct http_resp http;
    int status;       /* its status code (the final one: 1xx interim responses are skipped) */
    bool close_after; /* the server closes the connection after it (Connection: close, HTTP/1.0,
                       * a close-delimited body, or a request that asked for the close): the
                       * requests pipelined behind it are never answered */
};

#define VERIFY_MAX_FRAME (1u << 30) /* a len32 frame larger than this is garbage */

/* Starts a response to request (cls, stream, seq) of req_len bytes. */
void verify_start(struct verify *v, enum expect kind, size_t expect_bytes, const struct payloads *p,
                  int cls, uint64_t stream, uint64_t seq, size_t req_len);

/* --script: the request just started is these bytes (its caller's, alive until the response is
 * done), not a payload class's; head and close: what an HTTP request asks. */
void verify_bytes(struct verify *v, const uint8_t *req, bool head, bool close);

enum verify_status { VERIFY_MORE, VERIFY_DONE, VERIFY_BAD };

/* Consumes up to n bytes of the response; *used says how many (the rest belongs to the next
 * response). Returns VERIFY_DONE when the response is complete and right, VERIFY_BAD on the
 * first byte that differs (echo), an impossible len32 header or a malformed HTTP response (a
 * non-2xx status is not bad: see v->status), else VERIFY_MORE. */
enum verify_status verify_feed(struct verify *v, const uint8_t *buf, size_t n, size_t *used);

/* The connection ended (EOF) with this response in progress: VERIFY_DONE if that ends it (an
 * HTTP response whose body is close-delimited, its head complete; status and close_after are
 * then set), else VERIFY_BAD (cut short). */
enum verify_status verify_eof(struct verify *v);

#endif /* LFE_VERIFY_H */
