/* result: one lfbench run's results (or several merged) as one struct, and the human summary
 * printed from it. result_json.c writes it as --json and reads it back; merge.c merges them. */
#include "result.h"

#include <stdlib.h>
#include <string.h>

/* --- the struct ---------------------------------------------------------------------------- */

void result_init(struct bresult *r)
{
    memset(r, 0, sizeof(*r));
    r->agents = 1;
    r->conn_min = UINT64_MAX;
}

static void step_free(struct bstep *st)
{
    free(st->lat);
    st->lat = NULL;
}

void result_free(struct bresult *r)
{
    free(r->target);
    free(r->mode);
    free(r->expect);
    free(r->ok_status);
    free(r->script);
    free(r->script_failure);
    free(r->mismatch);
    free(r->tls_protocol);
    free(r->tls_cipher);
    free(r->tls_error);
    free(r->lat);
    for (int k = 0; k < CP_N; k++)
        free(r->ph[k]);
    for (int k = 0; k < BOPT_MAX_CLASSES; k++) {
        free(r->cls[k].name);
        free(r->cls[k].lat);
    }
    for (size_t i = 0; i < r->nseries; i++)
        hcompact_free(&r->series[i].lat);
    free(r->series);
    for (size_t i = 0; i < r->nsteps; i++)
        step_free(&r->steps[i]);
    free(r->steps);
    free(r->found_why);
    free(r->run_ids);
    result_init(r);
}

bool result_is_mode(const struct bresult *r, const char *m)
{
    return r->mode && !strcmp(r->mode, m);
}

const struct hist *result_class_lat(const struct bresult *r, int k)
{
    return r->nclasses > 1 && r->cls[k].lat ? r->cls[k].lat : r->lat;
}

const char *result_ok_status(const struct bresult *r)
{
    return r->ok_status ? r->ok_status : "2xx";
}

struct kstat_run result_kstat_run(const struct bresult *r)
{
    struct kstat_run kr = r->kr;

    kr.connects = r->connect_calls;
    kr.wall_s = r->wall;
    return kr;
}

/* --- the summary --------------------------------------------------------------------------- */

/* One latency line; indent goes before label (a class's latency under the total's); note, when
 * not NULL, says what the samples cover. */
static void print_lat(FILE *f, const char *indent, const char *label, const struct hist *h,
                      const char *note)
{
    int width = 12 - (int)strlen(indent);

    if (!h || h->count == 0) {
        fprintf(f, "  %s%-*s none\n", indent, width, label);
        return;
    }
    fprintf(f,
            "  %s%-*s min %.1f  p50 %.1f  p90 %.1f  p99 %.1f  p99.9 %.1f  p99.99 %.1f  max %.1f  "
            "mean %.1f  (µs, %llu samples%s%s)\n",
            indent, width, label, hist_us(h->min), hist_us(hist_percentile(h, 50)),
            hist_us(hist_percentile(h, 90)), hist_us(hist_percentile(h, 99)),
            hist_us(hist_percentile(h, 99.9)), hist_us(hist_percentile(h, 99.99)), hist_us(h->max),
            hist_us((uint64_t)(h->sum / (double)h->count)), (unsigned long long)h->count,
            note ? ", " : "", note ? note : "");
}

/* Bytes per second in the unit that keeps two decimals meaningful (B/s, KB/s, MB/s, GB/s; powers
 * of 1000): 200 req/s of 8 bytes is 1.60 KB/s, not 0.00 MB/s. */
static void rate_bytes(char *buf, size_t len, double per_s)
{
    static const char *const unit[] = {"B/s", "KB/s", "MB/s", "GB/s"};
    int u = 0;

    /* the unit where it shows at least 1.00 once rounded (999.999 KB/s is 1.00 MB/s) */
    while (u < 3 && per_s >= 999.995)
        per_s /= 1000, u++;
    snprintf(buf, len, "%.2f %s", per_s, unit[u]);
}

/* What connect() itself cost over the whole run, after a line that counts connections (short
 * mode, reconnects): there the port range's search shows, beside the count it belongs to. */
static void print_connect_cost(FILE *f, const struct bresult *r)
{
    if (r->connect_calls)
        fprintf(
            f, "; connect() itself took %.1f µs each on average over the whole run's %llu calls",
            r->connect_s * 1e6 / (double)r->connect_calls, (unsigned long long)r->connect_calls);
}

