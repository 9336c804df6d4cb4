/* Unit tests of result: --json written and read back, exact merges (the union's percentiles),
 * merge associativity, refusals with one line naming the file and the key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "merge.h"
#include "result.h"

static uint64_t rng = 88172645463325252ull;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* A latency: mostly tens of µs, some ms, a few huge (past 2^32 ns). */
static uint64_t sample(void)
{
    uint64_t r = next() % 1000;

    return r < 900   ? 10000 + next() % 90000
           : r < 998 ? 1000000 + next() % 9000000
                     : (1ull << 33) + next() % 1000;
}

static struct hist *new_hist(void)
{
    struct hist *h = malloc(sizeof(*h));

    assert_non_null(h);
    hist_init(h);
    return h;
}

/* A run of secs seconds starting at wall0, n samples a second; every sample also goes into u
 * (the union), when given. */
static void make(struct bresult *r, double wall0, int secs, int n, const char *target,
                 struct hist *u)
{
    result_init(r);
    r->target = strdup(target);
    r->mode = strdup("long");
    r->expect = strdup("echo");
    r->conns = 10;
    r->threads = 2;
    r->pipeline = 1;
    r->timeout_ms = 5000;
    r->duration = secs;
    r->rate = 1000;
    r->start_wall = wall0;
    r->end_wall = wall0 + secs;
    r->measured = secs;
    r->wall = secs + 0.5;
    r->open_s = 0.25;
    r->open_at_start = 10;
    r->connect_busy = 0.125;
    r->open_connects = 12;
    r->connect_s = 0.5;
    r->connect_calls = 1000;
    r->lat = new_hist();
    for (int k = 0; k < CP_N; k++)
        r->ph[k] = new_hist();
    r->nclasses = 2;
    for (int k = 0; k < 2; k++) {
        r->cls[k].name = strdup(k ? "b.bin" : "a \"quoted\" name");
        r->cls[k].weight = (unsigned)k + 1;
        r->cls[k].bytes = 64u << k;
        r->cls[k].lat = new_hist();
    }
    r->series = calloc((size_t)secs, sizeof(*r->series));
    r->nseries = (size_t)secs;
    for (int s = 0; s < secs; s++) {
        struct hist *h = new_hist();
        struct bsecond *b = &r->series[s];

        for (int i = 0; i < n; i++) {
            uint64_t v = sample();
            hist_record(h, v);
            hist_record(r->lat, v);
            hist_record(r->cls[i % 2].lat, v);
            if (u)
                hist_record(u, v);
        }
        hist_record(r->ph[CP_CONNECT], 1000 + next() % 100000);
        hist_record(r->ph[CP_CONNECT], 1000 + next() % 100000);
        hist_record(r->ph[CP_HANDSHAKE], 200000 + next() % 100000);
        hist_record(r->ph[CP_FIRST_BYTE], 5000 + next() % 1000);
        b->t = s + 1.03125;
        b->wall = wall0 + b->t;
        b->c.requests = (uint64_t)n;
        b->c.bytes_in = b->c.bytes_out = 64ull * (uint64_t)n;
        b->c.errors[ERR_TIMEOUT] = (uint64_t)s;
        b->c.errors[ERR_RESET] = 1;
        b->c.checks = (uint64_t)n;
        b->c.check_failed = (uint64_t)s;
        b->open = 10;
        assert_int_equal(hcompact_from(&b->lat, h), 0);
        free(h);
        r->total.requests += (uint64_t)n;
        r->total.bytes_in += 64ull * (uint64_t)n;
        r->total.bytes_out += 64ull * (uint64_t)n;
        r->total.errors[ERR_TIMEOUT] += (uint64_t)s;
        r->total.errors[ERR_RESET] += 1;
    }
    r->total.connects = 10;
    r->total.lost = 3;
    r->total.bytes_in +=
        1ull << 50; /* large, and three merged stay under the reader's bound of 2^53 */
    r->intended = 5000;
    r->behind = 7;
    r->unsent = 2;
    r->conn_min = 100;
    r->conn_max = 200;
    r->reconnects = r->total.reconnects = 4;
    r->all_requests = r->total.requests + 50;
    r->resumed = (uint64_t)secs / 2; /* of the secs handshakes timed */
    r->tls = true;                   /* and the run's, warm-up included */
    r->tls_full = (uint64_t)secs + 1;
    r->tls_resumed = r->tls_offered = 2;
    r->cpu_s = 0.75;
    r->have_k = true;
    for (int i = 0; i < KS_N; i++) {
        r->kd.have[i] = i != KS_SOFTNET_SQUEEZED;
        r->kd.v[i] = r->kd.have[i] ? (uint64_t)i * 3 : 0;
    }
    r->kr.addrnotavail = 0;
    r->nsteps = 2;
    r->steps = calloc(2, sizeof(*r->steps));
    for (int k = 0; k < 2; k++) {
        struct bstep *st = &r->steps[k];
        st->rate = 1000.0 * (k + 1);
        st->measured = 1;
        st->lat = new_hist();
        for (int i = 0; i < n; i++)
            hist_record(st->lat, sample());
        st->c.requests = (uint64_t)n;
        st->c.errors[ERR_REFUSED] = (uint64_t)k;
        st->c.checks = (uint64_t)n;
        st->c.check_failed = (uint64_t)k;
        st->intended = 1000;
        st->behind = 1;
        st->unsent = (uint64_t)k;
        st->cpu_percent = 12.5 * (k + 1);
        st->kept = k == 0;
    }
    r->found_rate = 1000;
    r->found_why = strdup("1000/s kept it and 2000/s broke it (latency: \xc2\xb5s)");
}

