/* fuzz_frame: frame_next, each framing, fed the way lconn feeds it.
 *
 * The input picks a framing as a script may declare it (line with the default "\n" and its CR,
 * or a delimiter of 1-8 bytes; len32; fixed; raw; max_frame small or large), then the byte
 * stream. The stream is split three ways: by a plain reference written from the framing's
 * definition, by frame_next over all of it at once, and by frame_next fed in random pieces
 * (a piece framed in place when nothing waits, else appended to what waits, with *scanned kept
 * for it, as lconn does). Invariants: for line, len32 and fixed the three give the same frames
 * (same bytes, same ends) and the same "frame over max_frame" at the same place, whatever the
 * pieces; every frame lies inside what was given, within max_frame, and takes > 0 bytes; after
 * "need more", *scanned covers what was looked at (less a delimiter's length), so a long line
 * is not scanned again from its start; after a frame it is 0 again (lconn frames on with it);
 * what waits for the rest of a frame stays under frame_max_partial. Raw: each piece gives frames
 * of 1..max_frame bytes that put back together are the stream. */
#include "fuzz.h"

#include "frame.h"

#define MAX_FRAMES 8192

struct frames {
    size_t end[MAX_FRAMES]; /* stream offset one past each frame's bytes (delimiter included) */
    size_t off[MAX_FRAMES]; /* and where its payload starts, and its length */
    size_t len[MAX_FRAMES];
    int n;
    bool too_big; /* after the n frames */
};

static void add(struct frames *fr, size_t off, size_t len, size_t end)
{
    FZ_CHECK(fr->n < MAX_FRAMES, "frames");
    fr->off[fr->n] = off;
    fr->len[fr->n] = len;
    fr->end[fr->n++] = end;
}

/* The framings' definitions, byte by byte. */
static void reference(const struct framing *f, const uint8_t *s, size_t n, struct frames *fr)
{
    size_t at = 0;

    memset(fr, 0, sizeof(*fr));
    while (at < n && fr->n < MAX_FRAMES) {
        size_t rest = n - at;

        if (f->kind == FRAME_LINE) {
            size_t limit = (size_t)f->max_frame + f->dlen + f->strip_cr, d, len;
            bool found = false;

            /* the first delimiter that ends inside the first limit bytes */
            for (d = 0; d + f->dlen <= rest && d + f->dlen <= limit; d++)
                if (!memcmp(s + at + d, f->delim, f->dlen)) {
                    found = true;
                    break;
                }
            if (!found) {
                fr->too_big = rest >= limit;
                return;
            }
            len = d;
            if (f->strip_cr && len && s[at + len - 1] == '\r')
                len--;
            if (len > f->max_frame) {
                fr->too_big = true;
                return;
            }
            add(fr, at, len, at + d + f->dlen);
            at += d + f->dlen;
        } else if (f->kind == FRAME_LEN32) {
            uint32_t len;

            if (rest < 4)
                return;
            len = (uint32_t)s[at] << 24 | (uint32_t)s[at + 1] << 16 | (uint32_t)s[at + 2] << 8 |
                  s[at + 3];
            if (len > f->max_frame) {
                fr->too_big = true;
                return;
            }
            if (rest - 4 < len)
                return;
            add(fr, at + 4, len, at + 4 + len);
            at += 4 + (size_t)len;
        } else { /* fixed */
            if (rest < f->size)
                return;
            add(fr, at, f->size, at + f->size);
            at += f->size;
        }
    }
}

/* One call, with the checks every call must pass. base: the stream offset of p. */
static long next(const struct framing *f, const char *p, size_t n, size_t *scanned, size_t base,
                 struct frames *fr)
{
    const char *frame = NULL;
    size_t flen = (size_t)-1, before = *scanned;
    long r = frame_next(f, p, n, scanned, &frame, &flen);

    FZ_CHECK(r >= -1 && r <= (long)n, "frame_next returned %ld for %zu bytes", r, n);
    if (r > 0) {
        FZ_CHECK(frame >= p && flen <= (size_t)r && frame + flen <= p + r,
                 "the frame is not inside the %ld bytes taken", r);
        FZ_CHECK(flen <= f->max_frame, "a frame of %zu bytes over max_frame %u", flen,
                 f->max_frame);
        /* lconn's run_frames goes on to the next frame with the same *scanned */
        FZ_CHECK(f->kind != FRAME_LINE || *scanned == 0, "*scanned %zu after a frame", *scanned);
        if (fr)
            add(fr, base + (size_t)(frame - p), flen, base + (size_t)r);
    } else if (r == 0 && f->kind == FRAME_LINE) {
        size_t limit = frame_max_partial(f), scan = n < limit ? n : limit;

        FZ_CHECK(*scanned <= n && *scanned + f->dlen - 1 >= scan,
                 "need more after %zu bytes (had %zu looked at), *scanned %zu: the next call "
                 "would look at them again",
                 n, before, *scanned);
    }
    return r;
}

static void one_shot(const struct framing *f, const uint8_t *s, size_t n, struct frames *fr)
{
    size_t at = 0;

    memset(fr, 0, sizeof(*fr));
    while (at < n && fr->n < MAX_FRAMES) {
        size_t scanned = 0;
        long r = next(f, (const char *)s + at, n - at, &scanned, at, fr);

        if (r <= 0) {
            fr->too_big = r < 0;
            return;
        }
        at += (size_t)r;
    }
}

