/* lfbench: load client for TCP echo and framed servers; main thread: pre-flight, threads,
 * per-second progress, the summary and --json. */
#include "bopt.h"
#include "bscript.h"
#include "btls.h"
#include "btune.h"
#include "engine.h"
#include "hdr.h"
#include "hist.h"
#include "kstat.h"
#include "merge.h"
#include "net.h"
#include "payload.h"
#include "plot.h"
#include "ports.h"
#include "result.h"
#include "sweep.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

struct second {
    double t;            /* seconds since start */
    double wall;         /* the same instant, seconds since the epoch */
    struct bcount c;     /* that second's counters */
    uint64_t p50, p99;   /* ns */
    int open;            /* connections open at its end */
    struct hcompact lat; /* that second's latencies (owned; moved into the result) */
};

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    if (interrupted)
        _exit(130); /* second Ctrl-C: now */
    interrupted = 1;
}

/* Joins the threads that have finished; returns how many have, in all. */
static int reap(struct bthread *ts, bool *joined, int n)
{
    int done = 0;

    for (int i = 0; i < n; i++) {
        if (!joined[i] && pthread_tryjoin_np(ts[i].tid, NULL) == 0)
            joined[i] = true;
        done += joined[i];
    }
    return done;
}

/* Ephemeral ports the kernel hands out for connect(). */
static long port_range(void)
{
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "re");
    long lo, hi;

    if (!f)
        return 28232;
    if (fscanf(f, "%ld %ld", &lo, &hi) != 2)
        lo = 32768, hi = 60999;
    fclose(f);
    return hi - lo + 1;
}

/* Raises RLIMIT_NOFILE and checks descriptors and ports against what was asked. 0 or -1. */
static int preflight(const struct bopt *o)
{
    struct rlimit rl;
    long need = (long)o->conns + 16L * o->threads + 32, ports = port_range();
    long sources = o->nsources ? o->nsources : 1;

    /* A TLS connection that reconnects keeps its last socket half-closed until the server's
     * close_notify is read (bconn's closing_fd): two descriptors each, at most. */
    if (o->tls && (o->mode == MODE_SHORT || o->reconnect_every))
        need += o->conns;
    if (o->have_cpus) {
        cpu_set_t allowed;
        sched_getaffinity(0, sizeof(allowed), &allowed);
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &o->cpus) && !CPU_ISSET(c, &allowed)) {
                fprintf(stderr,
                        "lfbench: --cpus: CPU %d is not online or outside this process's "
                        "affinity; pick CPUs from taskset -p $$ or nproc\n",
                        c);
                return -1;
            }
    }
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    if ((rlim_t)need > rl.rlim_cur) {
        fprintf(stderr,
                "lfbench: -c %d needs about %ld file descriptors but RLIMIT_NOFILE is %llu: raise "
                "it (ulimit -n %ld) or lower -c\n",
                o->conns, need, (unsigned long long)rl.rlim_cur, need);
        return -1;
    }
    if ((long)o->conns > ports * sources) {
        fprintf(stderr,
                "lfbench: -c %d connections need more than the %ld ephemeral ports of %ld source "
                "address%s: widen net.ipv4.ip_local_port_range or %s\n",
                o->conns, ports * sources, sources, sources == 1 ? "" : "es",
                o->nsources ? "add more --source addresses" : "add addresses with --source");
        return -1;
    }
    {
        /* The ports free now for this target, per source address: TIME_WAIT left by earlier
         * runs can leave too few, or crowd connect()'s search (ports.c says the kernel's rule).
         * Without /proc, no check. */
        struct ports_report *pr = malloc(sizeof(*pr));
        struct ports_need pn = {.conns = o->conns,
                                .short_mode = o->mode == MODE_SHORT,
                                .rate = o->rate,
                                .have_source = o->nsources > 0};
        char line[512];

        if (pr && ports_read(pr, &o->addr, o->sources, o->nsources) == 0) {
            enum ports_verdict v = ports_advice(pr, &pn, line, sizeof(line));
            ports_free(pr);
            if (v == PORTS_SHORT) {
                fprintf(stderr, "lfbench: %s\n", line);
                free(pr);
                return -1;
            }
            if (v == PORTS_WARN)
                fprintf(stderr, "lfbench: warning: %s\n", line);
        }
        free(pr);
    }
    if (o->linger0 && !o->quiet) /* a note, not a warning */
        fprintf(stderr, "lfbench: --linger0: each close sends a reset instead of a FIN; this "
                        "avoids TIME_WAIT on the client only, and the server sees ECONNRESET\n");
    if (o->busy_poll && (!o->have_cpus || CPU_COUNT(&o->cpus) < o->threads))
        fprintf(stderr,
                "lfbench: warning: --busy-poll with %d thread%s %s: a spinning thread shares "
                "its CPU (the server's too, on this host?); give each thread one with --cpus\n",
                o->threads, o->threads == 1 ? "" : "s",
                o->have_cpus ? "and fewer CPUs in --cpus" : "and no --cpus");
    return 0;
}

static double wall_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_seconds(const struct rusage *a, const struct rusage *b)
{
    return (double)(b->ru_utime.tv_sec - a->ru_utime.tv_sec + b->ru_stime.tv_sec -
                    a->ru_stime.tv_sec) +
           (double)(b->ru_utime.tv_usec - a->ru_utime.tv_usec + b->ru_stime.tv_usec -
                    a->ru_stime.tv_usec) /
               1e6;
}

/* The client's CPU at one instant: the process's, the main thread's, and (--busy-poll) the time
 * the engine threads spent in turns that handled something (engine.c). */
struct cpu_mark {
    struct rusage all, main;
    double work;
};

static void cpu_mark(struct cpu_mark *m, const struct bthread *ts, int n)
{
    uint64_t ns = 0;

    getrusage(RUSAGE_SELF, &m->all);
    getrusage(RUSAGE_THREAD, &m->main);
    for (int i = 0; i < n; i++)
        ns += __atomic_load_n(&ts[i].work_ns, __ATOMIC_RELAXED);
    m->work = (double)ns / 1e9;
}

/* The client CPU seconds between two marks. --busy-poll: the main thread's and the engine
 * threads' work, at most the process's; *idle gets the rest (polling that found nothing). */
static double cpu_between(const struct cpu_mark *a, const struct cpu_mark *b, bool busy,
                          double *idle)
{
    double all = cpu_seconds(&a->all, &b->all), used = all;

    if (busy) {
        used = b->work - a->work + cpu_seconds(&a->main, &b->main);
        if (used > all)
            used = all;
    }
    *idle = all - used;
    return used;
}

