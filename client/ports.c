/* ports: how many ephemeral ports a run can get from each source address, from /proc.
 *
 * THE RULE (Linux 6.x, net/ipv4/inet_hashtables.c __inet_hash_connect() and
 * __inet_check_established(), net/ipv4/tcp_ipv4.c tcp_twsk_unique()). connect() without a bound
 * port (lfbench's without --source, and with --source, which binds the address only with
 * IP_BIND_ADDRESS_NO_PORT) walks ip_local_port_range from a hashed offset, skipping
 * ip_local_reserved_ports. For each port it looks up the bind bucket, which is per port, for
 * every address and both families (one bhash for tcp and tcp6):
 *   - no bucket: the port is taken;
 *   - a bucket made by bind() (fastreuse >= 0: a listener, or a socket that bound a port
 *     explicitly): skipped, whatever the addresses;
 *   - a bucket made by connect() (fastreuse -1): the port is taken unless the established hash
 *     already holds this exact 4-tuple (source, port, target address, target port). A socket
 *     from another source address or to another destination does not block the port: ports
 *     are per 4-tuple. A TIME_WAIT of the same 4-tuple is taken over (TWRecycled) when
 *     tcp_twsk_unique() allows: net.ipv4.tcp_tw_reuse 1, or 2 (the default) when the source or
 *     the destination is loopback; and only if the connection had TCP timestamps and the
 *     TIME_WAIT is older than tcp_tw_reuse_delay (6.13+, 1000 ms; before, one second after the
 *     last timestamp). A TIME_WAIT still in FIN_WAIT2 (/proc shows 05) is never taken over.
 * So, per source S and target T, a port of the range is unusable when a listener holds it, or
 * a socket S:port -> T does, other than a TIME_WAIT that reuse allows. Sockets to other
 * destinations cost one hash lookup when the walk meets them, no skip: they do not slow it.
 * What slows connect() is the walk over ports unusable for this target (each one a lock and two
 * hash lookups), which this file counts.
 *
 * Not seen here: sockets bound but neither listening nor connected (/proc/net/tcp lists only the
 * listening and established hashes), and connected sockets that bind()ed their port before
 * connect() (their bucket blocks the port for every target; /proc cannot tell them apart, so
 * they are counted as connect()'s, blocking only their own 4-tuple). */
#include "ports.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ST_FIN_WAIT2 0x05
#define ST_TIME_WAIT 0x06
#define ST_LISTEN 0x0A
#define WHY_OTHER 255   /* why[]: blocked by a socket that is not an expiring TIME_WAIT */
#define MAX_SOURCES 256 /* lfbench's --source limit (bopt.h BOPT_MAX_SOURCES) */

static bool bit(const uint8_t *map, unsigned p)
{
    return map[p >> 3] & (1u << (p & 7));
}

static void set_bit(uint8_t *map, unsigned p)
{
    map[p >> 3] |= (uint8_t)(1u << (p & 7));
}

static void mapped(struct in6_addr *a, uint32_t s_addr)
{
    memset(a, 0, sizeof(*a));
    a->s6_addr[10] = a->s6_addr[11] = 0xff;
    memcpy(&a->s6_addr[12], &s_addr, 4);
}

static bool is_mapped(const struct in6_addr *a)
{
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

    return !memcmp(a->s6_addr, prefix, 12);
}

static bool is_loopback(const struct in6_addr *a)
{
    return is_mapped(a) ? a->s6_addr[12] == 127 : IN6_IS_ADDR_LOOPBACK(a);
}

static const char *skip_space(const char *p, const char *e)
{
    while (p < e && (*p == ' ' || *p == '\t'))
        p++;
    return p;
}

/* Up to 8 hex digits; *n gets how many. */
static const char *hex(const char *p, const char *e, uint32_t *v, int *n)
{
    uint32_t x = 0;
    int i = 0;

    for (; p < e && i < 8; p++, i++) {
        int d = *p >= '0' && *p <= '9'   ? *p - '0'
                : *p >= 'A' && *p <= 'F' ? *p - 'A' + 10
                : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10
                                         : -1;
        if (d < 0)
            break;
        x = x << 4 | (uint32_t)d;
    }
    *v = x;
    *n = i;
    return p;
}

