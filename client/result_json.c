/* result_json: a result as --json (everything, histograms in compact form, so that a merge of
 * files is exact), and read back from such a file for `lfbench merge` and `lfbench plot`. */
#include "result.h"

#include "json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
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
    json_str(f, result_ok_status(r));
    fprintf(f, ", \"linger0\": %s, \"busy_poll\": %s, \"sources\": %d},\n",
            r->kr.linger0 ? "true" : "false", r->busy_poll ? "true" : "false", r->kr.nsources);
    if (r->nrun_ids) { /* the runs merged here, so that a merge of this file counts none twice */
        fputs("  \"run_ids\": [", f);
        for (size_t i = 0; i < r->nrun_ids; i++)
            fprintf(f, "%s\"%016llx\"", i ? ", " : "", (unsigned long long)r->run_ids[i]);
        fputs("],\n", f);
    }
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
    if (r->script) {
        fprintf(f, "  \"script\": {\"file\": ");
        json_str(f, r->script);
        fprintf(f, ", \"checks\": %llu, \"failed\": %llu, \"unkept\": %llu, \"first_failure\": ",
                (unsigned long long)r->total.checks, (unsigned long long)r->total.check_failed,
                (unsigned long long)r->total.check_unkept);
        if (r->script_failure)
            json_str(f, r->script_failure);
        else
            fputs("null", f);
        fputs("},\n", f);
    }
    if (r->mismatch) {
        fputs("  \"first_mismatch\": ", f);
        json_str(f, r->mismatch);
        fputs(",\n", f);
    }
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
    }
    fprintf(f, "\n  ],\n  \"steps\": [");
    for (size_t k = 0; k < r->nsteps; k++) {
        const struct bstep *st = &r->steps[k];

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

static void read_series(struct rd *rd, const struct json *arr, struct bresult *r)
{
    if (!arr->len || !(r->series = rd_array(rd, arr, sizeof(*r->series), "series")))
        return;
    for (size_t i = 0; i < arr->len && !rd->bad; i++) {
        struct bsecond *s = &r->series[i];
        char at[32];
        const struct json *o = rd_item(rd, arr, i, "series", at, sizeof(at));

        r->nseries = i + 1;
        if (!o)
            return;
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
        read_checks(rd, o, at, &s->c);
        read_errors(rd, o, at, &s->c);
        s->open = need_int(rd, o, at, "open");
        if (!rd->bad)
            read_hcompact(rd, o, at, &s->lat);
    }
}

static void read_steps(struct rd *rd, const struct json *arr, struct bresult *r)
{
    if (!arr->len || !(r->steps = rd_array(rd, arr, sizeof(*r->steps), "steps")))
        return;
    for (size_t i = 0; i < arr->len && !rd->bad; i++) {
        struct bstep *st = &r->steps[i];
        char at[32];
        const struct json *o = rd_item(rd, arr, i, "steps", at, sizeof(at));

        r->nsteps = i + 1;
        if (!o)
            return;
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
        read_checks(rd, o, at, &st->c);
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
    const struct json *cfg, *op, *cls, *sch, *pc, *er, *cpu, *k, *ser, *steps, *v, *mm;
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
    if (!rd->bad && json_get(d, "run_ids")) /* absent before runs had ids */
        read_run_ids(rd, d, r);
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
        if (json_get(op, "connect_calls")) /* absent before it was counted */
            r->open_connects = need_u64(rd, op, "opening", "connect_calls");
    }
    if (json_get(d, "connect")) { /* absent before it was counted */
        const struct json *cn = need(rd, d, "", "connect", JSON_OBJECT);
        if (cn) {
            r->connect_calls = need_u64(rd, cn, "connect", "calls");
            r->connect_s = need_num(rd, cn, "connect", "busy_s");
        }
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
    if (json_get(d, "script")) { /* --script runs only */
        const struct json *sc = need(rd, d, "", "script", JSON_OBJECT), *sv;
        if (sc) {
            r->total.checks = need_u64(rd, sc, "script", "checks");
            r->total.check_failed = need_u64(rd, sc, "script", "failed");
            if (json_get(sc, "unkept")) /* absent before it was counted apart */
                r->total.check_unkept = need_u64(rd, sc, "script", "unkept");
            if (!rd->bad && r->total.check_unkept > r->total.check_failed)
                rd_fail(rd, "script", "unkept", "is %llu, more than the %llu \"failed\"",
                        (unsigned long long)r->total.check_unkept,
                        (unsigned long long)r->total.check_failed);
            if ((sv = need(rd, sc, "script", "file", JSON_STRING)))
                r->script = strdup(sv->s);
            if ((sv = json_get(sc, "first_failure")) && sv->type == JSON_STRING)
                r->script_failure = strdup(sv->s);
        }
    }
    if ((mm = json_get(d, "first_mismatch")) && mm->type == JSON_STRING) /* absent: none */
        r->mismatch = strdup(mm->s);
    if ((er = need(rd, d, "", "errors", JSON_OBJECT))) {
        total_err = need_u64(rd, er, "errors", "total");
        sum = 0;
        for (int e = 0; e < ERR_KINDS; e++)
            sum += r->total.errors[e] = need_u64(rd, er, "errors", berr_name[e]);
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
    r->kr.short_mode = result_is_mode(r, "short");
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