/* The main thread's view of the run while it goes. */
struct run {
    const struct bopt *o;
    struct bthread *ts;
    bool *joined;
    uint64_t t_start; /* CLOCK_MONOTONIC ns: the run's time 0 (the threads start opening) */
    double wall0;     /* the same instant, seconds since the epoch */
    double next_sec;  /* the whole wall-clock second whose end the next collect() takes */
    struct second *series;
    size_t nsec, capsec;
    FILE *stream;               /* --json-stream */
    struct hdrlog *hdr;         /* --hdr-log */
    int hdr_err;                /* its first failure, -errno */
    const char *phase;          /* opening, warmup, measure, drain, finishing */
    int step;                   /* the step running, from 1 */
    uint64_t step_t0, step_end; /* when it started, and when its last thread finished */
    uint64_t first_t0;          /* when the first step started */
    double step_rate, step_measured;
    struct bstep *steps; /* --rate-sweep, --find-rate */
    size_t nsteps, capsteps;
    double found_rate;
    char found_why[512];
    double open_s;     /* seconds until every connection was open (or --open-timeout) */
    int open_at_start; /* connections open when the first step began */
    /* what the result needs from around the steps */
    const struct payloads *p;
    FILE *jf;                 /* --json, opened before the run */
    bool out_failed;          /* --hdr-log or --json-stream could not be written whole */
    uint64_t t0, t1;          /* CLOCK_MONOTONIC ns: the threads' start, their end */
    struct cpu_mark ru0, ru1; /* the client's CPU at t0 and t1 */
    bool have_k;              /* the kernel's counters could be read at the start (and end) */
    struct kstat k0, kd;      /* at the start; the run's deltas */
    struct bscript *sc;       /* --script, NULL without */
    int ninit;                /* threads whose engine_init succeeded (freed on an early exit) */
    bool script_failed;       /* a thread's script error stopped the run (said when seen) */
    bool connected;           /* a connection has been established: refusals are errors now */
    bool nobody;              /* nothing listens: every connect refused (said when seen) */
    uint64_t judge_from;      /* CLOCK_MONOTONIC ns: --start-at, before which a refusal is
                               * retried (the server may come up meanwhile); 0: at once */
};

/* Grace past a call's budget before main's watchdog gives up on a thread stuck in its script. */
#define SCRIPT_GRACE_NS 2000000000ull

/* main's own script calls (the file, setup, init before the threads start; done after): the
 * count hook stops a Lua loop at the budget, SIGALRM a C call that never returns. */
static void on_script_alarm(int sig)
{
    static const char m[] =
        "lfbench: FAILED: the script's setup, init, done or a finalizer at exit ran past its "
        "budget in a call that does not return (a C function that never "
        "ends): exiting\n";
    (void)sig;
    (void)!write(2, m, sizeof(m) - 1);
    _exit(1);
}

static void script_alarm(unsigned seconds)
{
    signal(SIGALRM, on_script_alarm);
    alarm(seconds);
}

/* --script: a thread's script error stops every thread (once, said on one line); a thread stuck
 * in a call the hook cannot stop (a C function that never returns) ends lfbench. */
static void script_watch(struct run *r)
{
    uint64_t now = now_ns();

    for (int i = 0; r->sc && i < r->o->threads; i++) {
        struct bthread *t = &r->ts[i];
        const char *stuck = bscript_stuck(t->sc, now, SCRIPT_GRACE_NS);

        if (stuck) {
            fprintf(stderr,
                    "lfbench: FAILED: thread %d has been in %s for over %.0f s and does not "
                    "return (a C function that never ends, or a finalizer's loop: out of "
                    "reach of the script's budget): exiting without a summary\n",
                    i, stuck, (double)(SCRIPT_CALL_BUDGET_NS + SCRIPT_GRACE_NS) / 1e9);
            _exit(1);
        }
        if (!r->script_failed && __atomic_load_n(&t->script_failed, __ATOMIC_ACQUIRE)) {
            r->script_failed = true;
            fprintf(stderr, "lfbench: script error in thread %d: %s; stopping the run\n", i,
                    bscript_error(t->sc));
            for (int k = 0; k < r->o->threads; k++)
                engine_stop(&r->ts[k]);
        }
    }
}

/* Nothing listens where the connections go, wrk's check: not one connection established yet,
 * and every thread's connects refused (each thread has its own address when setup() set one);
 * with --start-at, asked from WHEN on (until then a refused connect is retried).
 * Said at once, and the run ends (run_tick returns -1 with r->nobody). Once a connection has
 * been established, refused connects are the run's errors (a server restarting mid-run), and
 * this is not asked again. */
static bool nothing_listens(struct run *r)
{
    char names[3][INET6_ADDRSTRLEN + 8], list[4 * sizeof(names[0]) + 16] = "";
    int nnames = 0;

    if (r->connected || now_ns() < r->judge_from)
        return false;
    for (int i = 0; i < r->o->threads; i++)
        if (__atomic_load_n(&r->ts[i].established, __ATOMIC_RELAXED)) {
            r->connected = true;
            return false;
        }
    for (int i = 0; i < r->o->threads; i++)
        if (r->ts[i].nconns > 0 && !__atomic_load_n(&r->ts[i].refused, __ATOMIC_RELAXED))
            return false;
    for (int i = 0; i < r->o->threads; i++) { /* the addresses refused, each named once */
        struct sockaddr_storage ss = {0};
        char name[sizeof(names[0])];
        bool seen = false;

        if (r->ts[i].nconns == 0)
            continue;
        memcpy(&ss, r->ts[i].addr, r->ts[i].addrlen < sizeof(ss) ? r->ts[i].addrlen : sizeof(ss));
        net_addr_name(&ss, name, sizeof(name));
        for (int k = 0; k < nnames && !seen; k++)
            seen = !strcmp(names[k], name);
        if (seen)
            continue;
        if (nnames == 3) {
            strcat(list, ", ...");
            break;
        }
        snprintf(names[nnames], sizeof(names[0]), "%s", name);
        if (nnames++)
            strcat(list, ", ");
        strcat(list, name);
    }
    if (nnames == 1 && strcmp(list, r->o->target)) /* a name given: say what it resolved to */
        fprintf(stderr,
                "lfbench: connect %s (%s): connection refused: nothing listens there; "
                "start the server or check the address\n",
                r->o->target, list);
    else
        fprintf(stderr,
                "lfbench: connect %s: connection refused: nothing listens there; start the server "
                "or check the address\n",
                list);
    r->nobody = true;
    return true;
}

/* Whether a thread stopped early (wrk.thread:stop(), a script error): the step's window is then
 * what its requests took, not -d. */
static bool stopped_early(const struct run *r)
{
    for (int i = 0; r->sc && i < r->o->threads; i++)
        if (__atomic_load_n(&r->ts[i].script_stopped, __ATOMIC_RELAXED) ||
            __atomic_load_n(&r->ts[i].script_failed, __ATOMIC_ACQUIRE))
            return true;
    return false;
}

static uint64_t series_errors(const struct run *r)
{
    uint64_t n = 0;

    for (size_t k = 0; k < r->nsec; k++)
        n += bcount_errors(&r->series[k].c);
    return n;
}

static int sum_open(const struct run *r)
{
    int n = 0;

    for (int i = 0; i < r->o->threads; i++)
        n += __atomic_load_n(&r->ts[i].open, __ATOMIC_RELAXED);
    return n;
}

