/* btune_stat: lfbench tune's verdict, from the paired ratios of the rounds.
 *
 * DESIGN. Each round runs every variant once, one after the other (A B C, A B C), so the drift of
 * a loaded machine hits a round's variants alike; the unit of evidence is the round's ratio
 * variant / baseline. The verdict is on the median of those ratios, with the distribution-free
 * interval that inverts the sign test: for n independent ratios, each is above the true median
 * with probability 1/2, so the k-th smallest and k-th largest bracket it with probability
 * 1 - 2 P(Bin(n, 1/2) < k), whatever the distribution. No normality, no bootstrap (whose
 * percentile interval covers less than it says with the 5 to 10 rounds a tuning run affords).
 * A vs A has ratios whose median is 1, so "helps" or "hurts" comes at most at the rate
 * 1 - level <= alpha: the false-positive rate is bounded, exactly, and test_btune_stat measures
 * it on synthetic rounds. The price: with n rounds the best level is 1 - 2^(1-n), so a 95%
 * interval needs 6 rounds and 99% needs 8. */
#include "btune_stat.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const btune_verdict_name[] = {"helps", "hurts", "no measurable effect",
                                          "too few rounds"};

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A sorted copy of v (malloc'd), or NULL. */
static double *sorted(const double *v, int n)
{
    double *s = malloc((size_t)(n > 0 ? n : 1) * sizeof(*s));

    if (!s)
        return NULL;
    memcpy(s, v, (size_t)n * sizeof(*s));
    qsort(s, (size_t)n, sizeof(*s), cmp_double);
    return s;
}

static double median_sorted(const double *s, int n)
{
    if (n <= 0)
        return 0;
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

double btune_median(const double *v, int n)
{
    double *s, m;

    if (n <= 0 || !(s = sorted(v, n)))
        return 0;
    m = median_sorted(s, n);
    free(s);
    return m;
}

double btune_binom_cdf(int n, int j)
{
    double sum = 0, logp = -n * log(2.0), lc = 0; /* lc: log C(n, i) */

    if (j < 0)
        return 0;
    if (j >= n)
        return 1;
    for (int i = 0; i <= j; i++) {
        if (i > 0)
            lc += log((double)(n - i + 1)) - log((double)i);
        sum += exp(lc + logp);
    }
    return sum > 1 ? 1 : sum;
}

int btune_order_k(int n, double alpha)
{
    int k = 0;

    /* coverage of [x(k), x(n+1-k)] is 1 - 2 P(Bin <= k - 1); it falls as k grows */
    for (int c = 1; c <= (n + 1) / 2; c++) {
        if (2 * btune_binom_cdf(n, c - 1) > alpha + 1e-12)
            break;
        k = c;
    }
    return k;
}

int btune_rounds_for(double alpha)
{
    return (int)ceil(log2(2 / alpha) - 1e-9);
}

int btune_interval(const double *r, int n, double alpha, struct btune_ci *ci)
{
    double *s;

    memset(ci, 0, sizeof(*ci));
    if (n < 1 || !(alpha > 0 && alpha < 1))
        return -EINVAL;
    for (int i = 0; i < n; i++)
        if (!isfinite(r[i]) || r[i] <= 0)
            return -EINVAL;
    if (!(s = sorted(r, n)))
        return -ENOMEM;
    ci->n = n;
    ci->median = median_sorted(s, n);
    ci->k = btune_order_k(n, alpha);
    ci->lo = s[0];
    ci->hi = s[n - 1];
    if (ci->k > 0) {
        ci->lo = s[ci->k - 1];
        ci->hi = s[n - ci->k];
        ci->level = 1 - 2 * btune_binom_cdf(n, ci->k - 1);
    }
    free(s);
    return 0;
}

enum btune_verdict btune_judge(const struct btune_ci *ci, bool higher_better)
{
    if (ci->k == 0)
        return BTUNE_TOO_FEW;
    if (ci->lo > 1)
        return higher_better ? BTUNE_HELPS : BTUNE_HURTS;
    if (ci->hi < 1)
        return higher_better ? BTUNE_HURTS : BTUNE_HELPS;
    return BTUNE_NONE;
}