static void print_steps(FILE *f, const struct bresult *r)
{
    bool find = r->found_why != NULL, http = r->expect && !strcmp(r->expect, "http");

    fprintf(f, "steps        %10s %10s %9s %9s %9s %8s %8s %8s %5s%s%s\n", "intended/s", "done/s",
            "p50 µs", "p99 µs", "p99.9 µs", "errors", "behind", "unsent", "CPU%",
            http ? "    non-2xx" : "", find ? "  kept" : "");
    for (size_t i = 0; i < r->nsteps; i++) {
        const struct bstep *st = &r->steps[i];
        const struct hist *h = st->lat;

        fprintf(
            f, "  %-10zu %10.0f %10.1f %9.1f %9.1f %9.1f %8llu %8llu %8llu %5.0f", i + 1, st->rate,
            st->measured > 0 ? (double)st->c.requests / st->measured : 0.0,
            h ? hist_us(hist_percentile(h, 50)) : 0.0, h ? hist_us(hist_percentile(h, 99)) : 0.0,
            h ? hist_us(hist_percentile(h, 99.9)) : 0.0, (unsigned long long)bcount_errors(&st->c),
            (unsigned long long)st->behind, (unsigned long long)st->unsent, st->cpu_percent);
        if (http)
            fprintf(f, " %10llu", (unsigned long long)st->c.http_non2xx);
        if (find)
            fprintf(f, "  %s", st->kept ? "yes" : "no");
        if (find && st->attempt > 1)
            fprintf(f, " (re-test %d of %.0f/s)", st->attempt - 1, st->rate);
        fputc('\n', f);
    }
    if (http)
        fprintf(f,
                "             non-2xx: responses with a status other than %s, which break a "
                "step\n",
                result_ok_status(r));
    if (find) {
        if (r->found_rate > 0)
            fprintf(f, "found        %.0f requests/s kept the bound: %s\n", r->found_rate,
                    r->found_why);
        else
            fprintf(f, "found        no rate kept the bound: %s\n", r->found_why);
    }
}

/* "merged", "requests" and the latencies, the classes' beneath. */
static void print_requests(FILE *f, const struct bresult *r)
{
    double measured = r->measured > 0 ? r->measured : 1;
    char out[32], in[32], steps[48] = "";

    if (r->agents > 1)
        fprintf(f, "merged       %d runs: windows start within %.0f ms of each other; targets %s\n",
                r->agents, r->window_spread * 1e3, r->target ? r->target : "?");
    rate_bytes(out, sizeof(out), (double)r->total.bytes_out / measured);
    rate_bytes(in, sizeof(in), (double)r->total.bytes_in / measured);
    /* A sweep's or a search's totals add its steps together (the same as --json's, which merge
     * needs whole): said on both lines, since only the steps' rows are each one rate's. */
    if (r->nsteps)
        snprintf(steps, sizeof(steps), " (all %zu step%s together)", r->nsteps,
                 r->nsteps == 1 ? "" : "s");
    /* Every response counts in the rate, one that failed the script's check too (as wrk counts
     * non-2xx ones): the rate is the server's; the failures are said beside it. */
    fprintf(f, "requests     %llu in %.2f s: %.1f req/s, %s out, %s in%s",
            (unsigned long long)r->total.requests, measured, (double)r->total.requests / measured,
            out, in, steps);
    /* of them: a response refused before it was whole failed its check, but is no response */
    if (r->total.check_failed > r->total.check_unkept)
        fprintf(f, "; %llu of them failed the script's check",
                (unsigned long long)(r->total.check_failed - r->total.check_unkept));
    fputc('\n', f);
    print_lat(f, "", "latency", r->lat, r->nsteps ? "all steps together" : NULL);
    if (r->nclasses > 1)
        for (int k = 0; k < r->nclasses; k++)
            print_lat(f, "  ", r->cls[k].name ? r->cls[k].name : "?", result_class_lat(r, k), NULL);
}

/* The samples of phase p (0: none, or a file without it). */
static uint64_t phase_count(const struct bresult *r, enum cphase p)
{
    return r->ph[p] ? r->ph[p]->count : 0;
}

/* The timed connections' phases (cphase.h), a row each for those with samples, beneath the line
 * about the connections ("connections", or "opening"). */
