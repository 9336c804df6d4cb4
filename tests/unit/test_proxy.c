/* Unit tests of the PROXY protocol parser: v1 and v2 headers as HAProxy sends them, every split
 * of each into a first part (which must ask for more, never fail or succeed early), the bytes
 * after a header left alone, and hostile headers refused with a reason. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "net.h"
#include "proxy.h"

/* Parses p[0..n) whole, and every proper prefix of it, which must answer 0 (need more). */
static int parse_all_splits(const char *p, size_t n, struct proxy_hdr *h, const char **why)
{
    for (size_t k = 0; k < n; k++) {
        struct proxy_hdr tmp;
        int r = proxy_parse(p, k, &tmp, why);

        if (r != 0)
            fail_msg("prefix of %zu of %zu bytes: got %d (%s), want 0", k, n, r, *why);
    }
    return proxy_parse(p, n, h, why);
}

static void addr_is(const struct sockaddr_storage *ss, const char *want)
{
    char got[64];

    net_addr_name(ss, got, sizeof(got));
    assert_string_equal(got, want);
}

static void test_v1(void **state)
{
    static const char tcp4[] = "PROXY TCP4 192.168.0.1 10.0.0.2 56324 443\r\nGET /";
    static const char tcp6[] =
        "PROXY TCP6 2001:db8::1 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 0\r\n";
    static const char longest[] = "PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff "
                                  "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n";
    static const char unk[] = "PROXY UNKNOWN\r\n";
    static const char unk2[] = "PROXY UNKNOWN ffff:f...f:ffff ffff:f...f:ffff 65535 65535\r\nx";
    struct proxy_hdr h;
    const char *why;

    (void)state;
    assert_int_equal(parse_all_splits(tcp4, strlen(tcp4) - 5, &h, &why), (int)strlen(tcp4) - 5);
    assert_int_equal(proxy_parse(tcp4, strlen(tcp4), &h, &why), (int)strlen(tcp4) - 5);
    assert_int_equal(h.version, 1);
    assert_int_equal(h.family, AF_INET);
    addr_is(&h.src, "192.168.0.1:56324");
    addr_is(&h.dst, "10.0.0.2:443");
    assert_int_equal(parse_all_splits(tcp6, strlen(tcp6), &h, &why), (int)strlen(tcp6));
    assert_int_equal(h.family, AF_INET6);
    addr_is(&h.src, "[2001:db8::1]:65535");
    addr_is(&h.dst, "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:0");
    assert_int_equal(strlen(longest), 104); /* the longest TCP6 line: 104 of the 107 allowed */
    assert_int_equal(proxy_parse(longest, strlen(longest), &h, &why), 104);
    assert_int_equal(parse_all_splits(unk, strlen(unk), &h, &why), (int)strlen(unk));
    assert_int_equal(h.family, AF_UNSPEC);
    assert_int_equal(proxy_parse(unk2, strlen(unk2), &h, &why), (int)strlen(unk2) - 1);
    assert_int_equal(h.family, AF_UNSPEC);
}

static void bad(const char *p, size_t n, const char *reason)
{
    struct proxy_hdr h;
    const char *why;
    int r = proxy_parse(p, n, &h, &why);

    if (r != -1)
        fail_msg("'%.*s': got %d, want -1 (%s)", (int)n, p, r, reason);
    if (!strstr(why, reason))
        fail_msg("'%.*s': reason '%s', want '%s'", (int)n, p, why, reason);
}

#define BAD(lit, reason) bad(lit, sizeof(lit) - 1, reason)

static void test_v1_hostile(void **state)
{
    char line[200];
    struct proxy_hdr h;
    const char *why;

    (void)state;
    /* Refused at the first byte that cannot start a header: no waiting on garbage. */
    BAD("GET / HTTP/1.1\r\n", "no PROXY header");
    BAD("X", "no PROXY header");
    BAD("PROXx", "no PROXY header");
    BAD("\r\n\r\nx", "no PROXY header");
    assert_int_equal(proxy_parse("PROX", 4, &h, &why), 0);
    BAD("PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n", "not ended by CRLF");
    BAD("PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n", "not TCP4, TCP6 or UNKNOWN");
    BAD("PROXY UNKNOWNX\r\n", "without its 6 fields");
    BAD("PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n", "without its 6 fields");
    BAD("PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n", "more than 6 fields");
    BAD("PROXY TCP4 1.2.3.4 5.6.7.8 1 2 \r\n", "trailing space");
    BAD("PROXY TCP4 1.2.3.4  5.6.7.8 1 2\r\n", "");
    BAD("PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n", "bad port");
    BAD("PROXY TCP4 1.2.3.4 5.6.7.8 -1 2\r\n", "bad port");
    BAD("PROXY TCP4 1.2.3.4 5.6.7.8 123456 2\r\n", "bad port");
    BAD("PROXY TCP4 1.2.3.256 5.6.7.8 1 2\r\n", "bad IPv4 address");
    BAD("PROXY TCP4 ::1 5.6.7.8 1 2\r\n", "bad IPv4 address");
    BAD("PROXY TCP6 1.2.3.4 ::1 1 2\r\n", "bad IPv6 address");
    BAD("PROXY TCP4 1.2.3.4\0 5.6.7.8 1 2\r\n", "control or non-ASCII");
    BAD("PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\r\n", "control or non-ASCII");
    BAD("PROXY TCP4 1.2.3.\xc4 5.6.7.8 1 2\r\n", "control or non-ASCII");
    BAD("PROXY \r\n", "without its 6 fields");
    /* No CRLF within 107 bytes: refused, not buffered for ever. */
    memset(line, 'a', sizeof(line));
    memcpy(line, "PROXY TCP4 ", 11);
    assert_int_equal(proxy_parse(line, 106, &h, &why), 0);
    assert_int_equal(proxy_parse(line, 107, &h, &why), -1);
    assert_non_null(strstr(why, "longer than 107"));
    assert_int_equal(proxy_parse(line, sizeof(line), &h, &why), -1);
}