static char *to_text(const struct bresult *r)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    assert_non_null(f);
    assert_int_equal(result_write_json(f, r), 0);
    fclose(f);
    return text;
}

static char *to_file(const char *text)
{
    char *path = strdup("/tmp/test_result_XXXXXX");
    int fd = mkstemp(path);

    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

static void read_text(const char *text, struct bresult *r)
{
    char *path = to_file(text), err[512];

    if (result_read_json(path, r, err, sizeof(err)) < 0)
        fail_msg("%s", err);
    unlink(path);
    free(path);
}

/* text must be refused with an error holding what, in one line, naming the file. */
static void refused(const char *text, const char *what)
{
    char *path = to_file(text), err[512];
    struct bresult r;

    if (result_read_json(path, &r, err, sizeof(err)) == 0)
        fail_msg("accepted, want '%s'", what);
    if (strncmp(err, path, strlen(path)) || !strstr(err, what) || strchr(err, '\n'))
        fail_msg("error '%s', want '%s: ...%s...'", err, path, what);
    unlink(path);
    free(path);
}

static void same_hist(const struct hist *a, const struct hist *b)
{
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(a->count, b->count);
    assert_int_equal(a->min, b->min);
    assert_int_equal(a->max, b->max);
    assert_true(a->sum == b->sum);
    assert_memory_equal(a->b, b->b, sizeof(a->b));
}

static void test_round_trip(void **state)
{
    struct bresult a, b;
    char *t1, *t2;

    (void)state;
    make(&a, 1700000000.5, 5, 300, "10.0.0.1:9000", NULL);
    t1 = to_text(&a);
    read_text(t1, &b);
    same_hist(a.lat, b.lat);
    for (int k = 0; k < CP_N; k++)
        same_hist(a.ph[k], b.ph[k]);
    assert_int_equal(b.resumed, 2);
    assert_int_equal(b.tls_full + b.tls_resumed, 8);
    for (int k = 0; k < 2; k++) {
        same_hist(a.cls[k].lat, b.cls[k].lat);
        assert_string_equal(a.cls[k].name, b.cls[k].name);
        assert_int_equal(a.cls[k].weight, b.cls[k].weight);
        assert_int_equal(a.cls[k].bytes, b.cls[k].bytes);
    }
    assert_memory_equal(&a.total, &b.total, sizeof(a.total));
    assert_true(b.total.bytes_in == a.total.bytes_in); /* up to 2^53 */
    assert_int_equal(b.nseries, 5);
    for (size_t i = 0; i < 5; i++) {
        assert_memory_equal(&a.series[i].c, &b.series[i].c, sizeof(a.series[i].c));
        assert_int_equal(a.series[i].lat.n, b.series[i].lat.n);
        assert_memory_equal(a.series[i].lat.idx, b.series[i].lat.idx, a.series[i].lat.n * 2);
        assert_memory_equal(a.series[i].lat.cnt, b.series[i].lat.cnt, a.series[i].lat.n * 8);
        assert_true(a.series[i].lat.sum == b.series[i].lat.sum);
        assert_true(a.series[i].wall == b.series[i].wall);
    }
    assert_int_equal(b.nsteps, 2);
    for (size_t i = 0; i < 2; i++) {
        same_hist(a.steps[i].lat, b.steps[i].lat);
        assert_memory_equal(&a.steps[i].c, &b.steps[i].c, sizeof(a.steps[i].c));
        assert_true(a.steps[i].kept == b.steps[i].kept);
        assert_true(a.steps[i].rate == b.steps[i].rate);
    }
    assert_string_equal(a.found_why, b.found_why);
    assert_memory_equal(&a.kd, &b.kd, sizeof(a.kd));
    assert_int_equal(b.agents, 1);
    assert_true(b.cpu_s == a.cpu_s);
    /* connect() itself: the opening's and the whole run's, each its own */
    assert_true(b.connect_busy == a.connect_busy);
    assert_int_equal(b.open_connects, 12);
    assert_true(b.connect_s == a.connect_s);
    assert_int_equal(b.connect_calls, 1000);
    /* and what it reads writes the same bytes again */
    t2 = to_text(&b);
    assert_string_equal(t1, t2);
    free(t1);
    free(t2);
    result_free(&a);
    result_free(&b);
}

/* The summary of a plain run: today's lines, and the new ones for what is set. */
static void test_print(void **state)
{
    struct bresult a;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    (void)state;
    make(&a, 1700000000.5, 3, 100, "10.0.0.1:9000", NULL);
    a.tls = false; /* the errors line without the TLS kinds */
    result_print(f, &a);
    fclose(f);
    /* a sweep's totals add its steps together, and say so (newcomer item 8) */
    assert_non_null(strstr(text, "requests     300 in 3.00 s: 100.0 req/s, 6.40 KB/s out, "
                                 "375299.97 GB/s in (all 2 steps together)\n"));
    assert_non_null(strstr(text, "\n  latency      min "));
    assert_non_null(strstr(text, " samples, all steps together)\n"));
    assert_null(strstr(text, "    a \"quoted\" name min 0.0"));
    assert_non_null(strstr(text, "\n    a \"quoted\" name min "));
    assert_non_null(strstr(text, "\nschedule     5002 sends due; 7 went out"));
    assert_non_null(strstr(text, "\nspread       100 to 200 done per connection\n"));
    assert_non_null(strstr(text, "\nerrors       6: refused 0 reset 3 timeout 3 addrnotavail 0 "
                                 "emfile 0 closed 0 mismatch 0 other 0; lost 3\n"));
    assert_non_null(strstr(text, "\nopening      10 of 10 connections open in 0.25 s, before the "
                                 "measured window; 0.12 s of it inside connect() itself (10417 µs "
                                 "each of 12 calls)"));
    assert_non_null(strstr(text, "\nreconnects   4 connections closed cleanly and opened again; "
                                 "connect() itself took 500.0 µs each on average over the whole "
                                 "run's 1000 calls\n"));
    assert_non_null(strstr(text, "(this network namespace, whole run)\n"));
    assert_non_null(strstr(text, "\nsteps        "));
    assert_non_null(strstr(text, "\nfound        1000 requests/s kept the bound: "));
    assert_null(strstr(text, "merged"));
    free(text);
    result_free(&a);
}

/* test_opening_is_the_opening: the opening line's connect() time is the opening's, not the
 * whole run's. With a server that closes each connection (or --reconnect-every 1) it divided
 * the connect() time of every reconnect by the 50 first connections: "0.98 s of it inside
 * connect() itself (19591 µs each)" in an opening of 0.00 s, blaming the port range. */
static void test_opening_is_the_opening(void **state)
{
    struct bresult a;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    (void)state;
    make(&a, 1700000000.5, 3, 100, "10.0.0.1:9000", NULL);
    free(a.steps[0].lat);
    free(a.steps[1].lat);
    free(a.steps);
    a.steps = NULL;
    a.nsteps = 0;
    a.conns = a.open_at_start = 50;
    a.open_s = 0.004;
    a.open_connects = 50;
    a.connect_busy = 0.0015; /* 30 µs each */
    a.connect_s = 0.98;      /* the whole run's 25,000 */
    a.connect_calls = 25000;
    a.reconnects = a.total.reconnects = 24950;
    result_print(f, &a);
    fclose(f);
    assert_non_null(strstr(text, "\nopening      50 of 50 connections open in 0.00 s, before the "
                                 "measured window\n"));
    assert_null(strstr(text, "crowded"));
    assert_non_null(strstr(text, "\nreconnects   24950 connections closed cleanly and opened "
                                 "again; connect() itself took 39.2 µs each on average over the "
                                 "whole run's 25000 calls\n"));
    /* the run's requests line has no steps to speak of */
    assert_non_null(strstr(text, "requests     300 in 3.00 s: 100.0 req/s"));
    assert_null(strstr(text, "all steps"));
    free(text);
    /* an opening that was slow inside connect() still says so, per call of its own */
    text = NULL;
    f = open_memstream(&text, &len);
    a.open_s = 2.0;
    a.connect_busy = 1.5; /* 50 calls of 30 ms */
    result_print(f, &a);
    fclose(f);
    assert_non_null(strstr(text, "; 1.50 s of it inside connect() itself (30000 µs each of 50 "
                                 "calls): the kernel searching"));
    free(text);
    result_free(&a);
}

/* test_rate_units: bytes per second in the unit that keeps two decimals meaningful: 200 req/s
 * of 8 bytes read "0.00 MB/s out, 0.00 MB/s in". */
static void test_rate_units(void **state)
{
    static const struct {
        uint64_t bytes;
        const char *want;
    } cases[] = {
        {0, "0.00 B/s out"},
        {4795, "998.96 B/s out"},
        {4800, "1.00 KB/s out"},
        {8000, "1.67 KB/s out"},
        {4799900, "999.98 KB/s out"},
        {4799999, "1.00 MB/s out"},
        {48ull << 30, "10.74 GB/s out"},
        {(uint64_t)1e15, "208333.33 GB/s out"},
    };
    struct bresult a;

    (void)state;
    make(&a, 1700000000.5, 3, 100, "10.0.0.1:9000", NULL);
    a.measured = 4.8;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);

        a.total.bytes_out = cases[i].bytes;
        result_print(f, &a);
        fclose(f);
        if (!strstr(text, cases[i].want))
            fail_msg("%llu bytes in 4.8 s: want \"%s\" in:\n%.300s",
                     (unsigned long long)cases[i].bytes, cases[i].want, text);
        free(text);
    }
    result_free(&a);
}