/* "0100007F:4A89" or 32 hex digits and a port: each 8-digit word is the kernel's __be32 printed
 * as a native integer, so its value is the s_addr (s6_addr32[i]) of the machine that wrote it. */
static const char *endpoint(const char *p, const char *e, struct in6_addr *a, uint16_t *port)
{
    uint32_t w[4], v;
    int words = 0, n;

    p = skip_space(p, e);
    while (words < 4) {
        p = hex(p, e, &w[words], &n);
        if (n != 8)
            return NULL;
        words++;
        if (p < e && *p == ':')
            break;
    }
    if (p >= e || *p != ':' || (words != 1 && words != 4))
        return NULL;
    p = hex(p + 1, e, &v, &n);
    if (n != 4)
        return NULL;
    if (words == 1) {
        mapped(a, w[0]);
    } else {
        memcpy(a->s6_addr, w, 16);
        if (IN6_IS_ADDR_V4MAPPED(a))
            mapped(a, w[3]); /* a v4 connection through a v6 socket: the same 4-tuple space */
    }
    *port = (uint16_t)v;
    return p;
}

int ports_parse_range(const char *text, int *lo, int *hi)
{
    char *end;
    long a, b;

    a = strtol(text, &end, 10);
    if (end == text)
        return -EINVAL;
    text = end;
    b = strtol(text, &end, 10);
    if (end == text || a < 1 || b > 65535 || a > b)
        return -EINVAL;
    *lo = (int)a;
    *hi = (int)b;
    return 0;
}

int ports_parse_reserved(const char *text, uint8_t reserved[65536 / 8])
{
    const char *p = text;
    int count = 0;

    while (*p == ' ' || *p == '\t' || *p == '\n')
        p++;
    while (*p) {
        char *end;
        long a = strtol(p, &end, 10), b;

        if (end == p || a < 0 || a > 65535)
            return -EINVAL;
        b = a;
        p = end;
        if (*p == '-') {
            b = strtol(p + 1, &end, 10);
            if (end == p + 1 || b < a || b > 65535)
                return -EINVAL;
            p = end;
        }
        for (long port = a; port <= b; port++, count++)
            set_bit(reserved, (unsigned)port);
        if (*p == ',')
            p++;
        else if (*p == '\n' || *p == ' ')
            while (*p == '\n' || *p == ' ')
                p++;
        else if (*p)
            return -EINVAL;
    }
    return count;
}

void ports_sys_default(struct ports_sys *sys)
{
    memset(sys, 0, sizeof(*sys));
    sys->lo = 32768;
    sys->hi = 60999;
    sys->tw_reuse = 2;
    sys->tw_reuse_delay_ms = 1000;
    sys->timestamps = true;
    sys->clk_tck = 100;
}

int ports_init(struct ports_report *r, const struct ports_sys *sys,
               const struct sockaddr_storage *target, const struct in6_addr *sources, int nsources)
{
    memset(r, 0, sizeof(*r));
    if (nsources < 1 || sys->lo < 1 || sys->lo > sys->hi || sys->hi > 65535)
        return -EINVAL;
    if (target->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)target;
        mapped(&r->target, in->sin_addr.s_addr);
        r->target_port = ntohs(in->sin_port);
        r->target_v4 = true;
    } else if (target->ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)target;
        r->target = in6->sin6_addr;
        r->target_port = ntohs(in6->sin6_port);
        r->target_v4 = is_mapped(&r->target);
    } else {
        return -EINVAL;
    }
    r->sys = *sys;
    r->src = calloc((size_t)nsources, sizeof(*r->src));
    if (!r->src)
        return -ENOMEM;
    r->nsources = nsources;
    for (int i = 0; i < nsources; i++)
        r->src[i].addr = sources[i];
    r->tw_reusable = sys->timestamps && sys->tw_reuse != 0;
    return 0;
}

void ports_free(struct ports_report *r)
{
    for (int i = 0; r->src && i < r->nsources; i++)
        free(r->src[i].why);
    free(r->src);
    r->src = NULL;
    r->nsources = 0;
}