/* --json-stream: a second's phases (cphase.h), each that has samples as an object of its own. */
static void stream_phases(FILE *f, const struct hist *ph)
{
    for (int k = 0; k < CP_N; k++) {
        const struct hist *h = &ph[k];

        if (!h->count)
            continue;
        fprintf(f,
                ", \"%s\": {\"samples\": %llu, \"p50_us\": %.3f, \"p90_us\": %.3f, "
                "\"p99_us\": %.3f, \"max_us\": %.3f}",
                cphase_tag[k], (unsigned long long)h->count, hist_us(hist_percentile(h, 50)),
                hist_us(hist_percentile(h, 90)), hist_us(hist_percentile(h, 99)), hist_us(h->max));
    }
}

/* --hdr-log: a second's phases with samples, each a tagged interval after the untagged one. */
static void hdr_phases(struct run *r, double from, double len, const struct hist *ph)
{
    for (int k = 0; k < CP_N; k++) {
        int e = ph[k].count ? hdrlog_write_tagged(r->hdr, cphase_tag[k], from, len, &ph[k]) : 0;
        if (e < 0 && !r->hdr_err)
            r->hdr_err = e;
    }
}

/* What the threads published for the second that ends: counts into s, latencies into h, the
 * measured window's into m (--hdr-log, else NULL), the phases into ph[CP_N]. */
static void take_second(struct run *r, struct second *s, struct hist *h, struct hist *m,
                        struct hist *ph)
{
    hist_init(h);
    if (m)
        hist_init(m);
    for (int k = 0; k < CP_N; k++)
        hist_init(&ph[k]);
    for (int i = 0; i < r->o->threads; i++) {
        struct bthread *t = &r->ts[i];
        pthread_mutex_lock(&t->pub_lock);
        bcount_add(&s->c, &t->pub);
        hist_merge(h, &t->pub_lat);
        memset(&t->pub, 0, sizeof(t->pub));
        hist_init(&t->pub_lat);
        if (m) {
            hist_merge(m, &t->pub_mlat);
            hist_init(&t->pub_mlat);
        }
        for (int k = 0; k < CP_N; k++)
            if (t->pub_ph[k].count) {
                hist_merge(&ph[k], &t->pub_ph[k]);
                hist_init(&t->pub_ph[k]);
            }
        pthread_mutex_unlock(&t->pub_lock);
    }
}

/* One second's counters from every thread, up to the wall-clock time end (a whole second, but
 * for the run's last): into the series, a progress line, --json-stream. */
static int collect(struct run *r, double end)
{
    const struct bopt *o = r->o;
    struct second s = {.t = end - r->wall0, .wall = end};
    struct hist *h = malloc(sizeof(*h)), *m = r->hdr ? malloc(sizeof(*m)) : NULL,
                *ph = malloc(CP_N * sizeof(*ph));
    double len;

    if (!h || (r->hdr && !m) || !ph)
        goto fail;
    take_second(r, &s, h, m, ph);
    s.open = sum_open(r);
    s.p50 = hist_percentile(h, 50);
    s.p99 = hist_percentile(h, 99);
    if (hcompact_from(&s.lat, h) < 0)
        goto fail;
    if (r->nsec == r->capsec) {
        r->capsec = r->capsec ? r->capsec * 2 : 64;
        r->series = realloc(r->series, r->capsec * sizeof(*r->series));
        if (!r->series)
            goto fail;
    }
    r->series[r->nsec++] = s;
    r->next_sec = floor(end) + 1;
    len = s.t - (r->nsec > 1 ? r->series[r->nsec - 2].t : 0.0);
    if (!o->quiet)
        fprintf(stderr, "%6.1fs %10.0f req/s  p99 %9.1f µs  errors %llu  open %d%s%s\n", s.t,
                len > 0 ? (double)s.c.requests / len : 0.0, hist_us(s.p99),
                (unsigned long long)bcount_errors(&s.c), s.open,
                strcmp(r->phase, "measure") ? "  " : "",
                strcmp(r->phase, "measure") ? r->phase : "");
    if (r->stream) {
        fprintf(r->stream,
                "{\"t\": %.3f, \"wall\": %.3f, \"phase\": \"%s\", \"step\": %d, \"rate\": %.3f, "
                "\"requests\": %llu, \"qps\": %.1f, \"errors\": %llu, \"lost\": %llu, "
                "\"p50_us\": %.3f, \"p90_us\": %.3f, \"p99_us\": %.3f, \"max_us\": %.3f, "
                "\"open\": %d",
                s.t, s.wall, r->phase, r->step, r->step_rate, (unsigned long long)s.c.requests,
                len > 0 ? (double)s.c.requests / len : 0.0, (unsigned long long)bcount_errors(&s.c),
                (unsigned long long)s.c.lost, hist_us(s.p50), hist_us(hist_percentile(h, 90)),
                hist_us(s.p99), h->count ? hist_us(h->max) : 0.0, s.open);
        stream_phases(r->stream, ph);
        fputs("}\n", r->stream);
        fflush(r->stream);
    }
    if (m) { /* the interval log holds the measured windows' latencies, as the summary does */
        int e = hdrlog_write(r->hdr, s.t - len, len, m);
        if (e < 0 && !r->hdr_err)
            r->hdr_err = e;
        hdr_phases(r, s.t - len, len, ph);
    }
    free(h);
    free(m);
    free(ph);
    return 0;
fail:
    free(h);
    free(m);
    free(ph);
    return -1;
}

/* Sleeps a tick; passes Ctrl-C on; collects a second when one is due. */
static int run_tick(struct run *r)
{
    struct timespec tick = {0, 10 * 1000000L};
    uint64_t now;
    double wall;

    nanosleep(&tick, NULL);
    script_watch(r);
    if (nothing_listens(r))
        return -1;
    if (interrupted) { /* every tick: a step commanded just before may not have begun */
        for (int i = 0; i < r->o->threads; i++)
            engine_stop(&r->ts[i]);
    }
    now = now_ns();
    if (r->step > 0 && strcmp(r->phase, "finishing")) {
        uint64_t warm = r->step_t0 + (uint64_t)(r->o->warmup * 1e9);
        r->phase = now < warm ? "warmup"
                   : r->o->duration <= 0 || now < warm + (uint64_t)(r->o->duration * 1e9)
                       ? "measure"
                       : "drain";
    }
    /* 30 ms after each whole second of the wall clock, so that the threads' periodic timers
     * (engine.c: at the same whole seconds) have published it. Each agent's seconds are then
     * the same seconds, whenever it started, and merge adds them as they are. A second missed
     * (the main thread held up) goes into the next: its counts are not lost. */
    wall = wall_now();
    if (wall < r->next_sec + 0.030)
        return 0;
    return collect(r, floor(wall - 0.030));
}

/* Whether every thread has finished step k. */
static bool step_over(struct run *r, int k)
{
    for (int i = 0; i < r->o->threads; i++)
        if (engine_step_done(&r->ts[i]) < k)
            return false;
    r->step_end = now_ns();
    return true;
}