/* Merged: exactly the result of all the samples together. */
static void test_merge_exact(void **state)
{
    struct bresult a, b;
    struct hist *u = new_hist();
    static const double ps[] = {1, 50, 90, 99, 99.9, 99.99, 100};
    char *text = NULL;
    size_t len = 0;
    FILE *f;

    (void)state;
    make(&a, 1700000000.25, 4, 500, "10.0.0.1:9000", u);
    make(&b, 1700000000.75, 5, 300, "10.0.0.2:9000", u);
    struct hist *ufb = new_hist(); /* both runs' first bytes together */
    hist_merge(ufb, a.ph[CP_FIRST_BYTE]);
    hist_merge(ufb, b.ph[CP_FIRST_BYTE]);
    assert_int_equal(merge_result(&a, &b), 0);
    same_hist(a.lat, u);
    for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++)
        assert_int_equal(hist_percentile(a.lat, ps[i]), hist_percentile(u, ps[i]));
    assert_int_equal(a.total.requests, 4 * 500 + 5 * 300);
    assert_int_equal(a.total.errors[ERR_TIMEOUT], 0 + 1 + 2 + 3 + 0 + 1 + 2 + 3 + 4);
    assert_int_equal(a.total.bytes_in, 64ull * 3500 + (2ull << 50));
    assert_int_equal(a.total.lost, 6);
    assert_int_equal(a.unsent, 4);
    assert_int_equal(a.agents, 2);
    assert_int_equal(a.conns, 20);
    assert_string_equal(a.target, "10.0.0.1:9000, 10.0.0.2:9000");
    assert_true(a.window_spread == 0.5);
    assert_true(a.start_wall == 1700000000.25);
    assert_true(a.measured == 5.5); /* the union of the windows */
    assert_true(a.kd.v[KS_ACTIVE_OPENS] == 2 * 3 * KS_ACTIVE_OPENS);
    assert_int_equal(a.connect_calls, 2000); /* what the hints weigh ActiveOpens against */
    assert_int_equal(a.open_connects, 24);
    assert_true(a.connect_s == 1.0);
    /* the phases, as the latencies: every sample of both */
    assert_int_equal(a.ph[CP_CONNECT]->count, 2 * (4 + 5));
    assert_int_equal(a.ph[CP_HANDSHAKE]->count, 4 + 5);
    assert_int_equal(a.ph[CP_FIRST_BYTE]->count, 4 + 5);
    assert_int_equal(a.resumed, 2 + 2);
    assert_int_equal(a.tls_full + a.tls_resumed, 7 + 8);
    same_hist(a.ph[CP_FIRST_BYTE], ufb);
    free(ufb);
    assert_false(a.kd.have[KS_SOFTNET_SQUEEZED]);
    /* series on whole epoch seconds: a's end at .28, b's at .78, both in the same buckets */
    {
        uint64_t req = 0, cnt = 0;
        for (size_t i = 0; i < a.nseries; i++) {
            req += a.series[i].c.requests;
            cnt += a.series[i].lat.count;
            assert_true(a.series[i].wall == (double)(long long)a.series[i].wall);
            assert_true(i == 0 || a.series[i].wall > a.series[i - 1].wall);
        }
        assert_int_equal(req, 3500);
        assert_int_equal(cnt, 3500);
        assert_int_equal(a.nseries, 5);
        assert_int_equal(a.series[0].c.requests, 800);
        assert_int_equal(a.series[0].open, 20);
        assert_int_equal(a.series[4].c.requests, 300);
        assert_true(a.series[0].t == 2); /* from the earliest start's whole second */
    }
    assert_int_equal(a.steps[0].c.requests, 800);
    assert_false(a.steps[0].kept && !b.steps[0].kept);
    f = open_memstream(&text, &len);
    result_print(f, &a);
    fclose(f);
    assert_non_null(strstr(text, "merged       2 runs: windows start within 500 ms of each other"));
    assert_non_null(strstr(text, "two runs on one host count its counters twice"));
    free(text);
    free(u);
    result_free(&a);
    result_free(&b);
}

