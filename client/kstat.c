/* kstat: the kernel counters that explain a load test's bottleneck, read before and after.
 * They are the network namespace's, all processes together: on a quiet machine that is the
 * load test; the summary says so. */
#include "kstat.h"

#include "tune.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

const char *const kstat_name[KS_N] = {
    "ListenOverflows", "ListenDrops",    "SyncookiesSent", "TCPTimeWaitOverflow",
    "TWRecycled",      "TCPAbortOnData", "ActiveOpens",    "PassiveOpens",
    "RetransSegs",     "EstabResets",    "SoftnetDropped", "SoftnetSqueezed",
    "TimeWait",        "TcpInUse"};

static const char *line_end(const char *p)
{
    const char *nl = strchr(p, '\n');

    return nl ? nl : p + strlen(p);
}

int kstat_parse_pairs(const char *text, const char *section, struct kstat *k)
{
    size_t sl = strlen(section);
    int found = 0;

    for (const char *p = text; *p;) {
        const char *e = line_end(p), *vals, *ve;

        if (strncmp(p, section, sl) || p[sl] != ':' || !*e) {
            p = *e ? e + 1 : e;
            continue;
        }
        vals = e + 1; /* the values line follows the names line */
        ve = line_end(vals);
        if (strncmp(vals, section, sl) || vals[sl] != ':')
            return found;
        /* walk both lines a word at a time */
        const char *n = p + sl + 1, *v = vals + sl + 1;
        for (;;) {
            char name[64];
            size_t len;
            char *end;
            unsigned long long val;

            while (n < e && *n == ' ')
                n++;
            while (v < ve && *v == ' ')
                v++;
            if (n >= e || v >= ve)
                break;
            len = strcspn(n, " \n");
            if (len >= sizeof(name))
                len = sizeof(name) - 1;
            memcpy(name, n, len);
            name[len] = '\0';
            n += strcspn(n, " \n");
            end = (char *)v; /* not a number: 0 (strtoull would skip a '\n' to the next line) */
            val = *v >= '0' && *v <= '9' ? strtoull(v, &end, 10) : 0;
            v = end + strcspn(end, " \n");
            for (int i = 0; i < KS_SOFTNET_DROPPED; i++)
                if (!strcmp(name, kstat_name[i])) {
                    k->v[i] = val;
                    k->have[i] = true;
                    found++;
                }
        }
        return found;
    }
    return found;
}

int kstat_parse_softnet(const char *text, struct kstat *k)
{
    uint64_t drop = 0, squeeze = 0;
    int cpus = 0;

    for (const char *p = text; *p;) {
        const char *e = line_end(p);
        char *end = (char *)p;
        unsigned long d = 0, s = 0;

        if (isxdigit((unsigned char)*p)) { /* a CPU's line: processed, dropped, squeezed */
            strtoul(p, &end, 16);
            d = strtoul(end, &end, 16);
            s = strtoul(end, &end, 16);
        }
        if (end != p && end <= e) { /* strtoul skips '\n': a number past e is the next line's */
            drop += d;
            squeeze += s;
            cpus++;
        }
        p = *e ? e + 1 : e;
    }
    if (!cpus)
        return 0;
    k->v[KS_SOFTNET_DROPPED] = drop;
    k->v[KS_SOFTNET_SQUEEZED] = squeeze;
    k->have[KS_SOFTNET_DROPPED] = k->have[KS_SOFTNET_SQUEEZED] = true;
    return 2;
}

int kstat_parse_sockstat(const char *text, struct kstat *k)
{
    const char *p = !strncmp(text, "TCP: ", 5) ? text : strstr(text, "\nTCP: ");
    int found = 0;

    if (!p)
        return 0;
    p = strchr(p + 1, ':') + 1;
    for (const char *e = line_end(p); p < e;) {
        char word[32];
        unsigned long long v;
        int used = 0;

        if (sscanf(p, " %31s %llu%n", word, &v, &used) < 2 || used == 0 || p + used > e)
            break;
        p += used;
        if (!strcmp(word, "tw") || !strcmp(word, "inuse")) {
            int id = word[0] == 't' ? KS_TCP_TW : KS_TCP_INUSE;
            k->v[id] = v;
            k->have[id] = true;
            found++;
        }
    }
    return found;
}