/* The measured seconds of a step with no fixed length (-n, or cut short by Ctrl-C): from its
 * start after the warm-up to the end of its last request, as the threads saw them. When main
 * noticed the step was over came up to 20 ms later (its 10 ms poll after the thread's 10 ms
 * tick): 1-9% of a short run. Without a request, when main saw it. */
static double step_window(const struct run *r)
{
    uint64_t from = UINT64_MAX, to = 0;

    for (int i = 0; i < r->o->threads; i++) {
        const struct bstepres *s = &r->ts[i].sres;
        if (s->t_from < from)
            from = s->t_from;
        if (s->t_to > to)
            to = s->t_to;
    }
    if (to > from)
        return (double)(to - from) / 1e9;
    return (double)(r->step_end - r->step_t0) / 1e9 - r->o->warmup;
}

/* A finished step's results from every thread. */
static void gather_step(struct run *r, struct bstep *st, double rate, double cpu, uint64_t ns)
{
    memset(st, 0, sizeof(*st));
    st->rate = rate;
    st->start_wall = r->wall0 + ((double)r->step_t0 - (double)r->t_start) / 1e9;
    st->lat = malloc(sizeof(*st->lat));
    if (st->lat)
        hist_init(st->lat);
    for (int i = 0; i < r->o->threads; i++) {
        const struct bstepres *s = &r->ts[i].sres;
        bcount_add(&st->c, &s->c);
        if (st->lat)
            hist_merge(st->lat, &s->lat);
        st->intended += s->intended;
        st->behind += s->behind;
        st->unsent += s->unsent;
        st->over_bound += s->over_bound;
    }
    st->measured =
        r->o->duration > 0 && !interrupted ? r->o->duration : (double)ns / 1e9 - r->o->warmup;
    if (st->measured <= 0)
        st->measured = (double)ns / 1e9;
    st->cpu_percent = ns ? 100.0 * cpu / ((double)ns / 1e9) : 0;
}

static bool step_without_response(const struct bresult *r)
{
    for (size_t k = 0; k < r->nsteps; k++)
        if (r->steps[k].c.requests == 0)
            return true;
    return false;
}

static const char *const mode_name[] = {"long", "short"};
static const char *const expect_name[] = {"echo", "line", "len32", "bytes", "http"};

/* --- main's phases, in the order it runs them ------------------------------------------------ */

/* The command line, the checks that need the system (file descriptors, ports, CPUs) and the
 * request files. Returns -1 to go on, or the exit status (0 for --help, 2 for bad usage) with
 * everything freed. */
static int parse_and_check(struct bopt *o, struct payloads *p, int argc, char **argv)
{
    char err[512];

    switch (bopt_parse(o, argc, argv, stdout, err, sizeof(err))) {
    case BOPT_EXIT:
        bopt_free(o);
        return 0;
    case BOPT_ERROR:
        fprintf(stderr, "lfbench: %s\n", err);
        bopt_free(o);
        return 2;
    case BOPT_RUN:
        break;
    }
    if (o->warning[0]) /* -q too: what an option means changed */
        fprintf(stderr, "lfbench: warning: %s\n", o->warning);
    if (preflight(o) < 0) {
        bopt_free(o);
        return 2;
    }
    if (payload_load(p, o, err, sizeof(err)) < 0) {
        fprintf(stderr, "lfbench: %s\n", err);
        bopt_free(o);
        return 2;
    }
    if (o->tls) { /* the files and lists, each said before any connection */
        struct tls_ctx *x = btls_ctx_new(o, err, sizeof(err));
        if (!x) {
            fprintf(stderr, "lfbench: %s\n", err);
            payload_free(p);
            bopt_free(o);
            return 2;
        }
        btls_ctx_free(x);
    }
    return -1;
}

/* The opening line on stderr: what is about to run (-q: none). */
static void announce(const struct bopt *o, const struct payloads *p)
{
    if (o->quiet) /* -q: the result and errors only */
        return;
    fprintf(stderr, "lfbench: %s, %s mode, %d connection%s, %d thread%s, pipeline %d, ",
            o->url ? o->url : o->target, mode_name[o->mode], o->conns, o->conns == 1 ? "" : "s",
            o->threads, o->threads == 1 ? "" : "s", o->pipeline);
    if (o->script && o->expect == EXPECT_HTTP) /* the script makes every request */
        fprintf(stderr, "requests from %s", o->script);
    else if (o->script) /* request(), or lfbench's payloads without one */
        fprintf(stderr, "requests from %s (else %zu-byte %s ones)", o->script, p->cls[0].len,
                p->n > 1         ? "--mix"
                : p->cls[0].data ? p->cls[0].name
                                 : "generated");
    else if (p->n == 1)
        fprintf(stderr, "%zu-byte %s requests", p->cls[0].len,
                p->cls[0].data ? p->cls[0].name : "generated");
    else
        fprintf(stderr, "a mix of %d request files", p->n);
    fprintf(stderr, ", expect %s", expect_name[o->expect]);
    if (o->tls)
        fprintf(stderr, ", TLS%s%s%s", o->tls_sni ? " to " : "", o->tls_sni ? o->tls_sni : "",
                o->tls_insecure ? " (not verified)" : "");
    if (o->rate > 0)
        fprintf(stderr, ", open loop at %.0f/s", o->rate);
    if (o->busy_poll)
        fprintf(stderr, ", busy-polling");
    if (o->duration > 0)
        fprintf(stderr, ", %.1f s after %.1f s warm-up\n", o->duration, o->warmup);
    else
        fprintf(stderr, ", %llu requests\n", (unsigned long long)o->requests);
}

/* The output files, opened before any connection is made: a bad path is a usage error. Returns
 * 0, or -1 with one line said and nothing left open. */
static int open_outputs(struct run *r)
{
    const struct bopt *o = r->o;
    char herr[512];

    if (o->json && !(r->jf = fopen(o->json, "we"))) {
        fprintf(stderr, "lfbench: cannot write --json %s: %s\n", o->json, strerror(errno));
        goto fail;
    }
    if (o->hdr_log && !(r->hdr = hdrlog_open(o->hdr_log, r->wall0, herr, sizeof(herr)))) {
        fprintf(stderr, "lfbench: %s\n", herr);
        goto fail;
    }
    if (o->json_stream) {
        r->stream = strcmp(o->json_stream, "-") ? fopen(o->json_stream, "we") : stdout;
        if (!r->stream) {
            fprintf(stderr, "lfbench: cannot write --json-stream %s: %s\n", o->json_stream,
                    strerror(errno));
            goto fail;
        }
    }
    return 0;
fail:
    if (r->jf)
        fclose(r->jf);
    if (r->hdr)
        hdrlog_close(r->hdr);
    return -1;
}

/* One engine per thread, its share of the connections and of -n, each started (pinned to
 * --cpus in turn). Returns 0, or -1 with one line said. */