/* (A + B) + C and A + (B + C) write the same bytes, and so do merges of files read back. */
static void test_merge_associative(void **state)
{
    struct bresult a, b, c, a2, b2, c2, r;
    char *t1, *t2, *t3;

    (void)state;
    make(&a, 1700000000.25, 3, 200, "h1:1", NULL);
    make(&b, 1700000001.5, 4, 100, "h2:1", NULL);
    make(&c, 1700000000.875, 2, 300, "h3:1", NULL);
    t1 = to_text(&a);
    read_text(t1, &a2);
    free(t1);
    t1 = to_text(&b);
    read_text(t1, &b2);
    free(t1);
    t1 = to_text(&c);
    read_text(t1, &c2);
    free(t1);
    assert_int_equal(merge_result(&a, &b), 0);
    assert_int_equal(merge_result(&a, &c), 0);
    assert_int_equal(merge_result(&b2, &c2), 0);
    assert_int_equal(merge_result(&a2, &b2), 0);
    t1 = to_text(&a);
    t2 = to_text(&a2);
    /* the targets' order follows the merge order; the rest must match byte for byte */
    assert_non_null(strstr(t1, "\"target\": \"h1:1, h2:1, h3:1\""));
    assert_non_null(strstr(t2, "\"target\": \"h1:1, h2:1, h3:1\""));
    assert_string_equal(t1, t2);
    /* a merged file merges again: read back, it writes the same */
    read_text(t1, &r);
    t3 = to_text(&r);
    assert_string_equal(t1, t3);
    assert_int_equal(r.agents, 3);
    free(t1);
    free(t2);
    free(t3);
    result_free(&a);
    result_free(&b);
    result_free(&c);
    result_free(&a2);
    result_free(&b2);
    result_free(&c2);
    result_free(&r);
}

