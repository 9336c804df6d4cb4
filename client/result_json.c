/* result_json: a result as --json (everything, histograms in compact form, so that a merge of
 * files is exact), and read back from such a file for `lfbench merge` and `lfbench plot`. */
#include "result.h"

#include "json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define LAYOUT "hdr-2" /* hist.c's buckets: 128 per power of two, HIST_BUCKETS of them */
#define VERSION 2

/* --- writing --json ------------------------------------------------------------------------ */

/* s as a JSON string: valid UTF-8 whatever s holds (a file name is any bytes): control
 * characters escaped, each byte that is not part of a valid character replaced by U+FFFD. */
static void json_str(FILE *f, const char *s)
{
    const unsigned char *u = (const unsigned char *)(s ? s : ""),
                        *end = u + strlen((const char *)u);

    fputc('"', f);
    while (*u) {
        size_t n = json_utf8_len(u, end);

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
            (unsigned long long)h->count, h->count ? hist_us(h->min) : 0.0,
            hist_us(hist_percentile(h, 50)), hist_us(hist_percentile(h, 90)),
            hist_us(hist_percentile(h, 99)), hist_us(hist_percentile(h, 99.9)),
            hist_us(hist_percentile(h, 99.99)), hist_us(h->max),
            h->count ? hist_us((uint64_t)(h->sum / (double)h->count)) : 0.0);
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

    fprintf(f, "\"errors\": %llu, \"error_kinds\": {", (unsigned long long)bcount_errors(c));
    for (int e = 0; e < ERR_KINDS; e++)
        if (c->errors[e])
            fprintf(f, "%s\"%s\": %llu", n++ ? ", " : "", berr_name[e],
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

/* s as a JSON string, or null when there is none. */
static void json_str_or_null(FILE *f, const char *s)
{
    if (s)
        json_str(f, s);
    else
        fputs("null", f);
}

/* "version" to "run_ids": what was run, and which runs are in it. */
static void json_config(FILE *f, const struct bresult *r)
{
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
    json_str(f, result_ok_status(r));
    fprintf(f, ", \"linger0\": %s, \"busy_poll\": %s, \"sources\": %d},\n",
            r->kr.linger0 ? "true" : "false", r->busy_poll ? "true" : "false", r->kr.nsources);
    if (r->nrun_ids) { /* the runs merged here, so that a merge of this file counts none twice */
        fputs("  \"run_ids\": [", f);
        for (size_t i = 0; i < r->nrun_ids; i++)
            fprintf(f, "%s\"%016llx\"", i ? ", " : "", (unsigned long long)r->run_ids[i]);
        fputs("],\n", f);
    }
}

/* "agents" to "connect": the window, and the opening of the connections. */
static void json_window(FILE *f, const struct bresult *r)
{
    fprintf(f,
            "  \"agents\": %d,\n  \"start_wall\": %.6f,\n  \"end_wall\": %.6f,\n"
            "  \"window_spread_s\": %.6f,\n  \"wall_s\": %.6f,\n",
            r->agents, r->start_wall, r->end_wall, r->window_spread, r->wall);
    /* connect() itself: the opening's calls (its connect_busy_s), and the whole run's */
    fprintf(f,
            "  \"opening\": {\"open_s\": %.6f, \"open_at_start\": %d, \"connect_busy_s\": %.6f, "
            "\"connect_calls\": %llu},\n",
            r->open_s, r->open_at_start, r->connect_busy, (unsigned long long)r->open_connects);
    fprintf(f, "  \"connect\": {\"calls\": %llu, \"busy_s\": %.6f},\n",
            (unsigned long long)r->connect_calls, r->connect_s);
}

/* "handshakes": the counts beside handshake_latency's samples (full and resumed of them), and in
 * short mode their rate and the client's CPU per handshake of the run ("tls"'s full and resumed:
 * every one, as the CPU per request is over every request); both null in long mode, where the
 * handshakes are the opening's and the client's CPU is the requests'. */
static void json_handshakes(FILE *f, const struct bresult *r)
{
    uint64_t n = r->ph[CP_HANDSHAKE] ? r->ph[CP_HANDSHAKE]->count : 0;
    bool is_short = result_is_mode(r, "short");

    uint64_t all = r->tls_full + r->tls_resumed;

    fprintf(f,
            ",\n  \"handshakes\": {\"samples\": %llu, \"full\": %llu, \"resumed\": %llu, "
            "\"per_s\": ",
            (unsigned long long)n, (unsigned long long)(n - r->resumed),
            (unsigned long long)r->resumed);
    if (is_short)
        fprintf(f, "%.3f", r->measured > 0 ? (double)n / r->measured : 0.0);
    else
        fputs("null", f);
    fputs(", \"client_cpu_us\": ", f);
    if (is_short && all)
        fprintf(f, "%.3f", r->cpu_s * 1e6 / (double)all);
    else
        fputs("null", f);
    fputc('}', f);
}

/* "requests" to "handshakes": the totals and their histograms. 0 or -ENOMEM. */
static int json_totals(FILE *f, const struct bresult *r)
{
    double measured = r->measured > 0 ? r->measured : 1;
    int rc = 0;

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
        rc |= json_lat(f, result_class_lat(r, k));
        fputc('}', f);
    }
    fprintf(f, "],\n  \"connections\": %llu", (unsigned long long)r->total.connects);
    for (int p = 0; p < CP_N; p++) { /* connect_latency, handshake_latency, first_byte_latency */
        fprintf(f, ",\n  \"%s\": ", cphase_json[p]);
        rc |= json_lat(f, r->ph[p]);
    }
    json_handshakes(f, r);
    return rc ? -ENOMEM : 0;
}

/* "schedule" to "all_requests": the open loop's sends and the counts beside the requests. */
static void json_schedule(FILE *f, const struct bresult *r)
{
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
}

/* "script" and "first_mismatch", each only when there is one. */
static void json_checks(FILE *f, const struct bresult *r)
{
    if (r->script) {
        fprintf(f, "  \"script\": {\"file\": ");
        json_str(f, r->script);
        fprintf(f, ", \"checks\": %llu, \"failed\": %llu, \"unkept\": %llu, \"first_failure\": ",
                (unsigned long long)r->total.checks, (unsigned long long)r->total.check_failed,
                (unsigned long long)r->total.check_unkept);
        json_str_or_null(f, r->script_failure);
        fputs("},\n", f);
    }
    if (r->mismatch) {
        fputs("  \"first_mismatch\": ", f);
        json_str(f, r->mismatch);
        fputs(",\n", f);
    }
}

/* "tls", in a TLS run only. */
static void json_tls(FILE *f, const struct bresult *r)
{
    if (!r->tls)
        return;
    fprintf(f, "  \"tls\": {\"protocol\": ");
    json_str_or_null(f, r->tls_protocol);
    fputs(", \"cipher\": ", f);
    json_str_or_null(f, r->tls_cipher);
    fprintf(f,
            ", \"verify\": %s, \"resume_asked\": %.17g, \"handshakes_full\": %llu, "
            "\"handshakes_resumed\": %llu, \"offered\": %llu, \"offered_not_resumed\": %llu, "
            "\"first_error\": ",
            r->tls_insecure ? "false" : "true", r->tls_resume, (unsigned long long)r->tls_full,
            (unsigned long long)r->tls_resumed, (unsigned long long)r->tls_offered,
            (unsigned long long)(r->tls_offered - r->tls_resumed));
    json_str_or_null(f, r->tls_error);
    fputs("},\n", f);
}

/* "errors" (every kind), "client_cpu", "kernel" and "hints". */
static void json_costs(FILE *f, const struct bresult *r)
{
    double wall = r->wall > 0 ? r->wall : 1;

    fprintf(f, "  \"errors\": {\"total\": %llu", (unsigned long long)bcount_errors(&r->total));
    for (int e = 0; e < ERR_KINDS; e++)
        fprintf(f, ", \"%s\": %llu", berr_name[e], (unsigned long long)r->total.errors[e]);
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
    if (r->have_k) {
        struct kstat_run kr = result_kstat_run(r);
        kstat_hints(f, &r->kd, &kr, true);
    } else {
        fputs("[]", f);
    }
}

/* One second of "series", after the separator k (its index) asks for. 0 or -ENOMEM. */
static int json_second(FILE *f, const struct bsecond *s, size_t k)
{
    struct hist *h = malloc(sizeof(*h));

    if (!h)
        return -ENOMEM;
    hist_init(h);
    hcompact_add_to(&s->lat, h);
    fprintf(f,
            "%s\n    {\"t\": %.3f, \"wall\": %.6f, \"requests\": %llu, \"bytes_in\": %llu, "
            "\"bytes_out\": %llu, \"connects\": %llu, \"lost\": %llu, \"reconnects\": %llu, "
            "\"http_non2xx\": %llu, \"checks\": %llu, \"check_failed\": %llu, "
            "\"p50_us\": %.3f, \"p90_us\": %.3f, \"p99_us\": %.3f, \"max_us\": %.3f, ",
            k ? "," : "", s->t, s->wall, (unsigned long long)s->c.requests,
            (unsigned long long)s->c.bytes_in, (unsigned long long)s->c.bytes_out,
            (unsigned long long)s->c.connects, (unsigned long long)s->c.lost,
            (unsigned long long)s->c.reconnects, (unsigned long long)s->c.http_non2xx,
            (unsigned long long)s->c.checks, (unsigned long long)s->c.check_failed,
            hist_us(hist_percentile(h, 50)), hist_us(hist_percentile(h, 90)),
            hist_us(hist_percentile(h, 99)), h->count ? hist_us(h->max) : 0.0);
    free(h);
    json_errors(f, &s->c);
    fprintf(f, ", \"open\": %d, \"hist\": ", s->open);
    json_hcompact(f, &s->lat);
    fputc('}', f);
    return 0;
}

/* One step of "steps", after the separator k (its index) asks for. 0 or -ENOMEM. */
static int json_step(FILE *f, const struct bstep *st, size_t k)
{
    int rc;

    fprintf(f,
            "%s\n    {\"rate\": %.3f, \"measured_s\": %.6f, \"requests\": %llu, \"qps\": %.3f, "
            "\"bytes_in\": %llu, \"bytes_out\": %llu, \"lost\": %llu, \"intended\": %llu, "
            "\"behind\": %llu, \"unsent\": %llu, \"http_non2xx\": %llu, \"over_bound\": %llu, "
            "\"checks\": %llu, \"check_failed\": %llu, ",
            k ? "," : "", st->rate, st->measured, (unsigned long long)st->c.requests,
            st->measured > 0 ? (double)st->c.requests / st->measured : 0.0,
            (unsigned long long)st->c.bytes_in, (unsigned long long)st->c.bytes_out,
            (unsigned long long)st->c.lost, (unsigned long long)st->intended,
            (unsigned long long)st->behind, (unsigned long long)st->unsent,
            (unsigned long long)st->c.http_non2xx, (unsigned long long)st->over_bound,
            (unsigned long long)st->c.checks, (unsigned long long)st->c.check_failed);
    json_errors(f, &st->c);
    fprintf(f,
            ", \"cpu_percent\": %.3f, \"attempt\": %d, \"kept\": %s, \"start_wall\": %.6f, "
            "\"latency\": ",
            st->cpu_percent, st->attempt, st->kept ? "true" : "false", st->start_wall);
    rc = json_lat(f, st->lat);
    fputc('}', f);
    return rc;
}

/* "series", "steps" and what --find-rate found, to the end of the document. 0 or -ENOMEM
 * (a second's histogram could not be made: the document stops there). */
static int json_timeline(FILE *f, const struct bresult *r)
{
    int rc = 0;

    fprintf(f, ",\n  \"series\": [");
    for (size_t k = 0; k < r->nseries; k++)
        if (json_second(f, &r->series[k], k) < 0)
            return -ENOMEM;
    fprintf(f, "\n  ],\n  \"steps\": [");
    for (size_t k = 0; k < r->nsteps; k++)
        rc |= json_step(f, &r->steps[k], k);
    fprintf(f, "%s],\n  \"found_rate\": %.3f,\n  \"found_why\": ", r->nsteps ? "\n  " : "",
            r->found_rate);
    json_str_or_null(f, r->found_why);
    fprintf(f, "\n}\n");
    return rc;
}

int result_write_json(FILE *f, const struct bresult *r)
{
    int rc = 0;

    json_config(f, r);
    json_window(f, r);
    rc |= json_totals(f, r);
    json_schedule(f, r);
    json_checks(f, r);
    json_tls(f, r);
    json_costs(f, r);
    rc |= json_timeline(f, r);
    if (rc)
        return -ENOMEM;
    if (fflush(f) != 0) /* a full disk says so here: ferror alone cannot say why */
        return errno ? -errno : -EIO;
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
        const struct json *v = json_get(k, berr_name[e]);
        if (v && (!json_u64(v, &c->errors[e]) || c->errors[e] > COUNT_MAX))
            rd_fail(rd, where, "error_kinds", "\"%s\" is not a count", berr_name[e]);
        sum += c->errors[e];
    }
    if (!rd->bad && sum != total)
        rd_fail(rd, where, "errors", "is %llu but \"error_kinds\" add up to %llu",
                (unsigned long long)total, (unsigned long long)sum);
}

