/* payload: request bytes, generated (carrying a sequence number) or from files, and the byte
 * pattern an echo must return. */
#include "payload.h"

#include "file.h"
#include "http.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define PAYLOAD_MAX (1UL << 30) /* a request: 1 byte to 1 GiB */
#define PATN 65521              /* prime period: a shifted stream never lines up again */

static uint8_t pat[PATN];

/* Where byte off of request (stream, seq) reads the pattern. Each term is reduced first: the sum
 * of the raw values could pass 2^64 inside a request, and a range starting past that wrap would
 * read other bytes than the whole request has there. PATN is a constant: these are multiplies. */
static size_t pattern_pos(uint64_t stream, uint64_t seq, size_t off)
{
    return (size_t)((off % PATN + seq % PATN + stream % PATN * 7) % PATN);
}

static void pattern_init(void)
{
    uint64_t s = 0x2545f4914f6cdd1dull;

    for (int i = 0; i < PATN; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        pat[i] = (uint8_t)(33 + (s >> 32) % 94); /* printable, never '\n' */
    }
}

/* --expect http: c must be one HTTP request; a head with LF line ends gets CRLF. Returns 0, or
 * -EINVAL (-ENOMEM) with one line in err. */
static int http_class(struct pclass *c, char *err, size_t errlen)
{
    struct http_req_info info;
    size_t n = http_request_crlf(c->data, c->len, NULL);
    const char *why;

    if (n) {
        uint8_t *crlf = malloc(n);
        if (!crlf) {
            snprintf(err, errlen, "out of memory");
            return -ENOMEM;
        }
        http_request_crlf(c->data, c->len, crlf);
        free(c->data);
        c->data = crlf;
        c->len = n;
    }
    if (http_request_check(c->data, c->len, &info, &why) < 0) {
        snprintf(err, errlen, "--expect http: request file '%s' is not one HTTP/1.x request: %s",
                 c->name, why);
        return -EINVAL;
    }
    c->head = info.head;
    c->close = info.close;
    return 0;
}

/* Whether -H gave a field named name. */
static bool has_header(const struct bopt *o, const char *name)
{
    size_t n = strlen(name);

    for (int k = 0; k < o->nheaders; k++)
        if (!strncasecmp(o->headers[k], name, n) && o->headers[k][n] == ':')
            return true;
    return false;
}

/* --expect http without a request file: GET of the URL's path (or /), Host the URL's host and
 * port as written (or the target), then the -H headers (a Host among them replaces the
 * default one, as in wrk). Checked as a request file is, which also reads a Connection: close
 * of -H into the class. */
static int http_default(struct payloads *p, const struct bopt *o, char *err, size_t errlen)
{
    struct pclass *c = &p->cls[0];
    const char *path = o->path ? o->path : "/", *host = o->url ? o->authority : o->target;
    bool own_host = has_header(o, "host");
    size_t len = strlen(path) + strlen(host) + 32, at;
    const char *why;
    struct http_req_info info;

    for (int k = 0; k < o->nheaders; k++)
        len += strlen(o->headers[k]) + 2;
    c->name = o->get_name ? o->get_name : "GET /";
    if (!(c->data = malloc(len))) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    at = (size_t)snprintf((char *)c->data, len, "GET %s HTTP/1.1\r\n", path);
    if (!own_host)
        at += (size_t)snprintf((char *)c->data + at, len - at, "Host: %s\r\n", host);
    for (int k = 0; k < o->nheaders; k++)
        at += (size_t)snprintf((char *)c->data + at, len - at, "%s\r\n", o->headers[k]);
    at += (size_t)snprintf((char *)c->data + at, len - at, "\r\n");
    c->len = at;
    c->weight = 1;
    p->n = 1;
    p->total_weight = 1;
    if (http_request_check(c->data, c->len, &info, &why) < 0) { /* bopt checked each part */
        snprintf(err, errlen,
                 "--expect http: the request made of the target and -H is not one "
                 "HTTP/1.x request: %s",
                 why);
        payload_free(p);
        return -EINVAL;
    }
    c->head = info.head;
    c->close = info.close;
    return 0;
}