static void test_merge_refused(void **state)
{
    struct bresult a, b;

    (void)state;
    make(&a, 1700000000, 2, 10, "h1:1", NULL);
    make(&b, 1700000000, 2, 10, "h2:1", NULL);
    free(b.expect);
    b.expect = strdup("line");
    assert_int_equal(merge_result(&a, &b), -EINVAL);
    assert_int_equal(a.agents, 1); /* unchanged */
    free(b.expect);
    b.expect = strdup("echo");
    b.steps[1].rate = 3000; /* another staircase */
    assert_int_equal(merge_result(&a, &b), -EINVAL);
    b.steps[1].rate = 2000;
    free(b.cls[1].name);
    b.cls[1].name = strdup("c.bin");
    assert_int_equal(merge_result(&a, &b), -EINVAL);
    result_free(&a);
    result_free(&b);
}

/* Phase p's histogram of a replaced by n samples of v ns each (n 0: empty). */
static void set_phase(struct bresult *a, enum cphase p, int n, uint64_t v)
{
    hist_init(a->ph[p]);
    for (int i = 0; i < n; i++)
        hist_record(a->ph[p], v);
}

static char *print_text(const struct bresult *a)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    assert_non_null(f);
    result_print(f, a);
    fclose(f);
    return text;
}

/* test_phases_print: the connections' phases, a row each with samples and none without, and in
 * short mode the handshakes' rate and the client's CPU per handshake; a run where no connection
 * ever completed prints no phase at all (no percentile of nothing, no NaN). */
