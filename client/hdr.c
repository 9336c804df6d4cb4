/* hdr: HdrHistogram's compressed V2 encoding of a hist and its interval log (format 1.3).
 *
 * The encoding, as HdrHistogram's Java AbstractHistogram writes it (big-endian throughout):
 *   outer: cookie 0x1c849314, int32 length of what follows, zlib (RFC 1950) of the inner
 *   inner: cookie 0x1c849313, int32 payload length, int32 normalizingIndexOffset (0),
 *          int32 significant digits, int64 lowestDiscernibleValue, int64 highestTrackableValue,
 *          double integerToDoubleValueConversionRatio (1.0): 40 bytes, then the payload: the
 *          counts up to the last non-zero one, each a ZigZag LEB128 varint of at most 9 bytes
 *          (the 9th carries 8 bits), a run of k > 1 zero counts as the one value -k.
 * The cookies' 0x10 is the "word size" nibble every V2 writer sets and every reader masks off. */
#include "hdr.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#define COOKIE_V2 0x1c849303u
#define COOKIE_V2_ZLIB 0x1c849304u
#define COOKIE_WORD 0x10u
#define COOKIE_BASE(c) ((c) & ~0xf0u)
#define INNER_HEADER 40
#define VARINT_MAX 9
/* The longest inner encoding of HIST_BUCKETS counts: each varint covers at least one count. */
#define INNER_MAX (INNER_HEADER + HIST_BUCKETS * VARINT_MAX)

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 3; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t get64(const uint8_t *p)
{
    return (uint64_t)get32(p) << 32 | get32(p + 4);
}

static uint64_t double_bits(double d)
{
    uint64_t u;

    memcpy(&u, &d, sizeof(u));
    return u;
}

/* ZigZag, then LEB128 in at most 9 bytes: 8 of 7 bits, a 9th of the remaining 8. */
static size_t put_varint(uint8_t *p, int64_t v)
{
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    size_t n = 0;

    while (n < VARINT_MAX - 1 && z >= 0x80) {
        p[n++] = (uint8_t)(z | 0x80);
        z >>= 7;
    }
    p[n++] = (uint8_t)z;
    return n;
}

/* The varint at *p, *p moved past it; false when it runs past end. */
static bool get_varint(const uint8_t **p, const uint8_t *end, int64_t *v)
{
    uint64_t z = 0;
    unsigned shift = 0;

    for (size_t n = 0;; n++) {
        uint8_t c;

        if (*p == end)
            return false;
        c = *(*p)++;
        if (n == VARINT_MAX - 1) {
            z |= (uint64_t)c << 56;
            break;
        }
        z |= (uint64_t)(c & 0x7f) << shift;
        shift += 7;
        if (!(c & 0x80))
            break;
    }
    *v = (int64_t)(z >> 1) ^ -(int64_t)(z & 1);
    return true;
}

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static char *b64_encode(const uint8_t *in, size_t n, size_t *outlen)
{
    char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;

    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t w = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0) |
                     (i + 2 < n ? in[i + 2] : 0);

        *o++ = b64_alphabet[w >> 18];
        *o++ = b64_alphabet[w >> 12 & 63];
        *o++ = i + 1 < n ? b64_alphabet[w >> 6 & 63] : '=';
        *o++ = i + 2 < n ? b64_alphabet[w & 63] : '=';
    }
    *o = '\0';
    *outlen = (size_t)(o - out);
    return out;
}

static int b64_value(char c)
{
    const char *p = c ? strchr(b64_alphabet, c) : NULL;

    return p ? (int)(p - b64_alphabet) : -1;
}

/* Strict: a whole number of quads, '=' only as the last one or two characters. Returns the
 * bytes written to out (len / 4 * 3 at most), or -1. */
static long b64_decode(const char *in, size_t len, uint8_t *out)
{
    size_t n = 0;

    if (len == 0 || len % 4)
        return -1;
    for (size_t i = 0; i < len; i += 4) {
        bool last = i + 4 == len;
        int pad = last && in[i + 3] == '=' ? (in[i + 2] == '=' ? 2 : 1) : 0;
        uint32_t w = 0;

        for (int k = 0; k < 4; k++) {
            int v = k >= 4 - pad ? 0 : b64_value(in[i + k]);

            if (v < 0)
                return -1;
            w = w << 6 | (uint32_t)v;
        }
        out[n++] = (uint8_t)(w >> 16);
        if (pad < 2)
            out[n++] = (uint8_t)(w >> 8);
        if (pad < 1)
            out[n++] = (uint8_t)w;
    }
    return (long)n;
}