/* A second's or a step's script checks: absent from files written before they were (none
 * counted); the failed ones are some of the checked ones, which are some of the responses. */
static void read_checks(struct rd *rd, const struct json *obj, const char *where, struct bcount *c)
{
    if (json_get(obj, "checks"))
        c->checks = need_u64(rd, obj, where, "checks");
    if (json_get(obj, "check_failed"))
        c->check_failed = need_u64(rd, obj, where, "check_failed");
    if (!rd->bad && c->check_failed > c->checks)
        rd_fail(rd, where, "check_failed", "is %llu, more than the %llu \"checks\"",
                (unsigned long long)c->check_failed, (unsigned long long)c->checks);
}

/* A zeroed array of arr->len items of size bytes, for the objects of the array key; NULL when
 * out of memory (the reader has failed). */
static void *rd_array(struct rd *rd, const struct json *arr, size_t size, const char *key)
{
    void *a = calloc(arr->len, size);

    if (!a)
        rd_fail(rd, "", key, "out of memory");
    return a;
}

/* The ids of the runs merged into r: at most one per agent, each 16 hex digits. */
static void read_run_ids(struct rd *rd, const struct json *d, struct bresult *r)
{
    const struct json *ids = need(rd, d, "", "run_ids", JSON_ARRAY);

    if (!ids || !ids->len)
        return;
    if (ids->len > (size_t)r->agents) {
        rd_fail(rd, "", "run_ids", "holds %zu ids for %d agents", ids->len, r->agents);
        return;
    }
    if (!(r->run_ids = rd_array(rd, ids, sizeof(*r->run_ids), "run_ids")))
        return;
    for (size_t i = 0; i < ids->len; i++) {
        const struct json *v = &ids->kid[i];

        if (v->type != JSON_STRING || v->len != 16 || strspn(v->s, "0123456789abcdef") != 16) {
            rd_fail(rd, "", "run_ids", "item %zu is not an id of 16 hex digits", i);
            return;
        }
        r->run_ids[i] = strtoull(v->s, NULL, 16);
    }
    r->nrun_ids = ids->len;
}