static void test_phases_print(void **state)
{
    struct bresult a;
    char *text;

    (void)state;
    make(&a, 1700000000.5, 3, 100, "10.0.0.1:9000", NULL);
    free(a.mode);
    a.mode = strdup("short");
    set_phase(&a, CP_CONNECT, 100, 10000);
    set_phase(&a, CP_HANDSHAKE, 50, 200000);
    set_phase(&a, CP_FIRST_BYTE, 100, 5000);
    a.resumed = 20;
    a.tls_full = 35;
    a.tls_resumed = 25;
    a.total.connects = 100;
    text = print_text(&a);
    assert_non_null(strstr(text, "\n  connect      p50 10.0  p90 10.0  p99 10.0  max 10.0  (µs, "
                                 "100 samples)\n"));
    assert_non_null(strstr(text, "\n  handshake    p50 200.0  p90 200.0  p99 200.0  max 200.0  "
                                 "(µs, 50 samples: 30 full, 20 resumed)\n"));
    assert_non_null(strstr(text, "\n  first byte   p50 5.0  p90 5.0  p99 5.0  max 5.0  (µs, 100 "
                                 "samples)\n"));
    assert_non_null(strstr(text, "\nhandshakes   50: 16.7/s, 30 full, 20 resumed; client CPU "
                                 "12500.00 µs per handshake (of the run's 60)\n"));
    free(text);
    /* without --tls: no handshake row, no handshakes line */
    set_phase(&a, CP_HANDSHAKE, 0, 0);
    a.resumed = a.tls_full = a.tls_resumed = 0;
    text = print_text(&a);
    assert_non_null(strstr(text, "\n  connect      p50 10.0"));
    assert_non_null(strstr(text, "\n  first byte   p50 5.0"));
    assert_null(strstr(text, "  handshake  "));
    assert_null(strstr(text, "\nhandshakes "));
    free(text);
    /* the server refused every connection: the count says so, and nothing else */
    for (int p = 0; p < CP_N; p++)
        set_phase(&a, (enum cphase)p, 0, 0);
    a.total.connects = 0;
    text = print_text(&a);
    assert_non_null(strstr(text, "\nconnections  0: 0.0 conn/s"));
    assert_null(strstr(text, "  connect  "));
    assert_null(strstr(text, "first byte"));
    assert_null(strstr(text, "nan"));
    assert_null(strstr(text, "inf"));
    free(text);
    /* long mode: the rows beneath the opening line, no rate (the handshakes are the opening's) */
    free(a.mode);
    a.mode = strdup("long");
    set_phase(&a, CP_CONNECT, 10, 30000);
    set_phase(&a, CP_HANDSHAKE, 10, 300000);
    text = print_text(&a);
    assert_non_null(strstr(text, "before the measured window; 0.12 s of it inside connect() "));
    assert_non_null(strstr(text, "\n  connect      p50 30.0  p90 30.0  p99 30.0  max 30.0  (µs, 10 "
                                 "samples)\n  handshake    p50 300.0"));
    assert_null(strstr(text, "\nhandshakes "));
    free(text);
    result_free(&a);
}

