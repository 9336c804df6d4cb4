/* Unit tests of ports: the sysctl and /proc/net/tcp{,6} parsers on canned text (the columns as a
 * 6.x kernel prints them, on a little-endian machine), the per-source counts under each
 * tcp_tw_reuse rule, and the advice line; one live read of this machine's /proc. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ports.h"

#define HEADER                                                                                     \
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout "  \
    "inode\n"
#define HEADER6                                                                                    \
    "  sl  local_address                         remote_address                        st "        \
    "tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
/* the tail of a line after the timer: retrnsmt uid timeout inode and the rest */
#define ESTAB_TAIL " 00000000  1000        0 3519463 1 0000000006fa6e2c 20 4 30 10 -1\n"
#define TW_TAIL " 00000000     0        0 0 3 000000006cd01afe\n"

static bool little_endian(void)
{
    return __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;
}

static struct sockaddr_storage v4(const char *a, int port)
{
    struct sockaddr_storage ss;
    struct sockaddr_in *in = (struct sockaddr_in *)&ss;

    memset(&ss, 0, sizeof(ss));
    in->sin_family = AF_INET;
    in->sin_port = htons((uint16_t)port);
    assert_int_equal(inet_pton(AF_INET, a, &in->sin_addr), 1);
    return ss;
}

static struct in6_addr src4(const char *a)
{
    struct in6_addr m;
    char buf[64];

    snprintf(buf, sizeof(buf), "::ffff:%s", a);
    assert_int_equal(inet_pton(AF_INET6, buf, &m), 1);
    return m;
}

/* A small range, 40000-40009, so that every port can be named. */
static void small_sys(struct ports_sys *sys, int tw_reuse)
{
    ports_sys_default(sys);
    sys->lo = 40000;
    sys->hi = 40009;
    sys->tw_reuse = tw_reuse;
}

static void test_parse_range(void **state)
{
    int lo = 0, hi = 0;

    (void)state;
    assert_int_equal(ports_parse_range("32768\t60999\n", &lo, &hi), 0);
    assert_int_equal(lo, 32768);
    assert_int_equal(hi, 60999);
    assert_int_equal(ports_parse_range("1 65535", &lo, &hi), 0);
    assert_int_equal(hi - lo + 1, 65535);
    assert_int_equal(ports_parse_range("40000 40000", &lo, &hi), 0); /* one port */
    assert_int_equal(ports_parse_range("60999 32768", &lo, &hi), -EINVAL);
    assert_int_equal(ports_parse_range("0 100", &lo, &hi), -EINVAL);
    assert_int_equal(ports_parse_range("1024 65536", &lo, &hi), -EINVAL);
    assert_int_equal(ports_parse_range("32768", &lo, &hi), -EINVAL);
    assert_int_equal(ports_parse_range("", &lo, &hi), -EINVAL);
    assert_int_equal(lo, 40000); /* untouched by the failures */
}

static bool reserved(const uint8_t *map, int p)
{
    return map[p >> 3] & (1u << (p & 7));
}

static void test_parse_reserved(void **state)
{
    uint8_t map[65536 / 8];

    (void)state;
    memset(map, 0, sizeof(map));
    assert_int_equal(ports_parse_reserved("1000-1005,2000\n", map), 7);
    for (int p = 1000; p <= 1005; p++)
        assert_true(reserved(map, p));
    assert_true(reserved(map, 2000));
    assert_false(reserved(map, 999));
    assert_false(reserved(map, 1006));
    assert_false(reserved(map, 1999));
    assert_false(reserved(map, 2001));
    memset(map, 0, sizeof(map));
    assert_int_equal(ports_parse_reserved("\n", map), 0);
    assert_int_equal(ports_parse_reserved("", map), 0);
    assert_int_equal(ports_parse_reserved("65535\n", map), 1);
    assert_true(reserved(map, 65535));
    assert_int_equal(ports_parse_reserved("0-65535", map), 65536);
    assert_int_equal(ports_parse_reserved("5-3", map), -EINVAL);
    assert_int_equal(ports_parse_reserved("70000", map), -EINVAL);
    assert_int_equal(ports_parse_reserved("1,x", map), -EINVAL);
    assert_int_equal(ports_parse_reserved("1-", map), -EINVAL);
}