/* tcp_twsk_unique()'s verdict for a TIME_WAIT from src to the target, remaining_ms left. */
static bool tw_taken_over(const struct ports_report *r, const struct in6_addr *src,
                          long remaining_ms)
{
    const struct ports_sys *s = &r->sys;

    if (!r->tw_reusable)
        return false;
    if (s->tw_reuse == 2 && !is_loopback(src) && !is_loopback(&r->target))
        return false;
    return PORTS_TW_SECONDS * 1000L - remaining_ms >= s->tw_reuse_delay_ms;
}

/* One socket line; false when it is not one (the header, a truncated line). */
static bool take_line(struct ports_report *r, const char *p, const char *e)
{
    struct in6_addr la, ra;
    uint16_t lport, rport;
    uint32_t st, tr, when, x;
    int n;

    p = skip_space(p, e);
    while (p < e && *p >= '0' && *p <= '9')
        p++;
    if (p >= e || *p != ':')
        return false;
    if (!(p = endpoint(p + 1, e, &la, &lport)) || !(p = endpoint(p, e, &ra, &rport)))
        return false;
    p = hex(skip_space(p, e), e, &st, &n);
    if (n != 2)
        return false;
    p = hex(skip_space(p, e), e, &x, &n); /* tx_queue:rx_queue */
    if (n != 8 || p >= e || *p != ':')
        return false;
    p = hex(p + 1, e, &x, &n);
    p = hex(skip_space(p, e), e, &tr, &n); /* timer kind : ticks left */
    if (n != 2 || p >= e || *p != ':')
        return false;
    hex(p + 1, e, &when, &n);
    if (n != 8)
        return false;
    r->sockets++;
    if (st == ST_LISTEN) {
        set_bit(r->listen, lport); /* the bucket is bind()'s: no connect() may take the port */
        return true;
    }
    if (lport < r->sys.lo || lport > r->sys.hi || bit(r->sys.reserved, lport))
        return true;
    for (int i = 0; i < r->nsources; i++) {
        struct ports_src *s = &r->src[i];
        unsigned idx = (unsigned)(lport - r->sys.lo);
        uint8_t why;

        if (memcmp(&s->addr, &la, sizeof(la)))
            continue;
        if (st == ST_TIME_WAIT)
            s->tw++;
        else
            s->inuse++;
        if (rport != r->target_port || memcmp(&ra, &r->target, sizeof(ra)))
            return true;
        if (st == ST_TIME_WAIT) {
            long ms = r->sys.clk_tck > 0 ? (long)when * 1000 / r->sys.clk_tck : 0;
            long secs = (ms + 999) / 1000;

            if (tw_taken_over(r, &s->addr, ms))
                return true;
            why = (uint8_t)(1 + (secs > PORTS_TW_SECONDS ? PORTS_TW_SECONDS : secs));
        } else {
            why = WHY_OTHER; /* in use, or a TIME_WAIT still in FIN_WAIT2 (never reused) */
        }
        if (!s->why) {
            s->why = calloc((size_t)(r->sys.hi - r->sys.lo + 1), 1);
            if (!s->why) /* counted as free: the check errs towards letting the run go */
                return true;
        }
        if (why > s->why[idx])
            s->why[idx] = why;
        return true;
    }
    return true;
}

long ports_parse_tcp(struct ports_report *r, const char *text, size_t len)
{
    const char *p = text, *end = text + len;
    long taken = 0;

    while (p < end) {
        const char *e = memchr(p, '\n', (size_t)(end - p));

        if (!e)
            e = end;
        taken += take_line(r, p, e);
        p = e + 1;
    }
    return taken;
}

void ports_finish(struct ports_report *r)
{
    const struct ports_sys *sys = &r->sys;

    r->listeners = 0;
    for (int port = sys->lo; port <= sys->hi; port++)
        r->listeners += !bit(sys->reserved, (unsigned)port) && bit(r->listen, (unsigned)port);
    for (int i = 0; i < r->nsources; i++) {
        struct ports_src *s = &r->src[i];

        s->range = s->blocked = s->blocked_tw = 0;
        memset(s->tw_expiry, 0, sizeof(s->tw_expiry));
        for (int port = sys->lo; port <= sys->hi; port++) {
            uint8_t why = s->why ? s->why[port - sys->lo] : 0;

            if (bit(sys->reserved, (unsigned)port))
                continue;
            s->range++;
            if (bit(r->listen, (unsigned)port)) {
                s->blocked++;
            } else if (why) {
                s->blocked++;
                if (why != WHY_OTHER) {
                    s->blocked_tw++;
                    s->tw_expiry[why - 1]++;
                }
            }
        }
        s->free = s->range - s->blocked;
    }
}