/* Item i of the array key, named "key[i]" in at for the errors; NULL (the reader failed) when
 * it is not an object. */
static const struct json *rd_item(struct rd *rd, const struct json *arr, size_t i, const char *key,
                                  char *at, size_t atlen)
{
    const struct json *o = &arr->kid[i];

    snprintf(at, atlen, "%s[%zu]", key, i);
    if (o->type == JSON_OBJECT)
        return o;
    rd_fail(rd, "", at, "is %s, not an object", json_type_name(o->type));
    return NULL;
}

/* A table of keys: each read into the field at off of the struct the reader is handed, by the
 * field's type (a count, an int, a number, true or false, a string). */
enum key_kind { K_U64, K_ANY_U64, K_INT, K_NUM, K_BOOL, K_STR };

struct key {
    const char *name;
    unsigned char kind;
    bool optional; /* absent from files written before it was: left as it is (0) */
    size_t off;
};

#define KIND_OF(T, f)                                                                              \
    _Generic(((T *)0)->f, uint64_t: K_U64, int: K_INT, double: K_NUM, bool: K_BOOL, char *: K_STR)
#define KEY(T, name, f)                                                                            \
    {                                                                                              \
        name, KIND_OF(T, f), false, offsetof(T, f)                                                 \
    }
#define OPT(T, name, f)                                                                            \
    {                                                                                              \
        name, KIND_OF(T, f), true, offsetof(T, f)                                                  \
    }