static int start_threads(struct run *r)
{
    const struct bopt *o = r->o;
    int cpu_list[CPU_SETSIZE], ncpus = 0, rc;

    for (int c = 0; o->have_cpus && c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &o->cpus))
            cpu_list[ncpus++] = c;
    r->ts = calloc((size_t)o->threads, sizeof(*r->ts));
    r->joined = calloc((size_t)o->threads, sizeof(*r->joined));
    if (!r->ts || !r->joined)
        return -1;
    for (int i = 0, base = 0; i < o->threads; i++) {
        int n = o->conns / o->threads + (i < o->conns % o->threads);
        struct bscthread *sc = NULL;
        char err[512];

        if (r->sc) { /* the file, setup() and init(): 10 s each */
            script_alarm(3 * (unsigned)(SCRIPT_PHASE_BUDGET_NS / 1000000000ull) + 2);
            sc = bscript_thread(r->sc, i, err, sizeof(err));
            alarm(0);
            if (!sc) {
                fprintf(stderr, "lfbench: %s\n", err);
                return -EINVAL; /* the script's error: no thread runs yet, main frees and exits */
            }
        }
        if (engine_init(&r->ts[i], i, o, r->p, sc, (uint32_t)base, n, r->t_start) < 0) {
            fprintf(stderr, "lfbench: out of memory for thread %d\n", i);
            return -1;
        }
        r->ninit = i + 1;
        if (o->requests)
            r->ts[i].quota = o->requests / (uint64_t)o->threads +
                             ((uint64_t)i < o->requests % (uint64_t)o->threads);
        base += n;
    }
    r->have_k = kstat_read("/proc/net", &r->k0) > 0;
    cpu_mark(&r->ru0, r->ts, o->threads);
    r->t0 = now_ns();
    for (int i = 0; i < o->threads; i++) {
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        if (ncpus) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(cpu_list[i % ncpus], &one);
            pthread_attr_setaffinity_np(&attr, sizeof(one), &one);
        }
        rc = pthread_create(&r->ts[i].tid, &attr, engine_main, &r->ts[i]);
        pthread_attr_destroy(&attr);
        if (rc) {
            fprintf(stderr, "lfbench: cannot create thread %d: %s\n", i, strerror(rc));
            return -1;
        }
    }
    return 0;
}

/* Long mode opens every connection first: the measured window (the open-loop schedule with
 * it) starts once all are open, at --open-timeout, or when opening stalled; and not before
 * --start-at. Returns 0 or -1. */
static int open_connections(struct run *r)
{
    const struct bopt *o = r->o;
    uint64_t start_mono = 0, t_opened = 0, best_t = r->t_start;
    double open_timeout = o->open_timeout >= 0 ? o->open_timeout : 10 + o->conns / 1000.0;
    int open_now = 0, best = 0;

    if (o->start_at > 0) {
        double ahead = o->start_at - wall_now();
        start_mono = now_ns() + (ahead > 0 ? (uint64_t)(ahead * 1e9) : 0);
        r->judge_from = start_mono; /* agents may be started before the server they load */
    }
    for (;;) {
        uint64_t now = now_ns();

        open_now = sum_open(r);
        if (open_now > best)
            best = open_now, best_t = now;
        /* Opening is over when all are open, at --open-timeout, or when it has stalled: no
         * new connection for a second while connects fail (nothing listens, say): the run
         * then shows the errors instead of waiting them out. */
        if (!t_opened && (o->mode == MODE_SHORT || open_now >= o->conns ||
                          now >= r->t_start + (uint64_t)(open_timeout * 1e9) ||
                          (now - best_t > 1000000000ull && series_errors(r) > 0)))
            t_opened = now;
        if (interrupted || (t_opened && now >= start_mono))
            break;
        if (run_tick(r) < 0)
            return -1;
    }
    if (!t_opened)
        t_opened = now_ns();
    r->open_s = o->mode == MODE_LONG ? (double)(t_opened - r->t_start) / 1e9 : 0;
    r->open_at_start = open_now;
    if (o->mode == MODE_LONG && open_now < o->conns && !interrupted)
        fprintf(
            stderr,
            "lfbench: only %d of %d connections opened in %.1f s (--open-timeout, or no progress "
            "while connects failed); the measured window starts anyway\n",
            open_now, o->conns, r->open_s);
    return 0;
}

/* A finished step of a sweep or search: its row, the search's verdict on it, its progress
 * line. Returns 0 or -1 (out of memory). */
static int sweep_step_done(struct run *r, struct sweep *sw, int k, double rate, double cpu,
                           uint64_t ns)
{
    const struct bopt *o = r->o;
    struct bstep *st;

    if (r->nsteps == r->capsteps) {
        r->capsteps = r->capsteps ? r->capsteps * 2 : 16;
        r->steps = realloc(r->steps, r->capsteps * sizeof(*r->steps));
        if (!r->steps)
            return -1;
    }
    st = &r->steps[r->nsteps++];
    gather_step(r, st, rate, cpu, ns);
    sweep_judge(sw, st);
    if (o->quiet)
        return 0;
    fprintf(stderr,
            "step %d: %.0f/s intended, %.0f/s done, p50 %.1f µs, p99 %.1f µs, errors %llu, "
            "unsent %llu, client CPU %.0f%%",
            k, rate, (double)st->c.requests / st->measured, hist_us(hist_percentile(st->lat, 50)),
            hist_us(hist_percentile(st->lat, 99)), (unsigned long long)bcount_errors(&st->c),
            (unsigned long long)st->unsent, st->cpu_percent);
    if (o->expect == EXPECT_HTTP)
        fprintf(stderr, ", non-2xx %llu", (unsigned long long)st->c.http_non2xx);
    if (o->find_pct > 0)
        fprintf(stderr, "%s%s%s", st->attempt > 1 ? ", re-test" : "",
                st->kept ? ", kept" : ", broke",
                sw->retest ? " (no verdict yet: the rate runs again)" : "");
    fputc('\n', stderr);
    return 0;
}

/* The load: one step, or --rate-sweep's and --find-rate's several on the same connections,
 * each commanded to every thread and waited for. Returns 0 or -1. */
static int run_steps(struct run *r)
{
    const struct bopt *o = r->o;
    struct sweep sw;
    bool multi = o->sweep_step > 0 || o->find_pct > 0;
    double rate = o->rate;

    sweep_init(&sw, o);
    for (int k = 1; !interrupted; k++) {
        struct bcmd cmd = {.seq = k, .warmup = o->warmup, .duration = o->duration};
        struct cpu_mark ra, rb;
        double idle;
        uint64_t ta, tb;

        if (multi && (rate = sweep_next(&sw)) <= 0)
            break;
        if (!multi && k > 1)
            break;
        cmd.rate = rate;
        cpu_mark(&ra, r->ts, o->threads);
        ta = now_ns();
        cmd.start = ta + 1000000; /* every thread has it by then */
        r->step = k;
        r->step_t0 = cmd.start;
        if (k == 1)
            r->first_t0 = cmd.start;
        r->step_rate = rate;
        for (int i = 0; i < o->threads; i++) {
            cmd.quota = o->requests ? o->requests / (uint64_t)o->threads +
                                          ((uint64_t)i < o->requests % (uint64_t)o->threads)
                                    : 0;
            engine_command(&r->ts[i], &cmd);
        }
        while (!step_over(r, k))
            if (run_tick(r) < 0)
                return -1;
        tb = now_ns();
        cpu_mark(&rb, r->ts, o->threads);
        if (!multi)
            r->step_measured =
                o->duration > 0 && !interrupted && !stopped_early(r) ? o->duration : step_window(r);
        else if (sweep_step_done(r, &sw, k, rate, cpu_between(&ra, &rb, o->busy_poll, &idle),
                                 tb - ta) < 0)
            return -1;
    }
    if (o->find_pct > 0) {
        r->found_rate = sweep_found(&sw);
        snprintf(r->found_why, sizeof(r->found_why), "%s", sw.why);
    }
    return 0;
}