/* --- reading ------------------------------------------------------------------------------- */

static int read_small(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC), err;
    ssize_t n;

    if (fd < 0)
        return -errno;
    do
        n = read(fd, buf, len - 1);
    while (n < 0 && errno == EINTR);
    err = errno;
    close(fd);
    if (n < 0)
        return -err;
    buf[n] = '\0';
    return 0;
}

static void read_sys(struct ports_sys *sys)
{
    char buf[4096];

    ports_sys_default(sys);
    if (!read_small("/proc/sys/net/ipv4/ip_local_port_range", buf, sizeof(buf)))
        ports_parse_range(buf, &sys->lo, &sys->hi);
    if (!read_small("/proc/sys/net/ipv4/ip_local_reserved_ports", buf, sizeof(buf)) &&
        ports_parse_reserved(buf, sys->reserved) < 0)
        memset(sys->reserved, 0, sizeof(sys->reserved));
    if (!read_small("/proc/sys/net/ipv4/tcp_tw_reuse", buf, sizeof(buf)))
        sys->tw_reuse = atoi(buf);
    if (!read_small("/proc/sys/net/ipv4/tcp_tw_reuse_delay", buf, sizeof(buf)))
        sys->tw_reuse_delay_ms = atoi(buf);
    if (!read_small("/proc/sys/net/ipv4/tcp_timestamps", buf, sizeof(buf)))
        sys->timestamps = atoi(buf) != 0;
    sys->clk_tck = sysconf(_SC_CLK_TCK);
}

/* The source address the kernel picks for target: a UDP socket's connect() routes without
 * sending anything. */
static int kernel_source(const struct sockaddr_storage *target, struct in6_addr *out)
{
    struct sockaddr_storage ss;
    socklen_t len =
        target->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
    int fd = socket(target->ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0), err = 0;

    if (fd < 0)
        return -errno;
    if (connect(fd, (const struct sockaddr *)target, len) < 0 ||
        getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
        err = -errno;
    close(fd);
    if (err)
        return err;
    if (ss.ss_family == AF_INET) {
        mapped(out, ((struct sockaddr_in *)&ss)->sin_addr.s_addr);
    } else {
        *out = ((struct sockaddr_in6 *)&ss)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(out))
            mapped(out, ((uint32_t *)out->s6_addr)[3]);
    }
    return 0;
}

/* Streams a /proc/net file through the parser a buffer of whole lines at a time. */
static int read_tcp(struct ports_report *r, const char *path)
{
    char buf[65536];
    size_t have = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0)
        return errno == ENOENT ? 0 : -errno; /* tcp6 is absent without IPv6 */
    for (;;) {
        ssize_t n = read(fd, buf + have, sizeof(buf) - have);
        char *nl;

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int err = -errno;
            close(fd);
            return err;
        }
        if (n == 0)
            break;
        have += (size_t)n;
        nl = memrchr(buf, '\n', have);
        if (!nl && have == sizeof(buf))
            nl = buf + have - 1; /* no line is this long; take it as it is */
        if (nl) {
            size_t used = (size_t)(nl - buf) + 1;
            ports_parse_tcp(r, buf, used);
            memmove(buf, buf + used, have - used);
            have -= used;
        }
    }
    close(fd);
    ports_parse_tcp(r, buf, have);
    return 0;
}

