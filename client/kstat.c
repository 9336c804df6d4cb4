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

/* The value sysctl.conf recommends for key, into buf; false when it has none. */
static bool conf_value(const char *key, char *buf, size_t len)
{
    struct tune_key *keys = calloc(TUNE_MAX_KEYS, sizeof(*keys));
    char err[160];
    int n = keys ? tune_parse(tune_default_conf, keys, TUNE_MAX_KEYS, err, sizeof(err)) : -1;
    bool found = false;

    for (int i = 0; i < n && !found; i++)
        if (!strcmp(keys[i].name, key)) {
            snprintf(buf, len, "%s", keys[i].value);
            found = true;
        }
    free(keys);
    return found;
}

/* The command that sets key to value: bare for root, with sudo for anyone else; a value with a
 * blank quoted for the shell. */
static void set_command(const struct kstat_run *r, const char *key, const char *value, char *buf,
                        size_t len)
{
    bool blank = strchr(value, ' ') != NULL;

    snprintf(buf, len, "%ssysctl -w %s=%s%s%s", r->root ? "" : "sudo ", key, blank ? "\"" : "",
             value, blank ? "\"" : "");
}

/* The port range under r->sysctl_root: false when it cannot be read. */
static bool port_range(const struct kstat_run *r, long *lo, long *hi)
{
    char v[64];

    return r->sysctl_root &&
           tune_read(r->sysctl_root, "net.ipv4.ip_local_port_range", v, sizeof(v)) == 0 &&
           sscanf(v, "%ld %ld", lo, hi) == 2;
}

/* The widest range a hint proposes: the ports below 1024 belong to services. */
#define WIDEST_LO 1024
#define WIDEST_HI 65535

/* The advice on key, from --check-sysctl's own judgement of it (tune_judge): "raise" (or
 * "widen") only what the checker calls low, with the command that sets sysctl.conf's value; a
 * key it calls ok is said to be ok, and then ok_tail says what follows (NULL: that it was still
 * not enough for this run, and to go past it). Never a value that is already there. Without a
 * tree to read (a result read back), the key is named with where its verdict is. */
static void advise(const struct kstat_run *r, const char *key, const char *verb,
                   const char *ok_tail, char *buf, size_t len)
{
    struct tune_verdict v;
    char value[128], cmd[256];

    if (!r->sysctl_root || tune_judge(tune_default_conf, r->sysctl_root, key, &v) < 0 || !v.have)
        snprintf(buf, len, "%s %s (lfepolld --check-sysctl says where it stands)", verb, key);
    else if (v.st == TUNE_OK && ok_tail)
        snprintf(buf, len, "%s is %s, which lfepolld --check-sysctl calls ok (%s): %s", key, v.cur,
                 v.want, ok_tail);
    else if (v.st == TUNE_OK)
        snprintf(buf, len,
                 "%s is %s, which lfepolld --check-sysctl calls ok (%s), and was still not "
                 "enough for this run: %s it past that",
                 key, v.cur, v.want, verb);
    else if (v.st == TUNE_READONLY)
        snprintf(buf, len,
                 "%s is %s, which lfepolld --check-sysctl calls %s (%s): %s it where it can be "
                 "written (as root in this network namespace, or on the host for a host-wide key)",
                 key, v.cur, tune_status_name[v.st], v.want, verb);
    else if (conf_value(key, value, sizeof(value)) && strcmp(value, v.cur)) {
        set_command(r, key, value, cmd, sizeof(cmd));
        snprintf(buf, len, "%s is %s, which lfepolld --check-sysctl calls %s (%s): %s it (%s)", key,
                 v.cur, tune_status_name[v.st], v.want, verb, cmd);
    } else {
        snprintf(buf, len, "%s is %s, which lfepolld --check-sysctl calls %s (%s): %s it", key,
                 v.cur, tune_status_name[v.st], v.want, verb);
    }
}

/* The port range's advice: widen it, unless it is already as wide as a hint goes. */
static void advise_ports(const struct kstat_run *r, char *buf, size_t len)
{
    long lo, hi;

    if (port_range(r, &lo, &hi) && lo <= WIDEST_LO && hi >= WIDEST_HI)
        snprintf(buf, len,
                 "net.ipv4.ip_local_port_range is %ld %ld, already as wide as it goes "
                 "(%d-%d): more ports come only from more source addresses",
                 lo, hi, WIDEST_LO, WIDEST_HI);
    else
        advise(r, "net.ipv4.ip_local_port_range", "widen", NULL, buf, len);
}

/* Whether the ephemeral ports limited this run: connect() found none (EADDRNOTAVAIL), or its
 * connections came at half or more of what the range allows a client that closes first
 * (tune_port_ceiling, as --check-sysctl's ceilings line), per source address. TWRecycled alone
 * is no limit: the kernel takes over a TIME_WAIT port it meets however many others are free. */
static bool ports_limited(const struct kstat_run *r)
{
    long lo, hi;
    double ceiling;
    char v[32];
    long reuse = 2, delay = 1000; /* the kernel's defaults (6.x; 1 s before the sysctl) */

    if (r->addrnotavail)
        return true;
    if (!r->connects || r->wall_s <= 0 || !port_range(r, &lo, &hi))
        return false;
    if (tune_read(r->sysctl_root, "net.ipv4.tcp_tw_reuse", v, sizeof(v)) == 0)
        reuse = strtol(v, NULL, 10);
    if (tune_read(r->sysctl_root, "net.ipv4.tcp_tw_reuse_delay", v, sizeof(v)) == 0)
        delay = strtol(v, NULL, 10);
    ceiling = tune_port_ceiling(lo, hi, (int)reuse, delay, r->loopback) *
              (r->nsources > 0 ? r->nsources : 1);
    return (double)r->connects / r->wall_s >= ceiling / 2;
}