static char *slurp(const char *dir, const char *name)
{
    char path[256], *buf;
    size_t n = 0, cap = 16384;
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "re");
    if (!f)
        return NULL;
    buf = malloc(cap);
    while (buf) {
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        n += r;
        if (r == 0)
            break;
        if (n + 1 == cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf)
        buf[n] = '\0';
    return buf;
}

int kstat_read(const char *dir, struct kstat *k)
{
    static const char *const files[] = {"netstat", "snmp", "softnet_stat", "sockstat"};
    int found = 0;

    memset(k, 0, sizeof(*k));
    for (int i = 0; i < 4; i++) {
        char *t = slurp(dir, files[i]);

        if (!t)
            continue;
        if (i == 0)
            found += kstat_parse_pairs(t, "TcpExt", k);
        else if (i == 1)
            found += kstat_parse_pairs(t, "Tcp", k);
        else if (i == 2)
            found += kstat_parse_softnet(t, k);
        else
            found += kstat_parse_sockstat(t, k);
        free(t);
    }
    return found;
}

void kstat_delta(const struct kstat *before, const struct kstat *after, struct kstat *d)
{
    for (int i = 0; i < KS_N; i++) {
        bool level = i == KS_TCP_TW || i == KS_TCP_INUSE;

        d->have[i] = after->have[i] && (level || before->have[i]);
        d->v[i] = !d->have[i]                   ? 0
                  : level                       ? after->v[i]
                  : after->v[i] >= before->v[i] ? after->v[i] - before->v[i]
                                                : 0; /* a counter that wrapped or was reset */
    }
}