int ports_read(struct ports_report *r, const struct sockaddr_storage *target,
               const struct in_addr *sources, int nsources)
{
    struct ports_sys sys;
    struct in6_addr *src, one;
    int err;

    if (nsources > 0 && target->ss_family != AF_INET)
        return -EAFNOSUPPORT;
    read_sys(&sys);
    if (nsources > 0) {
        src = calloc((size_t)nsources, sizeof(*src));
        if (!src)
            return -ENOMEM;
        for (int i = 0; i < nsources; i++)
            mapped(&src[i], sources[i].s_addr);
    } else {
        err = kernel_source(target, &one);
        if (err)
            return err;
        src = &one;
        nsources = 1;
    }
    err = ports_init(r, &sys, target, src, nsources);
    if (src != &one)
        free(src);
    if (err)
        return err;
    if ((err = read_tcp(r, "/proc/net/tcp")) < 0 || (err = read_tcp(r, "/proc/net/tcp6")) < 0) {
        ports_free(r);
        return err;
    }
    ports_finish(r);
    return 0;
}

/* --- the advice ---------------------------------------------------------------------------- */

/* 28232 as "28,232". */
static const char *num(long v, char *buf, size_t len)
{
    char tmp[32];
    int n = snprintf(tmp, sizeof(tmp), "%ld", v < 0 ? -v : v), o = 0;

    if (v < 0 && len > 1)
        buf[o++] = '-';
    for (int i = 0; i < n && (size_t)o + 1 < len; i++) {
        if (i && (n - i) % 3 == 0 && (size_t)o + 2 < len)
            buf[o++] = ',';
        buf[o++] = tmp[i];
    }
    buf[o] = '\0';
    return buf;
}

static const char *addr_str(const struct in6_addr *a, char *buf, size_t len)
{
    if (is_mapped(a))
        inet_ntop(AF_INET, &a->s6_addr[12], buf, (socklen_t)len);
    else
        inet_ntop(AF_INET6, a, buf, (socklen_t)len);
    return buf;
}

static const char *target_str(const struct ports_report *r, char *buf, size_t len)
{
    char a[INET6_ADDRSTRLEN];

    addr_str(&r->target, a, sizeof(a));
    snprintf(buf, len, is_mapped(&r->target) ? "%s:%u" : "[%s]:%u", a, r->target_port);
    return buf;
}

/* Seconds until the TIME_WAITs of s that expire free `more` ports; -1 if they never do. */
static int wait_for(const struct ports_src *s, long more)
{
    long got = 0;

    if (more <= 0)
        return 0;
    for (int t = 0; t <= PORTS_TW_SECONDS; t++)
        if ((got += s->tw_expiry[t]) >= more)
            return t ? t : 1;
    return -1;
}

static int tw_last(const struct ports_src *s)
{
    for (int t = PORTS_TW_SECONDS; t >= 0; t--)
        if (s->tw_expiry[t])
            return t ? t : 1;
    return 0;
}

/* The random-probe estimate of connect()'s walk: opening k connections while f of the range's
 * n ports are usable for this target takes about (n / k) ln((f + 1) / (f - k + 1)) probes each
 * (the i-th finds f - i usable ports among n). The kernel walks from a perturbed offset rather
 * than at random, but it meets the held ports all the same. */
static double probes(long n, long f, long k)
{
    if (k <= 0 || f < k)
        return 0;
    return (double)n / (double)k * log((double)(f + 1) / (double)(f - k + 1));
}

/* Appends the --source remedy: addresses enough for conns at `usable` ports each. */
static void source_remedy(const struct ports_report *r, const struct ports_need *need, long conns,
                          char *buf, size_t len)
{
    long usable = r->src[0].range - r->listeners, k;
    char a[INET_ADDRSTRLEN], b[INET_ADDRSTRLEN];
    uint32_t first, last;

    if (!r->target_v4) {
        snprintf(buf, len, "%s", "");
        return;
    }
    k = usable > 0 ? (conns + usable - 1) / usable : MAX_SOURCES + 1;
    if (need->have_source) {
        /* widen the user's range: lfbench spreads connections evenly, so the crowded
         * addresses keep their share; the first address stays, more follow it */
        k = k > r->nsources ? k : r->nsources + 1;
        memcpy(&first, &r->src[0].addr.s6_addr[12], 4);
        first = ntohl(first);
    } else if (is_loopback(&r->target)) {
        first = 0x7f000002; /* 127.0.0.2: 127.0.0.1 is the crowded one; lo answers all of 127/8 */
    } else {
        snprintf(buf, len, "add source addresses (--source A-B, %ld address%s of this host), ", k,
                 k == 1 ? "" : "es");
        return;
    }
    if (k > MAX_SOURCES) {
        snprintf(buf, len, "%s", "add source addresses (--source), ");
        return;
    }
    last = first + (uint32_t)k - 1;
    first = htonl(first);
    last = htonl(last);
    inet_ntop(AF_INET, &first, a, sizeof(a));
    inet_ntop(AF_INET, &last, b, sizeof(b));
    if (k == 1)
        snprintf(buf, len, "add a source address (--source %s), ", a);
    else
        snprintf(buf, len, "add source addresses (--source %s-%s), ", a, b);
}