/* Target 127.0.0.1:9876 (0x2694) from 127.0.0.1; the range 40000 (0x9C40) - 40009. */
static const char v4_text[] = HEADER
    /* a listener outside the range, on the target port */
    "   0: 0100007F:2694 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 "
    "3519463 1 0000000006fa6e2c 100 0 0 10 0\n"
    /* a wildcard listener in the range, 40001: blocks the port for every source */
    "   1: 00000000:9C41 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 "
    "1065 1 000000000e53f1c2 100 0 0 10 0\n"
    /* TIME_WAIT 127.0.0.1:40000 -> the target, 30 s left (3000 ticks) */
    "   2: 0100007F:9C40 0100007F:2694 06 00000000:00000000 03:00000BB8" TW_TAIL
    /* TIME_WAIT 127.0.0.1:40002 -> 127.0.0.2:9876, another destination */
    "   3: 0100007F:9C42 0200007F:2694 06 00000000:00000000 03:00000BB8" TW_TAIL
    /* established 127.0.0.1:40003 -> the target, and the same port to 127.0.0.1:80 */
    "   4: 0100007F:9C43 0100007F:2694 01 00000000:00000000 00:00000000" ESTAB_TAIL
    "   5: 0100007F:9C43 0100007F:0050 01 00000000:00000000 00:00000000" ESTAB_TAIL
    /* another source's TIME_WAIT to the target */
    "   6: 0200007F:9C44 0100007F:2694 06 00000000:00000000 03:00000BB8" TW_TAIL
    /* the server's side of connection 4: local port 9876, outside the range */
    "   7: 0100007F:2694 0100007F:9C43 01 00000000:00000000 00:00000000" ESTAB_TAIL
    /* a TIME_WAIT outside the range */
    "   8: 0100007F:8000 0100007F:2694 06 00000000:00000000 03:00000BB8" TW_TAIL;

static void count_v4(struct ports_report *r, int tw_reuse)
{
    struct ports_sys sys;
    struct sockaddr_storage t = v4("127.0.0.1", 9876);
    struct in6_addr s = src4("127.0.0.1");

    small_sys(&sys, tw_reuse);
    assert_int_equal(ports_init(r, &sys, &t, &s, 1), 0);
    assert_int_equal(ports_parse_tcp(r, v4_text, strlen(v4_text)), 9);
    ports_finish(r);
}

static void test_v4_no_reuse(void **state)
{
    struct ports_report r;
    const struct ports_src *s;

    (void)state;
    if (!little_endian())
        skip();
    count_v4(&r, 0);
    s = &r.src[0];
    assert_int_equal(r.sockets, 9);
    assert_int_equal(r.listeners, 1);
    assert_int_equal(s->range, 10);
    assert_int_equal(s->blocked, 3); /* 40000 TIME_WAIT, 40001 listener, 40003 established */
    assert_int_equal(s->blocked_tw, 1);
    assert_int_equal(s->free, 7);
    assert_int_equal(s->tw, 2);    /* 40000 and 40002 */
    assert_int_equal(s->inuse, 2); /* 40003 twice */
    assert_int_equal(s->tw_expiry[30], 1);
    ports_free(&r);
}

static void test_v4_reuse_loopback(void **state)
{
    struct ports_report r;

    (void)state;
    if (!little_endian())
        skip();
    count_v4(&r, 2); /* the default: loopback TIME_WAIT 30 s old is taken over */
    assert_int_equal(r.src[0].blocked, 2);
    assert_int_equal(r.src[0].blocked_tw, 0);
    assert_int_equal(r.src[0].tw, 2);
    ports_free(&r);
    count_v4(&r, 1);
    assert_int_equal(r.src[0].blocked, 2);
    ports_free(&r);
}

