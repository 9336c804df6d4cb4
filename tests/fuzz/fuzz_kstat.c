/* fuzz_kstat: lfbench's /proc/net parsers (netstat/snmp name-value line pairs, softnet_stat,
 * sockstat), the delta and the hints.
 *
 * The first byte picks the mode. Raw: the rest is the text of each file at once; the parsers
 * must stay inside it (ASan), count what they set (found = counters marked present), leave the
 * other counters alone, and give the same result twice. Shaped: the rest drives a generator of
 * files as the kernel writes them (sections in any order, the wanted names among others, values
 * up to 2^64-1, any number of CPUs; an empty or foreign line here and there), and every value
 * parsed must be the one written. Both: the
 * delta of two readings is after - before for the counters present in both (0 when one went
 * back), the levels are after's; the hints are one line each, or a JSON array of as many
 * strings. */
#include "fuzz.h"

#include "kstat.h"

#include <inttypes.h>
#include <stdarg.h>

#define NPAIRS KS_SOFTNET_DROPPED /* the counters of netstat and snmp */

/* Appends to a growing text. */
struct text {
    char *s;
    size_t len, cap;
};

static void put(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(struct text *t, const char *fmt, ...)
{
    va_list ap;
    int n;

    for (;;) {
        va_start(ap, fmt);
        n = vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        FZ_CHECK(n >= 0, "vsnprintf");
        if ((size_t)n < t->cap - t->len)
            break;
        t->cap = (t->cap + (size_t)n) * 2;
        t->s = realloc(t->s, t->cap);
        FZ_CHECK(t->s != NULL, "realloc");
    }
    t->len += (size_t)n;
}

static uint64_t value(struct fz *f)
{
    switch (fz_u8(f) % 4) {
    case 0:
        return fz_u8(f);
    case 1:
        return fz_u32(f);
    case 2:
        return UINT64_MAX - fz_u8(f);
    default:
        return fz_u64(f);
    }
}

/* A netstat/snmp file: a few sections, one of them want (TcpExt or Tcp) holding a random pick
 * of the names kstat looks for among others. Sets exp to what the parser must find. */
static void gen_pairs(struct fz *f, struct text *t, const char *want, struct kstat *exp)
{
    static const char *const others[] = {"Ip", "IpExt",    "Udp", "TcpExtra",
                                         "Tc", "MPTcpExt", "Tcp", "TcpExt"};
    static const char *const junk[] = {"InSegs",           "OutRsts", "TW",
                                       "DelayedACKs",      "MaxConn", "TCPTimeouts",
                                       "ListenOverflowsX", "Listen"};
    int nsec = 1 + fz_u8(f) % 4, at = fz_u8(f) % nsec;

    for (int s = 0; s < nsec; s++) {
        const char *sec = s == at ? want : others[fz_u8(f) % 8];
        int nn = fz_u8(f) % 24;
        const char *names[24];
        uint64_t vals[24];

        if (s != at && !strcmp(sec, want))
            sec = "Udp"; /* the kernel writes each section once */
        for (int i = 0; i < nn; i++) {
            uint8_t c = fz_u8(f);
            names[i] = c % 2 ? kstat_name[c / 2 % NPAIRS] : junk[c / 2 % 8];
            vals[i] = value(f);
        }
        put(t, "%s:", sec);
        for (int i = 0; i < nn; i++)
            put(t, " %s", names[i]);
        put(t, "\n%s:", sec);
        for (int i = 0; i < nn; i++)
            put(t, " %" PRIu64, vals[i]);
        put(t, "\n%s", fz_u8(f) % 8 ? "" : "\n"); /* an empty line between sections */
        if (s == at)
            for (int i = 0; i < nn; i++) /* a name given twice: the last one counts */
                for (int id = 0; id < NPAIRS; id++)
                    if (!strcmp(names[i], kstat_name[id])) {
                        exp->v[id] = vals[i];
                        exp->have[id] = true;
                    }
    }
}

static void gen_softnet(struct fz *f, struct text *t, struct kstat *exp)
{
    int cpus = fz_u8(f) % 70, cols = 11 + fz_u8(f) % 3;

    for (int c = 0; c < cpus; c++) {
        for (int i = 0; i < cols; i++) {
            uint32_t v = fz_u8(f) % 3 ? fz_u8(f) : fz_u32(f);
            put(t, "%s%08" PRIx32, i ? " " : "", v);
            if (i == 1)
                exp->v[KS_SOFTNET_DROPPED] += v;
            if (i == 2)
                exp->v[KS_SOFTNET_SQUEEZED] += v;
        }
        put(t, "\n");
        if (fz_u8(f) % 8 == 0) /* a line that is no CPU's (the kernel writes none): no count */
            put(t, "%s", fz_u8(f) % 2 ? "\n" : "zz -\n");
    }
    exp->have[KS_SOFTNET_DROPPED] = exp->have[KS_SOFTNET_SQUEEZED] = cpus > 0;
    if (!cpus)
        exp->v[KS_SOFTNET_DROPPED] = exp->v[KS_SOFTNET_SQUEEZED] = 0;
}

static void gen_sockstat(struct fz *f, struct text *t, struct kstat *exp)
{
    static const char *const fields[] = {"inuse", "orphan", "tw", "alloc", "mem"};
    bool first = fz_u8(f) % 2;

    if (!first)
        put(t, "sockets: used %u\n", fz_u8(f));
    put(t, "TCP:");
    for (int i = 0, n = fz_u8(f) % 8; i < n; i++) {
        int w = fz_u8(f) % 5;
        uint64_t v = value(f);

        put(t, " %s %" PRIu64, fields[w], v);
        if (w == 0 || w == 2) {
            int id = w == 0 ? KS_TCP_INUSE : KS_TCP_TW;
            exp->v[id] = v;
            exp->have[id] = true;
        }
    }
    put(t, "\nUDP: inuse %u mem %u\nRAW: inuse 0\nFRAG: inuse 0 memory 0\n", fz_u8(f), 1u);
}

static int present(const struct kstat *k, int from, int to)
{
    int n = 0;

    for (int i = from; i < to; i++)
        n += k->have[i];
    return n;
}

static void check_same(const struct kstat *a, const struct kstat *b, const char *what)
{
    for (int i = 0; i < KS_N; i++) {
        FZ_CHECK(a->have[i] == b->have[i], "%s: %s %s, expected %s", what, kstat_name[i],
                 a->have[i] ? "found" : "missing", b->have[i] ? "found" : "missing");
        FZ_CHECK(!b->have[i] || a->v[i] == b->v[i], "%s: %s = %" PRIu64 ", expected %" PRIu64, what,
                 kstat_name[i], a->v[i], b->v[i]);
    }
}

/* Reads k from the four texts as kstat_read does, checking the counts on the way. */
static void parse_all(const char *netstat, const char *snmp, const char *softnet,
                      const char *sockstat, struct kstat *k)
{
    int n;

    memset(k, 0, sizeof(*k));
    n = kstat_parse_pairs(netstat, "TcpExt", k);
    FZ_CHECK(n >= present(k, 0, NPAIRS), "netstat: found %d, %d present", n, present(k, 0, NPAIRS));
    n = kstat_parse_pairs(snmp, "Tcp", k);
    FZ_CHECK(n >= 0, "snmp: found %d", n);
    n = kstat_parse_softnet(softnet, k);
    FZ_CHECK(n == 2 * k->have[KS_SOFTNET_DROPPED] &&
                 k->have[KS_SOFTNET_DROPPED] == k->have[KS_SOFTNET_SQUEEZED],
             "softnet: returned %d", n);
    n = kstat_parse_sockstat(sockstat, k);
    FZ_CHECK(n >= present(k, KS_TCP_TW, KS_N), "sockstat: found %d", n);
}

/* The hints as JSON: '[', then n strings separated by ", ", then ']'. */
static void check_json(const char *s, size_t len, int n)
{
    size_t i = 0;
    int strings = 0;

    FZ_CHECK(len >= 2 && s[0] == '[' && s[len - 1] == ']', "hints JSON: '%s'", s);
    for (i = 1; i < len - 1;) {
        if (strings) {
            FZ_CHECK(!strncmp(s + i, ", ", 2), "hints JSON: separator at %zu", i);
            i += 2;
        }
        FZ_CHECK(s[i] == '"', "hints JSON: no string at %zu of '%s'", i, s);
        for (i++; i < len - 1 && s[i] != '"'; i++) {
            FZ_CHECK((unsigned char)s[i] >= 0x20, "hints JSON: control character");
            if (s[i] == '\\')
                FZ_CHECK(s[++i] == '"' || s[i] == '\\', "hints JSON: escape");
        }
        FZ_CHECK(s[i] == '"', "hints JSON: unterminated string");
        i++;
        strings++;
    }
    FZ_CHECK(strings == n, "hints JSON: %d strings, %d hints", strings, n);
}

static void check_delta_hints(const struct kstat *a, const struct kstat *b, struct fz *f)
{
    struct kstat d;
    struct kstat_run r = {.addrnotavail = fz_u8(f) % 2 ? fz_u64(f) : 0,
                          .linger0 = fz_u8(f) % 2,
                          .short_mode = fz_u8(f) % 2,
                          .connects = fz_u8(f) % 2 ? fz_u64(f) : 0,
                          .wall_s = fz_u8(f)};
    char *text = NULL;
    size_t len = 0;
    FILE *out;
    int n, n2, lines = 0;

    kstat_delta(a, b, &d);
    for (int i = 0; i < KS_N; i++) {
        bool level = i == KS_TCP_TW || i == KS_TCP_INUSE;
        bool have = b->have[i] && (level || a->have[i]);
        uint64_t want = !have ? 0 : level ? b->v[i] : b->v[i] >= a->v[i] ? b->v[i] - a->v[i] : 0;

        FZ_CHECK(d.have[i] == have && d.v[i] == want, "delta of %s", kstat_name[i]);
    }
    out = open_memstream(&text, &len);
    FZ_CHECK(out != NULL, "open_memstream");
    n = kstat_hints(out, &d, &r, false);
    fclose(out);
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    FZ_CHECK(len && text[len - 1] == '\n' && lines == (n ? n : 1), "%d hints in %d lines", n,
             lines);
    for (char *l = text; l < text + len; l = strchr(l, '\n') + 1)
        FZ_CHECK(!strncmp(l, "hint ", 5), "hint line '%.40s'", l);
    free(text);
    text = NULL;
    out = open_memstream(&text, &len);
    FZ_CHECK(out != NULL, "open_memstream");
    n2 = kstat_hints(out, &d, &r, true);
    fclose(out);
    FZ_CHECK(n2 == n, "JSON: %d hints, text %d", n2, n);
    check_json(text, len, n);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fz f = {data, size};
    struct kstat k, k2, exp;

    if (fz_u8(&f) % 2 == 0) {
        char *s = malloc(f.n + 1);

        FZ_CHECK(s != NULL, "malloc");
        memcpy(s, f.p, f.n);
        s[f.n] = '\0';
        parse_all(s, s, s, s, &k);
        parse_all(s, s, s, s, &k2);
        check_same(&k2, &k, "raw, second parse");
        f.p += f.n / 2;
        f.n -= f.n / 2;
        check_delta_hints(&k, &k2, &f);
        free(s);
    } else {
        struct text t[4] = {{0}};

        memset(&exp, 0, sizeof(exp));
        for (int i = 0; i < 4; i++) {
            t[i].cap = 256;
            t[i].s = malloc(t[i].cap);
            FZ_CHECK(t[i].s != NULL, "malloc");
            t[i].s[0] = '\0';
        }
        gen_pairs(&f, &t[0], "TcpExt", &exp);
        gen_pairs(&f, &t[1], "Tcp", &exp);
        gen_softnet(&f, &t[2], &exp);
        gen_sockstat(&f, &t[3], &exp);
        parse_all(t[0].s, t[1].s, t[2].s, t[3].s, &k);
        check_same(&k, &exp, "shaped");
        /* a second reading, from the rest of the input, and the delta between the two */
        memset(&exp, 0, sizeof(exp));
        for (int i = 0; i < 4; i++)
            t[i].len = 0, t[i].s[0] = '\0';
        gen_pairs(&f, &t[0], "TcpExt", &exp);
        gen_pairs(&f, &t[1], "Tcp", &exp);
        gen_softnet(&f, &t[2], &exp);
        gen_sockstat(&f, &t[3], &exp);
        parse_all(t[0].s, t[1].s, t[2].s, t[3].s, &k2);
        check_same(&k2, &exp, "shaped, second reading");
        check_delta_hints(&k, &k2, &f);
        for (int i = 0; i < 4; i++)
            free(t[i].s);
    }
    return 0;
}
