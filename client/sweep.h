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
#define SWEEP_TRIES 3          /* --find-rate: a rate that breaks is tried up to this often */

struct sweep {
    double from, to, step; /* the range; to is 0 when open-ended, step 0 when none */
    double pct, bound_ns;  /* --find-rate; pct 0: a plain staircase */
    const char *ok;        /* --ok-status as given ("2xx" by default), for the verdicts */
    int threads;           /* lfbench's threads: its CPU ceiling is threads × 100% */
    int n;                 /* steps handed out */
    double last;           /* the rate of the last step handed out */
    double lo_ok, hi_bad;  /* --find-rate: the highest rate kept, the lowest broken (0: none) */
    int tries, broke;      /* --find-rate: steps run at the rate `last`, and how many broke */
    bool retest;           /* --find-rate: `last` broke and has no verdict yet: run it again */
    int unconfirmed;       /* --find-rate: rates that broke once but kept it on re-test */
    char broke_why[224];   /* --find-rate: why the last broken step at `last` broke */
    char unconf[96];       /* ... the first of those rates, as the summary says them */
    bool done, ended;      /* no more steps; sweep_next has said so (and finished why) */
    char why[512];         /* --find-rate: why the search stopped; the staircase: empty */
};

void sweep_init(struct sweep *s, const struct bopt *o);

/* Judges the finished step (its rate is the one last handed out): sets st->kept and
 * st->attempt, and for --find-rate narrows the search. A rate whose step broke the bound is
 * not taken as broken on that one step (a transient stall of the server, or of this machine,
 * would bound the search): it is run again, and its verdict is that of the majority of up to
 * SWEEP_TRIES steps. A step the client itself limited ends the search at once. */
void sweep_judge(struct sweep *s, struct bstep *st);

/* The next step's rate, or 0 when there is none (s->why says why for --find-rate): the rate
 * just run again while s->retest says so. */
double sweep_next(struct sweep *s);

/* --find-rate's answer: the highest rate that kept the bound, 0 if none did. */
double sweep_found(const struct sweep *s);

#endif /* LFE_SWEEP_H */