/* The threads finish and are joined; the last, short second is collected; the streamed
 * outputs are closed (one that could not be written whole is said). Returns 0 or -1. */
static int finish(struct run *r)
{
    const struct bopt *o = r->o;
    struct kstat k1;
    double w, end;

    r->phase = "finishing";
    for (int i = 0; i < o->threads; i++)
        engine_command(&r->ts[i], &(struct bcmd){.finish = true});
    while (reap(r->ts, r->joined, o->threads) < o->threads)
        if (run_tick(r) < 0)
            return -1;
    /* Within 30 ms after a whole second not yet collected, the threads' final counts hold that
     * second and the few ms past it: they go to that second, where nearly all of them belong. */
    w = wall_now();
    end = w >= r->next_sec && w < r->next_sec + 0.030 ? r->next_sec : w;
    if (end > (r->nsec ? r->series[r->nsec - 1].wall : r->wall0) + 0.005 && collect(r, end) < 0)
        return -1;
    if (r->hdr) {
        int e = hdrlog_close(r->hdr);
        if (r->hdr_err || e)
            fprintf(stderr, "lfbench: --hdr-log %s is incomplete: %s\n", o->hdr_log,
                    strerror(-(r->hdr_err ? r->hdr_err : e)));
        r->out_failed = r->hdr_err || e;
    }
    if (r->stream &&
        (ferror(r->stream) | (r->stream != stdout ? fclose(r->stream) : fflush(r->stream)))) {
        fprintf(stderr, "lfbench: --json-stream %s is incomplete: %s\n", o->json_stream,
                strerror(errno));
        r->out_failed = true;
    }
    r->t1 = now_ns();
    cpu_mark(&r->ru1, r->ts, o->threads);
    r->have_k = r->have_k && kstat_read("/proc/net", &k1) > 0;
    kstat_delta(&r->k0, &k1, &r->kd);
    return 0;
}

/* Nothing listened (said already): the threads are told to finish and joined, the output files
 * opened for the run are removed (no connection ever opened: there is no run to describe), and
 * what the run made is freed. Returns the exit status: 1, the run failed. */
static int abandon(struct run *r)
{
    const struct bopt *o = r->o;
    struct timespec tick = {0, 10 * 1000000L};

    for (int i = 0; i < o->threads; i++)
        engine_command(&r->ts[i], &(struct bcmd){.finish = true});
    while (reap(r->ts, r->joined, o->threads) < o->threads) {
        nanosleep(&tick, NULL);
        script_watch(r); /* a thread stuck in its script ends lfbench there */
    }
    if (r->jf && !fclose(r->jf))
        unlink(o->json);
    if (r->hdr && !hdrlog_close(r->hdr))
        unlink(o->hdr_log);
    if (r->stream && r->stream != stdout && !fclose(r->stream))
        unlink(o->json_stream);
    for (int i = 0; i < o->threads; i++)
        engine_free(&r->ts[i]);
    for (size_t k = 0; k < r->nsec; k++)
        hcompact_free(&r->series[k].lat);
    free(r->series);
    for (size_t k = 0; k < r->nsteps; k++)
        free(r->steps[k].lat);
    free(r->steps);
    free(r->ts);
    free(r->joined);
    if (r->sc) {
        script_alarm((unsigned)(SCRIPT_PHASE_BUDGET_NS / 1000000000ull) + 2);
        bscript_free(r->sc);
        alarm(0);
    }
    return 1;
}

/* The configuration part of the result: what was asked, the request classes. 0 or -ENOMEM. */
static int result_config(struct bresult *res, const struct bopt *o, const struct payloads *p)
{
    res->target = strdup(o->target);
    res->mode = strdup(mode_name[o->mode]);
    res->expect = strdup(o->expect == EXPECT_HTTP ? "http" : expect_name[o->expect]);
    res->ok_status = strdup(o->ok_status_arg ? o->ok_status_arg : "2xx");
    res->lat = malloc(sizeof(*res->lat));
    if (!res->target || !res->mode || !res->expect || !res->ok_status || !res->lat)
        return -ENOMEM;
    for (int k = 0; k < CP_N; k++) {
        if (!(res->ph[k] = malloc(sizeof(*res->ph[k]))))
            return -ENOMEM;
        hist_init(res->ph[k]);
    }
    res->conns = o->conns;
    res->threads = o->threads;
    res->pipeline = o->pipeline;
    res->timeout_ms = o->timeout_ms;
    res->duration = o->duration;
    res->warmup = o->warmup;
    res->rate = o->rate;
    res->requests_asked = o->requests;
    res->busy_poll = o->busy_poll;
    res->tls = o->tls;
    res->tls_insecure = o->tls_insecure;
    res->tls_resume = o->tls_resume;
    hist_init(res->lat);
    res->nclasses = p->n;
    for (int k = 0; k < p->n; k++) {
        res->cls[k].name = strdup(p->cls[k].name ? p->cls[k].name : "generated");
        res->cls[k].weight = p->cls[k].weight;
        res->cls[k].bytes = p->cls[k].len;
        if (!res->cls[k].name)
            return -ENOMEM;
        if (p->n > 1) {
            if (!(res->cls[k].lat = malloc(sizeof(*res->cls[k].lat))))
                return -ENOMEM;
            hist_init(res->cls[k].lat);
        }
    }
    return 0;
}

/* The summary's words for a thread's first mismatch (malloc'd, NULL without memory): the bytes
 * as a C string would write them, and, for --expect http, what a response that does not start
 * with a status line says of the server (an echo sends the request back). */