int hdr_encode(const struct hist *h, char **b64, size_t *len)
{
    unsigned limit = HIST_BUCKETS;
    uint8_t *raw, *z;
    uLongf zlen;
    size_t n = INNER_HEADER;
    int rc = 0, zrc;

    while (limit > 0 && h->b[limit - 1] == 0)
        limit--;
    for (unsigned i = 0; i < limit; i++)
        if (h->b[i] > INT64_MAX)
            return -EOVERFLOW;
    raw = malloc(INNER_HEADER + (size_t)limit * VARINT_MAX);
    if (!raw)
        return -ENOMEM;
    for (unsigned i = 0; i < limit;) {
        uint64_t run = 0;

        if (h->b[i]) {
            n += put_varint(raw + n, (int64_t)h->b[i++]);
            continue;
        }
        while (i < limit && h->b[i] == 0)
            run++, i++;
        /* as Java's encoder: a lone zero is the count 0, a longer run -k */
        n += put_varint(raw + n, run > 1 ? -(int64_t)run : 0);
    }
    put32(raw, COOKIE_V2 | COOKIE_WORD);
    put32(raw + 4, (uint32_t)(n - INNER_HEADER));
    put32(raw + 8, 0);
    put32(raw + 12, HDR_SIG_DIGITS);
    put64(raw + 16, 1);
    put64(raw + 24, HDR_HIGHEST);
    put64(raw + 32, double_bits(1.0));

    zlen = compressBound((uLong)n);
    z = malloc(8 + zlen);
    if (!z) {
        rc = -ENOMEM;
        goto free_raw;
    }
    /* HistogramLogWriter compresses at Deflater.BEST_COMPRESSION */
    zrc = compress2(z + 8, &zlen, raw, (uLong)n, Z_BEST_COMPRESSION);
    if (zrc != Z_OK) {
        rc = zrc == Z_MEM_ERROR ? -ENOMEM : -EIO;
        goto free_z;
    }
    put32(z, COOKIE_V2_ZLIB | COOKIE_WORD);
    put32(z + 4, (uint32_t)zlen);
    *b64 = b64_encode(z, 8 + zlen, len);
    if (!*b64)
        rc = -ENOMEM;
free_z:
    free(z);
free_raw:
    free(raw);
    return rc;
}

/* The inner encoding's header and counts into h (just initialised). */
static int parse_inner(const uint8_t *p, size_t n, struct hist *h)
{
    const uint8_t *end = p + n;
    uint64_t idx = 0;

    if (n < INNER_HEADER || COOKIE_BASE(get32(p)) != COOKIE_V2 ||
        get32(p + 4) != n - INNER_HEADER || get32(p + 8) != 0 || get32(p + 12) != HDR_SIG_DIGITS ||
        get64(p + 16) != 1 || get64(p + 24) < 2 || get64(p + 24) > INT64_MAX ||
        get64(p + 32) != double_bits(1.0))
        return -EINVAL;
    p += INNER_HEADER;
    while (p < end) {
        int64_t v;

        if (!get_varint(&p, end, &v))
            return -EINVAL;
        if (v < 0) { /* a run of -v zero counts */
            if ((uint64_t)0 - (uint64_t)v > HIST_BUCKETS - idx)
                return -EINVAL;
            idx += (uint64_t)0 - (uint64_t)v;
            continue;
        }
        if (idx >= HIST_BUCKETS || h->count + (uint64_t)v < h->count)
            return -EINVAL;
        h->b[idx++] = (uint64_t)v;
        h->count += (uint64_t)v;
    }
    return 0;
}

