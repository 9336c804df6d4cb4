/* fuzz_proxy: the PROXY protocol header parser (proxy_parse), which reads the first bytes of
 * every connection under --proxy-protocol.
 *
 * The first byte picks the mode. Raw: the rest is the connection's first bytes. Shaped: the rest
 * drives a header as HAProxy writes it (v1 TCP4/TCP6/UNKNOWN, v2 PROXY/LOCAL over IPv4/IPv6 with
 * TLVs), followed by payload, maybe with one byte changed. Invariants: the result is -1, 0 or a
 * length inside the input and at most PROXY_MAX; -1 comes with a one-line reason, never with
 * fewer bytes turning it into a success (a refusal is final: more input never makes it valid),
 * and a success's every prefix answers 0 (no early success, no early refusal); the bytes after a
 * header change nothing; a shaped header unchanged parses to exactly the addresses written; a v1
 * success written back in canonical form parses to the same addresses. */
#include "fuzz.h"

#include "proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_proxy: %s\n", what);
        abort();
    }
}

static bool same_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    if (a->ss_family != b->ss_family)
        return false;
    if (a->ss_family == AF_INET) {
        const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
        return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
    }
    const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
    return x->sin6_port == y->sin6_port && !memcmp(&x->sin6_addr, &y->sin6_addr, 16);
}

static bool same_hdr(const struct proxy_hdr *a, const struct proxy_hdr *b)
{
    return a->family == b->family && a->version == b->version &&
           (a->family == AF_UNSPEC || (same_addr(&a->src, &b->src) && same_addr(&a->dst, &b->dst)));
}

/* Every documented property of one parse of p[0..n). Returns its result. */
static int parse_checked(const char *p, size_t n, struct proxy_hdr *h)
{
    struct proxy_hdr h2;
    const char *why, *why2;
    int r = proxy_parse(p, n, h, &why);

    check(r >= -1 && r <= (int)n && r <= PROXY_MAX, "result out of range");
    if (r < 0) {
        check(why && *why, "a refusal without a reason");
        for (const char *q = why; *q; q++)
            check((unsigned char)*q >= 0x20 && *q != 0x7f, "a control byte in the reason");
        for (size_t k = n + 1; k <= n + 64 && k <= 2 * PROXY_MAX; k += 21) {
            char *more = malloc(k);

            memcpy(more, p, n);
            memset(more + n, '\n', k - n);
            check(proxy_parse(more, k, &h2, &why2) == -1, "a refusal undone by more bytes");
            free(more);
        }
        return r;
    }
    if (r == 0) {
        check(n < PROXY_MAX, "need more past PROXY_MAX");
        return r;
    }
    check(h->version == 1 || h->version == 2, "a version that is neither 1 nor 2");
    check(h->family == AF_UNSPEC || h->family == AF_INET || h->family == AF_INET6, "family");
    for (size_t k = 0; k<(size_t)r; k += (size_t)r> 200 ? (size_t)r / 97 + 1 : 1)
        check(proxy_parse(p, k, &h2, &why2) == 0, "a prefix of a header that is not 'more'");
    check(proxy_parse(p, (size_t)r - 1, &h2, &why2) == 0, "the header less a byte is not 'more'");
    check(proxy_parse(p, (size_t)r, &h2, &why2) == r && same_hdr(h, &h2),
          "the bytes after the header changed it");
    if (h->version == 1 && h->family != AF_UNSPEC) {
        char a[INET6_ADDRSTRLEN], b[INET6_ADDRSTRLEN], line[160];
        int len;
        bool v4 = h->family == AF_INET;
        const void *sa = v4 ? (const void *)&((struct sockaddr_in *)&h->src)->sin_addr
                            : (const void *)&((struct sockaddr_in6 *)&h->src)->sin6_addr;
        const void *da = v4 ? (const void *)&((struct sockaddr_in *)&h->dst)->sin_addr
                            : (const void *)&((struct sockaddr_in6 *)&h->dst)->sin6_addr;
        unsigned sp = ntohs(v4 ? ((struct sockaddr_in *)&h->src)->sin_port
                               : ((struct sockaddr_in6 *)&h->src)->sin6_port);
        unsigned dp = ntohs(v4 ? ((struct sockaddr_in *)&h->dst)->sin_port
                               : ((struct sockaddr_in6 *)&h->dst)->sin6_port);

        inet_ntop(h->family, sa, a, sizeof(a));
        inet_ntop(h->family, da, b, sizeof(b));
        len = snprintf(line, sizeof(line), "PROXY %s %s %s %u %u\r\n", v4 ? "TCP4" : "TCP6", a, b,
                       sp, dp);
        check(proxy_parse(line, (size_t)len, &h2, &why2) == len && same_hdr(h, &h2),
              "a v1 header written back does not parse to the same addresses");
    }
    return r;
}