/* Whether the namespace's counters moved far more than lfbench's own connect() calls explain:
 * other traffic in it moved them (a proxying server, one connection out per one in, stays
 * within twice). Unknown (a file without the calls): no. */
static bool others_moved(const struct kstat *d, const struct kstat_run *r)
{
    uint64_t bar = r->connects < UINT64_MAX / 4 ? 2 * r->connects + 1000 : UINT64_MAX;

    return r->connects && ((d->have[KS_ACTIVE_OPENS] && d->v[KS_ACTIVE_OPENS] > bar) ||
                           (d->have[KS_PASSIVE_OPENS] && d->v[KS_PASSIVE_OPENS] > bar));
}

#define D(id) ((unsigned long long)d->v[id])

int kstat_hints(FILE *out, const struct kstat *d, const struct kstat_run *r, bool json)
{
    char adv[640], src[96];
    int n = 0;
    bool others = others_moved(d, r);

    if (r->nsources > 0)
        snprintf(src, sizeof(src), "add source addresses to the %d --source gave", r->nsources);
    else
        snprintf(src, sizeof(src), "spread over source addresses (--source)");
    if (json)
        fputc('[', out);
    /* The run's own errors are lfbench's, whatever else the namespace carried. */
    if (r->addrnotavail) {
        advise_ports(r, adv, sizeof(adv));
        n = hint(out, json, n,
                 "connect() found no free ephemeral port %llu times (EADDRNOTAVAIL): %s; %s; or "
                 "let the server close first",
                 (unsigned long long)r->addrnotavail, adv, src);
    }
    if (others) {
        n = hint(out, json, n,
                 "the namespace's counters moved far more than this run explains (ActiveOpens "
                 "+%llu, PassiveOpens +%llu for lfbench's %llu connect() calls): other traffic in "
                 "this network namespace moved them, so they say nothing sure about this server; "
                 "for hints, run where lfbench and the server have the namespace to themselves",
                 D(KS_ACTIVE_OPENS), D(KS_PASSIVE_OPENS), (unsigned long long)r->connects);
        goto done;
    }
    if (d->v[KS_LISTEN_OVERFLOWS]) {
        advise(r, "net.core.somaxconn", "raise",
               "not the limit here: the server's own backlog (lfepolld --backlog) or how fast it "
               "accepts is",
               adv, sizeof(adv));
        n = hint(out, json, n,
                 "the accept queue overflowed %llu times (ListenOverflows; ListenDrops %llu): "
                 "the server accepts too slowly or listens with a small backlog (lfepolld "
                 "--backlog); %s",
                 D(KS_LISTEN_OVERFLOWS), D(KS_LISTEN_DROPS), adv);
    } else if (d->v[KS_LISTEN_DROPS]) {
        n = hint(out, json, n,
                 "%llu SYNs or handshakes were dropped at a listener without an accept queue "
                 "overflow (ListenDrops): a listener closing or short of memory, not a queue "
                 "limit",
                 D(KS_LISTEN_DROPS));
    }
    if (d->v[KS_SYNCOOKIES_SENT]) {
        advise(r, "net.core.somaxconn", "raise",
               "not the limit here: the server's own backlog (lfepolld --backlog) is", adv,
               sizeof(adv));
        n = hint(out, json, n,
                 "the SYN queue overflowed: %llu SYN cookies sent (SyncookiesSent): raise the "
                 "server's listen backlog; %s",
                 D(KS_SYNCOOKIES_SENT), adv);
    }
    if (d->v[KS_TW_OVERFLOW]) {
        advise(r, "net.ipv4.tcp_max_tw_buckets", "raise", NULL, adv, sizeof(adv));
        n = hint(out, json, n,
                 "the TIME_WAIT table was full %llu times (TCPTimeWaitOverflow): %s (never "
                 "lower it), or let the server close first",
                 D(KS_TW_OVERFLOW), adv);
    }
    if (d->v[KS_SOFTNET_DROPPED]) {
        advise(r, "net.core.netdev_max_backlog", "raise", NULL, adv, sizeof(adv));
        n = hint(out, json, n, "the per-CPU input queue dropped %llu packets (softnet_stat): %s",
                 D(KS_SOFTNET_DROPPED), adv);
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
    if (r->short_mode && d->v[KS_TW_RECYCLED] && ports_limited(r)) {
        advise_ports(r, adv, sizeof(adv));
        n = hint(out, json, n,
                 "%llu connect()s took over a TIME_WAIT port (TWRecycled): the client closes "
                 "first, so each connect() searches a range full of TIME_WAIT ports (client "
                 "CPU) and the rate is capped at about the range per tcp_tw_reuse_delay; %s; %s; "
                 "or let the server close first",
                 D(KS_TW_RECYCLED), adv, src);
    }
done:
    if (!json && n == 0)
        fprintf(out, "hint         none: no kernel queue overflowed and no port ran out\n");
    if (json)
        fputc(']', out);
    return n;
}
