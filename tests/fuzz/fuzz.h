/* fuzz: what every libFuzzer target shares: taking typed values from the input, and an invariant
 * check that aborts with a message (libFuzzer then saves the input as a crash). */
#ifndef LFE_FUZZ_H
#define LFE_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The input, consumed from the front. Past its end every take returns zeros, so a short input
 * is still a valid (small) case. */
struct fz {
    const uint8_t *p;
    size_t n;
};

static inline uint8_t fz_u8(struct fz *f)
{
    if (!f->n)
        return 0;
    f->n--;
    return *f->p++;
}

static inline uint32_t fz_u32(struct fz *f)
{
    uint32_t v = 0;

    for (int i = 0; i < 4; i++)
        v = v << 8 | fz_u8(f);
    return v;
}

static inline uint64_t fz_u64(struct fz *f)
{
    return (uint64_t)fz_u32(f) << 32 | fz_u32(f);
}

/* A value in [lo, hi]. */
static inline uint32_t fz_range(struct fz *f, uint32_t lo, uint32_t hi)
{
    return hi <= lo ? lo : lo + fz_u32(f) % (hi - lo + 1);
}

/* Up to max bytes: a length byte, then that many (fewer at the end of the input). */
static inline size_t fz_bytes(struct fz *f, const uint8_t **p, size_t max)
{
    size_t len = fz_u8(f);

    if (len > max)
        len = max;
    if (len > f->n)
        len = f->n;
    *p = f->p;
    f->p += len;
    f->n -= len;
    return len;
}

/* A xorshift generator seeded from the input, for split points and other choices that must not
 * eat the bytes under test. */
static inline uint64_t fz_rand(uint64_t *s)
{
    uint64_t x = *s ? *s : 0x9e3779b97f4a7c15ull;

    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* An invariant. On failure: what was expected, where, then abort (a crash libFuzzer keeps). */
#define FZ_CHECK(cond, ...)                                                                        \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: invariant failed: %s: ", __FILE__, __LINE__, #cond);           \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* A message meant to be one line for people: not empty, NUL-terminated inside its buffer, no
 * line break or other control character. Returns NULL, or what is wrong. */
static inline const char *fz_one_line(const char *s, size_t cap)
{
    size_t len = strnlen(s, cap);

    if (len == cap)
        return "not NUL-terminated inside its buffer";
    if (len == 0)
        return "empty";
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return "holds a control character (a line break, or bytes a terminal acts on)";
    return NULL;
}

#endif /* LFE_FUZZ_H */
