/* payload: request bytes, generated (carrying a sequence number) or from files, and the byte
 * pattern an echo must return. */
#ifndef LFE_PAYLOAD_H
#define LFE_PAYLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bopt.h"

struct pclass {
    const char *name; /* file name as given (bopt's, which outlives the payloads), or
                       * "generated"; any bytes, whole: whoever prints it escapes it */
    uint8_t *data;    /* file contents; NULL for generated */
    size_t len;       /* request length */
    unsigned weight;  /* mix weight */
    bool head;        /* --expect http: the request is HEAD (its response has no body) */
    bool close;       /* --expect http: the request asks the server to close after answering */
};

/* Read-only once loaded; shared by all threads. */
struct payloads {
    struct pclass cls[BOPT_MAX_CLASSES];
    int n;                 /* at least 1 */
    unsigned total_weight; /* sum of weights */
    bool line;             /* generated requests end in '\n' and hold no other */
};

/* Loads the files named in o (or sets up one generated class of o->size bytes; with --expect
 * http, the request "GET <the URL's path, or /> HTTP/1.1\r\nHost: <the URL's host[:port] as
 * written, or the target as given>\r\n", the -H lines, "\r\n"). An HTTP request
 * file must be one request (http_request_check); one whose head has bare LF line ends (an
 * editor's) is sent with CRLF. Returns 0, or -errno with one line in err (a missing or empty
 * file, a line request without '\n', a file that is not an HTTP request). */
int payload_load(struct payloads *p, const struct bopt *o, char *err, size_t errlen);
void payload_free(struct payloads *p);

/* A class drawn by weight; rng is the caller's xorshift state. */
int payload_pick(const struct payloads *p, uint64_t *rng);

/* Writes bytes [off, off+len) of request seq of class cls on stream (a connection id) to out.
 * Generated requests start with the sequence number as 16 hex digits and continue with a
 * printable pattern that depends on stream and seq, so a stale, shifted or foreign byte never
 * matches. */
void payload_bytes(const struct payloads *p, int cls, uint64_t stream, uint64_t seq, size_t off,
                   uint8_t *out, size_t len);

/* Whether buf[0, len) equals bytes [off, off+len) of that request: payload_bytes compared in
 * place, without building a copy (the echo check runs once per response byte). */
bool payload_equal(const struct payloads *p, int cls, uint64_t stream, uint64_t seq, size_t off,
                   const uint8_t *buf, size_t len);

#endif /* LFE_PAYLOAD_H */
