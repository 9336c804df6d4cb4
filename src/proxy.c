/* proxy: the PROXY protocol header, versions 1 (text) and 2 (binary), parsed strictly: a
 * receiver must never guess (the spec, section 2), so anything but a well-formed header is
 * refused, and as early as the first byte that cannot belong to one. */
#include "proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#define V1_MAX 107 /* "PROXY TCP6 " + two full IPv6 addresses + two ports + CRLF */

static const char v1_sig[] = "PROXY ";
static const char v2_sig[12] = "\r\n\r\n\0\r\nQUIT\n";

/* A port: 1 to 5 digits, at most 65535 (the spec allows no sign and no leading space). */
static int port_of(const char *s, size_t n)
{
    long v = 0;

    if (n == 0 || n > 5)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v <= 65535 ? (int)v : -1;
}

static int set_addr(struct sockaddr_storage *ss, int family, const char *s, size_t n, int port)
{
    char text[INET6_ADDRSTRLEN];

    memset(ss, 0, sizeof(*ss));
    if (n == 0 || n >= sizeof(text))
        return -1;
    memcpy(text, s, n);
    text[n] = '\0';
    if (family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)ss;

        in->sin_family = AF_INET;
        in->sin_port = htons((uint16_t)port);
        return inet_pton(AF_INET, text, &in->sin_addr) == 1 ? 0 : -1;
    }
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons((uint16_t)port);
    return inet_pton(AF_INET6, text, &in6->sin6_addr) == 1 ? 0 : -1;
}

/* "PROXY TCP4 SRC DST SPORT DPORT\r\n", "PROXY TCP6 ...", "PROXY UNKNOWN...\r\n". */
static int parse_v1(const char *p, size_t n, struct proxy_hdr *h, const char **why)
{
    const char *end = memchr(p, '\n', n < V1_MAX ? n : V1_MAX), *tok[5];
    size_t len[5], ntok = 0;
    int sport, dport;

    size_t upto = end ? (size_t)(end - p) : n;

    for (size_t i = sizeof(v1_sig) - 1; i < upto; i++)
        if (((unsigned char)p[i] < 0x20 || (unsigned char)p[i] > 0x7e) &&
            !(p[i] == '\r' && i + 1 == upto)) {
            *why = "a control or non-ASCII byte in a v1 header";
            return -1;
        }
    if (!end) {
        if (n >= V1_MAX) {
            *why = "a v1 header longer than 107 bytes";
            return -1;
        }
        return 0;
    }
    if (end[-1] != '\r') {
        *why = "a v1 header not ended by CRLF";
        return -1;
    }
    h->version = 1;
    h->family = AF_UNSPEC;
    if (end - p >= 14 && !memcmp(p + 6, "UNKNOWN", 7) && (p[13] == '\r' || p[13] == ' '))
        return (int)(end - p + 1); /* the rest of the line is to be ignored */
    for (const char *q = p + 6; q < end - 1;) {
        const char *sp = memchr(q, ' ', (size_t)(end - 1 - q));
        const char *e = sp ? sp : end - 1;

        if (ntok == 5) {
            *why = "a v1 header with more than 6 fields";
            return -1;
        }
        tok[ntok] = q;
        len[ntok++] = (size_t)(e - q);
        q = sp ? sp + 1 : end - 1;
        if (sp && q == end - 1) {
            *why = "a v1 header with a trailing space";
            return -1;
        }
    }
    if (ntok != 5) {
        *why = "a v1 header without its 6 fields (PROXY TCP4|TCP6 SRC DST SPORT DPORT)";
        return -1;
    }
    if (len[0] == 4 && !memcmp(tok[0], "TCP4", 4))
        h->family = AF_INET;
    else if (len[0] == 4 && !memcmp(tok[0], "TCP6", 4))
        h->family = AF_INET6;
    else {
        *why = "a v1 header whose protocol is not TCP4, TCP6 or UNKNOWN";
        return -1;
    }
    sport = port_of(tok[3], len[3]);
    dport = port_of(tok[4], len[4]);
    if (sport < 0 || dport < 0) {
        *why = "a v1 header with a bad port (0-65535)";
        return -1;
    }
    if (set_addr(&h->src, h->family, tok[1], len[1], sport) < 0 ||
        set_addr(&h->dst, h->family, tok[2], len[2], dport) < 0) {
        *why = h->family == AF_INET ? "a v1 header with a bad IPv4 address"
                                    : "a v1 header with a bad IPv6 address";
        return -1;
    }
    return (int)(end - p + 1);
}