static void test_v4_reuse_needs_timestamps_and_age(void **state)
{
    static const char young[] =
        "   0: 0100007F:9C40 0100007F:2694 06 00000000:00000000 03:00001720" TW_TAIL;
    struct ports_sys sys;
    struct ports_report r;
    struct sockaddr_storage t = v4("127.0.0.1", 9876);
    struct in6_addr s = src4("127.0.0.1");

    (void)state;
    if (!little_endian())
        skip();
    /* 59.20 s left: 800 ms old, under tcp_tw_reuse_delay's 1000 */
    small_sys(&sys, 1);
    assert_int_equal(ports_init(&r, &sys, &t, &s, 1), 0);
    ports_parse_tcp(&r, young, strlen(young));
    ports_finish(&r);
    assert_int_equal(r.src[0].blocked_tw, 1);
    assert_int_equal(r.src[0].tw_expiry[60], 1); /* 59.2 s rounds up */
    ports_free(&r);
    sys.tw_reuse_delay_ms = 500;
    assert_int_equal(ports_init(&r, &sys, &t, &s, 1), 0);
    ports_parse_tcp(&r, young, strlen(young));
    ports_finish(&r);
    assert_int_equal(r.src[0].blocked_tw, 0);
    ports_free(&r);
    /* without timestamps nothing is taken over */
    sys.timestamps = false;
    assert_int_equal(ports_init(&r, &sys, &t, &s, 1), 0);
    ports_parse_tcp(&r, v4_text, strlen(v4_text));
    ports_finish(&r);
    assert_int_equal(r.src[0].blocked_tw, 1);
    ports_free(&r);
}

static void test_reuse_2_is_loopback_only(void **state)
{
    /* 10.0.0.1:40000 -> 10.1.0.1:80 TIME_WAIT, 30 s left */
    static const char text[] =
        "   0: 0100000A:9C40 0100010A:0050 06 00000000:00000000 03:00000BB8" TW_TAIL;
    struct ports_sys sys;
    struct ports_report r;
    struct sockaddr_storage t = v4("10.1.0.1", 80);
    struct in6_addr s = src4("10.0.0.1");

    (void)state;
    if (!little_endian())
        skip();
    small_sys(&sys, 2);
    assert_int_equal(ports_init(&r, &sys, &t, &s, 1), 0);
    ports_parse_tcp(&r, text, strlen(text));
    ports_finish(&r);
    assert_int_equal(r.src[0].blocked_tw, 1);
    ports_free(&r);
    sys.tw_reuse = 1;
    assert_int_equal(ports_init(&r, &sys, &t, &s, 1), 0);
    ports_parse_tcp(&r, text, strlen(text));
    ports_finish(&r);
    assert_int_equal(r.src[0].blocked_tw, 0);
    ports_free(&r);
}

/* tcp6: ::1, an IPv4-mapped connection (the same 4-tuples as IPv4's), a v6 wildcard listener
 * (one bind bucket per port for both families), a FIN_WAIT2 TIME_WAIT (05: never reused). */
static const char v6_text[] = HEADER6
    "   0: 00000000000000000000000000000000:9C46 00000000000000000000000000000000:0000 0A "
    "00000000:00000000 00:00000000 00000000     0        0 2212 1 0000000000000000 100 0 0 10 0\n"
    "   1: 0000000000000000FFFF00000100007F:9C45 0000000000000000FFFF00000100007F:2694 01 "
    "00000000:00000000 00:00000000" ESTAB_TAIL
    "   2: 00000000000000000000000001000000:9C47 00000000000000000000000001000000:2694 06 "
    "00000000:00000000 03:00000BB8" TW_TAIL
    "   3: 0000000000000000FFFF00000100007F:9C48 0000000000000000FFFF00000100007F:2694 05 "
    "00000000:00000000 03:00000BB8" TW_TAIL;

