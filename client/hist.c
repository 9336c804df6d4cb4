/* hist: a log-linear latency histogram (HdrHistogram's layout): exact below 256 ns, then 128
 * sub-buckets per power of two, so a reported value is within 0.4% of the true one. */
#include "hist.h"

#include <string.h>

void hist_init(struct hist *h)
{
    memset(h, 0, sizeof(*h));
    h->min = UINT64_MAX;
}

unsigned hist_index(uint64_t v)
{
    unsigned msb, shift;

    if (v < 2 * HIST_SUB)
        return (unsigned)v;
    msb = 63u - (unsigned)__builtin_clzll(v);
    shift = msb - 7u; /* v >> shift lands in [128, 256) */
    if (shift > HIST_MAX_SHIFT)
        return HIST_BUCKETS - 1;
    return 2 * HIST_SUB + (shift - 1) * HIST_SUB + (unsigned)((v >> shift) - HIST_SUB);
}

void hist_range(unsigned idx, uint64_t *lo, uint64_t *hi)
{
    unsigned shift;
    uint64_t sub;

    if (idx < 2 * HIST_SUB) {
        *lo = *hi = idx;
        return;
    }
    shift = (idx - 2 * HIST_SUB) / HIST_SUB + 1;
    sub = (idx - 2 * HIST_SUB) % HIST_SUB + HIST_SUB;
    *lo = sub << shift;
    *hi = ((sub + 1) << shift) - 1;
}

void hist_record(struct hist *h, uint64_t v)
{
    h->b[hist_index(v)]++;
    h->count++;
    h->sum += (double)v;
    if (v < h->min)
        h->min = v;
    if (v > h->max)
        h->max = v;
}

void hist_merge(struct hist *dst, const struct hist *src)
{
    for (unsigned i = 0; i < HIST_BUCKETS; i++)
        dst->b[i] += src->b[i];
    dst->count += src->count;
    dst->sum += src->sum;
    if (src->min < dst->min)
        dst->min = src->min;
    if (src->max > dst->max)
        dst->max = src->max;
}

uint64_t hist_rank(uint64_t count, double p)
{
    uint64_t rank;

    if (count == 0)
        return 0;
    rank = (uint64_t)(p / 100.0 * (double)count + 0.9999999);
    return rank < 1 ? 1 : rank > count ? count : rank;
}

uint64_t hist_percentile(const struct hist *h, double p)
{
    uint64_t rank = hist_rank(h->count, p), seen = 0, lo, hi;

    if (h->count == 0)
        return 0;
    if (rank == 1) /* the extremes are kept exactly: no estimate where the value is known */
        return h->min;
    if (rank == h->count)
        return h->max;
    for (unsigned i = 0; i < HIST_BUCKETS; i++) {
        seen += h->b[i];
        if (seen >= rank) {
            hist_range(i, &lo, &hi);
            if (lo < h->min) /* the min's bucket holds nothing below the min */
                lo = h->min;
            if (hi > h->max) /* nor the max's anything above the max */
                hi = h->max;
            return lo <= hi ? lo + (hi - lo) / 2 : hi; /* lo > hi: min/max not its own */
        }
    }
    return h->max;
}