/* lconn: a piece is framed in place when nothing waits; what is left waits in a buffer (with
 * its *scanned), and later pieces are appended to it and framed from its start. */
static void in_pieces(const struct framing *f, const uint8_t *s, size_t n, uint64_t rng,
                      struct frames *fr)
{
    char *in = malloc(n ? n : 1);
    size_t inlen = 0, inbase = 0, at = 0, scanned = 0;

    FZ_CHECK(in != NULL, "malloc");
    memset(fr, 0, sizeof(*fr));
    while (at < n && fr->n < MAX_FRAMES && !fr->too_big) {
        uint64_t r = fz_rand(&rng);
        size_t piece = r % 3 == 0 ? 1 + r / 3 % 4 : r % 3 == 1 ? 1 + r / 3 % 64 : 1 + r / 3 % 4096;
        const char *p;
        size_t len, base, used = 0;
        size_t *sc, local = 0;

        if (piece > n - at)
            piece = n - at;
        if (inlen) { /* appended to what waits */
            memcpy(in + inlen, s + at, piece);
            inlen += piece;
            p = in, len = inlen, base = inbase, sc = &scanned;
        } else {
            p = (const char *)s + at, len = piece, base = at, sc = &local;
        }
        while (used < len && fr->n < MAX_FRAMES) {
            long k = next(f, p + used, len - used, sc, base + used, fr);

            if (k < 0)
                fr->too_big = true;
            if (k <= 0)
                break;
            used += (size_t)k;
        }
        if (p == in) {
            memmove(in, in + used, inlen - used);
            inlen -= used;
            inbase += used;
        } else if (used < len) {
            memcpy(in, p + used, len - used);
            inlen = len - used;
            inbase = base + used;
            scanned = local; /* of the bytes now at the start of in */
        }
        /* what waits is less than a frame's most (lconn's memory bound per connection) */
        FZ_CHECK(fr->too_big || fr->n == MAX_FRAMES || inlen < frame_max_partial(f),
                 "%zu bytes wait, frame_max_partial is %zu", inlen, frame_max_partial(f));
        at += piece;
    }
    free(in);
}

static void raw(const struct framing *f, const uint8_t *s, size_t n, uint64_t rng)
{
    size_t at = 0;

    while (at < n) {
        uint64_t r = fz_rand(&rng);
        size_t piece = 1 + r % (r % 2 ? 16 : 8192), used = 0;

        if (piece > n - at)
            piece = n - at;
        while (used < piece) {
            size_t scanned = 0;
            const char *frame = NULL;
            size_t flen = 0;
            long k =
                frame_next(f, (const char *)s + at + used, piece - used, &scanned, &frame, &flen);

            FZ_CHECK(k > 0 && (size_t)k == flen && flen <= f->max_frame &&
                         frame == (const char *)s + at + used,
                     "raw: %ld for %zu bytes (frame %zu bytes)", k, piece - used, flen);
            used += (size_t)k;
        }
        at += piece;
    }
}

static void same(const struct frames *a, const struct frames *b, const uint8_t *s, const char *what)
{
    FZ_CHECK(a->n == b->n, "%s: %d frames, the reference %d", what, a->n, b->n);
    for (int i = 0; i < a->n; i++)
        FZ_CHECK(a->end[i] == b->end[i] && a->len[i] == b->len[i] &&
                     !memcmp(s + a->off[i], s + b->off[i], a->len[i]),
                 "%s: frame %d is [%zu, +%zu) ending at %zu, the reference [%zu, +%zu) at %zu",
                 what, i, a->off[i], a->len[i], a->end[i], b->off[i], b->len[i], b->end[i]);
    FZ_CHECK(a->too_big == b->too_big, "%s: %s over max_frame, the reference %s", what,
             a->too_big ? "a frame" : "none", b->too_big ? "one" : "none");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct frames ref, shot, pieces;
    struct fz f = {data, size};
    struct framing fr = {0};
    uint8_t k = fz_u8(&f), m = fz_u8(&f);
    uint64_t rng;

    fr.kind = k % 4;
    /* small limits are where the edges are; some large ones too */
    fr.max_frame = m < 200 ? 1 + m % 64 : m < 250 ? fz_range(&f, 1, 70000) : 64u << 20;
    if (fr.kind == FRAME_LINE) {
        if (k / 4 % 2 == 0) { /* the default: "\n", a CR before it dropped */
            fr.delim[0] = '\n';
            fr.dlen = 1;
            fr.strip_cr = true;
        } else {
            fr.dlen = (uint8_t)(1 + k / 8 % FRAME_DELIM_MAX);
            for (int i = 0; i < fr.dlen; i++) /* mostly a few letters, so they do occur */
                fr.delim[i] = (char)(k / 64 ? "\r\nab"[fz_u8(&f) % 4] : fz_u8(&f));
        }
    } else if (fr.kind == FRAME_FIXED) {
        fr.size = fz_range(&f, 1, fr.max_frame < 100000 ? fr.max_frame : 100000);
    }
    rng = fz_u64(&f);

    if (fr.kind == FRAME_RAW) {
        raw(&fr, f.p, f.n, rng);
        return 0;
    }
    reference(&fr, f.p, f.n, &ref);
    one_shot(&fr, f.p, f.n, &shot);
    same(&shot, &ref, f.p, "all at once");
    for (int round = 0; round < 3; round++) {
        in_pieces(&fr, f.p, f.n, rng + (uint64_t)round, &pieces);
        same(&pieces, &ref, f.p, "in pieces");
    }
    return 0;
}
