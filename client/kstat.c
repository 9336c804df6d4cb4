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

/* Writes one hint: a line of text, or a JSON string after the n before it. Returns n + 1. */
static int put_hint(FILE *out, bool json, int n, const char *line)
{
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

#define HINT_MAX 1400 /* a hint's bytes, its NUL included: a longer one is cut */

static int hint(FILE *out, bool json, int n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int hint(FILE *out, bool json, int n, const char *fmt, ...)
{
    char line[HINT_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    return put_hint(out, json, n, line);
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

#define PORT_RANGE "net.ipv4.ip_local_port_range"

/* The port range under r->sysctl_root: false when it cannot be read. */
static bool port_range(const struct kstat_run *r, long *lo, long *hi)
{
    char v[64];

    return r->sysctl_root && tune_read(r->sysctl_root, PORT_RANGE, v, sizeof(v)) == 0 &&
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
        advise(r, PORT_RANGE, "widen", NULL, buf, len);
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

/* When a counter's hint is said, beyond the counter having moved. */
enum hint_when {
    ALWAYS,
    NO_OVERFLOW,         /* the accept queue did not overflow (its hint covers the drops) */
    NOT_LINGER0,         /* without --linger0: a reset is a surprise */
    LINGER0,             /* with --linger0: a reset is what was asked for */
    SHORT_NOT_LINGER0,   /* short mode without --linger0: data came after lfbench's close */
    SHORT_PORTS_LIMITED, /* short mode, and the ports limited the run (ports_limited) */
};

/* A counter's hint. Its advice is on key: advise's with verb and ok_tail, or the port range's
 * (advise_ports); none without a key. In text, {advice} is that advice, {sources} the remedy of
 * more source addresses, and {NAME} the delta of the counter kstat_name calls NAME. */
struct hint_row {
    enum kstat_id counter;
    enum hint_when when;
    const char *key, *verb, *ok_tail;
    const char *text;
};

/* In the order they are said. */
static const struct hint_row hint_rows[] = {
    {KS_LISTEN_OVERFLOWS, ALWAYS, "net.core.somaxconn", "raise",
     "not the limit here: the server's own backlog (lfepolld --backlog) or how fast it accepts is",
     "the accept queue overflowed {ListenOverflows} times (ListenOverflows; ListenDrops "
     "{ListenDrops}): the server accepts too slowly or listens with a small backlog (lfepolld "
     "--backlog); {advice}"},
    {KS_LISTEN_DROPS, NO_OVERFLOW, NULL, NULL, NULL,
     "{ListenDrops} SYNs or handshakes were dropped at a listener without an accept queue "
     "overflow (ListenDrops): a listener closing or short of memory, not a queue limit"},
    {KS_SYNCOOKIES_SENT, ALWAYS, "net.core.somaxconn", "raise",
     "not the limit here: the server's own backlog (lfepolld --backlog) is",
     "the SYN queue overflowed: {SyncookiesSent} SYN cookies sent (SyncookiesSent): raise the "
     "server's listen backlog; {advice}"},
    {KS_TW_OVERFLOW, ALWAYS, "net.ipv4.tcp_max_tw_buckets", "raise", NULL,
     "the TIME_WAIT table was full {TCPTimeWaitOverflow} times (TCPTimeWaitOverflow): {advice} "
     "(never lower it), or let the server close first"},
    {KS_SOFTNET_DROPPED, ALWAYS, "net.core.netdev_max_backlog", "raise", NULL,
     "the per-CPU input queue dropped {SoftnetDropped} packets (softnet_stat): {advice}"},
    {KS_RETRANS_SEGS, ALWAYS, NULL, NULL, NULL,
     "{RetransSegs} segments were sent again (RetransSegs): a packet was dropped somewhere (a "
     "queue above, or the network); on loopback that stalls a connection for 200 ms to 1 s"},
    {KS_ESTAB_RESETS, NOT_LINGER0, NULL, NULL, NULL,
     "{EstabResets} established connections were reset (EstabResets): a peer closed with unread "
     "data or aborted"},
    {KS_ABORT_ON_DATA, LINGER0, NULL, NULL, NULL,
     "{TCPAbortOnData} closes sent a reset (TCPAbortOnData): what --linger0 does; the server "
     "sees ECONNRESET where it expected an end of file"},
    {KS_ABORT_ON_DATA, SHORT_NOT_LINGER0, NULL, NULL, NULL,
     "{TCPAbortOnData} connections were reset for data that came after their close, or for a "
     "close with SO_LINGER {1,0} (TCPAbortOnData): in short mode a server that sends more than "
     "the response after lfbench has read it and closed shows only here"},
    {KS_TW_RECYCLED, SHORT_PORTS_LIMITED, PORT_RANGE, "widen", NULL,
     "{TWRecycled} connect()s took over a TIME_WAIT port (TWRecycled): the client closes first, "
     "so each connect() searches a range full of TIME_WAIT ports (client CPU) and the rate is "
     "capped at about the range per tcp_tw_reuse_delay; {advice}; {sources}; or let the server "
     "close first"},
};

static bool hint_holds(enum hint_when when, const struct kstat *d, const struct kstat_run *r)
{
    switch (when) {
    case ALWAYS:
        return true;
    case NO_OVERFLOW:
        return !d->v[KS_LISTEN_OVERFLOWS];
    case NOT_LINGER0:
        return !r->linger0;
    case LINGER0:
        return r->linger0;
    case SHORT_NOT_LINGER0:
        return r->short_mode && !r->linger0;
    case SHORT_PORTS_LIMITED:
        return r->short_mode && ports_limited(r);
    }
    return false;
}

/* Appends s[0..n) to buf at *o, cut as snprintf cuts: buf stays a string of at most len - 1. */
static void append(char *buf, size_t len, size_t *o, const char *s, size_t n)
{
    if (*o + n >= len)
        n = len - 1 - *o;
    memcpy(buf + *o, s, n);
    *o += n;
    buf[*o] = '\0';
}

/* The value of {NAME} (name[0..n)) in a hint's text, or NULL: a brace that is no name stays. */
static const char *field(const char *name, size_t n, const struct kstat *d, const char *advice,
                         const char *sources, char *num, size_t numlen)
{
    if (n == 6 && !strncmp(name, "advice", n))
        return advice;
    if (n == 7 && !strncmp(name, "sources", n))
        return sources;
    for (int i = 0; i < KS_N; i++)
        if (strlen(kstat_name[i]) == n && !strncmp(name, kstat_name[i], n)) {
            snprintf(num, numlen, "%llu", (unsigned long long)d->v[i]);
            return num;
        }
    return NULL;
}

/* A row's text with its fields filled in, into buf (len bytes). */
static void fill(char *buf, size_t len, const char *text, const struct kstat *d, const char *advice,
                 const char *sources)
{
    size_t o = 0;

    buf[0] = '\0';
    for (const char *p = text; *p;) {
        const char *end = *p == '{' ? strchr(p, '}') : NULL, *v = NULL;
        char num[24];

        if (end)
            v = field(p + 1, (size_t)(end - p - 1), d, advice, sources, num, sizeof(num));
        if (v) {
            append(buf, len, &o, v, strlen(v));
            p = end + 1;
        } else {
            append(buf, len, &o, p++, 1);
        }
    }
}

static int row_hint(FILE *out, bool json, int n, const struct hint_row *row, const struct kstat *d,
                    const struct kstat_run *r, const char *sources)
{
    char adv[640] = "", line[HINT_MAX];

    if (row->key && !strcmp(row->key, PORT_RANGE))
        advise_ports(r, adv, sizeof(adv));
    else if (row->key)
        advise(r, row->key, row->verb, row->ok_tail, adv, sizeof(adv));
    fill(line, sizeof(line), row->text, d, adv, sources);
    return put_hint(out, json, n, line);
}

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
    /* The run's own errors are lfbench's, whatever else the namespace carried. */
    if (r->addrnotavail) {
        advise_ports(r, adv, sizeof(adv));
        n = hint(out, json, n,
                 "connect() found no free ephemeral port %llu times (EADDRNOTAVAIL): %s; %s; or "
                 "let the server close first",
                 (unsigned long long)r->addrnotavail, adv, src);
    }
    if (others_moved(d, r))
        n = hint(out, json, n,
                 "the namespace's counters moved far more than this run explains (ActiveOpens "
                 "+%llu, PassiveOpens +%llu for lfbench's %llu connect() calls): other traffic in "
                 "this network namespace moved them, so they say nothing sure about this server; "
                 "for hints, run where lfbench and the server have the namespace to themselves",
                 (unsigned long long)d->v[KS_ACTIVE_OPENS],
                 (unsigned long long)d->v[KS_PASSIVE_OPENS], (unsigned long long)r->connects);
    else
        for (size_t i = 0; i < sizeof(hint_rows) / sizeof(hint_rows[0]); i++)
            if (d->v[hint_rows[i].counter] && hint_holds(hint_rows[i].when, d, r))
                n = row_hint(out, json, n, &hint_rows[i], d, r, src);
    if (!json && n == 0)
        fprintf(out, "hint         none: no kernel queue overflowed and no port ran out\n");
    if (json)
        fputc(']', out);
    return n;
}
