/* sweep: --rate-sweep's staircase and --find-rate's search.
 *
 * The search is tcpkali's and mutilate's idea, made honest about its own limits: from the
 * range's FROM (or 1,000/s) it doubles the rate while a step keeps the bound, then bisects
 * between the highest rate kept and the lowest broken until they are within STEP (or 5%). A
 * step keeps the bound when its percentile is within it and nothing failed: no error, no lost
 * response, no send left unsent, no HTTP status outside --ok-status (a server that sheds load
 * with 503s answers fast, and would otherwise keep any bound), and an open-loop latency counts
 * from the intended send, so a client that fell behind shows in the percentile too.
 *
 * The percentile is judged exactly, not on the histogram's estimate (within 0.4%): the engine
 * counts the responses slower than the bound, and the pP percentile (the rank-th smallest,
 * hist_rank) is within the bound when at most count - rank of them were slower.
 *
 * One step is one sample of the server: a single stall (a collection, a page cache flush, this
 * machine's other work) breaks the bound for that step alone, and would end the search's climb
 * there. So a rate that broke is run again, and it is broken on the majority of up to
 * SWEEP_TRIES steps; the summary names the rates that broke and were not confirmed.
 *
 * A step whose client CPU reached SWEEP_CLIENT_BUSY% of its threads ends the search: past that
 * point lfbench, not the server, sets the latency, and the answer would be the client's. */
#include "sweep.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void sweep_init(struct sweep *s, const struct bopt *o)
{
    memset(s, 0, sizeof(*s));
    s->from = o->sweep_step > 0 ? o->sweep_from : SWEEP_FIRST;
    s->to = o->sweep_step > 0 ? o->sweep_to : 0;
    s->step = o->sweep_step;
    s->pct = o->find_pct;
    s->bound_ns = o->find_bound_us * 1000.0;
    s->ok = o->ok_status_arg ? o->ok_status_arg : "2xx";
    s->threads = o->threads;
}

/* A rate printed the way the summary prints it. */
static void rate_str(char *buf, size_t len, double r)
{
    snprintf(buf, len, r >= 100 ? "%.0f/s" : "%.3g/s", r);
}

/* The step's own verdict into st->kept; for --find-rate, why it broke into why. */
static void step_verdict(const struct sweep *s, struct bstep *st, char *why, size_t len)
{
    uint64_t errors = bcount_errors(&st->c), n = st->lat ? st->lat->count : 0, rank;
    unsigned long long non2xx = st->c.http_non2xx, over = st->over_bound;
    char r[32];

    why[0] = '\0';
    if (s->pct <= 0) {
        st->kept = errors == 0 && st->unsent == 0 && st->c.lost == 0 && non2xx == 0;
        return;
    }
    rank = hist_rank(n, s->pct);
    st->kept = false;
    rate_str(r, sizeof(r), st->rate);
    if (n == 0) {
        snprintf(why, len, "no response at %s", r);
    } else if (errors || st->c.lost) {
        snprintf(why, len, "errors: %llu (%llu lost) at %s", (unsigned long long)errors,
                 (unsigned long long)st->c.lost, r);
    } else if (non2xx) {
        snprintf(why, len, "%llu of %llu responses had a status other than %s at %s", non2xx,
                 (unsigned long long)n, s->ok, r);
    } else if (st->unsent) {
        snprintf(why, len, "%llu sends never went out at %s: every connection was busy (add -c)",
                 (unsigned long long)st->unsent, r);
    } else if (st->over_bound > n - rank) { /* fewer than rank within it */
        double p = (double)hist_percentile(st->lat, s->pct);
        char est[48] = "";

        /* the estimate may fall on the bound's side of its bucket: then say only "over" */
        if (p > s->bound_ns)
            snprintf(est, sizeof(est), " %.1f µs", p / 1000.0);
        snprintf(why, len,
                 "latency: p%g%s over %.1f µs at %s (%llu of %llu responses took longer; "
                 "p%g allows %llu)",
                 s->pct, est, s->bound_ns / 1000.0, r, over, (unsigned long long)n, s->pct,
                 (unsigned long long)(n - rank));
    } else {
        st->kept = true;
    }
}

/* The rate `last` kept the bound. */
static void rate_kept(struct sweep *s)
{
    char r[32];

    if (s->broke) { /* it broke, and the re-tests outvoted it */
        if (s->unconfirmed++ == 0) {
            rate_str(r, sizeof(r), s->last);
            snprintf(s->unconf, sizeof(s->unconf), "%s (kept it on %d of %d tries)", r,
                     s->tries - s->broke, s->tries);
        }
    }
    if (s->last > s->lo_ok)
        s->lo_ok = s->last;
    s->tries = s->broke = 0;
}

