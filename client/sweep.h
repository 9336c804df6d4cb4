/* sweep: the rates of --rate-sweep's staircase and --find-rate's search, step by step, and the
 * verdict on each step. Pure: the steps are run elsewhere (lfbench.c, engine.c). */
#ifndef LFE_SWEEP_H
#define LFE_SWEEP_H

#include <stdbool.h>
#include <stddef.h>

#include "bopt.h"
#include "result.h"

#define SWEEP_MAX_FIND 40      /* --find-rate gives up after this many steps */
#define SWEEP_FIRST 1000       /* --find-rate without a range starts here (requests/s) */
#define SWEEP_CLIENT_BUSY 90.0 /* client CPU (% of its threads) where it may be the limit */

struct sweep {
    double from, to, step; /* the range; to is 0 when open-ended, step 0 when none */
    double pct, bound_ns;  /* --find-rate; pct 0: a plain staircase */
    int threads;           /* lfbench's threads: its CPU ceiling is threads × 100% */
    int n;                 /* steps handed out */
    double last;           /* the rate of the last step handed out */
    double lo_ok, hi_bad;  /* --find-rate: the highest rate kept, the lowest broken (0: none) */
    bool done;
    char why[256]; /* --find-rate: why the search stopped; the staircase: empty */
};

void sweep_init(struct sweep *s, const struct bopt *o);

/* Judges the finished step (its rate is the one last handed out): sets st->kept, and for
 * --find-rate narrows the search; a step the client itself limited ends it. */
void sweep_judge(struct sweep *s, struct bstep *st);

/* The next step's rate, or 0 when there is none (s->why says why for --find-rate). */
double sweep_next(struct sweep *s);

/* --find-rate's answer: the highest rate that kept the bound, 0 if none did. */
double sweep_found(const struct sweep *s);

#endif /* LFE_SWEEP_H */