static int hint(FILE *out, bool json, int n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int hint(FILE *out, bool json, int n, const char *fmt, ...)
{
    char line[1400];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (json) {
        fputs(n ? ", \"" : "\"", out);
        for (const char *s = line; *s; s++)
            fprintf(out, *s == '"' || *s == '\\' ? "\\%c" : "%c", *s);
        fputc('"', out);
    } else {
        fprintf(out, "hint         %s\n", line);
    }
    return n + 1;
}

/* The advice on key, from --check-sysctl's own judgement of it (tune_judge): "raise" (or
 * "widen") only what the checker calls low; a key it calls ok is said to be ok, and that it
 * was still not enough for this run. Without a tree to read (a result read back), the key is
 * named with where its verdict is. */
static void advise(const struct kstat_run *r, const char *key, const char *verb, char *buf,
                   size_t len)
{
    struct tune_verdict v;

    if (!r->sysctl_root || tune_judge(tune_default_conf, r->sysctl_root, key, &v) < 0 || !v.have)
        snprintf(buf, len, "%s %s (lfepolld --check-sysctl says where it stands)", verb, key);
    else if (v.st == TUNE_OK)
        snprintf(buf, len,
                 "%s is %s, which lfepolld --check-sysctl calls ok (%s), and was still not "
                 "enough for this run: %s it past that",
                 key, v.cur, v.want, verb);
    else
        snprintf(buf, len, "%s is %s, which lfepolld --check-sysctl calls %s (%s): %s it", key,
                 v.cur, tune_status_name[v.st], v.want, verb);
}

#define D(id) ((unsigned long long)d->v[id])

int kstat_hints(FILE *out, const struct kstat *d, const struct kstat_run *r, bool json)
{
    char adv[640], src[96];
    int n = 0;

    if (r->nsources > 0)
        snprintf(src, sizeof(src), "add source addresses to the %d --source gave", r->nsources);
    else
        snprintf(src, sizeof(src), "spread over source addresses (--source)");
    if (json)
        fputc('[', out);
    if (d->v[KS_LISTEN_OVERFLOWS] || d->v[KS_LISTEN_DROPS]) {
        advise(r, "net.core.somaxconn", "raise", adv, sizeof(adv));
        n = hint(out, json, n,
                 "the accept queue overflowed %llu times (ListenOverflows; ListenDrops %llu): "
                 "the server accepts too slowly or listens with a small backlog (lfepolld "
                 "--backlog); %s",
                 D(KS_LISTEN_OVERFLOWS), D(KS_LISTEN_DROPS), adv);
    }
    if (d->v[KS_SYNCOOKIES_SENT]) {
        advise(r, "net.core.somaxconn", "raise", adv, sizeof(adv));
        n = hint(out, json, n,
                 "the SYN queue overflowed: %llu SYN cookies sent (SyncookiesSent): raise the "
                 "server's listen backlog; %s",
                 D(KS_SYNCOOKIES_SENT), adv);
    }
    if (d->v[KS_TW_OVERFLOW]) {
        advise(r, "net.ipv4.tcp_max_tw_buckets", "raise", adv, sizeof(adv));
        n = hint(out, json, n,
                 "the TIME_WAIT table was full %llu times (TCPTimeWaitOverflow): %s (never "
                 "lower it), or let the server close first",
                 D(KS_TW_OVERFLOW), adv);
    }
    if (d->v[KS_SOFTNET_DROPPED]) {
        advise(r, "net.core.netdev_max_backlog", "raise", adv, sizeof(adv));
        n = hint(out, json, n, "the per-CPU input queue dropped %llu packets (softnet_stat): %s",
                 D(KS_SOFTNET_DROPPED), adv);
    }
    if (r->addrnotavail) {
        advise(r, "net.ipv4.ip_local_port_range", "widen", adv, sizeof(adv));
        n = hint(out, json, n,
                 "connect() found no free ephemeral port %llu times (EADDRNOTAVAIL): %s; %s; or "
                 "let the server close first",
                 (unsigned long long)r->addrnotavail, adv, src);
    }
    if (d->v[KS_RETRANS_SEGS])
        n = hint(out, json, n,
                 "%llu segments were sent again (RetransSegs): a packet was dropped somewhere "
                 "(a queue above, or the network); on loopback that stalls a connection for "
                 "200 ms to 1 s",
                 D(KS_RETRANS_SEGS));
    if (d->v[KS_ESTAB_RESETS] && !r->linger0)
        n = hint(out, json, n,
                 "%llu established connections were reset (EstabResets): a peer closed with "
                 "unread data or aborted",
                 D(KS_ESTAB_RESETS));
    if (d->v[KS_ABORT_ON_DATA] && r->linger0)
        n = hint(out, json, n,
                 "%llu closes sent a reset (TCPAbortOnData): what --linger0 does; the server "
                 "sees ECONNRESET where it expected an end of file",
                 D(KS_ABORT_ON_DATA));
    if (d->v[KS_ABORT_ON_DATA] && !r->linger0 && r->short_mode)
        n = hint(out, json, n,
                 "%llu connections were reset for data that came after their close, or for a "
                 "close with SO_LINGER {1,0} (TCPAbortOnData): in short mode a server that sends "
                 "more than the response after lfbench has read it and closed shows only here",
                 D(KS_ABORT_ON_DATA));
    if (r->short_mode && d->v[KS_TW_RECYCLED]) {
        advise(r, "net.ipv4.ip_local_port_range", "widen", adv, sizeof(adv));
        n = hint(out, json, n,
                 "%llu connect()s took over a TIME_WAIT port (TWRecycled): the client closes "
                 "first, so each connect() searches a range full of TIME_WAIT ports (client "
                 "CPU) and the rate is capped at about the range per tcp_tw_reuse_delay; %s; %s; "
                 "or let the server close first",
                 D(KS_TW_RECYCLED), adv, src);
    }
    if (!json && n == 0)
        fprintf(out, "hint         none: no kernel queue overflowed and no port ran out\n");
    if (json)
        fputc(']', out);
    return n;
}