static void test_v6_and_mapped(void **state)
{
    struct ports_sys sys;
    struct ports_report r;
    struct sockaddr_storage t = v4("127.0.0.1", 9876), t6;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&t6;
    struct in6_addr s = src4("127.0.0.1"), lo6 = IN6ADDR_LOOPBACK_INIT;

    (void)state;
    if (!little_endian())
        skip();
    small_sys(&sys, 2);
    assert_int_equal(ports_init(&r, &sys, &t, &s, 1), 0);
    assert_int_equal(ports_parse_tcp(&r, v6_text, strlen(v6_text)), 4);
    ports_finish(&r);
    assert_int_equal(r.listeners, 1);         /* 40006 */
    assert_int_equal(r.src[0].blocked, 3);    /* 40005 (mapped), 40006, 40008 (FIN_WAIT2) */
    assert_int_equal(r.src[0].blocked_tw, 0); /* ::1's TIME_WAIT is not this source's */
    assert_int_equal(r.src[0].inuse, 2);      /* 40005 and the FIN_WAIT2 */
    ports_free(&r);

    memset(&t6, 0, sizeof(t6));
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(9876);
    in6->sin6_addr = lo6;
    sys.tw_reuse = 0;
    assert_int_equal(ports_init(&r, &sys, &t6, &lo6, 1), 0);
    ports_parse_tcp(&r, v6_text, strlen(v6_text));
    ports_finish(&r);
    assert_false(r.target_v4);
    assert_int_equal(r.src[0].blocked, 2); /* the listener and ::1's TIME_WAIT */
    assert_int_equal(r.src[0].blocked_tw, 1);
    assert_int_equal(r.src[0].tw, 1);
    ports_free(&r);
}

static void test_reserved_and_edges(void **state)
{
    struct ports_sys sys;
    struct ports_report r;
    struct sockaddr_storage t = v4("127.0.0.1", 9876);
    struct in6_addr s = src4("127.0.0.1");

    (void)state;
    if (!little_endian())
        skip();
    small_sys(&sys, 0);
    /* 40000 (a blocking TIME_WAIT) and 40001 (the listener) reserved: neither is counted */
    assert_int_equal(ports_parse_reserved("1000-1005,40000-40001,50000", sys.reserved), 9);
    assert_int_equal(ports_init(&r, &sys, &t, &s, 1), 0);
    ports_parse_tcp(&r, v4_text, strlen(v4_text));
    ports_finish(&r);
    assert_int_equal(r.src[0].range, 8);
    assert_int_equal(r.listeners, 0);
    assert_int_equal(r.src[0].blocked, 1); /* 40003 */
    assert_int_equal(r.src[0].tw, 1);      /* 40002 only */
    ports_free(&r);
    /* a range of one port, the one held */
    ports_sys_default(&sys);
    sys.tw_reuse = 0;
    sys.lo = sys.hi = 40003;
    assert_int_equal(ports_init(&r, &sys, &t, &s, 1), 0);
    ports_parse_tcp(&r, v4_text, strlen(v4_text));
    ports_finish(&r);
    assert_int_equal(r.src[0].range, 1);
    assert_int_equal(r.src[0].free, 0);
    ports_free(&r);
    /* the whole port space */
    sys.lo = 1;
    sys.hi = 65535;
    assert_int_equal(ports_init(&r, &sys, &t, &s, 1), 0);
    ports_parse_tcp(&r, v4_text, strlen(v4_text));
    ports_finish(&r);
    assert_int_equal(r.src[0].range, 65535);
    assert_int_equal(r.listeners, 2);      /* 9876 counts now */
    assert_int_equal(r.src[0].blocked, 5); /* + 32768's TIME_WAIT, 9876's listener */
    ports_free(&r);
}