#define NKEYS(t) (sizeof(t) / sizeof((t)[0]))

static void read_keys(struct rd *rd, const struct json *obj, const char *where, void *base,
                      const struct key *k, size_t n)
{
    for (; n--; k++) {
        char *p = (char *)base + k->off;

        if (k->optional && !json_get(obj, k->name))
            continue;
        switch (k->kind) {
        case K_U64:
            *(uint64_t *)p = need_u64(rd, obj, where, k->name);
            break;
        case K_ANY_U64:
            *(uint64_t *)p = need_any_u64(rd, obj, where, k->name);
            break;
        case K_INT:
            *(int *)p = need_int(rd, obj, where, k->name);
            break;
        case K_NUM:
            *(double *)p = need_num(rd, obj, where, k->name);
            break;
        case K_BOOL:
            *(bool *)p = need_bool(rd, obj, where, k->name);
            break;
        case K_STR:
            *(char **)p = need_str(rd, obj, where, k->name);
            break;
        }
    }
}

#define R(name, f) KEY(struct bresult, name, f)
#define ROPT(name, f) OPT(struct bresult, name, f)

static const struct key config_keys[] = {
    R("mode", mode),
    R("expect", expect),
    ROPT("ok_status", ok_status), /* absent before --ok-status existed: 2xx */
    R("connections", conns),
    R("threads", threads),
    R("pipeline", pipeline),
    R("duration_s", duration),
    R("requests", requests_asked),
    R("warmup_s", warmup),
    R("timeout_ms", timeout_ms),
    R("rate", rate),
    R("linger0", kr.linger0),
    ROPT("busy_poll", busy_poll), /* absent before --busy-poll existed */
    ROPT("sources", kr.nsources), /* absent before it was recorded: no --source */
};