static char *mismatch_text(const struct bthread *t, enum expect expect)
{
    char bytes[4 * sizeof(t->bad) + 1], *s;
    size_t n = 0;

    for (size_t i = 0; i < t->bad_len; i++) {
        uint8_t b = t->bad[i];

        if (b == '\r' || b == '\n' || b == '\t')
            n += (size_t)sprintf(bytes + n, "\\%c", b == '\r' ? 'r' : b == '\n' ? 'n' : 't');
        else if (b == '"' || b == '\\')
            n += (size_t)sprintf(bytes + n, "\\%c", b);
        else if (b < 0x20 || b > 0x7e)
            n += (size_t)sprintf(bytes + n, "\\x%02x", b);
        else
            bytes[n++] = (char)b;
    }
    bytes[n] = '\0';
    if (asprintf(&s, "byte %llu of a response, \"%s\"%s%s", (unsigned long long)t->bad_at, bytes,
                 t->bad_len == sizeof(t->bad) ? "..." : "",
                 expect == EXPECT_HTTP && t->bad_at == 0 &&
                         (t->bad_len < 5 || memcmp(t->bad, "HTTP/", 5))
                     ? " (no HTTP status line: is the server an HTTP one? an echo server sends "
                       "the request back)"
                     : "") < 0)
        return NULL;
    return s;
}

/* Every thread's totals summed into res. */
static void result_totals(struct bresult *res, const struct run *r)
{
    uint64_t connect_ns = 0, open_ns = 0;

    for (int i = 0; i < r->o->threads; i++) {
        const struct bthread *t = &r->ts[i];
        if (t->bad_seen && !res->mismatch)
            res->mismatch = mismatch_text(t, r->o->expect);
        if (t->tls_why[0] && !res->tls_error)
            res->tls_error = strdup(t->tls_why);
        if (t->tls_protocol && !res->tls_protocol) {
            res->tls_protocol = strdup(t->tls_protocol);
            res->tls_cipher = strdup(t->tls_cipher);
        }
        res->tls_full += t->tls_full;
        res->tls_resumed += t->tls_resumed;
        res->tls_offered += t->tls_offered;
        bcount_add(&res->total, &t->total);
        hist_merge(res->lat, &t->lat);
        for (int k = 0; k < CP_N; k++)
            hist_merge(res->ph[k], &t->ph[k]);
        res->resumed += t->resumed;
        for (int k = 0; res->nclasses > 1 && k < res->nclasses; k++)
            hist_merge(res->cls[k].lat, &t->cls_lat[k]);
        res->behind += t->behind;
        res->intended += t->intended;
        res->unsent += t->unsent;
        if (t->conn_min < res->conn_min)
            res->conn_min = t->conn_min;
        if (t->conn_max > res->conn_max)
            res->conn_max = t->conn_max;
        res->all_requests += t->issued;
        connect_ns += t->connect_ns;
        res->connect_calls += t->connect_calls;
        open_ns += t->open_connect_ns;
        res->open_connects += t->open_connect_calls;
    }
    res->connect_s = (double)connect_ns / 1e9;
    res->connect_busy = (double)open_ns / 1e9;
    res->reconnects = res->total.reconnects;
    res->http_non2xx = res->total.http_non2xx;
    if (r->sc) {
        const char *f = bscript_failure(r->sc);
        res->script = strdup(r->o->script);
        res->script_failure = f ? strdup(f) : NULL;
    }
}

/* Whether ss is a loopback address (127.0.0.0/8, ::1, or ::ffff:127.x.y.z). */
static bool is_loopback(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
    if (ss->ss_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
    }
    return false;
}

/* The run's id, drawn at random, by which merge tells one run given twice (a file and a merged
 * file that holds it). Where getrandom cannot give one, the time and the pid make one. Returns 0
 * or -ENOMEM. */
static int draw_run_id(struct bresult *res)
{
    uint64_t id = 0;
    struct timespec ts;

    if (!(res->run_ids = malloc(sizeof(*res->run_ids))))
        return -ENOMEM;
    if (getrandom(&id, sizeof(id), GRND_NONBLOCK) != (ssize_t)sizeof(id)) {
        clock_gettime(CLOCK_REALTIME, &ts);
        id = ((uint64_t)ts.tv_sec << 32 ^ (uint64_t)ts.tv_nsec) * 0x9e3779b97f4a7c15ULL ^
             (uint64_t)getpid();
    }
    res->run_ids[0] = id;
    res->nrun_ids = 1;
    return 0;
}

/* The results as one struct, from which the summary and --json both come. The per-second
 * series and the steps move from r into res. Returns 0 or -ENOMEM. */
static int build_result(struct bresult *res, struct run *r)
{
    const struct bopt *o = r->o;
    int rc;

    result_init(res);
    if ((rc = result_config(res, o, r->p)) < 0 || (rc = draw_run_id(res)) < 0)
        return rc;
    result_totals(res, r);
    res->wall = (double)(r->t1 - r->t0) / 1e9;
    if (r->nsteps) { /* a sweep's measured windows are its steps' */
        res->measured = 0;
        for (size_t k = 0; k < r->nsteps; k++)
            res->measured += r->steps[k].measured;
    } else {
        res->measured = r->step_measured;
    }
    if (res->measured <= 0)
        res->measured = res->wall;
    res->cpu_s = cpu_between(&r->ru0, &r->ru1, o->busy_poll, &res->poll_idle_s);
    /* the measured window: the (last) step's start after its warm-up; a sweep's steps follow
     * the opening. A sweep's ends when its last step did (its last response, or the end of its
     * drain): its steps' -d add up to less than that (the warm-ups between them, the drains),
     * and merge takes end_wall - start_wall as the span the server was loaded. */
    res->start_wall =
        r->wall0 + (r->first_t0 > r->t_start ? (double)(r->first_t0 - r->t_start) / 1e9 + o->warmup
                                             : r->open_s);
    res->end_wall = res->start_wall + res->measured;
    if (r->nsteps && r->step_end > r->t_start)
        res->end_wall = fmax(res->start_wall, r->wall0 + (double)(r->step_end - r->t_start) / 1e9);
    res->open_s = r->open_s;
    res->open_at_start = r->open_at_start;
    /* The network namespace's counters over the whole run, warm-up included. */
    res->have_k = r->have_k;
    res->kd = r->kd;
    res->kr = (struct kstat_run){.addrnotavail = res->total.errors[ERR_ADDRNOTAVAIL],
                                 .linger0 = o->linger0,
                                 .short_mode = o->mode == MODE_SHORT,
                                 .nsources = o->nsources,
                                 .sysctl_root = "/proc/sys",
                                 .loopback = is_loopback(&o->addr),
                                 .root = geteuid() == 0};
    if (r->nsec && !(res->series = calloc(r->nsec, sizeof(*res->series))))
        return -ENOMEM;
    for (size_t k = 0; k < r->nsec; k++) { /* the seconds' histograms move into res */
        const struct second *sec = &r->series[k];
        res->series[k] = (struct bsecond){
            .t = sec->t, .wall = sec->wall, .c = sec->c, .lat = sec->lat, .open = sec->open};
        r->series[k].lat = (struct hcompact){0};
    }
    res->nseries = r->nsec;
    res->steps = r->steps; /* moved: res owns them now */
    res->nsteps = r->nsteps;
    r->steps = NULL;
    if (o->find_pct > 0) {
        res->found_rate = r->found_rate;
        if (!(res->found_why = strdup(r->found_why)))
            return -ENOMEM;
    }
    return 0;
}