static void test_bad_input(void **state)
{
    static const char junk[] =
        "   0: 0100007F:9C40 0100007F:2694 06 00000000:00000000 03:0000\n" /* cut in the timer */
        "   1: 0100007F:9C40\n"
        "   2: 100007F:9C40 0100007F:2694 06 00000000:00000000 03:00000BB8\n" /* 7 digits */
        "   3: 0100007F9C40 0100007F:2694 06 00000000:00000000 03:00000BB8\n"
        "\x01\xff garbage\n\n"
        "   4: 0100007F:9C40 0100007F:2694 6 00000000:00000000 03:00000BB8\n"; /* st 1 digit */
    struct ports_sys sys;
    struct ports_report r;
    struct sockaddr_storage t = v4("127.0.0.1", 9876), bad;
    struct in6_addr s = src4("127.0.0.1");

    (void)state;
    small_sys(&sys, 0);
    assert_int_equal(ports_init(&r, &sys, &t, &s, 1), 0);
    assert_int_equal(ports_parse_tcp(&r, junk, strlen(junk)), 0);
    assert_int_equal(ports_parse_tcp(&r, "", 0), 0);
    /* a line cut short by len is not a line */
    assert_int_equal(ports_parse_tcp(&r, v4_text, strlen(HEADER) + 40), 0);
    ports_finish(&r);
    assert_int_equal(r.src[0].free, 10);
    ports_free(&r);
    assert_int_equal(ports_init(&r, &sys, &t, &s, 0), -EINVAL);
    memset(&bad, 0, sizeof(bad));
    bad.ss_family = AF_UNIX;
    assert_int_equal(ports_init(&r, &sys, &bad, &s, 1), -EINVAL);
    sys.lo = 50000;
    assert_int_equal(ports_init(&r, &sys, &t, &s, 1), -EINVAL);
}

/* 200 sources 10.0.0.1..200; source i holds i ports in TIME_WAIT to 10.1.0.1:80. */
static void test_many_sources(void **state)
{
    enum { N = 200 };
    struct ports_sys sys;
    struct ports_report r;
    struct sockaddr_storage t = v4("10.1.0.1", 80);
    struct in6_addr *src = calloc(N, sizeof(*src));
    char *text = malloc(N * N * 160), *p = text, line[512];
    struct ports_need need = {.conns = N * 28100, .have_source = true};

    (void)state;
    if (!little_endian())
        skip();
    assert_non_null(src);
    assert_non_null(text);
    for (int i = 0; i < N; i++) {
        char a[32];
        snprintf(a, sizeof(a), "10.0.0.%d", i + 1);
        src[i] = src4(a);
        for (int k = 0; k < i + 1; k++)
            p += sprintf(p, "%4d: %08X:%04X 0100010A:0050 06 00000000:00000000 03:%08X" TW_TAIL, k,
                         (unsigned)htonl(0x0a000001u + (unsigned)i), 32768 + k * 7,
                         (unsigned)(100 * (k % 60 + 1)));
    }
    ports_sys_default(&sys);
    assert_int_equal(ports_init(&r, &sys, &t, src, N), 0);
    assert_int_equal(ports_parse_tcp(&r, text, (size_t)(p - text)), N * (N + 1) / 2);
    ports_finish(&r);
    for (int i = 0; i < N; i++) {
        assert_int_equal(r.src[i].range, 28232);
        assert_int_equal(r.src[i].blocked_tw, i + 1);
        assert_int_equal(r.src[i].tw, i + 1);
    }
    /* 28,100 each: 10.0.0.200 has 28,032 free, short by 68; its TIME_WAIT k expires in
     * k % 60 + 1 s, four a second for the first 20 s: 68 are gone after 17 s */
    assert_int_equal(ports_advice(&r, &need, line, sizeof(line)), PORTS_SHORT);
    assert_non_null(strstr(line, "needs 28,100 ports from each of 200 source addresses "
                                 "(10.0.0.200 the fewest) to 10.1.0.1:80 but only 28,032 of "
                                 "28,232 are free (200 held by TIME_WAIT"));
    assert_non_null(strstr(line, "which expire within 60 s"));
    assert_non_null(strstr(line, "add source addresses (--source 10.0.0.1-10.0.0.201)"));
    assert_non_null(strstr(line, "set net.ipv4.tcp_tw_reuse=1"));
    assert_non_null(strstr(line, "or wait 17 s"));
    ports_free(&r);
    free(text);
    free(src);
}