int payload_load(struct payloads *p, const struct bopt *o, char *err, size_t errlen)
{
    memset(p, 0, sizeof(*p));
    pattern_init();
    p->line = o->expect == EXPECT_LINE;
    if (o->nclasses == 0 && o->expect == EXPECT_HTTP)
        return http_default(p, o, err, errlen);
    if (o->nclasses == 0) {
        p->cls[0].name = "generated";
        p->cls[0].len = o->size;
        p->cls[0].weight = 1;
        p->n = 1;
        p->total_weight = 1;
        return 0;
    }
    for (int i = 0; i < o->nclasses; i++) {
        struct pclass *c = &p->cls[i];
        int rc;

        c->name = o->cls[i].file;
        c->weight = o->cls[i].weight;
        c->data = (uint8_t *)file_read(o->cls[i].file, PAYLOAD_MAX, &c->len, NULL, 0);
        if (!c->data && errno != EFBIG) {
            int e = errno;
            snprintf(err, errlen, "cannot read payload file '%s': %s", o->cls[i].file, strerror(e));
            payload_free(p);
            return -e;
        }
        if (!c->data || c->len == 0) {
            snprintf(err, errlen, "payload file '%s' is %s; give 1 byte to 1 GiB", o->cls[i].file,
                     c->data ? "empty" : "over 1 GiB");
            payload_free(p);
            return -EINVAL;
        }
        p->n++;
        p->total_weight += c->weight;
        if (p->line && c->data[c->len - 1] != '\n') {
            snprintf(err, errlen,
                     "--expect line: payload file '%s' does not end in a newline; a line server "
                     "would wait for the rest",
                     o->cls[i].file);
            payload_free(p);
            return -EINVAL;
        }
        if (o->expect == EXPECT_HTTP && (rc = http_class(c, err, errlen)) < 0) {
            payload_free(p);
            return rc;
        }
    }
    return 0;
}

void payload_free(struct payloads *p)
{
    for (int i = 0; i < BOPT_MAX_CLASSES; i++) {
        free(p->cls[i].data);
        p->cls[i].data = NULL;
    }
}

int payload_pick(const struct payloads *p, uint64_t *rng)
{
    uint64_t x = *rng;
    unsigned r;

    if (p->n == 1)
        return 0;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *rng = x;
    r = (unsigned)((x >> 11) % p->total_weight);
    for (int i = 0; i < p->n; i++) {
        if (r < p->cls[i].weight)
            return i;
        r -= p->cls[i].weight;
    }
    return p->n - 1;
}

void payload_bytes(const struct payloads *p, int cls, uint64_t stream, uint64_t seq, size_t off,
                   uint8_t *out, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    const struct pclass *c = &p->cls[cls];
    size_t end = off + len, pos;

    if (len == 0)
        return; /* the line's '\n' below would go before out */
    if (c->data) {
        memcpy(out, c->data + off, len);
        return;
    }
    /* 16 hex digits of seq, then the pattern from a place that depends on stream and seq: 7
     * bytes further on per connection, one per request. All connections then read a window of
     * a few KiB that stays in the cache; random places in the 64 KiB table (seq * 7919 +
     * stream * 104729) missed it on every request (what that cost: docs/bench.md, "lfbench
     * against the independent generator"). The hex digits make a stale or foreign request
     * differ anyway. */
    while (off < end && off < 16) {
        *out++ = (uint8_t)hex[(seq >> (60 - 4 * off)) & 0xf];
        off++;
    }
    pos = pattern_pos(stream, seq, off);
    while (off < end) {
        size_t n = PATN - pos < end - off ? PATN - pos : end - off;
        memcpy(out, pat + pos, n);
        out += n;
        off += n;
        pos = 0;
    }
    if (p->line && end == c->len)
        out[-1] = '\n';
}

bool payload_equal(const struct payloads *p, int cls, uint64_t stream, uint64_t seq, size_t off,
                   const uint8_t *buf, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    const struct pclass *c = &p->cls[cls];
    size_t end = off + len, pos;

    if (len == 0)
        return true; /* and the line's '\n' below would be read before buf */
    if (c->data)
        return memcmp(c->data + off, buf, len) == 0;
    if (p->line && end == c->len) { /* the generated '\n' at the end: check it, then the rest */
        if (buf[len - 1] != '\n')
            return false;
        if (--len == 0)
            return true;
        end--;
    }
    while (off < end && off < 16) {
        if (*buf++ != (uint8_t)hex[(seq >> (60 - 4 * off)) & 0xf])
            return false;
        off++;
    }
    pos = pattern_pos(stream, seq, off);
    while (off < end) {
        size_t n = PATN - pos < end - off ? PATN - pos : end - off;
        if (memcmp(buf, pat + pos, n) != 0)
            return false;
        buf += n;
        off += n;
        pos = 0;
    }
    return true;
}
