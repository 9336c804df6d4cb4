/* http: where one HTTP/1.1 response ends, fed bytes as they arrive in any split; and the checks
 * of a request file. Pure: no syscalls, no allocation on the response path. */
#ifndef LFE_HTTP_H
#define LFE_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HTTP_MAX_HEAD                                                                              \
    (64 * 1024) /* the heads of one response (1xx included), or its trailers,                      \
                 * or one chunk-size line: more is garbage */

enum http_result { HTTP_MORE, HTTP_DONE, HTTP_BAD };

/* One response being read: owned by its connection, touched by its thread only. 64 bytes and
 * no buffer: the head is parsed byte by byte as it comes, bodies are skipped by count. */
struct http_resp {
    /* results: status and close once the final head is in (HTTP_DONE, or the body begun) */
    uint64_t head_bytes; /* bytes of the heads, 1xx interim responses included */
    uint64_t body_bytes; /* bytes after the final head: body, chunk framing and trailers */
    uint16_t status;     /* the final status code (100-599); 1xx interim ones are skipped */
    bool close;          /* the server closes after it: Connection: close, HTTP/1.0 without
                          * keep-alive, or a close-delimited body */
    bool eof_body;       /* the body runs to the end of the connection (no length, not chunked):
                          * only http_eof() can end it */
    /* parser state, private to http.c */
    bool head_req; /* the request was HEAD: no body, whatever the head says */
    bool trailer;  /* the field lines read are a chunked body's trailers */
    bool have_cl, have_te, te_chunked, conn_close, conn_keep;
    uint8_t state, after_cr, field, elem, tok_mask, minor;
    uint16_t pos;    /* in the literal, the status digits, the field name or the token */
    uint32_t span;   /* bytes of the trailers or of the chunk-size line so far */
    uint64_t cl;     /* Content-Length (have_cl) */
    uint64_t num;    /* the number being read: a Content-Length element or a chunk size */
    uint64_t remain; /* body or chunk bytes still to come */
};

/* Starts reading a response; head_request: the request's method was HEAD. */
void http_start(struct http_resp *h, bool head_request);

/* Consumes up to n bytes; *used says how many (the rest belongs to the next response). Returns
 * HTTP_DONE when the response is complete (it then consumes nothing more), HTTP_BAD at the
 * first byte that cannot be part of a well-formed response (a bad status line, a header field
 * folded (obs-fold) or with a control byte or a space before its colon, a Content-Length that
 * does not parse, overflows or has two values, Content-Length with Transfer-Encoding, a bad
 * chunk size or chunk end, a 101 we did not ask for, over HTTP_MAX_HEAD of head), else
 * HTTP_MORE. Never reads outside buf[0, n). */
enum http_result http_feed(struct http_resp *h, const uint8_t *buf, size_t n, size_t *used);

/* The connection ended (EOF): HTTP_DONE if the response in progress is close-delimited and its
 * head is complete (that EOF is its end), else HTTP_BAD (cut short). */
enum http_result http_eof(struct http_resp *h);

/* What a request file asks for. */
struct http_req_info {
    size_t head_len; /* request line, fields and the empty line */
    size_t len;      /* the whole request: head_len and its Content-Length */
    bool head;       /* method HEAD: the response has no body */
    bool close;      /* Connection: close, or HTTP/1.0 without keep-alive: the server closes */
};

/* Checks that req[0, len) is one HTTP/1.x request with CRLF line ends: a request line (METHOD
 * TARGET HTTP/1.x), field lines, the empty line, and then exactly Content-Length bytes of body
 * (none without it; Transfer-Encoding bodies are taken as they are). Returns 0 with *info
 * filled, or -EINVAL with *why a phrase saying what is wrong (static text). */
int http_request_check(const uint8_t *req, size_t len, struct http_req_info *info,
                       const char **why);

/* The first request of req[0, len), which may hold several back to back (pipelined), checked
 * as http_request_check does: *info says how long it is (info->len). Its body must have a
 * Content-Length (a Transfer-Encoding body cannot be told from what follows). 0, or -EINVAL with
 * *why. */
int http_request_first(const uint8_t *req, size_t len, struct http_req_info *info,
                       const char **why);

/* Whether the NUL-terminated s is one header field line without its CRLF, "Name: value" (RFC
 * 9110: a name of token bytes, a colon, a value of visible bytes, spaces and tabs; blanks
 * around it allowed, and an empty one). Returns 0 with *name_len, or -EINVAL with *why a phrase
 * saying what is wrong (static text). */
int http_field_check(const char *s, size_t *name_len, const char **why);

/* The bare LFs of req's head (up to its first empty line) made CRLF, for request files written
 * with LF line ends; the body stays as it is. Returns the length of the result, written to out
 * unless out is NULL (call with NULL first to size out), or 0 if the head has no bare LF. */
size_t http_request_crlf(const uint8_t *req, size_t len, uint8_t *out);

#endif /* LFE_HTTP_H */
