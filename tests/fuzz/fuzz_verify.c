/* fuzz_verify: lfbench's response verifier (verify_start/verify_feed) and the request bytes it
 * compares with (payload_bytes/payload_equal).
 *
 * The input picks --expect (echo, line, len32, bytes N), a request (generated, or a file's bytes
 * from the input), and a response stream: either raw bytes or the right responses with one byte
 * changed or the end cut. The stream is fed as lfbench reads it, in random pieces, starting the
 * next response where one ends. Invariants: each call makes progress (MORE takes every byte it
 * was given: lfbench's read loop would spin otherwise), used never exceeds what was given; the
 * responses end exactly where a plain reference says (after the '\n', after N bytes, after 4 +
 * the header's length, after the request's length), and the first wrong byte (an echo that
 * differs, a len32 header over VERIFY_MAX_FRAME) is reported by the call that holds it, whatever
 * the pieces. payload_equal agrees with payload_bytes on any range, and says no once a byte in
 * it changes; a range of payload_bytes is that range of the whole request; a generated request
 * starts with its sequence number in hex and holds no '\n' but a line request's last byte. */
#include "fuzz.h"

#include "verify.h"

#define MAX_REQ 3000

static struct payloads pl;

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    struct bopt o = {.size = 1};
    char err[256];

    (void)argc;
    (void)argv;
    FZ_CHECK(payload_load(&pl, &o, err, sizeof(err)) == 0, "payload_load: %s", err);
    return 0;
}

/* An event of the feed: a response done where it ended, or the mismatch and the bytes of the
 * call that reported it. */
struct events {
    size_t done[4096];
    int ndone;
    bool bad;
    size_t bad_at;           /* reference: the first wrong byte */
    size_t call_lo, call_hi; /* feed: the call that said so */
};

static void check_payload(int cls, uint64_t stream, uint64_t seq, struct fz *f)
{
    const struct pclass *c = &pl.cls[cls];
    static uint8_t whole[MAX_REQ + 256], part[MAX_REQ + 256];
    size_t off, len;

    payload_bytes(&pl, cls, stream, seq, 0, whole, c->len);
    FZ_CHECK(payload_equal(&pl, cls, stream, seq, 0, whole, c->len), "whole request");
    if (!c->data) {
        static const char hex[] = "0123456789abcdef";
        for (size_t i = 0; i < c->len && i < 16; i++)
            FZ_CHECK(whole[i] == (uint8_t)hex[(seq >> (60 - 4 * i)) & 0xf] ||
                         (pl.line && i == c->len - 1),
                     "byte %zu of a generated request is not its sequence number", i);
        for (size_t i = 0; i < c->len; i++)
            FZ_CHECK(pl.line && i == c->len - 1 ? whole[i] == '\n'
                                                : whole[i] >= 33 && whole[i] < 127,
                     "byte %zu of a generated request: 0x%02x", i, whole[i]);
    }
    /* 0 bytes anywhere, the end of a line request included, are equal and write nothing */
    off = fz_u32(f) % (c->len + 1);
    part[0] = 0xa5;
    payload_bytes(&pl, cls, stream, seq, off, part + 1, 0);
    FZ_CHECK(part[0] == 0xa5 && payload_equal(&pl, cls, stream, seq, off, part + 1, 0),
             "0 bytes at %zu", off);
    off = fz_u32(f) % c->len;
    len = 1 + fz_u32(f) % (c->len - off);
    payload_bytes(&pl, cls, stream, seq, off, part, len);
    FZ_CHECK(!memcmp(part, whole + off, len), "payload_bytes [%zu, +%zu) is not that range", off,
             len);
    FZ_CHECK(payload_equal(&pl, cls, stream, seq, off, part, len), "payload_equal [%zu, +%zu)", off,
             len);
    {
        size_t at = fz_u32(f) % len;
        part[at] ^= (uint8_t)(1 + fz_u8(f) % 255);
        FZ_CHECK(!payload_equal(&pl, cls, stream, seq, off, part, len),
                 "payload_equal took a changed byte at %zu", off + at);
    }
}

/* Where the responses end in s[0, n) and the first wrong byte, the plain way. */
static void reference(enum expect kind, size_t expect_bytes, int cls, uint64_t stream, uint64_t seq,
                      const uint8_t *s, size_t n, struct events *ev)
{
    static uint8_t want[MAX_REQ + 256];
    size_t at = 0;

    memset(ev, 0, sizeof(*ev));
    while (at < n && ev->ndone < 4096) {
        size_t end;

        switch (kind) {
        case EXPECT_LINE: {
            const uint8_t *nl = memchr(s + at, '\n', n - at);
            if (!nl)
                return;
            end = (size_t)(nl - s) + 1;
            break;
        }
        case EXPECT_BYTES:
            end = at + expect_bytes;
            break;
        case EXPECT_LEN32: {
            uint32_t len;
            if (n - at < 4)
                return;
            len = (uint32_t)s[at] << 24 | (uint32_t)s[at + 1] << 16 | (uint32_t)s[at + 2] << 8 |
                  s[at + 3];
            if (len > VERIFY_MAX_FRAME) {
                ev->bad = true;
                ev->bad_at = at + 3;
                return;
            }
            end = at + 4 + len;
            break;
        }
        default: {
            size_t len = pl.cls[cls].len;
            payload_bytes(&pl, cls, stream, seq + (uint64_t)ev->ndone, 0, want, len);
            for (size_t i = 0; i < len && at + i < n; i++)
                if (s[at + i] != want[i]) {
                    ev->bad = true;
                    ev->bad_at = at + i;
                    return;
                }
            end = at + len;
        }
        }
        if (end > n)
            return;
        ev->done[ev->ndone++] = end;
        at = end;
    }
}