int hdr_decode(const char *b64, size_t len, struct hist *h)
{
    uint8_t *raw, *inner;
    z_stream zs = {0};
    long n;
    int rc = -EINVAL, zrc;

    hist_init(h);
    raw = malloc(len / 4 * 3 + 1);
    if (!raw)
        return -ENOMEM;
    n = b64_decode(b64, len, raw);
    if (n < 8 || COOKIE_BASE(get32(raw)) != COOKIE_V2_ZLIB || get32(raw + 4) != (uint64_t)n - 8)
        goto free_raw;
    /* one byte more than the longest valid encoding: filling it means a lie, not a histogram */
    inner = malloc(INNER_MAX + 1);
    if (!inner) {
        rc = -ENOMEM;
        goto free_raw;
    }
    if (inflateInit(&zs) != Z_OK) {
        rc = -ENOMEM;
        goto free_inner;
    }
    zs.next_in = raw + 8;
    zs.avail_in = (uInt)(n - 8);
    zs.next_out = inner;
    zs.avail_out = INNER_MAX + 1;
    zrc = inflate(&zs, Z_FINISH);
    if (zrc == Z_MEM_ERROR)
        rc = -ENOMEM;
    else if (zrc == Z_STREAM_END && zs.avail_in == 0 && zs.total_out <= INNER_MAX)
        rc = parse_inner(inner, zs.total_out, h);
    inflateEnd(&zs);
    if (rc == 0) {
        for (unsigned i = 0; i < HIST_BUCKETS; i++) {
            uint64_t lo, hi;

            if (!h->b[i])
                continue;
            hist_range(i, &lo, &hi);
            if (lo < h->min)
                h->min = lo;
            h->max = hi;
            h->sum += (double)h->b[i] * (double)(lo + (hi - lo) / 2);
        }
    }
free_inner:
    free(inner);
free_raw:
    free(raw);
    if (rc)
        hist_init(h);
    return rc;
}

struct hdrlog {
    FILE *f;
    int err; /* the first failure since open, -errno; 0 = none */
};

static int io_error(void)
{
    return errno ? -errno : -EIO;
}

struct hdrlog *hdrlog_open(const char *path, double start_wall, char *err, size_t errlen)
{
    struct hdrlog *l = calloc(1, sizeof(*l));
    time_t t = (time_t)start_wall;
    char date[64] = "";
    struct tm tm;
    int e;

    if (!l) {
        snprintf(err, errlen, "cannot write --hdr-log %s: %s", path, strerror(ENOMEM));
        return NULL;
    }
    l->f = fopen(path, "we");
    if (!l->f) {
        e = errno;
        goto fail;
    }
    /* Java's Date.toString(), which HistogramLogWriter writes: "Mon Jun 23 10:28:30 NZST 2014" */
    if (localtime_r(&t, &tm))
        strftime(date, sizeof(date), "%a %b %d %H:%M:%S %Z %Y", &tm);
    errno = 0;
    fprintf(l->f,
            "#[Histogram log format version 1.3]\n"
            "#[StartTime: %.3f (seconds since epoch), %s]\n"
            "#[BaseTime: %.3f (seconds since epoch)]\n"
            "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\","
            "\"Interval_Compressed_Histogram\"\n",
            start_wall, date, start_wall);
    if (fflush(l->f) == EOF || ferror(l->f)) {
        e = errno ? errno : EIO;
        fclose(l->f);
        goto fail;
    }
    return l;
fail:
    snprintf(err, errlen, "cannot write --hdr-log %s: %s", path, strerror(e));
    free(l);
    return NULL;
}

int hdrlog_write(struct hdrlog *l, double start_rel_s, double len_s, const struct hist *h)
{
    return hdrlog_write_tagged(l, NULL, start_rel_s, len_s, h);
}

int hdrlog_write_tagged(struct hdrlog *l, const char *tag, double start_rel_s, double len_s,
                        const struct hist *h)
{
    uint64_t lo, hi = 0;
    char *b64;
    size_t n;
    /* the tag ends at the line's first comma: HistogramLogReader would split one inside it */
    int rc = tag && (!*tag || strpbrk(tag, ", \t\r\n")) ? -EINVAL : hdr_encode(h, &b64, &n);

    if (rc == 0) {
        /* HistogramLogWriter: getMaxValue() (its bucket's highest value) / 10^6 (ns to ms) */
        if (h->count)
            hist_range(hist_index(h->max), &lo, &hi);
        errno = 0;
        if (fprintf(l->f, "%s%s%s%.3f,%.3f,%.3f,%s\n", tag ? "Tag=" : "", tag ? tag : "",
                    tag ? "," : "", start_rel_s, len_s, (double)hi / 1e6, b64) < 0 ||
            fflush(l->f) == EOF)
            rc = io_error();
        free(b64);
    }
    if (rc && !l->err)
        l->err = rc;
    return rc;
}

int hdrlog_close(struct hdrlog *l)
{
    int rc;

    if (!l)
        return 0;
    rc = l->err;
    if (ferror(l->f) && !rc)
        rc = -EIO;
    errno = 0;
    if (fclose(l->f) == EOF && !rc)
        rc = io_error();
    free(l);
    return rc;
}