/* A default range with n TIME_WAITs from 127.0.0.1 to the target, half expiring in 10 s and
 * half in 50 s. */
static void crowd(struct ports_report *r, int n, int tw_reuse)
{
    struct ports_sys sys;
    struct sockaddr_storage t = v4("127.0.0.1", 9876);
    struct in6_addr s = src4("127.0.0.1");
    char *text = malloc((size_t)n * 160 + 1), *p = text;

    assert_non_null(text);
    for (int k = 0; k < n; k++)
        p += sprintf(p, "%4d: 0100007F:%04X 0100007F:2694 06 00000000:00000000 03:%08X" TW_TAIL, k,
                     32768 + k, k % 2 ? 1000u : 5000u);
    ports_sys_default(&sys);
    sys.tw_reuse = tw_reuse;
    assert_int_equal(ports_init(r, &sys, &t, &s, 1), 0);
    assert_int_equal(ports_parse_tcp(r, text, (size_t)(p - text)), n);
    ports_finish(r);
    free(text);
}

static void test_advice_long(void **state)
{
    struct ports_report r;
    struct ports_need need = {.conns = 15000};
    char line[512];

    (void)state;
    if (!little_endian())
        skip();
    crowd(&r, 20000, 0);
    assert_int_equal(r.src[0].free, 8232);
    assert_int_equal(ports_advice(&r, &need, line, sizeof(line)), PORTS_SHORT);
    assert_string_equal(line,
                        "ports: -c 15000 needs 15,000 ports from 127.0.0.1 to 127.0.0.1:9876 but "
                        "only 8,232 of 28,232 are free (20,000 held by TIME_WAIT to "
                        "127.0.0.1:9876, which expire within 50 s): add a source address "
                        "(--source 127.0.0.2), widen net.ipv4.ip_local_port_range (now "
                        "32768-60999), set net.ipv4.tcp_tw_reuse=1, or wait 10 s");
    /* 5,000 fit, but the walk meets ~5 held ports a connection */
    need.conns = 5000;
    assert_int_equal(ports_advice(&r, &need, line, sizeof(line)), PORTS_WARN);
    assert_non_null(strstr(line, "ports: connect() will search a crowded port range: 20,000 of "
                                 "28,232 ports from 127.0.0.1 to 127.0.0.1:9876 are held"));
    assert_non_null(strstr(line, "about 5 probes a connection: opening may be slow"));
    assert_non_null(strstr(line, "or wait 50 s"));
    need.conns = 1000;
    assert_int_equal(ports_advice(&r, &need, line, sizeof(line)), PORTS_OK);
    assert_string_equal(line, "");
    /* 120,000 connections at 28,232 a fresh address: five of them after 127.0.0.1 */
    need.conns = 120000;
    need.have_source = false;
    assert_int_equal(ports_advice(&r, &need, line, sizeof(line)), PORTS_SHORT);
    assert_non_null(strstr(line, "(--source 127.0.0.2-127.0.0.6)"));
    ports_free(&r);
    /* the same sockets under tcp_tw_reuse=2: all taken over, nothing to say */
    crowd(&r, 20000, 2);
    need.conns = 15000;
    assert_int_equal(r.src[0].free, 28232);
    assert_int_equal(ports_advice(&r, &need, line, sizeof(line)), PORTS_OK);
    ports_free(&r);
}