static void print_phases(FILE *f, const struct bresult *r)
{
    for (int p = 0; p < CP_N; p++) {
        const struct hist *h = r->ph[p];

        if (!h || !h->count)
            continue;
        fprintf(f, "  %-12s p50 %.1f  p90 %.1f  p99 %.1f  max %.1f  (µs, %llu samples",
                cphase_label[p], hist_us(hist_percentile(h, 50)), hist_us(hist_percentile(h, 90)),
                hist_us(hist_percentile(h, 99)), hist_us(h->max), (unsigned long long)h->count);
        if (p == CP_HANDSHAKE)
            fprintf(f, ": %llu full, %llu resumed", (unsigned long long)(h->count - r->resumed),
                    (unsigned long long)r->resumed);
        fputs(")\n", f);
    }
}

/* Short mode: "connections" and their rate, the phases, and "handshakes": their rate over the
 * measured window, and the client's CPU per handshake (over the whole run's, as per request). */
static void print_connections(FILE *f, const struct bresult *r)
{
    double measured = r->measured > 0 ? r->measured : 1;
    uint64_t hs = phase_count(r, CP_HANDSHAKE), all = r->tls_full + r->tls_resumed;

    fprintf(f, "connections  %llu: %.1f conn/s", (unsigned long long)r->total.connects,
            (double)r->total.connects / measured);
    print_connect_cost(f, r);
    fputc('\n', f);
    print_phases(f, r);
    if (!hs)
        return;
    fprintf(f, "handshakes   %llu: %.1f/s, %llu full, %llu resumed", (unsigned long long)hs,
            (double)hs / measured, (unsigned long long)(hs - r->resumed),
            (unsigned long long)r->resumed);
    if (all)
        fprintf(f, "; client CPU %.2f µs per handshake (of the run's %llu)",
                r->cpu_s * 1e6 / (double)all, (unsigned long long)all);
    fputc('\n', f);
}

/* Long mode: "opening". The window starts once the connections are open: say how long that
 * took, and when the client itself was slow (connect() searching a port range crowded by
 * TIME_WAIT), say so: it is not the server's time. */
static void print_opening(FILE *f, const struct bresult *r)
{
    fprintf(f, "opening      %d of %d connection%s open in %.2f s, before the measured window",
            r->open_at_start, r->conns, r->conns == 1 ? "" : "s", r->open_s);
    if (r->open_at_start < r->conns)
        fprintf(f, " (the rest never opened in time: see errors)");
    /* On loopback connect() runs the whole handshake inline: 10-30 µs each is normal.
     * Far more is the kernel searching a crowded port range. The opening's calls only
     * (refused ones too): the run's reconnects come after it (a file without the count:
     * the connections it opened). */
    uint64_t calls = r->open_connects   ? r->open_connects
                     : r->open_at_start ? (uint64_t)r->open_at_start
                                        : 1;
    double per = r->connect_busy / (double)calls;
    if (r->connect_busy >= 0.1 && r->connect_busy >= r->open_s / 4 && per > 100e-6)
        fprintf(f,
                "; %.2f s of it inside connect() itself (%.0f µs each of %llu calls): the "
                "kernel searching an ephemeral port range crowded by TIME_WAIT (a slow "
                "client, not a slow server: %s or wait 60 s)",
                r->connect_busy, per * 1e6, (unsigned long long)calls,
                r->kr.nsources ? "more --source addresses" : "--source");
    fputc('\n', f);
    print_phases(f, r);
}

/* "tls": what was agreed, the handshakes full and resumed, and what the server did with the
 * sessions offered; the first TLS failure. */
static void print_tls(FILE *f, const struct bresult *r)
{
    uint64_t hs = r->tls_full + r->tls_resumed;

    fprintf(f, "tls          %s %s; handshakes %llu: %llu full, %llu resumed",
            r->tls_protocol ? r->tls_protocol : "(no handshake completed)",
            r->tls_cipher ? r->tls_cipher : "", (unsigned long long)hs,
            (unsigned long long)r->tls_full, (unsigned long long)r->tls_resumed);
    if (r->tls_offered)
        fprintf(f, "; of %llu offering a session %.1f%% resumed",
                (unsigned long long)r->tls_offered,
                100.0 * (double)r->tls_resumed / (double)r->tls_offered);
    if (r->tls_offered && !r->tls_resumed)
        fprintf(f, " (the server refuses resumption: no session cache, no tickets)");
    else if (r->tls_resume > 0 && !r->tls_offered && hs)
        fprintf(f, "; no session to offer (the server gave none: tickets off?)");
    if (r->tls_insecure)
        fprintf(f, "; verification off (--tls-insecure)");
    fputc('\n', f);
    if (r->tls_error)
        fprintf(f, "tls error    the first: %s\n", r->tls_error);
}