/* A header as HAProxy writes it, then payload. Returns its length; *want what it says. */
static size_t shaped(struct fz *f, char *out, struct proxy_hdr *want)
{
    unsigned kind = fz_u8(f) % 5, tlv;
    bool v4 = fz_u8(f) & 1;
    struct sockaddr_in *s4 = (void *)&want->src, *d4 = (void *)&want->dst;
    struct sockaddr_in6 *s6 = (void *)&want->src, *d6 = (void *)&want->dst;
    char a[INET6_ADDRSTRLEN], b[INET6_ADDRSTRLEN];
    unsigned char *u = (unsigned char *)out;
    size_t n;

    memset(want, 0, sizeof(*want));
    want->family = v4 ? AF_INET : AF_INET6;
    if (v4) {
        s4->sin_family = d4->sin_family = AF_INET;
        s4->sin_addr.s_addr = fz_u32(f);
        d4->sin_addr.s_addr = fz_u32(f);
        s4->sin_port = (uint16_t)fz_u32(f);
        d4->sin_port = (uint16_t)fz_u32(f);
        inet_ntop(AF_INET, &s4->sin_addr, a, sizeof(a));
        inet_ntop(AF_INET, &d4->sin_addr, b, sizeof(b));
    } else {
        s6->sin6_family = d6->sin6_family = AF_INET6;
        for (int i = 0; i < 16; i++) {
            s6->sin6_addr.s6_addr[i] = fz_u8(f) & 0x81; /* zero runs, to compress */
            d6->sin6_addr.s6_addr[i] = fz_u8(f);
        }
        s6->sin6_port = (uint16_t)fz_u32(f);
        d6->sin6_port = (uint16_t)fz_u32(f);
        inet_ntop(AF_INET6, &s6->sin6_addr, a, sizeof(a));
        inet_ntop(AF_INET6, &d6->sin6_addr, b, sizeof(b));
    }
    switch (kind) {
    case 0: /* v1 */
        want->version = 1;
        return (size_t)sprintf(out, "PROXY %s %s %s %u %u\r\n", v4 ? "TCP4" : "TCP6", a, b,
                               ntohs(v4 ? s4->sin_port : s6->sin6_port),
                               ntohs(v4 ? d4->sin_port : d6->sin6_port));
    case 1: /* v1 UNKNOWN */
        want->version = 1;
        want->family = AF_UNSPEC;
        return (size_t)sprintf(out, "PROXY UNKNOWN%s\r\n", fz_u8(f) & 1 ? "" : " 1.2.3.4 x y z");
    default: /* v2: PROXY, with TLVs, or LOCAL */
        want->version = 2;
        memcpy(u, "\r\n\r\n\0\r\nQUIT\n", 12);
        u[12] = kind == 4 ? 0x20 : 0x21;
        u[13] = v4 ? 0x11 : 0x21;
        n = v4 ? 12 : 36;
        if (v4) {
            memcpy(u + 16, &s4->sin_addr, 4);
            memcpy(u + 20, &d4->sin_addr, 4);
            memcpy(u + 24, &s4->sin_port, 2);
            memcpy(u + 26, &d4->sin_port, 2);
        } else {
            memcpy(u + 16, &s6->sin6_addr, 16);
            memcpy(u + 32, &d6->sin6_addr, 16);
            memcpy(u + 48, &s6->sin6_port, 2);
            memcpy(u + 50, &d6->sin6_port, 2);
        }
        tlv = kind == 3 ? fz_u32(f) % (PROXY_MAX - 16 - n + 1) : 0;
        for (unsigned i = 0; i < tlv; i++)
            u[16 + n + i] = fz_u8(f);
        n += tlv;
        u[14] = (unsigned char)(n >> 8);
        u[15] = (unsigned char)n;
        if (kind == 4)
            want->family = AF_UNSPEC;
        return 16 + n;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fz f = {data, size};
    struct proxy_hdr h, want;
    static char buf[2 * PROXY_MAX + 64];
    size_t n, extra;
    int r;

    if (size > 2 * PROXY_MAX)
        return 0;
    if (!(fz_u8(&f) & 1)) {
        parse_checked((const char *)f.p, f.n, &h);
        return 0;
    }
    n = shaped(&f, buf, &want);
    extra = fz_u8(&f) % 64;
    for (size_t i = 0; i < extra; i++)
        buf[n + i] = (char)fz_u8(&f);
    if (fz_u8(&f) == 0xff) { /* one byte changed: whatever it gives, the invariants hold */
        size_t at = fz_u32(&f) % (n + extra);

        buf[at] = (char)(buf[at] ^ (fz_u8(&f) | 1));
        parse_checked(buf, n + extra, &h);
        return 0;
    }
    r = parse_checked(buf, n + extra, &h);
    check(r == (int)n, "a header as HAProxy writes it is not taken whole");
    check(same_hdr(&h, &want), "a header as HAProxy writes it gives other addresses");
    return 0;
}
