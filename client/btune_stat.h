/* btune_stat: the statistics of lfbench tune's verdicts: the median of paired ratios and its
 * distribution-free confidence interval (the sign test's), and the words of a verdict. Pure. */
#ifndef LFE_BTUNE_STAT_H
#define LFE_BTUNE_STAT_H

#include <stdbool.h>
#include <stdint.h>

enum btune_verdict {
    BTUNE_HELPS,  /* the whole interval is on the better side of 1 */
    BTUNE_HURTS,  /* the whole interval is on the worse side of 1 */
    BTUNE_NONE,   /* the interval holds 1: no measurable effect */
    BTUNE_TOO_FEW /* too few rounds for an interval at the level asked */
};

/* The words of each verdict: the text output and --json's "verdict", which must not change. */
extern const char *const btune_verdict_name[];

/* The median of paired ratios and its interval. */
struct btune_ci {
    int n;         /* the pairs it is made of */
    double median; /* of the ratios */
    double lo, hi; /* the interval: the k-th smallest and the k-th largest ratio */
    int k;         /* that order statistic (1-based); 0 when n is too small for the level */
    double level;  /* the interval's exact coverage, 1 - 2 P(Bin(n, 1/2) < k); 0 when k is 0 */
};

/* The median of v[0..n-1] (the mean of the middle two when n is even); 0 when n is 0. v is
 * left as it was. */
double btune_median(const double *v, int n);

/* P(Bin(n, 1/2) <= j), exactly as a double for n up to 1000. */
double btune_binom_cdf(int n, int j);

/* The largest k for which [x(k), x(n+1-k)] of n ordered pairs covers the median with
 * probability at least 1 - alpha (the sign test inverted); 0 when even [min, max] does not:
 * n below log2(2 / alpha). */
int btune_order_k(int n, double alpha);

/* The fewest pairs whose interval (the smallest to the largest ratio) covers the median with
 * probability 1 - alpha or more: ceil(log2(2 / alpha)), 6 for alpha 0.05, 9 for 0.05 / 7. */
int btune_rounds_for(double alpha);

/* The median of ratios r[0..n-1] and its interval at level 1 - alpha (0 < alpha < 1). Valid for
 * any continuous distribution of the ratios: it assumes only that the rounds are independent
 * pairs. Returns 0, or -EINVAL for n < 1 or a ratio that is not finite and positive. */
int btune_interval(const double *r, int n, double alpha, struct btune_ci *ci);

/* The verdict on ci: for a figure where more is better (a rate) when higher_better, else (a
 * latency, CPU per request) where less is. */
enum btune_verdict btune_judge(const struct btune_ci *ci, bool higher_better);

#endif /* LFE_BTUNE_STAT_H */