/* The rate `last` broke the bound. */
static void rate_broken(struct sweep *s)
{
    if (s->hi_bad == 0 || s->last < s->hi_bad)
        s->hi_bad = s->last;
    if (s->tries > 1)
        snprintf(s->why, sizeof(s->why), "%s; broke it on %d of %d tries", s->broke_why, s->broke,
                 s->tries);
    else
        snprintf(s->why, sizeof(s->why), "%s", s->broke_why);
    s->tries = s->broke = 0;
}

void sweep_judge(struct sweep *s, struct bstep *st)
{
    bool busy = st->cpu_percent >= SWEEP_CLIENT_BUSY * s->threads;
    char why[sizeof(s->broke_why)], r[32];

    step_verdict(s, st, why, sizeof(why));
    if (s->pct <= 0)
        return;
    st->attempt = ++s->tries;
    s->retest = false;
    if (!st->kept) {
        s->broke++;
        memcpy(s->broke_why, why, sizeof(why));
    }
    if (busy) {
        /* a re-test would only measure the client again: this step decides, and ends it */
        if (st->kept)
            rate_kept(s);
        else
            rate_broken(s);
        rate_str(r, sizeof(r), st->rate);
        snprintf(s->why, sizeof(s->why),
                 "the client: lfbench's CPU reached %.0f%% of its %d thread%s at %s, so past "
                 "here it, not the server, sets the latency (add -t, or load from more hosts)",
                 st->cpu_percent, s->threads, s->threads == 1 ? "" : "s", r);
        s->done = true;
        return;
    }
    if (s->broke == 0)
        rate_kept(s);
    else if (s->broke > SWEEP_TRIES / 2)
        rate_broken(s);
    else if (s->tries - s->broke > SWEEP_TRIES / 2)
        rate_kept(s);
    else
        s->retest = true;
}

/* Rounds r to the range's grid (FROM + k × STEP) when there is one. */
static double on_grid(const struct sweep *s, double r)
{
    if (s->step <= 0)
        return r;
    return s->from + floor((r - s->from) / s->step + 0.5) * s->step;
}

static double find_next(struct sweep *s)
{
    char a[32], b[32];
    double r;

    if (s->n == 0)
        return s->from;
    if (s->done)
        return 0;
    if (s->n >= SWEEP_MAX_FIND) {
        snprintf(s->why + strlen(s->why), sizeof(s->why) - strlen(s->why),
                 "%sgave up after %d steps", s->why[0] ? "; " : "", SWEEP_MAX_FIND);
        return 0;
    }
    if (s->retest)
        return s->last;
    if (s->hi_bad == 0) { /* every step so far kept it: go up */
        if (s->to > 0 && s->last >= s->to) {
            rate_str(a, sizeof(a), s->to);
            snprintf(s->why, sizeof(s->why), "every rate up to the range's end (%s) kept it", a);
            return 0;
        }
        r = s->last * 2;
        return s->to > 0 && r > s->to ? s->to : r;
    }
    if (s->lo_ok == 0) { /* nothing kept it yet: go down */
        if (s->step > 0 || s->last <= 1) {
            rate_str(a, sizeof(a), s->last);
            snprintf(s->why + strlen(s->why), sizeof(s->why) - strlen(s->why),
                     "; even the lowest rate tried (%s) broke the bound", a);
            return 0;
        }
        return s->last / 2;
    }
    if (s->hi_bad - s->lo_ok <= (s->step > 0 ? s->step * 1.0001 : s->lo_ok * 0.05)) {
        char tmp[sizeof(s->why) + 96];
        rate_str(a, sizeof(a), s->lo_ok);
        rate_str(b, sizeof(b), s->hi_bad);
        snprintf(tmp, sizeof(tmp), "%s kept it and %s broke it (%s)", a, b, s->why);
        memcpy(s->why, tmp, sizeof(s->why) - 1); /* truncated if it must be */
        s->why[sizeof(s->why) - 1] = '\0';
        return 0;
    }
    r = on_grid(s, (s->lo_ok + s->hi_bad) / 2);
    if (r <= s->lo_ok)
        r = s->lo_ok + s->step;
    if (r >= s->hi_bad)
        r = s->hi_bad - s->step;
    return r;
}

double sweep_next(struct sweep *s)
{
    double r;

    if (s->pct > 0)
        r = find_next(s);
    else
        r = s->from + s->n * s->step <= s->to * 1.0000001 ? s->from + s->n * s->step : 0;
    if (r > 0) {
        s->n++;
        s->last = r;
        return r;
    }
    if (!s->ended && s->unconfirmed) { /* the answer's caveat: it is in the summary's line */
        size_t len = strlen(s->why);
        snprintf(s->why + len, sizeof(s->why) - len, "; a break not confirmed on re-test: %s%s",
                 s->unconf, s->unconfirmed > 1 ? " and more (see the steps)" : "");
    }
    s->done = s->ended = true;
    return r;
}

double sweep_found(const struct sweep *s)
{
    return s->lo_ok;
}
