/* hist: a log-linear latency histogram (HdrHistogram's layout): exact below 256 ns, then 128
 * sub-buckets per power of two, so a reported value is within 0.4% of the true one. */
#ifndef LFE_HIST_H
#define LFE_HIST_H

#include <stdint.h>

#define HIST_SUB 128      /* sub-buckets per power of two */
#define HIST_MAX_SHIFT 33 /* values up to 2^41 ns (about 36 minutes) */
#define HIST_BUCKETS (2 * HIST_SUB + HIST_MAX_SHIFT * HIST_SUB)

/* Owned by one thread while recording; merged by another after it stops. */
struct hist {
    uint64_t count;    /* values recorded */
    uint64_t min, max; /* exact extremes (min is UINT64_MAX when empty) */
    double sum;        /* for the mean */
    uint64_t b[HIST_BUCKETS];
};

void hist_init(struct hist *h);

/* Records one value (nanoseconds); larger than the range is clamped to its top bucket. */
void hist_record(struct hist *h, uint64_t v);

/* dst += src */
void hist_merge(struct hist *dst, const struct hist *src);

/* The rank of percentile p (0 < p <= 100) among count values: the percentile is the rank-th
 * smallest, the smallest v such that at least p% of the values are <= v. 1 to count (0 when
 * count is 0). --find-rate judges its bound on this rank with an exact count. */
uint64_t hist_rank(uint64_t count, double p);

/* The value at percentile p (0 < p <= 100): the rank-th smallest recorded value (hist_rank).
 * Exact where the histogram knows it: the min for rank 1, the max for the last rank (p100), and
 * every value below 256 ns. Otherwise the midpoint of what its bucket can hold, the bucket cut
 * to [min, max] (so a percentile in the max's bucket lies between the bucket's floor and the
 * max): within 0.4% of the true value. Returns 0 when empty. */
uint64_t hist_percentile(const struct hist *h, double p);

/* Nanoseconds as microseconds, the unit lfbench prints latencies in. */
static inline double hist_us(uint64_t ns)
{
    return (double)ns / 1000.0;
}

/* A histogram in compact form: the non-empty buckets only (a second's latencies fill a few
 * hundred of the 4,480), for the per-second series and for --json. Owns idx and cnt. */
struct hcompact {
    uint64_t count, min, max; /* min is UINT64_MAX when empty */
    double sum;
    uint32_t n;    /* non-empty buckets */
    uint16_t *idx; /* their indexes, ascending (hist_index) */
    uint64_t *cnt; /* their counts */
};

int hcompact_from(struct hcompact *c, const struct hist *h);    /* 0 or -ENOMEM */
void hcompact_add_to(const struct hcompact *c, struct hist *h); /* h += c */

/* dst += src, both ascending. 0, or -ENOMEM with dst unchanged. */
int hcompact_merge(struct hcompact *dst, const struct hcompact *src);

void hcompact_free(struct hcompact *c);

/* Bucket index of v, and the [lo, hi] range of values a bucket holds (for tests). */
unsigned hist_index(uint64_t v);
void hist_range(unsigned idx, uint64_t *lo, uint64_t *hi);

#endif /* LFE_HIST_H */