/* Whether the run failed, and why: every reason that applies, on one line. Returns 0 or 1. */
static int verdict(const struct bresult *res, const struct run *r)
{
    const struct bopt *o = r->o;
    bool search = o->sweep_step > 0 || o->find_pct > 0;
    const struct {
        bool on;
        const char *why;
    } fails[] = {
        {res->total.errors[ERR_MISMATCH] > 0, "responses did not match what was sent"},
        /* a sweep and a search overload the server on purpose: their errors, losses and
         * unsent sends are the steps' findings (in the table), not the run's failure */
        {!search && res->total.lost > 0, "some responses never came back whole (lost)"},
        {!search && res->unsent > 0, "some due sends never went out (unsent): the "
                                     "connections could not keep up with -R"},
        {!search && bcount_errors(&res->total) > o->max_errors, "errors exceed --max-errors"},
        {!res->total.requests, "no request completed"},
        {o->find_pct > 0 && res->found_rate <= 0, "--find-rate: no rate kept the bound"},
        {search && step_without_response(res), "a step completed no request: the server "
                                               "stopped answering"},
        {interrupted, "interrupted (SIGINT): the figures are of a partial run"},
        {r->script_failed, "a script error stopped the run (said above)"},
        {r->out_failed, "an output file could not be written whole"},
    };
    int rc = 0;

    for (size_t k = 0; k < sizeof(fails) / sizeof(fails[0]); k++) {
        if (!fails[k].on)
            continue;
        fprintf(stderr, "%s%s", rc ? "; " : "lfbench: FAILED: ", fails[k].why);
        rc = 1;
    }
    if (rc)
        fputc('\n', stderr);
    return rc;
}

/* --latency: the percentiles of the whole measured window one a line, as wrk2's --latency
 * prints them (wrk's four, then the tail), after the summary. */
static void print_distribution(FILE *f, const struct bresult *res)
{
    static const double pct[] = {50, 75, 90, 99, 99.9, 99.99, 99.999, 100};
    const struct hist *h = res->lat;

    if (!h || !h->count) {
        fprintf(f, "latency distribution: no samples\n");
        return;
    }
    fprintf(f, "latency distribution (µs, %llu samples%s)\n", (unsigned long long)h->count,
            res->nsteps ? ", all steps together" : "");
    for (size_t k = 0; k < sizeof(pct) / sizeof(pct[0]); k++)
        fprintf(f, "  %8.3f%% %12.1f\n", pct[k], hist_us(hist_percentile(h, pct[k])));
}

/* The summary on stdout (--latency: its distribution too), --json, the verdict, then the
 * script's done(). Returns the exit status. */
static int report(const struct bresult *res, struct run *r)
{
    int rc;
    char err[512];

    result_print(stdout, res);
    if (r->o->latency)
        print_distribution(stdout, res);
    if (r->jf) {
        rc = result_write_json(r->jf, res);
        if (fclose(r->jf) != 0 && rc == 0)
            rc = -errno;
        r->jf = NULL;
        if (rc < 0) {
            fprintf(stderr, "lfbench: cannot write --json %s: %s\n", r->o->json, strerror(-rc));
            return 1;
        }
    }
    rc = verdict(res, r);
    if (r->sc && !r->script_failed) {
        struct scsummary sum = {.duration_s = res->measured, .c = res->total, .lat = res->lat};
        fflush(stdout);
        script_alarm((unsigned)(SCRIPT_PHASE_BUDGET_NS / 1000000000ull) + 2);
        if (bscript_done(r->sc, &sum, err, sizeof(err)) < 0) {
            fprintf(stderr, "lfbench: %s\n", err);
            rc = 1;
        }
        alarm(0);
        fflush(stdout);
    }
    return rc;
}

int main(int argc, char **argv)
{
    struct bopt o;
    struct payloads p;
    struct bresult res;
    struct run R0 = {0}; /* what is made before the run's clock starts */
    uint64_t t_start;
    int rc;

    if (argc > 1 && !strcmp(argv[1], "merge"))
        return merge_main(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "plot"))
        return plot_main(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "tune"))
        return btune_main(argc - 1, argv + 1);
    if ((rc = parse_and_check(&o, &p, argc, argv)) >= 0)
        return rc;
    if (o.script) {
        char err[512];
        script_alarm((unsigned)(SCRIPT_PHASE_BUDGET_NS / 1000000000ull) + 2);
        R0.sc = bscript_load(&o, err, sizeof(err));
        alarm(0);
        if (!R0.sc) {
            fprintf(stderr, "lfbench: %s\n", err);
            payload_free(&p);
            bopt_free(&o);
            return 2;
        }
    }
    signal(SIGPIPE, SIG_IGN);
    signal(SIGINT, on_sigint);
    announce(&o, &p);

    t_start = now_ns() + 20 * 1000000ull;
    struct run R = {.o = &o,
                    .sc = R0.sc,
                    .p = &p,
                    .t_start = t_start,
                    .wall0 = wall_now() + ((double)t_start - (double)now_ns()) / 1e9,
                    .phase = "opening"};
    R.next_sec = floor(R.wall0) + 1; /* the threads' first whole second ends there */

    if (open_outputs(&R) < 0) { /* nothing was started */
        payload_free(&p);
        bopt_free(&o);
        return 2;
    }
    /* A script error in setup() or init() (usage, exit 2) comes before any thread runs: what
     * was made is freed, so that a sanitizer's leak check holds (exit 2 stays exit 2). */
    if ((rc = start_threads(&R)) == -EINVAL) {
        for (int i = 0; i < R.ninit; i++)
            engine_free(&R.ts[i]);
        /* the output files were opened for a run that never began: none is left behind */
        if (R.jf && !fclose(R.jf))
            unlink(o.json);
        if (R.hdr && !hdrlog_close(R.hdr))
            unlink(o.hdr_log);
        if (R.stream && R.stream != stdout && !fclose(R.stream))
            unlink(o.json_stream);
        free(R.ts);
        free(R.joined);
        bscript_free(R.sc);
        payload_free(&p);
        bopt_free(&o);
        return 2;
    }
    /* An error below is out of memory or the like, said where it happened: exit at once. */
    if (rc < 0 || open_connections(&R) < 0 || run_steps(&R) < 0 || finish(&R) < 0 ||
        build_result(&res, &R) < 0) {
        if (!R.nobody)
            return 2;
        rc = abandon(&R);
        payload_free(&p);
        bopt_free(&o);
        return rc;
    }
    rc = report(&res, &R);

    for (int i = 0; i < o.threads; i++)
        engine_free(&R.ts[i]);
    payload_free(&p);
    bopt_free(&o);
    free(R.ts);
    free(R.joined);
    free(R.series);
    result_free(&res);
    if (R.sc) { /* closing the states runs the script's finalizers (__gc): bounded as well */
        script_alarm((unsigned)(SCRIPT_PHASE_BUDGET_NS / 1000000000ull) + 2);
        bscript_free(R.sc);
        alarm(0);
    }
    return rc;
}