/* A v2 header: command, family byte, addresses of alen bytes, then tlv bytes of TLVs. */
static size_t v2(unsigned char *out, int cmd, int fam, const void *addr, size_t alen, size_t tlv)
{
    static const unsigned char sig[12] = "\r\n\r\n\0\r\nQUIT\n";
    size_t len = alen + tlv;

    memcpy(out, sig, 12);
    out[12] = (unsigned char)(0x20 | cmd);
    out[13] = (unsigned char)fam;
    out[14] = (unsigned char)(len >> 8);
    out[15] = (unsigned char)len;
    memcpy(out + 16, addr, alen);
    memset(out + 16 + alen, 0x42, tlv);
    return 16 + len;
}

static void test_v2(void **state)
{
    unsigned char b[PROXY_MAX + 64], a4[12], a6[36];
    struct proxy_hdr h;
    const char *why;
    size_t n;

    (void)state;
    inet_pton(AF_INET, "203.0.113.7", a4);
    inet_pton(AF_INET, "127.0.0.1", a4 + 4);
    a4[8] = 0xd2, a4[9] = 0x04, a4[10] = 0x26, a4[11] = 0x94; /* 53764, 9876 */
    n = v2(b, 1, 0x11, a4, sizeof(a4), 0);
    memcpy(b + n, "payload", 7);
    assert_int_equal(parse_all_splits((char *)b, n, &h, &why), (int)n);
    assert_int_equal(proxy_parse((char *)b, n + 7, &h, &why), (int)n);
    assert_int_equal(h.version, 2);
    assert_int_equal(h.family, AF_INET);
    addr_is(&h.src, "203.0.113.7:53764");
    addr_is(&h.dst, "127.0.0.1:9876");

    inet_pton(AF_INET6, "2001:db8::7", a6);
    inet_pton(AF_INET6, "::1", a6 + 16);
    a6[32] = 0, a6[33] = 80, a6[34] = 0x01, a6[35] = 0xbb;
    n = v2(b, 1, 0x21, a6, sizeof(a6), 300); /* with 300 bytes of TLVs, skipped */
    assert_int_equal(parse_all_splits((char *)b, n, &h, &why), (int)n);
    assert_int_equal(h.family, AF_INET6);
    addr_is(&h.src, "[2001:db8::7]:80");
    addr_is(&h.dst, "[::1]:443");

    n = v2(b, 0, 0x00, a4, 0, 0); /* LOCAL: HAProxy's own health check */
    assert_int_equal(parse_all_splits((char *)b, n, &h, &why), 16);
    assert_int_equal(h.family, AF_UNSPEC);
    n = v2(b, 0, 0x11, a4, sizeof(a4), 0); /* LOCAL with addresses: they are ignored */
    assert_int_equal(proxy_parse((char *)b, n, &h, &why), (int)n);
    assert_int_equal(h.family, AF_UNSPEC);
    n = v2(b, 1, 0x12, a4, sizeof(a4), 0); /* UDP: no TCP client to take */
    assert_int_equal(proxy_parse((char *)b, n, &h, &why), (int)n);
    assert_int_equal(h.family, AF_UNSPEC);
    n = v2(b, 1, 0x31, a4, 0, 216); /* AF_UNIX */
    assert_int_equal(proxy_parse((char *)b, n, &h, &why), (int)n);
    assert_int_equal(h.family, AF_UNSPEC);
    n = v2(b, 1, 0x11, a4, sizeof(a4), PROXY_MAX - 16 - 12); /* the largest accepted */
    assert_int_equal(proxy_parse((char *)b, n, &h, &why), PROXY_MAX);

    /* Hostile: refused as soon as the bad byte is in. */
    n = v2(b, 1, 0x11, a4, sizeof(a4), PROXY_MAX - 16 - 12 + 1);
    assert_int_equal(proxy_parse((char *)b, 16, &h, &why), -1);
    assert_non_null(strstr(why, "over 4096"));
    n = v2(b, 1, 0x11, a4, 8, 0); /* IPv4 without room for its ports */
    assert_int_equal(proxy_parse((char *)b, n, &h, &why), -1);
    assert_non_null(strstr(why, "shorter than its addresses"));
    n = v2(b, 1, 0x21, a6, 20, 0);
    assert_int_equal(proxy_parse((char *)b, n, &h, &why), -1);
    v2(b, 1, 0x11, a4, sizeof(a4), 0);
    b[12] = 0x11; /* version 1 in a v2 signature */
    assert_int_equal(proxy_parse((char *)b, 13, &h, &why), -1);
    assert_non_null(strstr(why, "another version"));
    b[12] = 0x22; /* command 2 */
    assert_int_equal(proxy_parse((char *)b, 13, &h, &why), -1);
    assert_non_null(strstr(why, "unknown command"));
    b[12] = 0x21;
    b[13] = 0x41; /* family 4 */
    assert_int_equal(proxy_parse((char *)b, 14, &h, &why), -1);
    b[13] = 0x13; /* transport 3 */
    assert_int_equal(proxy_parse((char *)b, 14, &h, &why), -1);
    b[13] = 0x11;
    b[5] = 'X'; /* a broken signature */
    assert_int_equal(proxy_parse((char *)b, 6, &h, &why), -1);
    assert_non_null(strstr(why, "no PROXY header"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v1),
        cmocka_unit_test(test_v1_hostile),
        cmocka_unit_test(test_v2),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