/* text without what lies from from (included) up to upto (excluded): a key of an older file. */
static char *cut(const char *text, const char *from, const char *upto)
{
    const char *p = strstr(text, from), *q = p ? strstr(p, upto) : NULL;
    char *s;

    assert_non_null(q);
    assert_true(asprintf(&s, "%.*s%s", (int)(p - text), text, q) > 0);
    return s;
}

/* test_phases_old_file: a file written before the handshake and first-byte phases were (only
 * connect_latency) is read, prints its connect row alone, and merges with a new one: the sum
 * of the phases each has, and no word of anything wrong. */
static void test_phases_old_file(void **state)
{
    struct bresult a, old, n, o2;
    char *t, *e, *text;

    (void)state;
    make(&a, 1700000000, 3, 50, "h1:1", NULL);
    t = to_text(&a);
    e = cut(t, ",\n  \"handshake_latency\"", ",\n  \"schedule\"");
    assert_null(strstr(e, "first_byte"));
    assert_null(strstr(e, "\"handshake_latency\""));
    assert_null(strstr(e, "\"handshakes\":"));
    read_text(e, &old);
    assert_null(old.ph[CP_HANDSHAKE]);
    assert_null(old.ph[CP_FIRST_BYTE]);
    same_hist(old.ph[CP_CONNECT], a.ph[CP_CONNECT]);
    text = print_text(&old);
    assert_non_null(strstr(text, "\n  connect      p50 "));
    assert_null(strstr(text, "  handshake  "));
    assert_null(strstr(text, "first byte"));
    free(text);
    /* merged either way round: the new file's phases, the connects of both */
    make(&n, 1700000000.5, 3, 50, "h2:1", NULL);
    assert_int_equal(merge_result(&n, &old), 0);
    assert_int_equal(n.ph[CP_CONNECT]->count, 2 * 3 * 2);
    assert_int_equal(n.ph[CP_HANDSHAKE]->count, 3);
    assert_int_equal(n.ph[CP_FIRST_BYTE]->count, 3);
    assert_int_equal(n.resumed, 1);
    read_text(e, &o2);
    result_free(&n);
    make(&n, 1700000000.5, 3, 50, "h2:1", NULL);
    assert_int_equal(merge_result(&o2, &n), 0);
    assert_int_equal(o2.ph[CP_CONNECT]->count, 2 * 3 * 2);
    assert_int_equal(o2.ph[CP_HANDSHAKE]->count, 3);
    assert_int_equal(o2.ph[CP_FIRST_BYTE]->count, 3);
    assert_int_equal(o2.tls_full + o2.tls_resumed, 2 * 6);
    free(e);
    free(t);
    result_free(&a);
    result_free(&old);
    result_free(&n);
    result_free(&o2);
}

/* Replaces the first from in text with to (a new string). */
static char *edit(const char *text, const char *from, const char *to)
{
    const char *p = strstr(text, from);
    size_t n = strlen(text) - strlen(from) + strlen(to) + 1;
    char *s = malloc(n);

    assert_non_null(p);
    snprintf(s, n, "%.*s%s%s", (int)(p - text), text, to, p + strlen(from));
    return s;
}