/* "errors" and what else went other than asked: "mismatched", "reconnects", "http",
 * "script". */
static void print_failures(FILE *f, const struct bresult *r, bool is_long)
{
    fprintf(f, "errors       %llu:", (unsigned long long)bcount_errors(&r->total));
    for (int e = 0; e < ERR_KINDS; e++) /* the TLS kinds in a TLS run, or where counted */
        if (e < ERR_TLS_FIRST || r->tls || r->total.errors[e])
            fprintf(f, " %s %llu", berr_name[e], (unsigned long long)r->total.errors[e]);
    fprintf(f, "; lost %llu\n", (unsigned long long)r->total.lost);
    if (r->mismatch && r->total.errors[ERR_MISMATCH])
        fprintf(f, "mismatched   the first: %s\n", r->mismatch);
    if (r->reconnects) {
        fprintf(f, "reconnects   %llu connections closed cleanly and opened again",
                (unsigned long long)r->reconnects);
        if (is_long)
            print_connect_cost(f, r);
        fputc('\n', f);
    }
    if (r->http_non2xx || (r->expect && !strcmp(r->expect, "http")))
        fprintf(f, "http         %llu responses with a status other than %s\n",
                (unsigned long long)r->http_non2xx, result_ok_status(r));
    if (r->script)
        fprintf(f, "script       %s: %llu responses checked, %llu failed%s%s%s\n", r->script,
                (unsigned long long)r->total.checks, (unsigned long long)r->total.check_failed,
                r->total.checks ? "" : " (it has no response(), or nothing answered)",
                r->script_failure ? "; the first: " : "",
                r->script_failure ? r->script_failure : "");
}

/* "client CPU" and "busy-poll": what the run cost the client. */
static void print_cpu(FILE *f, const struct bresult *r)
{
    double wall = r->wall > 0 ? r->wall : 1, cpu = r->cpu_s;

    fprintf(f, "client CPU   %.0f%% of one core over %.2f s, %.2f µs per request%s\n",
            100.0 * cpu / wall, wall, r->all_requests ? cpu * 1e6 / (double)r->all_requests : 0.0,
            100.0 * cpu / wall > 90.0 * r->threads ? " (saturated: the client may be the limit)"
                                                   : "");
    if (r->poll_idle_s > 0)
        fprintf(
            f, "busy-poll    %.2f CPU seconds more polled with nothing to do (not counted above)\n",
            r->poll_idle_s);
}

/* "kernel": the counters over the run, and the hints drawn from them. */
static void print_kernel(FILE *f, const struct bresult *r)
{
    if (!r->have_k) {
        fprintf(f, "kernel       no counters: /proc/net/netstat, snmp, softnet_stat and sockstat "
                   "could not be read\n");
        return;
    }
    fprintf(f, "kernel      ");
    for (int i = 0; i < KS_N; i++)
        if (r->kd.have[i])
            fprintf(f, " %s %s%llu", kstat_name[i], i >= KS_TCP_TW ? "" : "+",
                    (unsigned long long)r->kd.v[i]);
    if (r->agents > 1)
        fprintf(f,
                " (%d runs' network namespaces summed, whole runs: two runs on one host "
                "count its counters twice)\n",
                r->agents);
    else
        fprintf(f, " (this network namespace, whole run)\n");
    struct kstat_run kr = result_kstat_run(r);
    kstat_hints(f, &r->kd, &kr, false);
}

void result_print(FILE *f, const struct bresult *r)
{
    bool is_short = result_is_mode(r, "short"), is_long = !is_short;

    print_requests(f, r);
    if (is_short)
        print_connections(f, r);
    if (is_long && r->open_s > 0)
        print_opening(f, r); /* with the phases beneath */
    else if (is_long)
        print_phases(f, r);
    if (r->rate > 0 || r->nsteps)
        fprintf(f,
                "schedule     %llu sends due; %llu went out more than 1 ms behind their intended "
                "time; unsent %llu\n",
                (unsigned long long)(r->intended + r->unsent), (unsigned long long)r->behind,
                (unsigned long long)r->unsent);
    if (is_long)
        fprintf(f, "spread       %llu to %llu done per connection\n",
                (unsigned long long)r->conn_min, (unsigned long long)r->conn_max);
    if (r->tls)
        print_tls(f, r);
    print_failures(f, r, is_long);
    print_cpu(f, r);
    print_kernel(f, r);
    if (r->nsteps)
        print_steps(f, r);
}