static const struct key opening_keys[] = {
    R("open_s", open_s), R("open_at_start", open_at_start), R("connect_busy_s", connect_busy),
    ROPT("connect_calls", open_connects), /* absent before it was counted */
};

static const struct key connect_keys[] = {
    R("calls", connect_calls),
    R("busy_s", connect_s),
};

static const struct key total_keys[] = {
    R("requests", total.requests),
    R("measured_s", measured),
    R("bytes_out", total.bytes_out),
    R("bytes_in", total.bytes_in),
};

static const struct key schedule_keys[] = {
    R("sent", intended),
    R("behind", behind),
};

/* min and max, never summed: any count (an empty run's min is 2^64-1) */
static const struct key per_connection_keys[] = {
    {"min", K_ANY_U64, false, offsetof(struct bresult, conn_min)},
    {"max", K_ANY_U64, false, offsetof(struct bresult, conn_max)},
};

static const struct key count_keys[] = {
    R("lost", total.lost),           R("unsent", unsent),
    R("reconnects", reconnects),     R("http_non2xx", http_non2xx),
    R("all_requests", all_requests),
};

static const struct key script_keys[] = {
    R("checks", total.checks), R("failed", total.check_failed),
    ROPT("unkept", total.check_unkept), /* absent before it was counted apart */
};

static const struct key second_keys[] = {
    KEY(struct bsecond, "requests", c.requests),
    KEY(struct bsecond, "bytes_in", c.bytes_in),
    KEY(struct bsecond, "bytes_out", c.bytes_out),
    KEY(struct bsecond, "connects", c.connects),
    KEY(struct bsecond, "lost", c.lost),
    KEY(struct bsecond, "reconnects", c.reconnects),
    KEY(struct bsecond, "http_non2xx", c.http_non2xx),
};

static const struct key step_keys[] = {
    KEY(struct bstep, "rate", rate),
    KEY(struct bstep, "measured_s", measured),
    KEY(struct bstep, "requests", c.requests),
    KEY(struct bstep, "bytes_in", c.bytes_in),
    KEY(struct bstep, "bytes_out", c.bytes_out),
    KEY(struct bstep, "lost", c.lost),
    KEY(struct bstep, "intended", intended),
    KEY(struct bstep, "behind", behind),
    KEY(struct bstep, "unsent", unsent),
    /* absent from files written before they were: none counted */
    OPT(struct bstep, "http_non2xx", c.http_non2xx),
    OPT(struct bstep, "over_bound", over_bound),
    OPT(struct bstep, "attempt", attempt),
};

/* One second of "series", the object o named at. */
static void read_second(struct rd *rd, const struct json *o, const char *at, void *item)
{
    struct bsecond *s = item;

    s->lat.min = UINT64_MAX;
    s->t = need_num(rd, o, at, "t");
    s->wall = need_num(rd, o, at, "wall");
    if (!rd->bad && !(s->wall >= 0 && s->wall <= 1e10))
        rd_fail(rd, at, "wall", "is not a time in seconds since the epoch");
    read_keys(rd, o, at, s, second_keys, NKEYS(second_keys));
    read_checks(rd, o, at, &s->c);
    read_errors(rd, o, at, &s->c);
    s->open = need_int(rd, o, at, "open");
    if (!rd->bad)
        read_hcompact(rd, o, at, &s->lat);
}

