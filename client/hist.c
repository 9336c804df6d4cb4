/* hist: a log-linear latency histogram (HdrHistogram's layout): exact below 256 ns, then 128
 * sub-buckets per power of two, so a reported value is within 0.4% of the true one. */
#include "hist.h"

#include <errno.h>
#include <stdlib.h>
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

/* --- compact histograms -------------------------------------------------------------------- */

int hcompact_from(struct hcompact *c, const struct hist *h)
{
    uint32_t n = 0;

    memset(c, 0, sizeof(*c));
    c->min = UINT64_MAX;
    for (unsigned i = 0; i < HIST_BUCKETS; i++)
        n += h->b[i] != 0;
    if (n) {
        c->idx = malloc(n * sizeof(*c->idx));
        c->cnt = malloc(n * sizeof(*c->cnt));
        if (!c->idx || !c->cnt) {
            hcompact_free(c);
            return -ENOMEM;
        }
        for (unsigned i = 0; i < HIST_BUCKETS; i++)
            if (h->b[i]) {
                c->idx[c->n] = (uint16_t)i;
                c->cnt[c->n++] = h->b[i];
            }
    }
    c->count = h->count;
    c->min = h->min;
    c->max = h->max;
    c->sum = h->sum;
    return 0;
}

void hcompact_add_to(const struct hcompact *c, struct hist *h)
{
    for (uint32_t i = 0; i < c->n; i++)
        h->b[c->idx[i]] += c->cnt[i];
    h->count += c->count;
    h->sum += c->sum;
    if (c->count && c->min < h->min)
        h->min = c->min;
    if (c->count && c->max > h->max)
        h->max = c->max;
}

void hcompact_free(struct hcompact *c)
{
    free(c->idx);
    free(c->cnt);
    c->idx = NULL;
    c->cnt = NULL;
    c->n = 0;
}

/* a merge of the two ascending index lists */
int hcompact_merge(struct hcompact *dst, const struct hcompact *src)
{
    uint32_t cap = dst->n + src->n, n = 0, i = 0, j = 0;
    uint16_t *idx;
    uint64_t *cnt;

    if (!src->count && !src->n)
        return 0;
    idx = malloc((cap ? cap : 1) * sizeof(*idx));
    cnt = malloc((cap ? cap : 1) * sizeof(*cnt));
    if (!idx || !cnt) {
        free(idx);
        free(cnt);
        return -ENOMEM;
    }
    while (i < dst->n || j < src->n) {
        if (j == src->n || (i < dst->n && dst->idx[i] < src->idx[j])) {
            idx[n] = dst->idx[i];
            cnt[n++] = dst->cnt[i++];
        } else if (i == dst->n || src->idx[j] < dst->idx[i]) {
            idx[n] = src->idx[j];
            cnt[n++] = src->cnt[j++];
        } else {
            idx[n] = dst->idx[i];
            cnt[n++] = dst->cnt[i++] + src->cnt[j++];
        }
    }
    free(dst->idx);
    free(dst->cnt);
    dst->idx = idx;
    dst->cnt = cnt;
    dst->n = n;
    if (src->count && src->min < dst->min)
        dst->min = src->min;
    if (src->count && src->max > dst->max)
        dst->max = src->max;
    dst->count += src->count;
    dst->sum += src->sum;
    return 0;
}