/* 12-byte signature, version 2 and command, family and transport, length, addresses, TLVs. */
static int parse_v2(const unsigned char *p, size_t n, struct proxy_hdr *h, const char **why)
{
    size_t total;

    if (n >= 13 && ((p[12] >> 4) != 2 || (p[12] & 0xf) > 1)) {
        *why =
            (p[12] >> 4) != 2 ? "a v2 header of another version" : "a v2 header's unknown command";
        return -1;
    }
    if (n >= 14 && ((p[13] >> 4) > 3 || (p[13] & 0xf) > 2)) {
        *why = "a v2 header's unknown address family or transport";
        return -1;
    }
    if (n < 16)
        return 0;
    total = 16 + ((size_t)p[14] << 8 | p[15]);
    if (total > PROXY_MAX) {
        *why = "a v2 header over 4096 bytes";
        return -1;
    }
    if (n < total)
        return 0;
    h->version = 2;
    h->family = AF_UNSPEC;
    if ((p[12] & 0xf) == 0 || (p[13] & 0xf) != 1)
        return (int)total; /* LOCAL (the proxy's own health check), or not TCP: the socket's */
    switch (p[13] >> 4) {
    case 1: {
        struct sockaddr_in *s = (struct sockaddr_in *)&h->src, *d = (struct sockaddr_in *)&h->dst;

        if (total < 16 + 12) {
            *why = "a v2 IPv4 header shorter than its addresses";
            return -1;
        }
        memset(&h->src, 0, sizeof(h->src));
        memset(&h->dst, 0, sizeof(h->dst));
        s->sin_family = d->sin_family = AF_INET;
        memcpy(&s->sin_addr, p + 16, 4);
        memcpy(&d->sin_addr, p + 20, 4);
        memcpy(&s->sin_port, p + 24, 2);
        memcpy(&d->sin_port, p + 26, 2);
        h->family = AF_INET;
        break;
    }
    case 2: {
        struct sockaddr_in6 *s = (struct sockaddr_in6 *)&h->src,
                            *d = (struct sockaddr_in6 *)&h->dst;

        if (total < 16 + 36) {
            *why = "a v2 IPv6 header shorter than its addresses";
            return -1;
        }
        memset(&h->src, 0, sizeof(h->src));
        memset(&h->dst, 0, sizeof(h->dst));
        s->sin6_family = d->sin6_family = AF_INET6;
        memcpy(&s->sin6_addr, p + 16, 16);
        memcpy(&d->sin6_addr, p + 32, 16);
        memcpy(&s->sin6_port, p + 48, 2);
        memcpy(&d->sin6_port, p + 50, 2);
        h->family = AF_INET6;
        break;
    }
    default: /* UNSPEC or AF_UNIX: no IP address to take */
        break;
    }
    return (int)total;
}

int proxy_parse(const char *p, size_t n, struct proxy_hdr *h, const char **why)
{
    size_t k;

    *why = "";
    if (n == 0)
        return 0;
    k = n < sizeof(v1_sig) - 1 ? n : sizeof(v1_sig) - 1;
    if (!memcmp(p, v1_sig, k))
        return n < sizeof(v1_sig) - 1 ? 0 : parse_v1(p, n, h, why);
    k = n < sizeof(v2_sig) ? n : sizeof(v2_sig);
    if (!memcmp(p, v2_sig, k))
        return n < sizeof(v2_sig) ? 0 : parse_v2((const unsigned char *)p, n, h, why);
    *why = "no PROXY header (the connection must start with one: --proxy-protocol)";
    return -1;
}