/* One step of "steps", the object o named at. */
static void read_step(struct rd *rd, const struct json *o, const char *at, void *item)
{
    struct bstep *st = item;

    read_keys(rd, o, at, st, step_keys, NKEYS(step_keys));
    read_checks(rd, o, at, &st->c);
    if (json_get(o, "start_wall")) { /* absent before it was recorded: 0, unknown */
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

/* The objects of the array key, each read by one into a new zeroed array of items of size
 * bytes; *n counts those begun (the last may be half read when the reader failed). NULL for
 * an empty array, or out of memory. */
static void *read_objects(struct rd *rd, const struct json *arr, const char *key, size_t size,
                          size_t *n,
                          void (*one)(struct rd *, const struct json *, const char *, void *))
{
    char *items;

    if (!arr->len || !(items = rd_array(rd, arr, size, key)))
        return NULL;
    for (size_t i = 0; i < arr->len && !rd->bad; i++) {
        char at[32];
        const struct json *o = rd_item(rd, arr, i, key, at, sizeof(at));

        *n = i + 1;
        if (!o)
            break;
        one(rd, o, at, items + i * size);
    }
    return items;
}

/* The object at key of d, read by its table: a group that is optional (absent from files
 * written before it was) when optional is true. */
static const struct json *read_group(struct rd *rd, const struct json *d, const char *key,
                                     bool optional, void *base, const struct key *k, size_t n)
{
    const struct json *o;

    if (optional && !json_get(d, key))
        return NULL;
    if ((o = need(rd, d, "", key, JSON_OBJECT)))
        read_keys(rd, o, key, base, k, n);
    return o;
}

/* Whether d is a line of --json-stream (its progress: "t", "wall", "phase"), which is no run's
 * result, and a reader must say so rather than call it a file of an old version. */
static bool stream_line(const struct json *d)
{
    return d && d->type == JSON_OBJECT && json_get(d, "t") && json_get(d, "wall") &&
           json_get(d, "phase") && !json_get(d, "version");
}

/* The one line for a --json-stream file given instead of a --json one. */
static void stream_refused(char *err, size_t errlen, const char *path)
{
    snprintf(err, errlen,
             "%s: a --json-stream file (progress lines, no histograms), not a --json result: "
             "give plot and merge the run's --json file instead",
             path);
}

/* Whether text (that did not parse whole) is a --json-stream file: its first line is one. */
static bool stream_text(const char *text, size_t len)
{
    const char *nl = memchr(text, '\n', len);
    char jerr[160];
    struct json *d = nl ? json_parse(text, (size_t)(nl - text), NULL, jerr, sizeof(jerr)) : NULL;
    bool yes = stream_line(d);

    json_free(d);
    return yes;
}

/* Whether d is an object of this lfbench's version. */
static bool read_version(struct rd *rd, const struct json *d)
{
    const struct json *v;
    uint64_t version;

    if (d->type != JSON_OBJECT) {
        rd_fail(rd, "", "", "the document is %s, not an object", json_type_name(d->type));
        return false;
    }
    if (stream_line(d)) {
        stream_refused(rd->err, rd->errlen, rd->path);
        rd->bad = true;
        return false;
    }
    if (!(v = json_get(d, "version"))) {
        snprintf(rd->err, rd->errlen,
                 "%s: a version 1 file (no \"version\", no histograms): it cannot be merged "
                 "exactly; rerun with a newer lfbench",
                 rd->path);
        rd->bad = true;
        return false;
    }
    if (!json_u64(v, &version) || version != VERSION) {
        rd_fail(rd, "", "version", "is not %d: %s", VERSION,
                json_u64(v, &version) && version > VERSION
                    ? "written by a newer lfbench than this one"
                    : "this lfbench reads version 2 only");
        return false;
    }
    return true;
}

/* "agents", "run_ids", the window and the opening of the connections. */
static void read_window(struct rd *rd, const struct json *d, struct bresult *r)
{
    r->agents = need_int(rd, d, "", "agents");
    if (!rd->bad && r->agents < 1)
        rd_fail(rd, "", "agents", "is 0");
    if (!rd->bad && json_get(d, "run_ids")) /* absent before runs had ids */
        read_run_ids(rd, d, r);
    r->start_wall = need_num(rd, d, "", "start_wall");
    r->end_wall = need_num(rd, d, "", "end_wall");
    if (!rd->bad && !(r->start_wall >= 0 && r->end_wall >= r->start_wall && r->end_wall <= 1e10))
        rd_fail(rd, "", "start_wall",
                "and \"end_wall\" are not a window in seconds since the epoch");
    r->window_spread = need_num(rd, d, "", "window_spread_s");
    r->wall = need_num(rd, d, "", "wall_s");
    read_group(rd, d, "opening", false, r, opening_keys, NKEYS(opening_keys));
    read_group(rd, d, "connect", true, r, connect_keys, NKEYS(connect_keys));
}

/* The phases' histograms (connect_latency in every version 2 file; the others absent from files
 * written before they were: none recorded) and "handshakes", its counts: of the connections
 * timed, no more handshakes or first bytes than connects, no more resumed than handshakes. */
static void read_phases(struct rd *rd, const struct json *d, struct bresult *r)
{
    const struct json *hs;
    uint64_t n[CP_N] = {0};

    for (int p = 0; p < CP_N && !rd->bad; p++)
        if (p == CP_CONNECT || json_get(d, cphase_json[p])) {
            r->ph[p] = read_lat(rd, d, "", cphase_json[p]);
            n[p] = r->ph[p] ? r->ph[p]->count : 0;
        }
    for (int p = CP_HANDSHAKE; p < CP_N && !rd->bad; p++)
        if (n[p] > n[CP_CONNECT])
            rd_fail(rd, cphase_json[p], "samples",
                    "is %llu, more than the %llu of \"connect_latency\": each is a timed "
                    "connection's",
                    (unsigned long long)n[p], (unsigned long long)n[CP_CONNECT]);
    if (rd->bad || !(hs = json_get(d, "handshakes")))
        return;
    if (!(hs = need(rd, d, "", "handshakes", JSON_OBJECT)))
        return;
    r->resumed = need_u64(rd, hs, "handshakes", "resumed");
    if (!rd->bad && r->resumed > n[CP_HANDSHAKE])
        rd_fail(rd, "handshakes", "resumed", "is %llu, more than the %llu of \"handshake_latency\"",
                (unsigned long long)r->resumed, (unsigned long long)n[CP_HANDSHAKE]);
}

/* Once "tls" is read: the handshakes timed are some of those the run completed. */
static void check_handshakes(struct rd *rd, const struct bresult *r)
{
    uint64_t n = r->ph[CP_HANDSHAKE] ? r->ph[CP_HANDSHAKE]->count : 0;

    if (!rd->bad && n > r->tls_full + r->tls_resumed)
        rd_fail(rd, "handshake_latency", "samples",
                "is %llu, more than the %llu handshakes of \"tls\" (full and resumed)",
                (unsigned long long)n, (unsigned long long)(r->tls_full + r->tls_resumed));
    else if (!rd->bad && r->resumed > r->tls_resumed)
        rd_fail(rd, "handshakes", "resumed", "is %llu, more than the %llu of \"tls\"",
                (unsigned long long)r->resumed, (unsigned long long)r->tls_resumed);
}

/* The request latency (one sample per request), each class's, and the connections'. */
static void read_latencies(struct rd *rd, const struct json *d, struct bresult *r)
{
    const struct json *cls;

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
    read_phases(rd, d, r);
}

/* "script" (--script runs only) and "first_mismatch" (absent: none). */
static void read_script(struct rd *rd, const struct json *d, struct bresult *r)
{
    const struct json *sc = read_group(rd, d, "script", true, r, script_keys, NKEYS(script_keys));
    const struct json *v;

    if (sc) {
        if (!rd->bad && r->total.check_unkept > r->total.check_failed)
            rd_fail(rd, "script", "unkept", "is %llu, more than the %llu \"failed\"",
                    (unsigned long long)r->total.check_unkept,
                    (unsigned long long)r->total.check_failed);
        if ((v = need(rd, sc, "script", "file", JSON_STRING)))
            r->script = strdup(v->s);
        if ((v = json_get(sc, "first_failure")) && v->type == JSON_STRING)
            r->script_failure = strdup(v->s);
    }
    if ((v = json_get(d, "first_mismatch")) && v->type == JSON_STRING)
        r->mismatch = strdup(v->s);
}

/* "errors" (every kind, adding up to the total), "client_cpu" and "kernel". */
static void read_costs(struct rd *rd, const struct json *d, struct bresult *r)
{
    const struct json *er, *cpu, *k;

    if ((er = need(rd, d, "", "errors", JSON_OBJECT))) {
        uint64_t total = need_u64(rd, er, "errors", "total"), sum = 0;

        for (int e = 0; e < ERR_KINDS; e++)
            if (e < ERR_TLS_FIRST || json_get(er, berr_name[e])) /* absent: a file before TLS */
                sum += r->total.errors[e] = need_u64(rd, er, "errors", berr_name[e]);
        if (!rd->bad && sum != total)
            rd_fail(rd, "errors", "total", "is %llu but the kinds add up to %llu",
                    (unsigned long long)total, (unsigned long long)sum);
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
    r->kr.short_mode = result_is_mode(r, "short");
}

/* "series", "steps" and what --find-rate found. */
static void read_timeline(struct rd *rd, const struct json *d, struct bresult *r)
{
    const struct json *a;

    if ((a = need(rd, d, "", "series", JSON_ARRAY)))
        r->series = read_objects(rd, a, "series", sizeof(*r->series), &r->nseries, read_second);
    if ((a = need(rd, d, "", "steps", JSON_ARRAY)))
        r->steps = read_objects(rd, a, "steps", sizeof(*r->steps), &r->nsteps, read_step);
    r->found_rate = need_num(rd, d, "", "found_rate");
    if ((a = json_get(d, "found_why")) && a->type != JSON_NULL)
        r->found_why = need_str(rd, d, "", "found_why");
}

/* "tls" (TLS runs only; absent: none). */
static void read_tls(struct rd *rd, const struct json *d, struct bresult *r)
{
    const struct json *t = json_get(d, "tls"), *v;

    if (!t)
        return;
    if (t->type != JSON_OBJECT) {
        rd_fail(rd, "", "tls", "is not an object");
        return;
    }
    r->tls = true;
    r->tls_insecure = !need_bool(rd, t, "tls", "verify");
    r->tls_resume = need_num(rd, t, "tls", "resume_asked");
    r->tls_full = need_u64(rd, t, "tls", "handshakes_full");
    r->tls_resumed = need_u64(rd, t, "tls", "handshakes_resumed");
    r->tls_offered = need_u64(rd, t, "tls", "offered");
    if (!rd->bad && r->tls_resumed > r->tls_offered)
        rd_fail(rd, "tls", "handshakes_resumed", "is %llu, more than the %llu \"offered\"",
                (unsigned long long)r->tls_resumed, (unsigned long long)r->tls_offered);
    if ((v = json_get(t, "protocol")) && v->type == JSON_STRING)
        r->tls_protocol = strdup(v->s);
    if ((v = json_get(t, "cipher")) && v->type == JSON_STRING)
        r->tls_cipher = strdup(v->s);
    if ((v = json_get(t, "first_error")) && v->type == JSON_STRING)
        r->tls_error = strdup(v->s);
}

/* The document d into r, key group by key group in the order the writer writes them; the
 * first error wins. Stops where what follows would read a histogram of a broken file. */
static void read_doc(struct rd *rd, const struct json *d, struct bresult *r)
{
    const struct json *cfg;

    if (!read_version(rd, d))
        return;
    r->target = need_str(rd, d, "", "target");
    cfg = need(rd, d, "", "config", JSON_OBJECT);
    if (rd->bad)
        return;
    read_keys(rd, cfg, "config", r, config_keys, NKEYS(config_keys));
    read_window(rd, d, r);
    read_keys(rd, d, "", r, total_keys, NKEYS(total_keys));
    if (rd->bad)
        return;
    read_latencies(rd, d, r);
    read_group(rd, d, "schedule", false, r, schedule_keys, NKEYS(schedule_keys));
    read_group(rd, d, "per_connection", false, r, per_connection_keys, NKEYS(per_connection_keys));
    read_keys(rd, d, "", r, count_keys, NKEYS(count_keys));
    r->total.reconnects = r->reconnects;
    r->total.http_non2xx = r->http_non2xx;
    read_script(rd, d, r);
    read_tls(rd, d, r);
    check_handshakes(rd, r);
    read_costs(rd, d, r);
    read_timeline(rd, d, r);
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
        if (stream_text(text, len))
            stream_refused(err, errlen, path);
        else
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