/* What each verdict says of the run: the source address with the fewest usable ports for its
 * share of the connections, and the words that name it, the target and what holds its ports. */
struct fewest {
    const struct ports_src *w;
    long per;       /* connections each source address carries */
    int n;          /* source addresses */
    bool tw_covers; /* connect() takes over w's TIME_WAIT to the target (tcp_tw_reuse) */
    char ta[INET6_ADDRSTRLEN + 8], from[INET6_ADDRSTRLEN + 64], held[160];
};

static void find_fewest(const struct ports_report *r, const struct ports_need *need,
                        struct fewest *x)
{
    const struct ports_src *w = NULL;
    char sa[INET6_ADDRSTRLEN], n1[32];
    long worst = 0;
    int n = r->nsources;

    x->n = n;
    x->per = ((long)need->conns + n - 1) / n;
    for (int i = 0; i < n; i++)
        if (!w || r->src[i].free - x->per < worst) {
            w = &r->src[i];
            worst = w->free - x->per;
        }
    x->w = w;
    x->tw_covers = r->tw_reusable &&
                   (r->sys.tw_reuse == 1 || is_loopback(&w->addr) || is_loopback(&r->target));
    addr_str(&w->addr, sa, sizeof(sa));
    target_str(r, x->ta, sizeof(x->ta));
    if (n == 1)
        snprintf(x->from, sizeof(x->from), "from %s", sa);
    else
        snprintf(x->from, sizeof(x->from), "from each of %d source addresses (%s the fewest)", n,
                 sa);
    x->held[0] = '\0';
    if (w->blocked_tw)
        snprintf(x->held, sizeof(x->held), "%s held by TIME_WAIT to %s, which expire within %d s%s",
                 num(w->blocked_tw, n1, sizeof(n1)), x->ta, tw_last(w),
                 w->blocked > w->blocked_tw ? "; " : "");
    if (w->blocked > w->blocked_tw)
        snprintf(x->held + strlen(x->held), sizeof(x->held) - strlen(x->held), "%s by %s",
                 num(w->blocked - w->blocked_tw, n1, sizeof(n1)),
                 r->listeners ? "listeners and open connections" : "open connections to it");
    if (!x->held[0])
        snprintf(x->held, sizeof(x->held), "%s", "none held: the range is too small");
}

/* Fewer ports free than connections to put on them: long mode cannot open, short mode cannot
 * keep -c in flight. PORTS_OK when there are enough. */
static enum ports_verdict too_few(const struct ports_report *r, const struct ports_need *need,
                                  const struct fewest *x, char *line, size_t len)
{
    const struct ports_src *w = x->w;
    char src_rem[128], wait[48] = "", n2[32], n3[32], n4[32];
    int wait_s = 0;

    if (w->free >= x->per)
        return PORTS_OK;
    for (int i = 0; i < x->n && wait_s >= 0; i++) {
        int t = wait_for(&r->src[i], x->per - r->src[i].free);
        wait_s = t < 0 ? -1 : t > wait_s ? t : wait_s;
    }
    if (wait_s > 0)
        snprintf(wait, sizeof(wait), ", or wait %d s", wait_s);
    source_remedy(r, need, need->conns, src_rem, sizeof(src_rem));
    snprintf(line, len,
             "ports: -c %d needs %s ports %s to %s but only %s of %s are free (%s): %swiden "
             "net.ipv4.ip_local_port_range (now %d-%d)%s%s",
             need->conns, num(x->per, n2, sizeof(n2)), x->from, x->ta, num(w->free, n3, sizeof(n3)),
             num(w->range, n4, sizeof(n4)), x->held, src_rem, r->sys.lo, r->sys.hi,
             w->blocked_tw && !x->tw_covers ? ", set net.ipv4.tcp_tw_reuse=1" : "", wait);
    return need->short_mode ? PORTS_WARN : PORTS_SHORT;
}