static void test_advice_short(void **state)
{
    struct ports_sys sys;
    struct ports_report r;
    struct sockaddr_storage t = v4("10.1.0.1", 80);
    struct in6_addr s = src4("10.0.0.1");
    struct ports_need need = {.conns = 50, .short_mode = true, .rate = 1000};
    char line[512];

    (void)state;
    ports_sys_default(&sys);
    assert_int_equal(ports_init(&r, &sys, &t, &s, 1), 0);
    ports_finish(&r);
    /* 28,232 ports / 60 s: 470 a second */
    assert_int_equal(ports_advice(&r, &need, line, sizeof(line)), PORTS_WARN);
    assert_string_equal(line, "ports: short mode at -R 1000 leaves each port in TIME_WAIT for "
                              "60 s but only 28,232 ports from 10.0.0.1 to 10.1.0.1:80 are "
                              "free: connect() fails with EADDRNOTAVAIL after about 28 s; add "
                              "source addresses (--source A-B, 3 addresses of this host), set "
                              "net.ipv4.tcp_tw_reuse=1, or keep -R under 471");
    need.rate = 400;
    assert_int_equal(ports_advice(&r, &need, line, sizeof(line)), PORTS_OK);
    need.rate = 0;
    assert_int_equal(ports_advice(&r, &need, line, sizeof(line)), PORTS_WARN);
    assert_non_null(strstr(line, "sustain 471 connections a second"));
    ports_free(&r);
    /* loopback under the default tcp_tw_reuse=2: TIME_WAIT comes back, nothing to say */
    t = v4("127.0.0.1", 9876);
    s = src4("127.0.0.1");
    assert_int_equal(ports_init(&r, &sys, &t, &s, 1), 0);
    ports_finish(&r);
    need.rate = 100000;
    assert_int_equal(ports_advice(&r, &need, line, sizeof(line)), PORTS_OK);
    /* -c in flight above the free ports: a warning in short mode, not an error */
    need.conns = 30000;
    assert_int_equal(ports_advice(&r, &need, line, sizeof(line)), PORTS_WARN);
    assert_non_null(strstr(line, "none held: the range is too small"));
    ports_free(&r);
}

/* This machine's /proc: the kernel picks 127.0.0.1 for any 127/8 target. */
static void test_read_live(void **state)
{
    struct ports_report r;
    struct sockaddr_storage t = v4("127.0.0.9", 1), t6;
    struct in6_addr lo = src4("127.0.0.1");
    struct in_addr a;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    int plo, phi;

    (void)state;
    if (!f)
        skip();
    assert_int_equal(fscanf(f, "%d %d", &plo, &phi), 2);
    fclose(f);
    assert_int_equal(ports_read(&r, &t, NULL, 0), 0);
    assert_int_equal(r.nsources, 1);
    assert_memory_equal(&r.src[0].addr, &lo, sizeof(lo));
    assert_int_equal(r.sys.lo, plo);
    assert_int_equal(r.sys.hi, phi);
    assert_true(r.src[0].range <= phi - plo + 1);
    assert_true(r.src[0].free <= r.src[0].range);
    ports_free(&r);
    inet_pton(AF_INET, "127.0.0.3", &a);
    assert_int_equal(ports_read(&r, &t, &a, 1), 0);
    assert_int_equal(r.src[0].addr.s6_addr[15], 3);
    ports_free(&r);
    memset(&t6, 0, sizeof(t6));
    t6.ss_family = AF_INET6;
    assert_int_equal(ports_read(&r, &t6, &a, 1), -EAFNOSUPPORT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_range),
        cmocka_unit_test(test_parse_reserved),
        cmocka_unit_test(test_v4_no_reuse),
        cmocka_unit_test(test_v4_reuse_loopback),
        cmocka_unit_test(test_v4_reuse_needs_timestamps_and_age),
        cmocka_unit_test(test_reuse_2_is_loopback_only),
        cmocka_unit_test(test_v6_and_mapped),
        cmocka_unit_test(test_reserved_and_edges),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_many_sources),
        cmocka_unit_test(test_advice_long),
        cmocka_unit_test(test_advice_short),
        cmocka_unit_test(test_read_live),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
