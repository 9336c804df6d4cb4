/* lfbench: load client for TCP echo and framed servers; main thread: pre-flight, threads,
 * per-second progress, the summary and --json. */
#include "bopt.h"
#include "engine.h"
#include "hist.h"
#include "kstat.h"
#include "payload.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

struct second {
    double t;          /* seconds since start */
    struct bcount c;   /* that second's counters */
    uint64_t p50, p99; /* ns */
    int open;          /* connections open at its end */
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

static uint64_t errors_of(const struct bcount *c)
{
    uint64_t n = 0;

    for (int e = 0; e < ERR_KINDS; e++)
        n += c->errors[e];
    return n;
}

static double us(uint64_t ns)
{
    return (double)ns / 1000.0;
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
                "address%s: widen net.ipv4.ip_local_port_range or add addresses with --source\n",
                o->conns, ports * sources, sources, sources == 1 ? "" : "es");
        return -1;
    }
    if (o->linger0)
        fprintf(stderr, "lfbench: --linger0: each close sends a reset instead of a FIN; this "
                        "avoids TIME_WAIT on the client only, and the server sees ECONNRESET\n");
    return 0;
}

/* One latency line; indent goes before label (a class's latency under the total's). */
static void print_lat(FILE *f, const char *indent, const char *label, const struct hist *h)
{
    int width = 12 - (int)strlen(indent);

    if (h->count == 0) {
        fprintf(f, "  %s%-*s none\n", indent, width, label);
        return;
    }
    fprintf(f,
            "  %s%-*s min %.1f  p50 %.1f  p90 %.1f  p99 %.1f  p99.9 %.1f  p99.99 %.1f  max %.1f  "
            "mean %.1f  (µs, %llu samples)\n",
            indent, width, label, us(h->min), us(hist_percentile(h, 50)),
            us(hist_percentile(h, 90)), us(hist_percentile(h, 99)), us(hist_percentile(h, 99.9)),
            us(hist_percentile(h, 99.99)), us(h->max), us((uint64_t)(h->sum / (double)h->count)),
            (unsigned long long)h->count);
}

static void json_lat(FILE *f, const struct hist *h)
{
    fprintf(f,
            "{\"samples\": %llu, \"min_us\": %.3f, \"p50_us\": %.3f, \"p90_us\": %.3f, "
            "\"p99_us\": %.3f, \"p999_us\": %.3f, \"p9999_us\": %.3f, \"max_us\": %.3f, "
            "\"mean_us\": %.3f}",
            (unsigned long long)h->count, h->count ? us(h->min) : 0.0, us(hist_percentile(h, 50)),
            us(hist_percentile(h, 90)), us(hist_percentile(h, 99)), us(hist_percentile(h, 99.9)),
            us(hist_percentile(h, 99.99)), us(h->max),
            h->count ? us((uint64_t)(h->sum / (double)h->count)) : 0.0);
}

/* Length of the UTF-8 character at s (RFC 3629: no overlong form, no surrogate, nothing past
 * U+10FFFF), or 0 when the byte at s does not start one. s is NUL-terminated, and NUL is no
 * continuation byte, so nothing past it is read. */
static size_t utf8_char(const unsigned char *s)
{
    unsigned char lo = 0x80, hi = 0xbf;
    size_t n;

    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        n = 2;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        n = 3, lo = s[0] == 0xe0 ? 0xa0 : 0x80, hi = s[0] == 0xed ? 0x9f : 0xbf;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        n = 4, lo = s[0] == 0xf0 ? 0x90 : 0x80, hi = s[0] == 0xf4 ? 0x8f : 0xbf;
    else
        return 0;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t k = 2; k < n; k++)
        if ((s[k] & 0xc0) != 0x80)
            return 0;
    return n;
}

/* s as a JSON string: valid UTF-8 whatever s holds (a file name is any bytes): control
 * characters escaped, each byte that is not part of a valid character replaced by U+FFFD. */
