/* sweep: --rate-sweep's staircase and --find-rate's search.
 *
 * The search is tcpkali's and mutilate's idea, made honest about its own limits: from the
 * range's FROM (or 1,000/s) it doubles the rate while a step keeps the bound, then bisects
 * between the highest rate kept and the lowest broken until they are within STEP (or 5%). A
 * step keeps the bound when its percentile is within it and nothing failed: no error, no lost
 * response, no send left unsent (an open-loop latency counts from the intended send, so a
 * client that fell behind shows in the percentile too). A step whose client CPU reached
 * SWEEP_CLIENT_BUSY% of its threads ends the search: past that point lfbench, not the server,
 * sets the latency, and the answer would be the client's. */
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
    s->threads = o->threads;
}

static uint64_t errors_of(const struct bcount *c)
{
    uint64_t n = 0;

    for (int e = 0; e < ERR_KINDS; e++)
        n += c->errors[e];
    return n;
}

/* A rate printed the way the summary prints it. */
static void rate_str(char *buf, size_t len, double r)
{
    snprintf(buf, len, r >= 100 ? "%.0f/s" : "%.3g/s", r);
}

void sweep_judge(struct sweep *s, struct bstep *st)
{
    double p = st->lat && st->lat->count ? (double)hist_percentile(st->lat, s->pct) : 0;
    uint64_t errors = errors_of(&st->c);
    bool busy = st->cpu_percent >= SWEEP_CLIENT_BUSY * s->threads;
    char r[32];

    if (s->pct <= 0) {
        st->kept = errors == 0 && st->unsent == 0 && st->c.lost == 0;
        return;
    }
    st->kept = st->lat && st->lat->count > 0 && p <= s->bound_ns && errors == 0 &&
               st->unsent == 0 && st->c.lost == 0;
    rate_str(r, sizeof(r), st->rate);
    if (st->kept) {
        if (st->rate > s->lo_ok)
            s->lo_ok = st->rate;
    } else {
        if (s->hi_bad == 0 || st->rate < s->hi_bad)
            s->hi_bad = st->rate;
        if (!st->lat || st->lat->count == 0)
            snprintf(s->why, sizeof(s->why), "no response at %s", r);
        else if (errors || st->c.lost)
            snprintf(s->why, sizeof(s->why), "errors: %llu (%llu lost) at %s",
                     (unsigned long long)errors, (unsigned long long)st->c.lost, r);
        else if (st->unsent)
            snprintf(s->why, sizeof(s->why),
                     "%llu sends never went out at %s: every connection was busy (add -c)",
                     (unsigned long long)st->unsent, r);
        else
            snprintf(s->why, sizeof(s->why), "latency: p%g %.1f µs over %.1f µs at %s", s->pct,
                     p / 1000.0, s->bound_ns / 1000.0, r);
    }
    if (busy) {
        snprintf(s->why, sizeof(s->why),
                 "the client: lfbench's CPU reached %.0f%% of its %d thread%s at %s, so past "
                 "here it, not the server, sets the latency (add -t, or load from more hosts)",
                 st->cpu_percent, s->threads, s->threads == 1 ? "" : "s", r);
        s->done = true;
    }
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
    } else {
        s->done = true;
    }
    return r;
}

double sweep_found(const struct sweep *s)
{
    return s->lo_ok;
}