/* lfbench's read loop: pieces of random sizes, verify_feed until each piece is used. */
static void feed(enum expect kind, size_t expect_bytes, int cls, uint64_t stream, uint64_t seq,
                 const uint8_t *s, size_t n, uint64_t rng, struct events *ev)
{
    struct verify v;
    size_t at = 0;

    memset(ev, 0, sizeof(*ev));
    verify_start(&v, kind, expect_bytes, &pl, cls, stream, seq, pl.cls[cls].len);
    while (at < n && ev->ndone < 4096) {
        uint64_t r = fz_rand(&rng);
        size_t piece = r % 4 == 0 ? 1 : r % 4 == 1 ? 1 + r / 4 % 8 : 1 + r / 4 % 2048;
        size_t end = at + piece < n ? at + piece : n;

        while (at < end && ev->ndone < 4096) {
            size_t used = (size_t)-1;
            enum verify_status st = verify_feed(&v, s + at, end - at, &used);

            FZ_CHECK(used <= end - at, "used %zu of %zu", used, end - at);
            if (st == VERIFY_BAD) {
                ev->bad = true;
                ev->call_lo = at;
                ev->call_hi = end;
                return;
            }
            FZ_CHECK(st == VERIFY_DONE || st == VERIFY_MORE, "status %d", (int)st);
            FZ_CHECK(st == VERIFY_DONE || used == end - at,
                     "MORE after taking %zu of %zu bytes: the read loop would spin", used,
                     end - at);
            at += used;
            if (st == VERIFY_DONE) {
                ev->done[ev->ndone++] = at;
                verify_start(&v, kind, expect_bytes, &pl, cls, stream, seq + (uint64_t)ev->ndone,
                             pl.cls[cls].len);
            }
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t file[256], s[64 * 1024];
    struct fz f = {data, size};
    enum expect kind = (enum expect)(fz_u8(&f) % 4);
    uint8_t flags = fz_u8(&f);
    size_t req_len = fz_range(&f, 1, MAX_REQ), expect_bytes = fz_range(&f, 1, MAX_REQ), n = 0;
    uint64_t stream = fz_u64(&f), seq = fz_u64(&f), rng = fz_u64(&f);
    int cls = 0;
    struct events ref, got;

    pl.line = flags & 1;
    pl.cls[0].len = req_len;
    pl.n = 1;
    if (flags & 2) { /* a payload file's bytes */
        const uint8_t *p;
        size_t len = fz_bytes(&f, &p, sizeof(file));

        if (len) {
            memcpy(file, p, len);
            if (pl.line)
                file[len - 1] = '\n'; /* payload_load insists */
            pl.cls[1].data = file;
            pl.cls[1].len = len;
            pl.n = 2;
            cls = 1;
        }
    }
    check_payload(cls, stream, seq, &f);

    if (flags & 4) { /* raw bytes */
        n = f.n < sizeof(s) ? f.n : sizeof(s);
        memcpy(s, f.p, n);
    } else { /* right responses, then one byte changed or the end cut */
        int count = 1 + fz_u8(&f) % 4;

        for (int i = 0; i < count; i++) {
            size_t len = kind == EXPECT_ECHO    ? pl.cls[cls].len
                         : kind == EXPECT_BYTES ? expect_bytes
                                                : fz_range(&f, 0, 600);

            if (n + len + 5 > sizeof(s))
                break;
            if (kind == EXPECT_ECHO) {
                payload_bytes(&pl, cls, stream, seq + (uint64_t)i, 0, s + n, len);
            } else if (kind == EXPECT_LEN32) {
                s[n++] = 0, s[n++] = 0, s[n++] = (uint8_t)(len >> 8), s[n++] = (uint8_t)len;
                for (size_t k = 0; k < len; k++)
                    s[n + k] = fz_u8(&f);
            } else {
                for (size_t k = 0; k < len; k++)
                    s[n + k] =
                        (uint8_t)(kind == EXPECT_LINE && fz_u8(&f) == '\n' ? 'x' : fz_u8(&f));
                if (kind == EXPECT_LINE)
                    s[n + len++] = '\n';
            }
            n += len;
        }
        if (n && fz_u8(&f) % 2)
            s[fz_u32(&f) % n] ^= (uint8_t)(1 + fz_u8(&f) % 255);
        if (n && fz_u8(&f) % 4 == 0)
            n -= fz_u32(&f) % n;
    }

    reference(kind, expect_bytes, cls, stream, seq, s, n, &ref);
    feed(kind, expect_bytes, cls, stream, seq, s, n, rng, &got);
    FZ_CHECK(got.ndone == ref.ndone, "%d responses done, the reference %d (expect %d)", got.ndone,
             ref.ndone, (int)kind);
    for (int i = 0; i < ref.ndone; i++)
        FZ_CHECK(got.done[i] == ref.done[i], "response %d ends at %zu, the reference %zu", i,
                 got.done[i], ref.done[i]);
    FZ_CHECK(got.bad == ref.bad, "mismatch %s, the reference %s", got.bad ? "seen" : "not seen",
             ref.bad ? "sees one" : "does not");
    FZ_CHECK(!ref.bad || (got.call_lo <= ref.bad_at && ref.bad_at < got.call_hi),
             "the wrong byte %zu reported by the call on [%zu, %zu)", ref.bad_at, got.call_lo,
             got.call_hi);
    pl.cls[1].data = NULL;
    pl.cls[1].len = 0;
    return 0;
}
