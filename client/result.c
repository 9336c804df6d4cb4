/* result: one lfbench run's results (or several merged): the summary, --json, reading --json
 * back, and the exact merge of runs that `lfbench merge` makes. */
#include "result.h"

#include "json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define LAYOUT "hdr-2" /* hist.c's buckets: 128 per power of two, HIST_BUCKETS of them */
#define VERSION 2

/* engine.c's berr_name, kept here too so that result (and its unit tests) link without the
 * engine and libev; the names are --json keys and must not change. */
static const char *const err_key[ERR_KINDS] = {"refused", "reset",  "timeout",  "addrnotavail",
                                               "emfile",  "closed", "mismatch", "other"};
_Static_assert(ERR_KINDS == 8, "err_key lists every enum berr");

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

/* dst += src, both ascending: a merge of the two index lists. 0 or -ENOMEM (dst unchanged). */
static int hcompact_merge(struct hcompact *dst, const struct hcompact *src)
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
    free(r->lat);
    free(r->clat);
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
    result_init(r);
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

static bool is_mode(const struct bresult *r, const char *m)
{
    return r->mode && !strcmp(r->mode, m);
}

/* A class's latency: its own, or the total's when there is one class. */
static const struct hist *cls_hist(const struct bresult *r, int k)
{
    return r->nclasses > 1 && r->cls[k].lat ? r->cls[k].lat : r->lat;
}

/* --- the summary --------------------------------------------------------------------------- */