static void json_str(FILE *f, const char *s)
{
    const unsigned char *u = (const unsigned char *)s;

    fputc('"', f);
    while (*u) {
        size_t n = utf8_char(u);

        if (*u == '"' || *u == '\\')
            fprintf(f, "\\%c", *u);
        else if (*u < 0x20 || *u == 0x7f)
            fprintf(f, "\\u%04x", *u);
        else if (n == 0)
            fputs("\\ufffd", f);
        else
            fwrite(u, 1, n, f);
        u += n ? n : 1;
    }
    fputc('"', f);
}

int main(int argc, char **argv)
{
    static const char *const mode_name[] = {"long", "short"};
    static const char *const expect_name[] = {"echo", "line", "len32", "bytes"};
    struct bopt o;
    struct payloads p;
    struct bthread *ts;
    struct second *series = NULL;
    struct bcount total = {0};
    struct hist *lat, *clat, *cls_lat;
    struct rusage ru0, ru1;
    struct kstat k0, k1, kd;
    struct kstat_run kr;
    char err[512];
    uint64_t t_start, t0, t1, behind = 0, intended = 0, unsent = 0, errors, all_requests = 0;
    uint64_t conn_min = UINT64_MAX, conn_max = 0;
    size_t nsec = 0, capsec = 0;
    int cpu_list[CPU_SETSIZE], ncpus = 0, rc;
    bool *joined, stopping_sent = false;
    double wall, measured, cpu;
    FILE *f;

    switch (bopt_parse(&o, argc, argv, stdout, err, sizeof(err))) {
    case BOPT_EXIT:
        bopt_free(&o);
        return 0;
    case BOPT_ERROR:
        fprintf(stderr, "lfbench: %s\n", err);
        bopt_free(&o);
        return 2;
    case BOPT_RUN:
        break;
    }
    if (preflight(&o) < 0) {
        bopt_free(&o);
        return 2;
    }
    if (payload_load(&p, &o, err, sizeof(err)) < 0) {
        fprintf(stderr, "lfbench: %s\n", err);
        bopt_free(&o);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    signal(SIGINT, on_sigint);
    for (int c = 0; o.have_cpus && c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &o.cpus))
            cpu_list[ncpus++] = c;

    fprintf(stderr, "lfbench: %s, %s mode, %d connection%s, %d thread%s, pipeline %d, ", o.target,
            mode_name[o.mode], o.conns, o.conns == 1 ? "" : "s", o.threads,
            o.threads == 1 ? "" : "s", o.pipeline);
    if (p.n == 1)
        fprintf(stderr, "%zu-byte %s requests", p.cls[0].len,
                p.cls[0].data ? p.cls[0].name : "generated");
    else
        fprintf(stderr, "a mix of %d request files", p.n);
    fprintf(stderr, ", expect %s", expect_name[o.expect]);
    if (o.rate > 0)
        fprintf(stderr, ", open loop at %.0f/s", o.rate);
    if (o.duration > 0)
        fprintf(stderr, ", %.1f s after %.1f s warm-up\n", o.duration, o.warmup);
    else
        fprintf(stderr, ", %llu requests\n", (unsigned long long)o.requests);

    ts = calloc((size_t)o.threads, sizeof(*ts));
    joined = calloc((size_t)o.threads, sizeof(*joined));
    if (!ts || !joined)
        return 2;
    t_start = now_ns() + 20 * 1000000ull;
    for (int i = 0, base = 0; i < o.threads; i++) {
        int n = o.conns / o.threads + (i < o.conns % o.threads);
        if (engine_init(&ts[i], i, &o, &p, (uint32_t)base, n, t_start) < 0) {
            fprintf(stderr, "lfbench: out of memory for thread %d\n", i);
            return 2;
        }
        if (o.requests)
            ts[i].quota =
                o.requests / (uint64_t)o.threads + ((uint64_t)i < o.requests % (uint64_t)o.threads);
        base += n;
    }
    bool have_k = kstat_read("/proc/net", &k0) > 0;
    getrusage(RUSAGE_SELF, &ru0);
    t0 = now_ns();
    for (int i = 0; i < o.threads; i++) {
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        if (ncpus) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(cpu_list[i % ncpus], &one);
            pthread_attr_setaffinity_np(&attr, sizeof(one), &one);
        }
        rc = pthread_create(&ts[i].tid, &attr, engine_main, &ts[i]);
        pthread_attr_destroy(&attr);
        if (rc) {
            fprintf(stderr, "lfbench: cannot create thread %d: %s\n", i, strerror(rc));
            return 2;
        }
    }

    /* Once a second: collect what the threads published, print a progress line. */
    for (unsigned sec = 1;; sec++) {
        uint64_t wake = t_start + sec * 1000000000ull + 30 * 1000000ull, now;
        struct second s = {.t = sec};
        struct hist h;

        while ((now = now_ns()) < wake) {
            struct timespec tick = {0, 10 * 1000000L};
            if (interrupted && !stopping_sent) {
                for (int i = 0; i < o.threads; i++)
                    engine_stop(&ts[i]);
                stopping_sent = true;
            }
            if (reap(ts, joined, o.threads) == o.threads)
                break;
            nanosleep(&tick, NULL);
        }
        hist_init(&h);
        for (int i = 0; i < o.threads; i++) {
            pthread_mutex_lock(&ts[i].pub_lock);
            s.c.requests += ts[i].pub.requests;
            s.c.bytes_in += ts[i].pub.bytes_in;
            s.c.bytes_out += ts[i].pub.bytes_out;
            s.c.connects += ts[i].pub.connects;
            for (int e = 0; e < ERR_KINDS; e++)
                s.c.errors[e] += ts[i].pub.errors[e];
            hist_merge(&h, &ts[i].pub_lat);
            memset(&ts[i].pub, 0, sizeof(ts[i].pub));
            hist_init(&ts[i].pub_lat);
            pthread_mutex_unlock(&ts[i].pub_lock);
            s.open += __atomic_load_n(&ts[i].open, __ATOMIC_RELAXED);
        }
        s.t = (double)(now - t_start) / 1e9; /* the last interval may be short */
        s.p50 = hist_percentile(&h, 50);
        s.p99 = hist_percentile(&h, 99);
        if (nsec == capsec) {
            capsec = capsec ? capsec * 2 : 64;
            series = realloc(series, capsec * sizeof(*series));
            if (!series)
                return 2;
        }
        series[nsec++] = s;
        if (!o.quiet) {
            double len = s.t - (nsec > 1 ? series[nsec - 2].t : 0.0);
            fprintf(stderr, "%6.1fs %10.0f req/s  p99 %9.1f µs  errors %llu  open %d\n", s.t,
                    len > 0 ? (double)s.c.requests / len : 0.0, us(s.p99),
                    (unsigned long long)errors_of(&s.c), s.open);
        }
        if (reap(ts, joined, o.threads) == o.threads)
            break;
    }
    t1 = now_ns();
    getrusage(RUSAGE_SELF, &ru1);
    have_k = have_k && kstat_read("/proc/net", &k1) > 0;
    kstat_delta(&k0, &k1, &kd);

    lat = calloc(1, sizeof(*lat));
    clat = calloc(1, sizeof(*clat));
    cls_lat = calloc(BOPT_MAX_CLASSES, sizeof(*cls_lat));
    if (!lat || !clat || !cls_lat)
        return 2;
    hist_init(lat);
    hist_init(clat);
    for (int k = 0; k < BOPT_MAX_CLASSES; k++)
        hist_init(&cls_lat[k]);
    for (int i = 0; i < o.threads; i++) {
        struct bthread *t = &ts[i];
        total.requests += t->total.requests;
        total.bytes_in += t->total.bytes_in;
        total.bytes_out += t->total.bytes_out;
        total.connects += t->total.connects;
        total.lost += t->total.lost;
        for (int e = 0; e < ERR_KINDS; e++)
            total.errors[e] += t->total.errors[e];
        hist_merge(lat, &t->lat);
        hist_merge(clat, &t->clat);
        for (int k = 0; k < p.n; k++)
            hist_merge(&cls_lat[k], &t->cls_lat[k]);
        behind += t->behind;
        intended += t->intended;
        unsent += t->unsent;
        if (t->conn_min < conn_min)
            conn_min = t->conn_min;
        if (t->conn_max > conn_max)
            conn_max = t->conn_max;
        all_requests += t->issued;
    }
    errors = errors_of(&total);
    wall = (double)(t1 - t0) / 1e9;
    measured = o.duration > 0 && !interrupted ? o.duration : wall - o.warmup;
    if (measured <= 0)
        measured = wall;
    cpu = (double)(ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec + ru1.ru_stime.tv_sec -
                   ru0.ru_stime.tv_sec) +
          (double)(ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec + ru1.ru_stime.tv_usec -
                   ru0.ru_stime.tv_usec) /
              1e6;

    f = stdout;
    fprintf(f, "requests     %llu in %.2f s: %.1f req/s, %.2f MB/s out, %.2f MB/s in\n",
            (unsigned long long)total.requests, measured, (double)total.requests / measured,
            (double)total.bytes_out / measured / 1e6, (double)total.bytes_in / measured / 1e6);
    print_lat(f, "", "latency", lat);
    if (p.n > 1)
        for (int k = 0; k < p.n; k++)
            print_lat(f, "  ", p.cls[k].name, &cls_lat[k]);
    if (o.mode == MODE_SHORT) {
        fprintf(f, "connections  %llu: %.1f conn/s\n", (unsigned long long)total.connects,
                (double)total.connects / measured);
        print_lat(f, "", "connect", clat);
    }
    if (o.rate > 0)
        fprintf(f,
                "schedule     %llu sends due; %llu went out more than 1 ms behind their intended "
                "time; unsent %llu\n",
                (unsigned long long)(intended + unsent), (unsigned long long)behind,
                (unsigned long long)unsent);
    if (o.mode == MODE_LONG)
        fprintf(f, "spread       %llu to %llu done per connection\n", (unsigned long long)conn_min,
                (unsigned long long)conn_max);
    fprintf(f, "errors       %llu:", (unsigned long long)errors);
    for (int e = 0; e < ERR_KINDS; e++)
        fprintf(f, " %s %llu", berr_name[e], (unsigned long long)total.errors[e]);
    fprintf(f, "; lost %llu\n", (unsigned long long)total.lost);
    fprintf(f, "client CPU   %.0f%% of one core over %.2f s, %.2f µs per request%s\n",
            100.0 * cpu / wall, wall, all_requests ? cpu * 1e6 / (double)all_requests : 0.0,
            100.0 * cpu / wall > 90.0 * o.threads ? " (saturated: the client may be the limit)"
                                                  : "");
    /* The network namespace's counters over the whole run, warm-up included. */
    kr = (struct kstat_run){.addrnotavail = total.errors[ERR_ADDRNOTAVAIL],
                            .linger0 = o.linger0,
                            .short_mode = o.mode == MODE_SHORT};
    if (have_k) {
        fprintf(f, "kernel      ");
        for (int i = 0; i < KS_N; i++)
            if (kd.have[i])
                fprintf(f, " %s %s%llu", kstat_name[i], i >= KS_TCP_TW ? "" : "+",
                        (unsigned long long)kd.v[i]);
        fprintf(f, " (this network namespace, whole run)\n");
        kstat_hints(f, &kd, &kr, false);
    } else {
        fprintf(f, "kernel       no counters: /proc/net/netstat, snmp, softnet_stat and sockstat "
                   "could not be read\n");
    }

    if (o.json) {
        FILE *j = fopen(o.json, "w");
        if (!j) {
            fprintf(stderr, "lfbench: cannot write --json %s: %s\n", o.json, strerror(errno));
            return 1;
        }
        fprintf(j, "{\n  \"target\": ");
        json_str(j, o.target);
        fprintf(j,
                ",\n  \"config\": {\"mode\": \"%s\", \"connections\": %d, \"threads\": %d, "
                "\"pipeline\": %d, \"duration_s\": %.3f, \"requests\": %llu, \"warmup_s\": %.3f, "
                "\"timeout_ms\": %d, \"rate\": %.3f, \"expect\": \"%s\"},\n",
                mode_name[o.mode], o.conns, o.threads, o.pipeline, o.duration,
                (unsigned long long)o.requests, o.warmup, o.timeout_ms, o.rate,
                expect_name[o.expect]);
        fprintf(j,
                "  \"requests\": %llu,\n  \"measured_s\": %.3f,\n  \"qps\": %.3f,\n"
                "  \"bytes_out\": %llu,\n  \"bytes_in\": %llu,\n  \"latency\": ",
                (unsigned long long)total.requests, measured, (double)total.requests / measured,
                (unsigned long long)total.bytes_out, (unsigned long long)total.bytes_in);
        json_lat(j, lat);
        fprintf(j, ",\n  \"classes\": [");
        for (int k = 0; k < p.n; k++) {
            fprintf(j, "%s{\"name\": ", k ? ", " : "");
            json_str(j, p.cls[k].name);
            fprintf(j, ", \"weight\": %u, \"bytes\": %zu, \"latency\": ", p.cls[k].weight,
                    p.cls[k].len);
            json_lat(j, p.n > 1 ? &cls_lat[k] : lat);
            fputc('}', j);
        }
        fprintf(j, "],\n  \"connections\": %llu,\n  \"connect_latency\": ",
                (unsigned long long)total.connects);
        json_lat(j, clat);
        fprintf(j, ",\n  \"schedule\": {\"intended\": %llu, \"sent\": %llu, \"behind\": %llu},\n",
                (unsigned long long)(intended + unsent), (unsigned long long)intended,
                (unsigned long long)behind);
        fprintf(j, "  \"per_connection\": {\"min\": %llu, \"max\": %llu},\n",
                (unsigned long long)conn_min, (unsigned long long)conn_max);
        fprintf(j, "  \"lost\": %llu,\n  \"unsent\": %llu,\n", (unsigned long long)total.lost,
                (unsigned long long)unsent);
        fprintf(j, "  \"errors\": {\"total\": %llu", (unsigned long long)errors);
        for (int e = 0; e < ERR_KINDS; e++)
            fprintf(j, ", \"%s\": %llu", berr_name[e], (unsigned long long)total.errors[e]);
        fprintf(j, "},\n  \"client_cpu\": {\"percent\": %.1f, \"us_per_request\": %.3f},\n",
                100.0 * cpu / wall, all_requests ? cpu * 1e6 / (double)all_requests : 0.0);
        fprintf(j, "  \"kernel\": {");
        for (int i = 0, n = 0; i < KS_N; i++)
            if (kd.have[i])
                fprintf(j, "%s\"%s\": %llu", n++ ? ", " : "", kstat_name[i],
                        (unsigned long long)kd.v[i]);
        fprintf(j, "},\n  \"hints\": ");
        if (have_k)
            kstat_hints(j, &kd, &kr, true);
        else
            fputs("[]", j);
        fprintf(j, ",\n  \"series\": [");
        for (size_t k = 0; k < nsec; k++)
            fprintf(j,
                    "%s\n    {\"t\": %.3f, \"requests\": %llu, \"p50_us\": %.3f, \"p99_us\": "
                    "%.3f, \"errors\": %llu, \"open\": %d}",
                    k ? "," : "", series[k].t, (unsigned long long)series[k].c.requests,
                    us(series[k].p50), us(series[k].p99),
                    (unsigned long long)errors_of(&series[k].c), series[k].open);
        fprintf(j, "\n  ]\n}\n");
        fclose(j);
    }

    {
        /* every reason that applies, on one line */
        const struct {
            bool on;
            const char *why;
        } fails[] = {
            {total.errors[ERR_MISMATCH] > 0, "responses did not match what was sent"},
            {total.lost > 0, "some responses never came back whole (lost)"},
            {unsent > 0, "some due sends never went out (unsent): the connections could not keep "
                         "up with -R"},
            {errors > o.max_errors, "errors exceed --max-errors"},
            {!total.requests, "no request completed"},
        };
        rc = 0;
        for (size_t k = 0; k < sizeof(fails) / sizeof(fails[0]); k++) {
            if (!fails[k].on)
                continue;
            fprintf(stderr, "%s%s", rc ? "; " : "lfbench: FAILED: ", fails[k].why);
            rc = 1;
        }
        if (rc)
            fputc('\n', stderr);
    }
    for (int i = 0; i < o.threads; i++)
        engine_free(&ts[i]);
    payload_free(&p);
    bopt_free(&o);
    free(ts);
    free(joined);
    free(series);
    free(lat);
    free(clat);
    free(cls_lat);
    return rc;
}