/* Short mode where tcp_tw_reuse does not hand TIME_WAIT back for this target: lfbench closes
 * first, so each connection leaves its port in TIME_WAIT for 60 s, and the free ports sustain
 * only so many connections a second. PORTS_OK when -R stays within that. */
static enum ports_verdict time_wait_cap(const struct ports_report *r, const struct ports_need *need,
                                        const struct fewest *x, char *line, size_t len)
{
    const struct ports_src *w = x->w;
    double sustain = (double)w->free / PORTS_TW_SECONDS * x->n;
    char src_rem[128], n1[32];

    if (!need->short_mode || x->tw_covers || (need->rate > 0 && need->rate <= sustain))
        return PORTS_OK;
    source_remedy(r, need, (long)(need->rate > 0 ? need->rate : sustain * 2) * PORTS_TW_SECONDS,
                  src_rem, sizeof(src_rem));
    if (need->rate > 0)
        snprintf(line, len,
                 "ports: short mode at -R %.0f leaves each port in TIME_WAIT for %d s but "
                 "only %s ports %s to %s are free: connect() fails with EADDRNOTAVAIL after "
                 "about %.0f s; %sset net.ipv4.tcp_tw_reuse=1, or keep -R under %.0f",
                 need->rate, PORTS_TW_SECONDS, num(w->free, n1, sizeof(n1)), x->from, x->ta,
                 (double)w->free * x->n / need->rate, src_rem, sustain);
    else
        snprintf(line, len,
                 "ports: short mode leaves each port in TIME_WAIT for %d s and tcp_tw_reuse=%d%s "
                 "does not hand them back for %s: %s free ports %s sustain %.0f connections "
                 "a second, beyond that connect() fails with EADDRNOTAVAIL; %sset "
                 "net.ipv4.tcp_tw_reuse=1, or cap the rate with -R",
                 PORTS_TW_SECONDS, r->sys.tw_reuse,
                 r->sys.timestamps ? "" : " (without tcp_timestamps)", x->ta,
                 num(w->free, n1, sizeof(n1)), x->from, sustain, src_rem);
    return PORTS_WARN;
}

/* Enough ports, but so many held that connect() probes about four or more a connection before
 * it finds a free one. PORTS_OK when the walk is short. */
static enum ports_verdict crowded(const struct ports_report *r, const struct ports_need *need,
                                  const struct fewest *x, char *line, size_t len)
{
    const struct ports_src *w = x->w;
    char src_rem[128], wait[48] = "", n1[32], n2[32];
    int wait_s;

    if (probes(w->range, w->free, x->per) < 4.0 || w->blocked <= 0)
        return PORTS_OK;
    wait_s = tw_last(w);
    if (wait_s > 0)
        snprintf(wait, sizeof(wait), ", or wait %d s", wait_s);
    source_remedy(r, need, need->conns, src_rem, sizeof(src_rem));
    snprintf(line, len,
             "ports: connect() will search a crowded port range: %s of %s ports %s to %s "
             "are held (%s), about %.0f probes a connection: opening may be slow; %swiden "
             "net.ipv4.ip_local_port_range (now %d-%d)%s",
             num(w->blocked, n1, sizeof(n1)), num(w->range, n2, sizeof(n2)), x->from, x->ta,
             x->held, probes(w->range, w->free, x->per), src_rem, r->sys.lo, r->sys.hi, wait);
    return PORTS_WARN;
}

enum ports_verdict ports_advice(const struct ports_report *r, const struct ports_need *need,
                                char *line, size_t len)
{
    struct fewest x;
    enum ports_verdict v;

    line[0] = '\0';
    if (r->nsources < 1 || need->conns <= 0)
        return PORTS_OK;
    find_fewest(r, need, &x);
    if ((v = too_few(r, need, &x, line, len)) != PORTS_OK)
        return v;
    if ((v = time_wait_cap(r, need, &x, line, len)) != PORTS_OK)
        return v;
    return crowded(r, need, &x, line, len);
}