/* One latency line; indent goes before label (a class's latency under the total's). */
static void print_lat(FILE *f, const char *indent, const char *label, const struct hist *h)
{
    int width = 12 - (int)strlen(indent);

    if (!h || h->count == 0) {
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

/* The --ok-status a result's HTTP statuses were counted against. */
static const char *ok_of(const struct bresult *r)
{
    return r->ok_status ? r->ok_status : "2xx";
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

        fprintf(f, "  %-10zu %10.0f %10.1f %9.1f %9.1f %9.1f %8llu %8llu %8llu %5.0f", i + 1,
                st->rate, st->measured > 0 ? (double)st->c.requests / st->measured : 0.0,
                h ? us(hist_percentile(h, 50)) : 0.0, h ? us(hist_percentile(h, 99)) : 0.0,
                h ? us(hist_percentile(h, 99.9)) : 0.0, (unsigned long long)errors_of(&st->c),
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
                ok_of(r));
    if (find) {
        if (r->found_rate > 0)
            fprintf(f, "found        %.0f requests/s kept the bound: %s\n", r->found_rate,
                    r->found_why);
        else
            fprintf(f, "found        no rate kept the bound: %s\n", r->found_why);
    }
}

void result_print(FILE *f, const struct bresult *r)
{
    double measured = r->measured > 0 ? r->measured : 1, wall = r->wall > 0 ? r->wall : 1;
    double cpu = r->cpu_s;
    bool is_short = is_mode(r, "short"), is_long = !is_short;

    if (r->agents > 1)
        fprintf(f, "merged       %d runs: windows start within %.0f ms of each other; targets %s\n",
                r->agents, r->window_spread * 1e3, r->target ? r->target : "?");
    fprintf(f, "requests     %llu in %.2f s: %.1f req/s, %.2f MB/s out, %.2f MB/s in\n",
            (unsigned long long)r->total.requests, measured, (double)r->total.requests / measured,
            (double)r->total.bytes_out / measured / 1e6,
            (double)r->total.bytes_in / measured / 1e6);
    print_lat(f, "", "latency", r->lat);
    if (r->nclasses > 1)
        for (int k = 0; k < r->nclasses; k++)
            print_lat(f, "  ", r->cls[k].name ? r->cls[k].name : "?", cls_hist(r, k));
    if (is_short) {
        fprintf(f, "connections  %llu: %.1f conn/s\n", (unsigned long long)r->total.connects,
                (double)r->total.connects / measured);
        print_lat(f, "", "connect", r->clat);
    }
    if (is_long && r->open_s > 0) {
        /* The window starts once the connections are open: say how long that took, and when
         * the client itself was slow (connect() searching a port range crowded by TIME_WAIT),
         * say so: it is not the server's time. */
        fprintf(f, "opening      %d of %d connection%s open in %.2f s, before the measured window",
                r->open_at_start, r->conns, r->conns == 1 ? "" : "s", r->open_s);
        if (r->open_at_start < r->conns)
            fprintf(f, " (the rest never opened in time: see errors)");
        /* On loopback connect() runs the whole handshake inline: 10-30 µs each is normal.
         * Far more is the kernel searching a crowded port range. */
        double per = r->connect_busy / (r->open_at_start > 0 ? r->open_at_start : 1);
        if (r->connect_busy >= 0.1 && r->connect_busy >= r->open_s / 4 && per > 100e-6)
            fprintf(f,
                    "; %.2f s of it inside connect() itself (%.0f µs each): the kernel searching "
                    "an ephemeral port range crowded by TIME_WAIT (a slow client, not a slow "
                    "server: %s or wait 60 s)",
                    r->connect_busy, per * 1e6,
                    r->kr.nsources ? "more --source addresses" : "--source");
        fputc('\n', f);
    }
    if (r->rate > 0 || r->nsteps)
        fprintf(f,
                "schedule     %llu sends due; %llu went out more than 1 ms behind their intended "
                "time; unsent %llu\n",
                (unsigned long long)(r->intended + r->unsent), (unsigned long long)r->behind,
                (unsigned long long)r->unsent);
    if (is_long)
        fprintf(f, "spread       %llu to %llu done per connection\n",
                (unsigned long long)r->conn_min, (unsigned long long)r->conn_max);
    fprintf(f, "errors       %llu:", (unsigned long long)errors_of(&r->total));
    for (int e = 0; e < ERR_KINDS; e++)
        fprintf(f, " %s %llu", err_key[e], (unsigned long long)r->total.errors[e]);
    fprintf(f, "; lost %llu\n", (unsigned long long)r->total.lost);
    if (r->reconnects)
        fprintf(f, "reconnects   %llu connections closed cleanly and opened again\n",
                (unsigned long long)r->reconnects);
    if (r->http_non2xx || (r->expect && !strcmp(r->expect, "http")))
        fprintf(f, "http         %llu responses with a status other than %s\n",
                (unsigned long long)r->http_non2xx, ok_of(r));
    fprintf(f, "client CPU   %.0f%% of one core over %.2f s, %.2f µs per request%s\n",
            100.0 * cpu / wall, wall, r->all_requests ? cpu * 1e6 / (double)r->all_requests : 0.0,
            100.0 * cpu / wall > 90.0 * r->threads ? " (saturated: the client may be the limit)"
                                                   : "");
    if (r->poll_idle_s > 0)
        fprintf(
            f, "busy-poll    %.2f CPU seconds more polled with nothing to do (not counted above)\n",
            r->poll_idle_s);
    if (r->have_k) {
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
        kstat_hints(f, &r->kd, &r->kr, false);
    } else {
        fprintf(f, "kernel       no counters: /proc/net/netstat, snmp, softnet_stat and sockstat "
                   "could not be read\n");
    }
    if (r->nsteps)
        print_steps(f, r);
}

/* --- writing --json ------------------------------------------------------------------------ */

/* Length of the UTF-8 character at s (RFC 3629), or 0 when the byte at s does not start one.
 * s is NUL-terminated, and NUL is no continuation byte, so nothing past it is read. */
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
    const unsigned char *u = (const unsigned char *)(s ? s : "");

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

static void json_hcompact(FILE *f, const struct hcompact *c)
{
    fprintf(f,
            "{\"unit\": \"ns\", \"layout\": \"" LAYOUT "\", \"count\": %llu, \"min\": %llu, "
            "\"max\": %llu, \"sum\": %.17g, \"buckets\": [",
            (unsigned long long)c->count, (unsigned long long)(c->count ? c->min : 0),
            (unsigned long long)(c->count ? c->max : 0), c->sum);
    for (uint32_t i = 0; i < c->n; i++)
        fprintf(f, "%s[%u, %llu]", i ? ", " : "", c->idx[i], (unsigned long long)c->cnt[i]);
    fputs("]}", f);
}

/* Today's latency object, with the whole histogram in it. */
static int json_lat(FILE *f, const struct hist *h)
{
    struct hist empty;
    struct hcompact c;

    if (!h) {
        hist_init(&empty);
        h = &empty;
    }
    fprintf(f,
            "{\"samples\": %llu, \"min_us\": %.3f, \"p50_us\": %.3f, \"p90_us\": %.3f, "
            "\"p99_us\": %.3f, \"p999_us\": %.3f, \"p9999_us\": %.3f, \"max_us\": %.3f, "
            "\"mean_us\": %.3f, \"hist\": ",
            (unsigned long long)h->count, h->count ? us(h->min) : 0.0, us(hist_percentile(h, 50)),
            us(hist_percentile(h, 90)), us(hist_percentile(h, 99)), us(hist_percentile(h, 99.9)),
            us(hist_percentile(h, 99.99)), us(h->max),
            h->count ? us((uint64_t)(h->sum / (double)h->count)) : 0.0);
    if (hcompact_from(&c, h) < 0)
        return -ENOMEM;
    json_hcompact(f, &c);
    hcompact_free(&c);
    fputc('}', f);
    return 0;
}

/* "errors": total, and "error_kinds" with the kinds that are not 0 (a second's or a step's). */
static void json_errors(FILE *f, const struct bcount *c)
{
    int n = 0;

    fprintf(f, "\"errors\": %llu, \"error_kinds\": {", (unsigned long long)errors_of(c));
    for (int e = 0; e < ERR_KINDS; e++)
        if (c->errors[e])
            fprintf(f, "%s\"%s\": %llu", n++ ? ", " : "", err_key[e],
                    (unsigned long long)c->errors[e]);
    fputc('}', f);
}

static void json_targets(FILE *f, const char *list)
{
    const char *p = list ? list : "";

    fputc('[', f);
    for (int n = 0; *p; n++) {
        const char *e = strstr(p, ", ");
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char *one = strndup(p, len);

        fputs(n ? ", " : "", f);
        json_str(f, one ? one : "");
        free(one);
        p += len + (e ? 2 : 0);
    }
    fputc(']', f);
}

int result_write_json(FILE *f, const struct bresult *r)
{
    double measured = r->measured > 0 ? r->measured : 1, wall = r->wall > 0 ? r->wall : 1;
    int rc = 0;

    fprintf(f, "{\n  \"version\": %d,\n  \"target\": ", VERSION);
    json_str(f, r->target);
    fprintf(f, ",\n  \"targets\": ");
    json_targets(f, r->target);
    fprintf(f, ",\n  \"config\": {\"mode\": ");
    json_str(f, r->mode);
    fprintf(f,
            ", \"connections\": %d, \"threads\": %d, \"pipeline\": %d, \"duration_s\": %.3f, "
            "\"requests\": %llu, \"warmup_s\": %.3f, \"timeout_ms\": %d, \"rate\": %.3f, "
            "\"expect\": ",
            r->conns, r->threads, r->pipeline, r->duration, (unsigned long long)r->requests_asked,
            r->warmup, r->timeout_ms, r->rate);
    json_str(f, r->expect);
    fprintf(f, ", \"ok_status\": ");
    json_str(f, ok_of(r));
    fprintf(f, ", \"linger0\": %s, \"busy_poll\": %s, \"sources\": %d},\n",
            r->kr.linger0 ? "true" : "false", r->busy_poll ? "true" : "false", r->kr.nsources);
    fprintf(f,
            "  \"agents\": %d,\n  \"start_wall\": %.6f,\n  \"end_wall\": %.6f,\n"
            "  \"window_spread_s\": %.6f,\n  \"wall_s\": %.6f,\n",
            r->agents, r->start_wall, r->end_wall, r->window_spread, r->wall);
    fprintf(f,
            "  \"opening\": {\"open_s\": %.6f, \"open_at_start\": %d, \"connect_busy_s\": %.6f},\n",
            r->open_s, r->open_at_start, r->connect_busy);
    fprintf(f,
            "  \"requests\": %llu,\n  \"measured_s\": %.3f,\n  \"qps\": %.3f,\n"
            "  \"bytes_out\": %llu,\n  \"bytes_in\": %llu,\n  \"latency\": ",
            (unsigned long long)r->total.requests, r->measured,
            (double)r->total.requests / measured, (unsigned long long)r->total.bytes_out,
            (unsigned long long)r->total.bytes_in);
    rc |= json_lat(f, r->lat);
    fprintf(f, ",\n  \"classes\": [");
    for (int k = 0; k < r->nclasses; k++) {
        fprintf(f, "%s{\"name\": ", k ? ", " : "");
        json_str(f, r->cls[k].name);
        fprintf(f, ", \"weight\": %u, \"bytes\": %zu, \"latency\": ", r->cls[k].weight,
                r->cls[k].bytes);
        rc |= json_lat(f, cls_hist(r, k));
        fputc('}', f);
    }
    fprintf(f, "],\n  \"connections\": %llu,\n  \"connect_latency\": ",
            (unsigned long long)r->total.connects);
    rc |= json_lat(f, r->clat);
    fprintf(f, ",\n  \"schedule\": {\"intended\": %llu, \"sent\": %llu, \"behind\": %llu},\n",
            (unsigned long long)(r->intended + r->unsent), (unsigned long long)r->intended,
            (unsigned long long)r->behind);
    fprintf(f, "  \"per_connection\": {\"min\": %llu, \"max\": %llu},\n",
            (unsigned long long)r->conn_min, (unsigned long long)r->conn_max);
    fprintf(f, "  \"lost\": %llu,\n  \"unsent\": %llu,\n", (unsigned long long)r->total.lost,
            (unsigned long long)r->unsent);
    fprintf(f, "  \"reconnects\": %llu,\n  \"http_non2xx\": %llu,\n  \"all_requests\": %llu,\n",
            (unsigned long long)r->reconnects, (unsigned long long)r->http_non2xx,
            (unsigned long long)r->all_requests);
    fprintf(f, "  \"errors\": {\"total\": %llu", (unsigned long long)errors_of(&r->total));
    for (int e = 0; e < ERR_KINDS; e++)
        fprintf(f, ", \"%s\": %llu", err_key[e], (unsigned long long)r->total.errors[e]);
    fprintf(f,
            "},\n  \"client_cpu\": {\"percent\": %.1f, \"us_per_request\": %.3f, "
            "\"seconds\": %.17g, \"poll_idle_seconds\": %.17g},\n",
            100.0 * r->cpu_s / wall,
            r->all_requests ? r->cpu_s * 1e6 / (double)r->all_requests : 0.0, r->cpu_s,
            r->poll_idle_s);
    fprintf(f, "  \"kernel\": {");
    for (int i = 0, n = 0; r->have_k && i < KS_N; i++)
        if (r->kd.have[i])
            fprintf(f, "%s\"%s\": %llu", n++ ? ", " : "", kstat_name[i],
                    (unsigned long long)r->kd.v[i]);
    fprintf(f, "},\n  \"hints\": ");
    if (r->have_k)
        kstat_hints(f, &r->kd, &r->kr, true);
    else
        fputs("[]", f);
    fprintf(f, ",\n  \"series\": [");
    for (size_t k = 0; k < r->nseries; k++) {
        const struct bsecond *s = &r->series[k];
        struct hist *h = malloc(sizeof(*h));

        if (!h)
            return -ENOMEM;
        hist_init(h);
        hcompact_add_to(&s->lat, h);
        fprintf(f,
                "%s\n    {\"t\": %.3f, \"wall\": %.6f, \"requests\": %llu, \"bytes_in\": %llu, "
                "\"bytes_out\": %llu, \"connects\": %llu, \"lost\": %llu, \"reconnects\": %llu, "
                "\"http_non2xx\": %llu, \"p50_us\": %.3f, \"p90_us\": %.3f, \"p99_us\": %.3f, "
                "\"max_us\": %.3f, ",
                k ? "," : "", s->t, s->wall, (unsigned long long)s->c.requests,
                (unsigned long long)s->c.bytes_in, (unsigned long long)s->c.bytes_out,
                (unsigned long long)s->c.connects, (unsigned long long)s->c.lost,
                (unsigned long long)s->c.reconnects, (unsigned long long)s->c.http_non2xx,
                us(hist_percentile(h, 50)), us(hist_percentile(h, 90)), us(hist_percentile(h, 99)),
                h->count ? us(h->max) : 0.0);
        free(h);
        json_errors(f, &s->c);
        fprintf(f, ", \"open\": %d, \"hist\": ", s->open);
        json_hcompact(f, &s->lat);
        fputc('}', f);
    }
    fprintf(f, "\n  ],\n  \"steps\": [");
    for (size_t k = 0; k < r->nsteps; k++) {
        const struct bstep *st = &r->steps[k];

        fprintf(f,
                "%s\n    {\"rate\": %.3f, \"measured_s\": %.6f, \"requests\": %llu, \"qps\": %.3f, "
                "\"bytes_in\": %llu, \"bytes_out\": %llu, \"lost\": %llu, \"intended\": %llu, "
                "\"behind\": %llu, \"unsent\": %llu, \"http_non2xx\": %llu, \"over_bound\": %llu, ",
                k ? "," : "", st->rate, st->measured, (unsigned long long)st->c.requests,
                st->measured > 0 ? (double)st->c.requests / st->measured : 0.0,
                (unsigned long long)st->c.bytes_in, (unsigned long long)st->c.bytes_out,
                (unsigned long long)st->c.lost, (unsigned long long)st->intended,
                (unsigned long long)st->behind, (unsigned long long)st->unsent,
                (unsigned long long)st->c.http_non2xx, (unsigned long long)st->over_bound);
        json_errors(f, &st->c);
        fprintf(f,
                ", \"cpu_percent\": %.3f, \"attempt\": %d, \"kept\": %s, \"start_wall\": %.6f, "
                "\"latency\": ",
                st->cpu_percent, st->attempt, st->kept ? "true" : "false", st->start_wall);
        rc |= json_lat(f, st->lat);
        fputc('}', f);
    }
    fprintf(f, "%s],\n  \"found_rate\": %.3f,\n  \"found_why\": ", r->nsteps ? "\n  " : "",
            r->found_rate);
    if (r->found_why)
        json_str(f, r->found_why);
    else
        fputs("null", f);
    fprintf(f, "\n}\n");
    if (rc)
        return -ENOMEM;
    return ferror(f) ? -EIO : 0;
}

/* --- reading --json ------------------------------------------------------------------------ */

/* The reader's state: the first error wins, and names the file and the key. */
struct rd {
    const char *path;
    char *err;
    size_t errlen;
    bool bad;
};

static void rd_fail(struct rd *rd, const char *where, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void rd_fail(struct rd *rd, const char *where, const char *key, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (rd->bad)
        return;
    rd->bad = true;
    n = snprintf(rd->err, rd->errlen, "%s: \"%s%s%s\": ", rd->path, where, *where ? "." : "", key);
    if (n < 0 || (size_t)n >= rd->errlen)
        return;
    va_start(ap, fmt);
    vsnprintf(rd->err + n, rd->errlen - (size_t)n, fmt, ap);
    va_end(ap);
}

static const struct json *need(struct rd *rd, const struct json *obj, const char *where,
                               const char *key, enum json_type t)
{
    const struct json *v = json_get(obj, key);

    if (!v) {
        rd_fail(rd, where, key, "missing");
        return NULL;
    }
    if (v->type != t && !(t == JSON_TRUE && v->type == JSON_FALSE)) {
        rd_fail(rd, where, key, "is %s, not %s", json_type_name(v->type),
                t == JSON_TRUE ? "true or false" : json_type_name(t));
        return NULL;
    }
    return v;
}

/* Counts read are at most 2^53 (no run reaches that: 104 days at a billion a second), so that
 * merge's sums of up to MERGE_MAX_FILES of them cannot wrap: merge is exact or refuses. */
#define COUNT_MAX (1ull << 53)

static uint64_t need_u64(struct rd *rd, const struct json *obj, const char *where, const char *key)
{
    const struct json *v = need(rd, obj, where, key, JSON_NUMBER);
    uint64_t u = 0;

    if (v && (!json_u64(v, &u) || u > COUNT_MAX))
        rd_fail(rd, where, key, "is not a count (a whole number from 0 to 2^53)");
    return u;
}

static uint64_t need_any_u64(struct rd *rd, const struct json *obj, const char *where,
                             const char *key)
{
    const struct json *v = need(rd, obj, where, key, JSON_NUMBER);
    uint64_t u = 0;

    if (v && !json_u64(v, &u))
        rd_fail(rd, where, key, "is not a count (a whole number from 0 to 2^64-1)");
    return u;
}

static int need_int(struct rd *rd, const struct json *obj, const char *where, const char *key)
{
    uint64_t u = need_u64(rd, obj, where, key);

    if (u > 100000000) { /* connections, threads, agents: sums of 20 of these fit an int */
        rd_fail(rd, where, key, "is too large (over 100,000,000)");
        return 0;
    }
    return (int)u;
}

static double need_num(struct rd *rd, const struct json *obj, const char *where, const char *key)
{
    const struct json *v = need(rd, obj, where, key, JSON_NUMBER);

    /* no figure of a run comes near 1e30 (a sum of nanoseconds over 2^53 samples of 2^41 ns
     * is 2e28): larger, summed, could reach infinity, which JSON cannot hold */
    if (v && !(fabs(v->d) <= 1e30)) {
        rd_fail(rd, where, key, "is out of range (beyond 1e30)");
        return 0;
    }
    return v ? v->d : 0;
}

static bool need_bool(struct rd *rd, const struct json *obj, const char *where, const char *key)
{
    const struct json *v = need(rd, obj, where, key, JSON_TRUE);

    return v && v->type == JSON_TRUE;
}

static char *need_str(struct rd *rd, const struct json *obj, const char *where, const char *key)
{
    const struct json *v = need(rd, obj, where, key, JSON_STRING);
    char *s;

    if (!v)
        return NULL;
    if (strlen(v->s) != v->len) {
        rd_fail(rd, where, key, "holds a NUL");
        return NULL;
    }
    if (!(s = strdup(v->s)))
        rd_fail(rd, where, key, "out of memory");
    return s;
}

/* A "hist" object into c (ascending, counts that add up to "count"). */
static void read_hcompact(struct rd *rd, const struct json *obj, const char *where,
                          struct hcompact *c)
{
    const struct json *h = need(rd, obj, where, "hist", JSON_OBJECT), *b, *layout;
    char at[160];
    uint64_t sum = 0;

    memset(c, 0, sizeof(*c));
    c->min = UINT64_MAX;
    if (!h)
        return;
    snprintf(at, sizeof(at), "%s%shist", where, *where ? "." : "");
    layout = need(rd, h, at, "layout", JSON_STRING);
    if (layout && strcmp(layout->s, LAYOUT)) {
        rd_fail(rd, at, "layout", "is \"%.40s\": this lfbench reads \"" LAYOUT "\" only",
                layout->s);
        return;
    }
    if ((layout = need(rd, h, at, "unit", JSON_STRING)) && strcmp(layout->s, "ns")) {
        rd_fail(rd, at, "unit", "is \"%.40s\", not \"ns\"", layout->s);
        return;
    }
    c->count = need_u64(rd, h, at, "count");
    c->min = need_u64(rd, h, at, "min");
    c->max = need_u64(rd, h, at, "max");
    c->sum = need_num(rd, h, at, "sum");
    b = need(rd, h, at, "buckets", JSON_ARRAY);
    if (rd->bad)
        return;
    if (!c->count)
        c->min = UINT64_MAX, c->max = 0;
    if (b->len) {
        c->idx = malloc(b->len * sizeof(*c->idx));
        c->cnt = malloc(b->len * sizeof(*c->cnt));
        if (!c->idx || !c->cnt) {
            rd_fail(rd, at, "buckets", "out of memory");
            return;
        }
    }
    for (size_t i = 0; i < b->len; i++) {
        const struct json *p = &b->kid[i];
        uint64_t idx, n;

        if (p->type != JSON_ARRAY || p->len != 2 || !json_u64(&p->kid[0], &idx) ||
            !json_u64(&p->kid[1], &n)) {
            rd_fail(rd, at, "buckets", "item %zu is not [index, count]", i);
            return;
        }
        if (idx >= HIST_BUCKETS) {
            rd_fail(rd, at, "buckets", "index %llu out of range (0 to %d)", (unsigned long long)idx,
                    HIST_BUCKETS - 1);
            return;
        }
        if (c->n && idx <= c->idx[c->n - 1]) {
            rd_fail(rd, at, "buckets", "index %llu not in ascending order",
                    (unsigned long long)idx);
            return;
        }
        if (n > COUNT_MAX || n > UINT64_MAX - sum) {
            rd_fail(rd, at, "buckets", "counts overflow");
            return;
        }
        sum += n;
        if (n) {
            c->idx[c->n] = (uint16_t)idx;
            c->cnt[c->n++] = n;
        }
    }
    if (sum != c->count)
        rd_fail(rd, at, "count", "is %llu but the buckets hold %llu", (unsigned long long)c->count,
                (unsigned long long)sum);
    else if (c->count && (c->min > c->max || hist_index(c->min) != c->idx[0] ||
                          hist_index(c->max) != c->idx[c->n - 1]))
        rd_fail(rd, at, "min", "and \"max\" do not fall in the first and last buckets");
}

/* A latency object's histogram into a new struct hist. */
static struct hist *read_lat(struct rd *rd, const struct json *obj, const char *where,
                             const char *key)
{
    const struct json *l = need(rd, obj, where, key, JSON_OBJECT);
    struct hcompact c;
    struct hist *h;
    char at[160];

    if (!l)
        return NULL;
    snprintf(at, sizeof(at), "%s%s%s", where, *where ? "." : "", key);
    read_hcompact(rd, l, at, &c);
    if (rd->bad || !(h = malloc(sizeof(*h)))) {
        if (!rd->bad)
            rd_fail(rd, where, key, "out of memory");
        hcompact_free(&c);
        return NULL;
    }
    hist_init(h);
    hcompact_add_to(&c, h);
    hcompact_free(&c);
    return h;
}

static void read_errors(struct rd *rd, const struct json *obj, const char *where, struct bcount *c)
{
    uint64_t total = need_u64(rd, obj, where, "errors"), sum = 0;
    const struct json *k = need(rd, obj, where, "error_kinds", JSON_OBJECT);

    for (int e = 0; k && e < ERR_KINDS; e++) {
        const struct json *v = json_get(k, err_key[e]);
        if (v && (!json_u64(v, &c->errors[e]) || c->errors[e] > COUNT_MAX))
            rd_fail(rd, where, "error_kinds", "\"%s\" is not a count", err_key[e]);
        sum += c->errors[e];
    }
    if (!rd->bad && sum != total)
        rd_fail(rd, where, "errors", "is %llu but \"error_kinds\" add up to %llu",
                (unsigned long long)total, (unsigned long long)sum);
}

static void read_series(struct rd *rd, const struct json *arr, struct bresult *r)
{
    if (!arr->len)
        return;
    if (!(r->series = calloc(arr->len, sizeof(*r->series)))) {
        rd_fail(rd, "", "series", "out of memory");
        return;
    }
    for (size_t i = 0; i < arr->len && !rd->bad; i++) {
        const struct json *o = &arr->kid[i];
        struct bsecond *s = &r->series[i];
        char at[32];

        snprintf(at, sizeof(at), "series[%zu]", i);
        r->nseries = i + 1;
        if (o->type != JSON_OBJECT) {
            rd_fail(rd, "", at, "is %s, not an object", json_type_name(o->type));
            return;
        }
        s->lat.min = UINT64_MAX;
        s->t = need_num(rd, o, at, "t");
        s->wall = need_num(rd, o, at, "wall");
        if (!rd->bad && !(s->wall >= 0 && s->wall <= 1e10))
            rd_fail(rd, at, "wall", "is not a time in seconds since the epoch");
        s->c.requests = need_u64(rd, o, at, "requests");
        s->c.bytes_in = need_u64(rd, o, at, "bytes_in");
        s->c.bytes_out = need_u64(rd, o, at, "bytes_out");
        s->c.connects = need_u64(rd, o, at, "connects");
        s->c.lost = need_u64(rd, o, at, "lost");
        s->c.reconnects = need_u64(rd, o, at, "reconnects");
        s->c.http_non2xx = need_u64(rd, o, at, "http_non2xx");
        read_errors(rd, o, at, &s->c);
        s->open = need_int(rd, o, at, "open");
        if (!rd->bad)
            read_hcompact(rd, o, at, &s->lat);
    }
}

static void read_steps(struct rd *rd, const struct json *arr, struct bresult *r)
{
    if (!arr->len)
        return;
    if (!(r->steps = calloc(arr->len, sizeof(*r->steps)))) {
        rd_fail(rd, "", "steps", "out of memory");
        return;
    }
    for (size_t i = 0; i < arr->len && !rd->bad; i++) {
        const struct json *o = &arr->kid[i];
        struct bstep *st = &r->steps[i];
        char at[32];

        snprintf(at, sizeof(at), "steps[%zu]", i);
        r->nsteps = i + 1;
        if (o->type != JSON_OBJECT) {
            rd_fail(rd, "", at, "is %s, not an object", json_type_name(o->type));
            return;
        }
        st->rate = need_num(rd, o, at, "rate");
        st->measured = need_num(rd, o, at, "measured_s");
        st->c.requests = need_u64(rd, o, at, "requests");
        st->c.bytes_in = need_u64(rd, o, at, "bytes_in");
        st->c.bytes_out = need_u64(rd, o, at, "bytes_out");
        st->c.lost = need_u64(rd, o, at, "lost");
        st->intended = need_u64(rd, o, at, "intended");
        st->behind = need_u64(rd, o, at, "behind");
        st->unsent = need_u64(rd, o, at, "unsent");
        /* absent from files written before they were: none counted */
        if (json_get(o, "http_non2xx"))
            st->c.http_non2xx = need_u64(rd, o, at, "http_non2xx");
        if (json_get(o, "over_bound"))
            st->over_bound = need_u64(rd, o, at, "over_bound");
        if (json_get(o, "attempt"))
            st->attempt = need_int(rd, o, at, "attempt");
        if (json_get(o, "start_wall")) {
            st->start_wall = need_num(rd, o, at, "start_wall");
            if (!rd->bad && !(st->start_wall >= 0 && st->start_wall <= 1e10))
                rd_fail(rd, at, "start_wall", "is not a time in seconds since the epoch");
        }
        read_errors(rd, o, at, &st->c);
        st->cpu_percent = need_num(rd, o, at, "cpu_percent");
        st->kept = need_bool(rd, o, at, "kept");
        if (!rd->bad)
            st->lat = read_lat(rd, o, at, "latency");
    }
}

static void read_doc(struct rd *rd, const struct json *d, struct bresult *r)
{
    const struct json *cfg, *op, *cls, *sch, *pc, *er, *cpu, *k, *ser, *steps, *v;
    uint64_t total_err = 0, sum = 0;

    if (d->type != JSON_OBJECT) {
        rd_fail(rd, "", "", "the document is %s, not an object", json_type_name(d->type));
        return;
    }
    if (!(v = json_get(d, "version"))) {
        snprintf(rd->err, rd->errlen,
                 "%s: a version 1 file (no \"version\", no histograms): it cannot be merged "
                 "exactly; rerun with a newer lfbench",
                 rd->path);
        rd->bad = true;
        return;
    }
    if (!json_u64(v, &sum) || sum != VERSION) {
        rd_fail(rd, "", "version", "is not %d: %s", VERSION,
                json_u64(v, &sum) && sum > VERSION ? "written by a newer lfbench than this one"
                                                   : "this lfbench reads version 2 only");
        return;
    }
    r->target = need_str(rd, d, "", "target");
    cfg = need(rd, d, "", "config", JSON_OBJECT);
    if (rd->bad)
        return;
    r->mode = need_str(rd, cfg, "config", "mode");
    r->expect = need_str(rd, cfg, "config", "expect");
    if (json_get(cfg, "ok_status")) /* absent before --ok-status existed: 2xx */
        r->ok_status = need_str(rd, cfg, "config", "ok_status");
    r->conns = need_int(rd, cfg, "config", "connections");
    r->threads = need_int(rd, cfg, "config", "threads");
    r->pipeline = need_int(rd, cfg, "config", "pipeline");
    r->duration = need_num(rd, cfg, "config", "duration_s");
    r->requests_asked = need_u64(rd, cfg, "config", "requests");
    r->warmup = need_num(rd, cfg, "config", "warmup_s");
    r->timeout_ms = need_int(rd, cfg, "config", "timeout_ms");
    r->rate = need_num(rd, cfg, "config", "rate");
    r->kr.linger0 = need_bool(rd, cfg, "config", "linger0");
    if (json_get(cfg, "busy_poll")) /* absent before --busy-poll existed */
        r->busy_poll = need_bool(rd, cfg, "config", "busy_poll");
    if (json_get(cfg, "sources")) /* absent before it was recorded: no --source */
        r->kr.nsources = need_int(rd, cfg, "config", "sources");
    r->agents = need_int(rd, d, "", "agents");
    if (!rd->bad && r->agents < 1)
        rd_fail(rd, "", "agents", "is 0");
    r->start_wall = need_num(rd, d, "", "start_wall");
    r->end_wall = need_num(rd, d, "", "end_wall");
    if (!rd->bad && !(r->start_wall >= 0 && r->end_wall >= r->start_wall && r->end_wall <= 1e10))
        rd_fail(rd, "", "start_wall",
                "and \"end_wall\" are not a window in seconds since the epoch");
    r->window_spread = need_num(rd, d, "", "window_spread_s");
    r->wall = need_num(rd, d, "", "wall_s");
    if ((op = need(rd, d, "", "opening", JSON_OBJECT))) {
        r->open_s = need_num(rd, op, "opening", "open_s");
        r->open_at_start = need_int(rd, op, "opening", "open_at_start");
        r->connect_busy = need_num(rd, op, "opening", "connect_busy_s");
    }
    r->total.requests = need_u64(rd, d, "", "requests");
    r->measured = need_num(rd, d, "", "measured_s");
    r->total.bytes_out = need_u64(rd, d, "", "bytes_out");
    r->total.bytes_in = need_u64(rd, d, "", "bytes_in");
    if (rd->bad)
        return;
    r->lat = read_lat(rd, d, "", "latency");
    if (!rd->bad && r->lat && r->lat->count != r->total.requests)
        rd_fail(rd, "latency", "samples", "is %llu but \"requests\" is %llu: each request has one",
                (unsigned long long)r->lat->count, (unsigned long long)r->total.requests);
    if ((cls = need(rd, d, "", "classes", JSON_ARRAY)) && cls->len > BOPT_MAX_CLASSES)
        rd_fail(rd, "", "classes", "has %zu, more than %d", cls->len, BOPT_MAX_CLASSES);
    for (size_t i = 0; !rd->bad && i < cls->len; i++) {
        const struct json *c = &cls->kid[i];
        char at[32];
        uint64_t w, b;

        snprintf(at, sizeof(at), "classes[%zu]", i);
        r->nclasses = (int)i + 1;
        r->cls[i].name = need_str(rd, c, at, "name");
        w = need_u64(rd, c, at, "weight");
        b = need_u64(rd, c, at, "bytes");
        r->cls[i].weight = w > UINT32_MAX ? UINT32_MAX : (unsigned)w;
        r->cls[i].bytes = (size_t)b;
        if (!rd->bad && cls->len > 1)
            r->cls[i].lat = read_lat(rd, c, at, "latency");
    }
    r->total.connects = need_u64(rd, d, "", "connections");
    if (!rd->bad)
        r->clat = read_lat(rd, d, "", "connect_latency");
    if ((sch = need(rd, d, "", "schedule", JSON_OBJECT))) {
        r->intended = need_u64(rd, sch, "schedule", "sent");
        r->behind = need_u64(rd, sch, "schedule", "behind");
    }
    if ((pc = need(rd, d, "", "per_connection", JSON_OBJECT))) {
        /* min and max, never summed: any count (an empty run's min is 2^64-1) */
        r->conn_min = need_any_u64(rd, pc, "per_connection", "min");
        r->conn_max = need_any_u64(rd, pc, "per_connection", "max");
    }
    r->total.lost = need_u64(rd, d, "", "lost");
    r->unsent = need_u64(rd, d, "", "unsent");
    r->reconnects = need_u64(rd, d, "", "reconnects");
    r->http_non2xx = need_u64(rd, d, "", "http_non2xx");
    r->total.reconnects = r->reconnects;
    r->total.http_non2xx = r->http_non2xx;
    r->all_requests = need_u64(rd, d, "", "all_requests");
    if ((er = need(rd, d, "", "errors", JSON_OBJECT))) {
        total_err = need_u64(rd, er, "errors", "total");
        sum = 0;
        for (int e = 0; e < ERR_KINDS; e++)
            sum += r->total.errors[e] = need_u64(rd, er, "errors", err_key[e]);
        if (!rd->bad && sum != total_err)
            rd_fail(rd, "errors", "total", "is %llu but the kinds add up to %llu",
                    (unsigned long long)total_err, (unsigned long long)sum);
    }
    if ((cpu = need(rd, d, "", "client_cpu", JSON_OBJECT))) {
        r->cpu_s = need_num(rd, cpu, "client_cpu", "seconds");
        if (json_get(cpu, "poll_idle_seconds")) /* --busy-poll; absent before it existed */
            r->poll_idle_s = need_num(rd, cpu, "client_cpu", "poll_idle_seconds");
    }
    if ((k = need(rd, d, "", "kernel", JSON_OBJECT))) {
        r->have_k = k->len > 0;
        for (int i = 0; i < KS_N; i++)
            if (json_get(k, kstat_name[i])) {
                r->kd.v[i] = need_u64(rd, k, "kernel", kstat_name[i]);
                r->kd.have[i] = true;
            }
    }
    r->kr.addrnotavail = r->total.errors[ERR_ADDRNOTAVAIL];
    r->kr.short_mode = is_mode(r, "short");
    if ((ser = need(rd, d, "", "series", JSON_ARRAY)))
        read_series(rd, ser, r);
    if ((steps = need(rd, d, "", "steps", JSON_ARRAY)))
        read_steps(rd, steps, r);
    r->found_rate = need_num(rd, d, "", "found_rate");
    if ((v = json_get(d, "found_why")) && v->type != JSON_NULL)
        r->found_why = need_str(rd, d, "", "found_why");
}

int result_read_json(const char *path, struct bresult *r, char *err, size_t errlen)
{
    struct rd rd = {.path = path, .err = err, .errlen = errlen};
    FILE *f = fopen(path, "re");
    char *text = NULL, jerr[200];
    size_t len = 0, cap = 0, n;
    struct json *d = NULL;

    result_init(r);
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    do {
        if (cap - len < 65536) {
            char *t = cap > ((size_t)1 << 30) ? NULL : realloc(text, cap = cap * 2 + 65536);
            if (!t) {
                snprintf(err, errlen, "%s: too large to read (over 1 GiB), or out of memory", path);
                goto bad;
            }
            text = t;
        }
        n = fread(text + len, 1, cap - len, f);
        len += n;
    } while (n > 0);
    if (ferror(f)) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        goto bad;
    }
    if (!(d = json_parse(text, len, NULL, jerr, sizeof(jerr)))) {
        snprintf(err, errlen, "%s:%s (not valid JSON)", path, jerr);
        goto bad;
    }
    free(text);
    text = NULL;
    read_doc(&rd, d, r);
    if (rd.bad)
        goto bad;
    json_free(d);
    fclose(f);
    return 0;
bad:
    json_free(d);
    free(text);
    fclose(f);
    result_free(r);
    return -1;
}

/* --- merging ------------------------------------------------------------------------------- */

static void count_add(struct bcount *d, const struct bcount *s)
{
    d->requests += s->requests;
    d->bytes_out += s->bytes_out;
    d->bytes_in += s->bytes_in;
    d->connects += s->connects;
    d->lost += s->lost;
    d->reconnects += s->reconnects;
    d->http_non2xx += s->http_non2xx;
    for (int e = 0; e < ERR_KINDS; e++)
        d->errors[e] += s->errors[e];
}

/* *dst += src, where either may be NULL (no histogram yet). */
static int hist_add(struct hist **dst, const struct hist *src)
{
    if (!src)
        return 0;
    if (!*dst) {
        if (!(*dst = malloc(sizeof(**dst))))
            return -ENOMEM;
        hist_init(*dst);
    }
    hist_merge(*dst, src);
    return 0;
}

/* The run's time 0, seconds since the epoch: where its series starts. */
static double series_origin(const struct bresult *r)
{
    return r->nseries ? r->series[0].wall - r->series[0].t : r->start_wall;
}

/* A second's bucket: the whole second of the epoch (K, K+1] its end falls in. lfbench's seconds
 * are the wall clock's (engine.c publishes at each whole second), so each is a bucket of its
 * own, and a stall seen by every agent at one instant lands in one merged second whenever each
 * agent started; only a run's first and last seconds are shorter. A merged second's wall is
 * K+1 exactly, so merging again keeps it in K: the merge stays associative. The microsecond of
 * slack keeps a whole second that went through %.6f in its own bucket. (Files from an lfbench
 * before the alignment have seconds that end anywhere: each goes to the second it ends in.) */
static long long bucket_of(double wall)
{
    return (long long)ceil(wall - 1e-6) - 1;
}

struct sref {
    long long key;
    int from; /* 0: dst, 1: src */
    size_t i;
};

static int sref_cmp(const void *a, const void *b)
{
    const struct sref *x = a, *y = b;

    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    if (x->from != y->from)
        return x->from - y->from;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* The two series on the common grid of whole epoch seconds: counts and histograms summed per
 * bucket; "open" the sum over the two sides of each side's last second in the bucket. */
static int merge_series(struct bresult *dst, const struct bresult *src)
{
    size_t n = dst->nseries + src->nseries, m = 0;
    double origin = floor(fmin(series_origin(dst), series_origin(src)));
    struct sref *ref;
    struct bsecond *out;

    if (!n)
        return 0;
    ref = malloc(n * sizeof(*ref));
    out = calloc(n, sizeof(*out));
    if (!ref || !out) {
        free(ref);
        free(out);
        return -ENOMEM;
    }
    for (size_t i = 0; i < dst->nseries; i++)
        ref[i] = (struct sref){bucket_of(dst->series[i].wall), 0, i};
    for (size_t i = 0; i < src->nseries; i++)
        ref[dst->nseries + i] = (struct sref){bucket_of(src->series[i].wall), 1, i};
    qsort(ref, n, sizeof(*ref), sref_cmp);
    for (size_t a = 0; a < n;) {
        struct bsecond *o = &out[m++];
        int open[2] = {0, 0};
        size_t b;

        o->lat.min = UINT64_MAX;
        o->wall = (double)ref[a].key + 1;
        o->t = o->wall - origin;
        for (b = a; b < n && ref[b].key == ref[a].key; b++) {
            const struct bsecond *s = ref[b].from ? &src->series[ref[b].i] : &dst->series[ref[b].i];
            count_add(&o->c, &s->c);
            if (hcompact_merge(&o->lat, &s->lat) < 0)
                goto oom;
            open[ref[b].from] = s->open; /* the side's last second in this bucket */
        }
        o->open = open[0] + open[1];
        a = b;
    }
    for (size_t i = 0; i < dst->nseries; i++)
        hcompact_free(&dst->series[i].lat);
    free(dst->series);
    free(ref);
    dst->series = out;
    dst->nseries = m;
    return 0;
oom:
    for (size_t i = 0; i < m; i++)
        hcompact_free(&out[i].lat);
    free(out);
    free(ref);
    return -ENOMEM;
}

/* Steps index by index: the same staircase (rates) on both sides, or no merge. */
static int merge_steps(struct bresult *dst, const struct bresult *src)
{
    if (dst->nsteps != src->nsteps)
        return -EINVAL;
    for (size_t i = 0; i < dst->nsteps; i++)
        if (fabs(dst->steps[i].rate - src->steps[i].rate) > 1e-6 * fmax(1, dst->steps[i].rate))
            return -EINVAL;
    for (size_t i = 0; i < dst->nsteps; i++) {
        struct bstep *d = &dst->steps[i];
        const struct bstep *s = &src->steps[i];

        if (hist_add(&d->lat, s->lat) < 0)
            return -ENOMEM;
        count_add(&d->c, &s->c);
        d->measured = fmax(d->measured, s->measured);
        d->intended += s->intended;
        d->behind += s->behind;
        d->unsent += s->unsent;
        d->over_bound += s->over_bound;
        /* the busiest agent: a client that limits the step shows in one of them */
        d->cpu_percent = fmax(d->cpu_percent, s->cpu_percent);
        d->kept = d->kept && s->kept;
        /* the first agent's start: the step's load began then (0, unknown, is no start) */
        if (s->start_wall > 0 && (d->start_wall <= 0 || s->start_wall < d->start_wall))
            d->start_wall = s->start_wall;
    }
    return 0;
}

/* Adds target t to dst's ", "-separated list unless it is in it. */
static int add_targets(struct bresult *dst, const char *list)
{
    const char *p = list ? list : "";

    while (*p) {
        const char *e = strstr(p, ", ");
        size_t len = e ? (size_t)(e - p) : strlen(p), have = dst->target ? strlen(dst->target) : 0;
        bool found = false;

        for (const char *q = dst->target; q && *q;) {
            const char *qe = strstr(q, ", ");
            size_t ql = qe ? (size_t)(qe - q) : strlen(q);
            if (ql == len && !memcmp(q, p, len))
                found = true;
            q += ql + (qe ? 2 : 0);
        }
        if (!found) {
            char *t = realloc(dst->target, have + 2 + len + 1);
            if (!t)
                return -ENOMEM;
            if (have)
                memcpy(t + have, ", ", 2), have += 2;
            memcpy(t + have, p, len);
            t[have + len] = '\0';
            dst->target = t;
        }
        p += len + (e ? 2 : 0);
    }
    return 0;
}

static bool same_str(const char *a, const char *b)
{
    return !strcmp(a ? a : "", b ? b : "");
}

/* Merging is exact for what is counted (counts, bytes, errors by kind, histograms bucket by
 * bucket); what is a configuration is summed where agents add up (connections, threads, rates,
 * -n) and kept otherwise. Refused (-EINVAL, nothing changed): a different --mode or --expect
 * (the latencies are of different things), different classes, or different sweeps. */
int result_merge(struct bresult *dst, const struct bresult *src)
{
    double start, end;
    int rc;

    if (!same_str(dst->mode, src->mode) || !same_str(dst->expect, src->expect) ||
        strcmp(ok_of(dst), ok_of(src)) || dst->nclasses != src->nclasses)
        return -EINVAL;
    for (int k = 0; k < dst->nclasses; k++)
        if (!same_str(dst->cls[k].name, src->cls[k].name))
            return -EINVAL;
    if (dst->nsteps != src->nsteps)
        return -EINVAL;
    for (size_t i = 0; i < dst->nsteps; i++)
        if (fabs(dst->steps[i].rate - src->steps[i].rate) > 1e-6 * fmax(1, dst->steps[i].rate))
            return -EINVAL;
    if ((rc = merge_steps(dst, src)) < 0 || (rc = merge_series(dst, src)) < 0 ||
        (rc = add_targets(dst, src->target)) < 0 || (rc = hist_add(&dst->lat, src->lat)) < 0 ||
        (rc = hist_add(&dst->clat, src->clat)) < 0)
        return rc;
    for (int k = 0; dst->nclasses > 1 && k < dst->nclasses; k++)
        if ((rc = hist_add(&dst->cls[k].lat, src->cls[k].lat)) < 0)
            return rc;
    if (__builtin_add_overflow(dst->conns, src->conns, &dst->conns) ||
        __builtin_add_overflow(dst->threads, src->threads, &dst->threads) ||
        __builtin_add_overflow(dst->agents, src->agents, &dst->agents) ||
        __builtin_add_overflow(dst->open_at_start, src->open_at_start, &dst->open_at_start))
        return -EOVERFLOW;
    dst->rate += src->rate;
    dst->requests_asked += src->requests_asked;
    dst->pipeline = dst->pipeline > src->pipeline ? dst->pipeline : src->pipeline;
    dst->timeout_ms = dst->timeout_ms > src->timeout_ms ? dst->timeout_ms : src->timeout_ms;
    dst->duration = fmax(dst->duration, src->duration);
    dst->warmup = fmax(dst->warmup, src->warmup);
    dst->kr.linger0 = dst->kr.linger0 || src->kr.linger0;
    dst->kr.nsources = dst->kr.nsources > src->kr.nsources ? dst->kr.nsources : src->kr.nsources;
    dst->busy_poll = dst->busy_poll || src->busy_poll;
    /* The spread: the two sides' own spreads and the distance between their earliest and
     * latest starts (each side's starts lie in [start_wall, start_wall + window_spread]). */
    start = fmin(dst->start_wall, src->start_wall);
    dst->window_spread =
        fmax(dst->start_wall + dst->window_spread, src->start_wall + src->window_spread) - start;
    end = fmax(dst->end_wall, src->end_wall);
    dst->start_wall = start;
    dst->end_wall = end;
    /* QPS over the union of the windows, from the first start to the last end: what the
     * server saw from all agents together. Dividing by the longest window instead would
     * count two agents that ran one after the other as twice the rate. */
    dst->measured = end - start;
    dst->wall = fmax(dst->wall, src->wall);
    dst->open_s = fmax(dst->open_s, src->open_s);
    dst->connect_busy += src->connect_busy;
    count_add(&dst->total, &src->total);
    dst->intended += src->intended;
    dst->behind += src->behind;
    dst->unsent += src->unsent;
    dst->conn_min = dst->conn_min < src->conn_min ? dst->conn_min : src->conn_min;
    dst->conn_max = dst->conn_max > src->conn_max ? dst->conn_max : src->conn_max;
    dst->reconnects += src->reconnects;
    dst->http_non2xx += src->http_non2xx;
    dst->all_requests += src->all_requests;
    dst->cpu_s += src->cpu_s;
    dst->poll_idle_s += src->poll_idle_s;
    /* The kernel's counters are summed: right for agents on different hosts; two agents on one
     * host (one network namespace) count that host's counters twice (the summary says so). A
     * counter is kept where both sides have it. */
    dst->have_k = dst->have_k && src->have_k;
    for (int i = 0; i < KS_N; i++) {
        dst->kd.have[i] = dst->kd.have[i] && src->kd.have[i];
        dst->kd.v[i] = dst->kd.have[i] ? dst->kd.v[i] + src->kd.v[i] : 0;
    }
    dst->kr.addrnotavail = dst->total.errors[ERR_ADDRNOTAVAIL];
    dst->kr.short_mode = is_mode(dst, "short");
    if (src->found_why && (!dst->found_why || src->found_rate < dst->found_rate)) {
        /* the lowest answer: the rate every agent kept */
        char *w = strdup(src->found_why);
        if (!w)
            return -ENOMEM;
        free(dst->found_why);
        dst->found_why = w;
        dst->found_rate = src->found_rate;
    }
    return 0;
}