static void test_read_refused(void **state)
{
    struct bresult a;
    char *t, *e;

    (void)state;
    make(&a, 1700000000, 2, 50, "h1:1", NULL);
    t = to_text(&a);
    e = edit(t, "  \"version\": 2,\n", "");
    refused(e, "a version 1 file");
    refused(e, "rerun with a newer lfbench");
    free(e);
    e = edit(t, "\"version\": 2", "\"version\": 3");
    refused(e, "\"version\": is not 2: written by a newer lfbench");
    free(e);
    e = edit(t, "\"layout\": \"hdr-2\"", "\"layout\": \"hdr-3\"");
    refused(e, "\"latency.hist.layout\": is \"hdr-3\"");
    free(e);
    e = edit(t, "\"buckets\": [[", "\"buckets\": [[4480, 1], [");
    refused(e, "\"latency.hist.buckets\": index 4480 out of range");
    free(e);
    e = edit(t, "\"count\": 100,", "\"count\": 101,");
    refused(e, "\"latency.hist.count\": is 101 but the buckets hold 100");
    free(e);
    e = edit(t, "\"requests\": 100,", "\"requests\": 1.5,");
    refused(e, "\"requests\": is not a count");
    free(e);
    /* Regression (attack on issue 11): counts near 2^64, sums past infinity and absurd times
     * were read, and merging two such files wrapped or printed "inf" in its --json */
    e = edit(t, "\"requests\": 100,", "\"requests\": 9223372036854775813,");
    refused(e, "\"requests\": is not a count (a whole number from 0 to 2^53)");
    free(e);
    e = edit(t, "\"start_wall\": ", "\"start_wall\": 1e300, \"x\": ");
    refused(e, "\"start_wall\": is out of range");
    free(e);
    e = edit(t, "\"requests\": 100,", "\"requests\": 99,");
    refused(e, "\"latency.samples\": is 100 but \"requests\" is 99");
    free(e);
    e = edit(t, "\"per_connection\"", "\"per_connectionX\"");
    refused(e, "\"per_connection\": missing");
    free(e);
    e = edit(t, "\"open\": 10,", "\"open\": \"10\",");
    refused(e, "\"series[0].open\": is a string, not a number");
    free(e);
    e = edit(t, "\"timeout\": 1", "\"timeout\": 2");
    refused(e, "\"errors.total\": is 3 but the kinds add up to 4");
    free(e);
    e = edit(t, "{\n", "{\n  \"unknown_key\": [1, {\"x\": null}],\n");
    {
        struct bresult r;
        read_text(e, &r); /* unknown keys are ignored */
        result_free(&r);
    }
    free(e);
    e = edit(t, "\"series\": [", "\"series\": [}");
    refused(e, "(not valid JSON)");
    free(e);
    refused("", "1:1: expected a value");
    /* the phases: no more handshakes or first bytes than connects, no more resumed than
     * handshakes, no fewer handshakes in all than timed */
    e = edit(t, "\"resumed\": 1,", "\"resumed\": 3,");
    refused(e, "\"handshakes.resumed\": is 3, more than the 2 of \"handshake_latency\"");
    free(e);
    {
        char *e1 = edit(t, "\"handshakes_full\": 3,", "\"handshakes_full\": 0,");
        e = edit(e1, "\"handshakes_resumed\": 2,", "\"handshakes_resumed\": 1,");
        free(e1);
    }
    refused(e, "\"handshake_latency.samples\": is 2, more than the 1 handshakes of \"tls\"");
    free(e);
    e = edit(t, "\"handshakes_resumed\": 2,", "\"handshakes_resumed\": 0,");
    refused(e, "\"handshakes.resumed\": is 1, more than the 0 of \"tls\"");
    free(e);
    e = edit(t, "\"resumed\": 1,", "\"resumed\": -1,");
    refused(e, "\"handshakes.resumed\": is not a count");
    free(e);
    for (int i = 0; i < 5; i++)
        hist_record(a.ph[CP_FIRST_BYTE], 1000);
    e = to_text(&a);
    refused(e, "\"first_byte_latency.samples\": is 7, more than the 4 of \"connect_latency\"");
    free(e);
    {
        char err[256];
        struct bresult r;
        assert_int_equal(result_read_json("/nonexistent/x.json", &r, err, sizeof(err)), -1);
        assert_string_equal(err, "/nonexistent/x.json: No such file or directory");
    }
    free(t);
    result_free(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_print),
        cmocka_unit_test(test_merge_exact),
        cmocka_unit_test(test_merge_associative),
        cmocka_unit_test(test_merge_refused),
        cmocka_unit_test(test_read_refused),
        cmocka_unit_test(test_opening_is_the_opening),
        cmocka_unit_test(test_rate_units),
        cmocka_unit_test(test_phases_print),
        cmocka_unit_test(test_phases_old_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
