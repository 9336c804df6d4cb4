/* test_tls: lfepolld's TLS listeners (--listen-tls) against real clients: OpenSSL in this test
 * (byte-level attacks) and the openssl CLI, which also makes the certificates at the suite's
 * start (an ECDSA P-256 CA and a server certificate it signs; an expired one; a key of no
 * certificate). One daemon serves most tests; those that need options of their own (a stop, a
 * PROXY header, --max-conns, a hand-over) start their own. */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <cmocka.h>

static char dir[] = "/tmp/lfe-tls-XXXXXX";
static char ca[128], cert[128], key[128], expired[128], otherkey[128], encrypted[128];
static struct daemon shared;
static int admin;
static SSL_CTX *cctx;

/* Runs a shell command line (the openssl CLI); fails the suite's setup when it fails. */
static int sh(const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    if (system(cmd) != 0) {
        fprintf(stderr, "test_tls: failed: %s\n", cmd);
        return -1;
    }
    return 0;
}

/* The certificates, made here with the openssl CLI (never committed). */
static int make_certs(void)
{
    if (!mkdtemp(dir))
        return -1;
    snprintf(ca, sizeof(ca), "%s/ca.pem", dir);
    snprintf(cert, sizeof(cert), "%s/cert.pem", dir);
    snprintf(key, sizeof(key), "%s/key.pem", dir);
    snprintf(expired, sizeof(expired), "%s/expired.pem", dir);
    snprintf(otherkey, sizeof(otherkey), "%s/other.pem", dir);
    snprintf(encrypted, sizeof(encrypted), "%s/enc.pem", dir);
    return sh("cd %s && exec 2>/dev/null && "
              "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
              "-keyout ca.key -out ca.pem -days 2 -subj /CN=lfe-test-ca && "
              "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout key.pem "
              "-out srv.csr -subj /CN=localhost && "
              "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' >ext && "
              "openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
              "-days 2 -extfile ext -out cert.pem && "
              "openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
              "-days -1 -out expired.pem && "
              "openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out other.pem && "
              "openssl pkey -in key.pem -aes256 -passout pass:secret -out enc.pem",
              dir);
}

/* A client context that trusts the suite's CA only. */
static SSL_CTX *client_ctx(void)
{
    SSL_CTX *c = SSL_CTX_new(TLS_client_method());

    if (!c || SSL_CTX_load_verify_locations(c, ca, NULL) != 1)
        return NULL;
    SSL_CTX_set_verify(c, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_mode(c, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    return c;
}

static int setup(void **state)
{
    char port[16];
    const char *args[] = {"--listen-tls",
                          "127.0.0.1:0",
                          "--tls-cert",
                          cert,
                          "--tls-key",
                          key,
                          "--tls-handshake-timeout",
                          "1s",
                          "--max-pending",
                          "64K",
                          "--admin",
                          "127.0.0.1:0",
                          NULL};

    (void)state;
    if (make_certs() < 0 || !(cctx = client_ctx()))
        return -1;
    (void)port;
    if (spawn(&shared, args, 0, NULL) < 0) {
        fprintf(stderr, "test_tls: the daemon did not start: %s\n", log_text(&shared));
        return -1;
    }
    admin = admin_port(&shared);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    teardown(NULL); /* the shared daemon too, if a test failed before its stop */
    SSL_CTX_free(cctx);
    sh("rm -rf %s", dir);
    return 0;
}

/* The sum of a counter of the shared daemon's /metrics. */
static double metric(const char *name)
{
    char *body = NULL;
    double v;

    assert_int_equal(http_get(admin, "/metrics", &body), 200);
    v = metric_sum(body, name);
    free(body);
    return v;
}

/* Waits (bounded) for counter name of the shared daemon to reach at least want. */
static void wait_metric(const char *name, double want)
{
    long deadline = now_ms() + 10000L * slow;

    while (metric(name) < want && now_ms() < deadline)
        sleep_ms(20);
    if (metric(name) < want)
        fail_msg("%s stayed at %.0f, below %.0f", name, metric(name), want);
}

/* Waits (bounded) for the shared daemon to hold no connection: the count falls just after the
 * close the client sees. */
static void wait_no_connection(void)
{
    long deadline = now_ms() + 10000L * slow;

    while (metric("lfepolld_connections") != 0 && now_ms() < deadline)
        sleep_ms(20);
    assert_int_equal(metric("lfepolld_connections"), 0);
}

/* The third field of a tcp_rmem/tcp_wmem style file: the most a buffer autotunes to. */
static size_t buf_max(const char *path)
{
    FILE *f = fopen(path, "r");
    unsigned long a = 0, b = 0, c = 6u << 20;

    if (f) {
        if (fscanf(f, "%lu %lu %lu", &a, &b, &c) != 3)
            c = 6u << 20;
        fclose(f);
    }
    return c;
}

/* A TLS connection over fd, handshake done and the server's certificate verified. */
static SSL *tls_on(int fd)
{
    SSL *s = SSL_new(cctx);

    assert_non_null(s);
    SSL_set_fd(s, fd);
    SSL_set1_host(s, "127.0.0.1");
    if (SSL_connect(s) != 1) {
        ERR_print_errors_fp(stderr);
        fail_msg("TLS handshake with lfepolld failed");
    }
    return s;
}

static SSL *tls_connect(int port)
{
    return tls_on(tcp_connect(port));
}

static void tls_close(SSL *s)
{
    int fd = SSL_get_fd(s);

    SSL_free(s);
    close(fd);
}

/* Every byte of p, blocking. */
static void tls_send(SSL *s, const void *p, size_t n)
{
    for (size_t off = 0; off < n;) {
        int w = SSL_write(s, (const char *)p + off, (int)(n - off));

        assert_true(w > 0);
        off += (size_t)w;
    }
}

/* Reads exactly n bytes (each read bounded by the socket's timeout); returns how many came. */
static size_t tls_recv(SSL *s, char *buf, size_t n)
{
    size_t got = 0;

    while (got < n) {
        int r = SSL_read(s, buf + got, (int)(n - got));

        if (r <= 0)
            break;
        got += (size_t)r;
    }
    return got;
}

static void set_timeout(int fd, long ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};

    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* Whether the server ended fd: a read gives EOF or a reset within timeout_ms (bytes before
 * that, an alert, are read and dropped). */
static bool closed_by_server(int fd, long timeout_ms)
{
    long deadline = now_ms() + timeout_ms * slow;
    char b[4096];

    while (now_ms() < deadline) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        ssize_t r;

        if (poll(&p, 1, 50) <= 0)
            continue;
        r = recv(fd, b, sizeof(b), MSG_DONTWAIT);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
            return true;
    }
    return false;
}

/* A ClientHello as a real client sends it, made through memory buffers: its bytes. */
static size_t client_hello(unsigned char *buf, size_t len)
{
    SSL *s = SSL_new(cctx);
    BIO *rb = BIO_new(BIO_s_mem()), *wb = BIO_new(BIO_s_mem());
    int n;

    SSL_set_bio(s, rb, wb);
    SSL_connect(s); /* wants read: the hello is in wb */
    n = BIO_read(wb, buf, (int)len);
    SSL_free(s);
    ERR_clear_error();
    assert_true(n > 100);
    return (size_t)n;
}

static void test_echo_line(void **state)
{
    SSL *s = tls_connect(shared.port);
    char buf[64];

    (void)state;
    set_timeout(SSL_get_fd(s), 5000L * slow);
    tls_send(s, "hello over tls\n", 15);
    assert_int_equal(tls_recv(s, buf, 15), 15);
    assert_memory_equal(buf, "hello over tls\n", 15);
    assert_true(SSL_version(s) == TLS1_3_VERSION);
    tls_close(s);
}

/* TLS 1.2 is served too, and renegotiation refused there (the connection goes on or ends: the
 * server never renegotiates). */
static void test_tls12_no_renegotiation(void **state)
{
    SSL_CTX *c12 = client_ctx();
    int fd = tcp_connect(shared.port);
    SSL *s;
    char buf[8];

    (void)state;
    SSL_CTX_set_max_proto_version(c12, TLS1_2_VERSION);
    s = SSL_new(c12);
    SSL_set_fd(s, fd);
    set_timeout(fd, 5000L * slow);
    assert_int_equal(SSL_connect(s), 1);
    assert_true(SSL_version(s) == TLS1_2_VERSION);
    tls_send(s, "abc", 3);
    assert_int_equal(tls_recv(s, buf, 3), 3);
    /* ask for a renegotiation: the server answers with a no_renegotiation alert (or ends it) */
    if (SSL_renegotiate(s) == 1)
        SSL_do_handshake(s);
    assert_int_equal(SSL_renegotiate_pending(s), 1); /* never completed */
    SSL_free(s);
    close(fd);
    SSL_CTX_free(c12);
}

/* A connection whose buffers stay small (set before the SYN: no autotuning), so that what the
 * server sends waits in its own buffers and what it does not read in its receive buffer. */
static int small_window_connect(int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM, 0), rcv = 32768, snd = 65536;

    assert_true(fd >= 0);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &snd, sizeof(snd));
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    return fd;
}

/* A big random payload, read slowly at first: the server's output waits at --max-pending
 * (reading pauses) and every byte comes back in order. Non-blocking, one poll loop. */
static void test_slow_reader_gets_every_byte(void **state)
{
    /* more than every buffer on the way can hold: the server's receive and send buffers at
     * their most, and a few MiB (this side's, --max-pending, TLS's own) */
    size_t total = buf_max("/proc/sys/net/ipv4/tcp_rmem") + tcp_wmem_max() + (3u << 20);
    size_t sent = 0, got = 0;
    unsigned char *out = malloc(total), *in = malloc(total);
    double paused0 = metric("lfepolld_worker_paused_total");
    int fd = small_window_connect(shared.port);
    SSL *s = tls_on(fd);
    long deadline = now_ms() + 60000L * slow, reads = 0;

    (void)state;
    assert_non_null(out);
    assert_non_null(in);
    for (size_t i = 0; i < total; i++)
        out[i] = (unsigned char)(random() >> 7);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    /* First nothing is read: the server's output fills the buffers between, then its own up to
     * --max-pending, and it stops reading: writes here block for good (a quarter second of no
     * progress). Then every byte is read, slowly at first. */
    for (long still = now_ms();
         sent < total && now_ms() - still < 250 * slow && now_ms() < deadline;) {
        int r = SSL_write(s, out + sent, (int)(total - sent > 65536 ? 65536 : total - sent));

        if (r > 0) {
            sent += (size_t)r;
            still = now_ms();
        } else {
            sleep_ms(5);
        }
    }
    assert_true(sent < total); /* it stopped reading */
    while (got < total && now_ms() < deadline) {
        struct pollfd p = {.fd = fd, .events = POLLIN | (sent < total ? POLLOUT : 0)};
        int r;

        poll(&p, 1, 100);
        if (sent < total) {
            r = SSL_write(s, out + sent, (int)(total - sent > 65536 ? 65536 : total - sent));
            if (r > 0)
                sent += (size_t)r;
        }
        if (reads++ < 200)
            sleep_ms(2); /* slow: 4 KiB a 2 ms for a while */
        r = SSL_read(s, in + got, reads < 200 ? 4096 : (int)(total - got));
        if (r > 0)
            got += (size_t)r;
        else
            assert_true(SSL_get_error(s, r) == SSL_ERROR_WANT_READ ||
                        SSL_get_error(s, r) == SSL_ERROR_WANT_WRITE);
    }
    assert_int_equal(got, total);
    assert_memory_equal(in, out, total);
    assert_true(metric("lfepolld_worker_paused_total") > paused0);
    tls_close(s);
    free(out);
    free(in);
}

/* Bytes that are not TLS: the handshake fails, counted; the connection is closed and nothing of
 * it stays (the live count falls back). */
static void test_garbage_instead_of_client_hello(void **state)
{
    double before = metric("lfepolld_worker_tls_fail_protocol_total");
    unsigned char junk[512];
    int fd = tcp_connect(shared.port);

    (void)state;
    for (size_t i = 0; i < sizeof(junk); i++)
        junk[i] = (unsigned char)(random() >> 5);
    junk[0] = 0x42; /* not a handshake record's type (0x16) */
    send_all(fd, junk, sizeof(junk));
    assert_true(closed_by_server(fd, 5000));
    close(fd);
    wait_metric("lfepolld_worker_tls_fail_protocol_total", before + 1);
    wait_no_connection();
}

static void test_plain_http_on_tls_port(void **state)
{
    double before = metric("lfepolld_worker_tls_fail_http_total");
    int fd = tcp_connect(shared.port);
    const char *req = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

    (void)state;
    send_all(fd, req, strlen(req));
    assert_true(closed_by_server(fd, 5000));
    close(fd);
    wait_metric("lfepolld_worker_tls_fail_http_total", before + 1);
    /* its line, unless the garbage's took this second of its worker (one a second) */
    assert_true(strstr(log_text(&shared), "a plain HTTP request on a TLS port") ||
                strstr(log_text(&shared), "not TLS, or nothing the server can agree to"));
}

/* A real ClientHello a byte every 100 ms: the whole would take half a minute; the handshake's
 * deadline (1 s, from the accept, whatever bytes come) ends it long before. */
static void test_trickled_hello_ends_at_deadline(void **state)
{
    double before = metric("lfepolld_worker_tls_fail_timeout_total");
    unsigned char hello[2048];
    size_t n = client_hello(hello, sizeof(hello)), i;
    int fd = tcp_connect(shared.port);
    bool closed = false;

    (void)state;
    for (i = 0; i < n && !closed; i++) {
        if (send(fd, hello + i, 1, MSG_NOSIGNAL) != 1)
            break;
        closed = closed_by_server(fd, 100);
    }
    assert_true(i < n); /* ended before the hello was whole */
    assert_true(closed || closed_by_server(fd, 5000));
    close(fd);
    wait_metric("lfepolld_worker_tls_fail_timeout_total", before + 1);
}

/* Half a ClientHello, then a reset: counted as a reset, nothing left open. */
static void test_reset_mid_handshake(void **state)
{
    double before = metric("lfepolld_worker_tls_fail_reset_total");
    unsigned char hello[2048];
    size_t n = client_hello(hello, sizeof(hello));
    struct linger lg = {1, 0};
    int fd = tcp_connect(shared.port);

    (void)state;
    send_all(fd, hello, n / 2);
    sleep_ms(50); /* the server has taken it: its handshake waits for the rest */
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    close(fd); /* RST */
    wait_metric("lfepolld_worker_tls_fail_reset_total", before + 1);
    wait_no_connection();
}

/* The client's close_notify after its data is its end of input: every byte comes back, then
 * the server's close_notify. */
static void test_close_notify_after_data(void **state)
{
    size_t total = 300000;
    char *out = malloc(total), *in = malloc(total);
    SSL *s = tls_connect(shared.port);
    char b;

    (void)state;
    set_timeout(SSL_get_fd(s), 10000L * slow);
    for (size_t i = 0; i < total; i++)
        out[i] = (char)(i * 7 + 3);
    tls_send(s, out, total);
    assert_int_equal(SSL_shutdown(s), 0); /* ours sent; the server's not seen yet */
    assert_int_equal(tls_recv(s, in, total), total);
    assert_memory_equal(in, out, total);
    assert_int_equal(SSL_read(s, &b, 1), 0);
    assert_int_equal(SSL_get_error(s, 0), SSL_ERROR_ZERO_RETURN); /* its close_notify */
    assert_true(SSL_get_shutdown(s) & SSL_RECEIVED_SHUTDOWN);
    tls_close(s);
    free(out);
    free(in);
}

/* A FIN without a close_notify (a client that only shuts its socket's sending side) is an end of
 * input too, as nginx takes it: every byte echoed, then the server's close_notify. */
static void test_fin_without_close_notify(void **state)
{
    char in[64], b;
    SSL *s = tls_connect(shared.port);

    (void)state;
    set_timeout(SSL_get_fd(s), 10000L * slow);
    tls_send(s, "before the FIN\n", 15);
    shutdown(SSL_get_fd(s), SHUT_WR);
    assert_int_equal(tls_recv(s, in, 15), 15);
    assert_memory_equal(in, "before the FIN\n", 15);
    assert_int_equal(SSL_read(s, &b, 1), 0);
    assert_int_equal(SSL_get_error(s, 0), SSL_ERROR_ZERO_RETURN);
    tls_close(s);
}

/* Python's ssl module as the client (another TLS stack's ClientHello; the CA verified): a
 * line echoed, then its close_notify answered by the server's (unwrap). */
/* After a finished handshake and an echo, a record header claiming 18433 bytes (more than any
 * record may hold: 2^14 + 2048) written raw on the socket: the connection is closed and counted
 * as an I/O error, nothing of it stays, and the daemon serves the next client. */
static void test_oversized_record_after_handshake(void **state)
{
    static const unsigned char hdr[] = {0x17, 0x03, 0x03, 0x48, 0x01};
    double before = metric("lfepolld_worker_err_io_total");
    unsigned char body[256];
    SSL *s = tls_connect(shared.port);
    int fd = SSL_get_fd(s);
    char buf[16];

    (void)state;
    set_timeout(fd, 5000L * slow);
    tls_send(s, "before\n", 7);
    assert_int_equal(tls_recv(s, buf, 7), 7);
    assert_memory_equal(buf, "before\n", 7);
    memset(body, 0xa5, sizeof(body));
    send_all(fd, hdr, sizeof(hdr));
    send_all(fd, body, sizeof(body));
    assert_true(closed_by_server(fd, 5000));
    tls_close(s);
    wait_metric("lfepolld_worker_err_io_total", before + 1);
    wait_no_connection();
    s = tls_connect(shared.port);
    set_timeout(SSL_get_fd(s), 5000L * slow);
    tls_send(s, "after\n", 6);
    assert_int_equal(tls_recv(s, buf, 6), 6);
    assert_memory_equal(buf, "after\n", 6);
    tls_close(s);
}

/* The events a daemon's workers have handled, from its /metrics on admin port adm. */
static double events_of(int adm)
{
    char *body = NULL;
    double v;

    assert_int_equal(http_get(adm, "/metrics", &body), 200);
    v = metric_sum(body, "lfepolld_worker_events_total");
    free(body);
    return v;
}

/* A client that sends the first 20 bytes of a 100-byte record and holds the rest for a second:
 * the server waits for the socket (a handful of events at most, not one per loop of a worker
 * that spins on the bytes it holds), then echoes the record whole once its rest comes. */
static void hold_part_of_a_record(int port, int adm)
{
    SSL *s = tls_connect(port);
    int fd = SSL_get_fd(s);
    BIO *mem = BIO_new(BIO_s_mem());
    char want[100], got[100], rec[512];
    double before, during;
    int n;

    set_timeout(fd, 5000L * slow);
    tls_send(s, "first\n", 6);
    assert_int_equal(tls_recv(s, got, 6), 6); /* the tickets too, before it */
    memset(want, 'p', sizeof(want));
    SSL_set0_wbio(s, mem); /* the record is made here, sent by hand; reads stay on fd */
    assert_int_equal(SSL_write(s, want, sizeof(want)), sizeof(want));
    n = BIO_read(mem, rec, sizeof(rec));
    assert_true(n > 40);
    send_all(fd, rec, 20);
    sleep_ms(200); /* the server has taken them */
    before = events_of(adm);
    sleep_ms(1000);
    during = events_of(adm) - before;
    send_all(fd, rec + 20, (size_t)n - 20);
    assert_int_equal(tls_recv(s, got, sizeof(got)), sizeof(got));
    assert_memory_equal(got, want, sizeof(want));
    tls_close(s);
    if (during > 20)
        fail_msg("the server handled %.0f events in the second it held a part of a record", during);
}

/* 200 records of 10 bytes in one send: the server reads ahead, so one read(2) takes many of
 * them, more than it opens in one event; those it holds raise no socket event, and must be
 * echoed all the same, with nothing more sent. */
static void many_records_in_one_segment(int port)
{
    SSL *s = tls_connect(port);
    int fd = SSL_get_fd(s);
    BIO *mem = BIO_new(BIO_s_mem());
    char want[2000], got[2000], *recs;
    long n;

    set_timeout(fd, 5000L * slow);
    tls_send(s, "first\n", 6);
    assert_int_equal(tls_recv(s, got, 6), 6);
    for (size_t i = 0; i < sizeof(want); i++)
        want[i] = (char)('a' + i % 26);
    SSL_set0_wbio(s, mem);
    for (size_t off = 0; off < sizeof(want); off += 10)
        assert_int_equal(SSL_write(s, want + off, 10), 10);
    n = BIO_get_mem_data(mem, &recs);
    assert_true(n > 200 * 10);
    send_all(fd, recs, (size_t)n);
    assert_int_equal(tls_recv(s, got, sizeof(got)), sizeof(got));
    assert_memory_equal(got, want, sizeof(want));
    tls_close(s);
}

static void test_many_records_in_one_segment(void **state)
{
    (void)state;
    many_records_in_one_segment(shared.port);
}

static void test_part_of_a_record_waits(void **state)
{
    (void)state;
    hold_part_of_a_record(shared.port, admin);
}

static void test_python_ssl_client(void **state)
{
    char cmd[1024];

    (void)state;
    snprintf(cmd, sizeof(cmd),
             "timeout %d python3 -c '\n"
             "import socket, ssl, sys\n"
             "ctx = ssl.create_default_context(cafile=sys.argv[1])\n"
             "s = ctx.wrap_socket(socket.create_connection((\"127.0.0.1\", int(sys.argv[2]))),"
             " server_hostname=\"127.0.0.1\")\n"
             "s.sendall(b\"ping from python\\n\")\n"
             "got = b\"\"\n"
             "while not got.endswith(b\"\\n\"):\n"
             "    b = s.recv(100)\n"
             "    assert b, \"EOF\"\n"
             "    got += b\n"
             "assert got == b\"ping from python\\n\", got\n"
             "s.unwrap()\n"
             "' %s %d",
             10 * slow, ca, shared.port);
    assert_int_equal(system(cmd), 0);
}

/* A session resumed from the ticket of a first connection counts as resumed; /metrics, with the
 * handshakes' histogram, is what promtool accepts, and its count is every finished handshake. */
static void test_resumed_and_metrics(void **state)
{
    double resumed = metric("lfepolld_worker_tls_resumed_total");
    SSL *s = tls_connect(shared.port), *t;
    SSL_SESSION *sess;
    char buf[4], path[160], cmd[256], *body = NULL;
    FILE *f;
    int fd;

    (void)state;
    set_timeout(SSL_get_fd(s), 5000L * slow);
    tls_send(s, "r1", 2);
    assert_int_equal(tls_recv(s, buf, 2), 2); /* the tickets came before the echo */
    assert_non_null(sess = SSL_get1_session(s));
    SSL_shutdown(s); /* a session ended without close_notify is not resumed */
    tls_close(s);
    assert_true(SSL_SESSION_is_resumable(sess));
    fd = tcp_connect(shared.port);
    set_timeout(fd, 5000L * slow);
    t = SSL_new(cctx);
    SSL_set_fd(t, fd);
    SSL_set_session(t, sess);
    assert_int_equal(SSL_connect(t), 1);
    tls_send(t, "r2", 2);
    assert_int_equal(tls_recv(t, buf, 2), 2);
    assert_int_equal(SSL_session_reused(t), 1);
    tls_close(t);
    SSL_SESSION_free(sess);
    wait_metric("lfepolld_worker_tls_resumed_total", resumed + 1);

    assert_int_equal(http_get(admin, "/metrics", &body), 200);
    assert_true(metric_sum(body, "lfepolld_tls_handshake_seconds_count") ==
                metric_sum(body, "lfepolld_worker_tls_full_total") +
                    metric_sum(body, "lfepolld_worker_tls_resumed_total"));
    snprintf(path, sizeof(path), "%s/metrics.txt", dir);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(body, f);
    fclose(f);
    free(body);
    snprintf(cmd, sizeof(cmd), "promtool check metrics <%s", path);
    assert_int_equal(system(cmd), 0);
}

/* One connection of test_resumption_sends_a_new_ticket: offers sess (or none), echoes a line,
 * ends with a close_notify. Returns the session the connection ended with (its newest ticket's),
 * and *reused whether the server took sess. */
static SSL_SESSION *resume_once(SSL_CTX *c, SSL_SESSION *sess, bool *reused)
{
    int fd = tcp_connect(shared.port);
    SSL *s = SSL_new(c);
    SSL_SESSION *got;
    char buf[4];

    assert_non_null(s);
    set_timeout(fd, 5000L * slow);
    SSL_set_fd(s, fd);
    if (sess)
        SSL_set_session(s, sess);
    assert_int_equal(SSL_connect(s), 1);
    tls_send(s, "rt", 2);
    assert_int_equal(tls_recv(s, buf, 2), 2); /* the tickets come before the echo */
    *reused = SSL_session_reused(s) == 1;
    got = SSL_get1_session(s);
    SSL_shutdown(s);
    tls_close(s);
    return got;
}

/* A TLS 1.3 ticket is used once (RFC 8446 C.4): a client that keeps its sessions, as OpenSSL's
 * does with SSL_SESS_CACHE_CLIENT, drops the one it resumed with. So a resumption must bring a
 * new ticket, or the client's next connection has none to offer and resumes every other time.
 * Four connections, each offering the session the one before ended with: all but the first
 * resumed, and each ends with a session other than the one it offered, resumable. */
static void test_resumption_sends_a_new_ticket(void **state)
{
    SSL_CTX *c = client_ctx();
    SSL_SESSION *sess = NULL, *got;
    bool reused;

    (void)state;
    assert_non_null(c);
    SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    for (int k = 0; k < 4; k++) {
        got = resume_once(c, sess, &reused);
        if (reused != (k > 0))
            fail_msg("connection %d: resumed %d, want %d", k, reused, k > 0);
        if (!got || got == sess || !SSL_SESSION_is_resumable(got))
            fail_msg("connection %d (resumed %d) brought no new ticket", k, reused);
        SSL_SESSION_free(sess);
        sess = got;
    }
    SSL_SESSION_free(sess);
    SSL_CTX_free(c);
}

/* The shared daemon's stop: it exits 0, nothing left live (the tests before left nothing). */
static void test_shared_daemon_stops(void **state)
{
    (void)state;
    wait_no_connection();
    assert_int_equal(stop_daemon(&shared, SIGTERM, 10000), 0);
}

/* A daemon of its own, TLS on its first address. */
static void start_own(struct daemon *d, const char *const *extra)
{
    const char *args[40] = {"--listen-tls", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key};
    int n = 6;

    while (extra && *extra)
        args[n++] = *extra++;
    args[n] = NULL;
    if (spawn(d, args, 0, NULL) < 0)
        fail_msg("lfepolld did not start: %s", log_text(d));
}

/* SIGTERM: a connection still open at the end of the drain gets the server's close_notify. */
static void test_sigterm_sends_close_notify(void **state)
{
    const char *extra[] = {"--drain-timeout", "200ms", NULL};
    struct daemon d;
    SSL *s;
    char buf[8];

    (void)state;
    start_own(&d, extra);
    s = tls_connect(d.port);
    set_timeout(SSL_get_fd(s), 10000L * slow);
    tls_send(s, "x\n", 2);
    assert_int_equal(tls_recv(s, buf, 2), 2);
    kill(d.pid, SIGTERM);
    assert_int_equal(SSL_read(s, buf, 1), 0);
    assert_int_equal(SSL_get_error(s, 0), SSL_ERROR_ZERO_RETURN);
    assert_int_equal(stop_daemon(&d, SIGTERM, 10000), 0);
    tls_close(s);
    cleanup(&d);
}

/* --proxy-protocol: the PROXY header first, then the handshake on the same connection. */
static void test_proxy_header_then_tls(void **state)
{
    const char *extra[] = {"--proxy-protocol", NULL};
    const char *hdr = "PROXY TCP4 192.0.2.7 127.0.0.1 40000 9443\r\n";
    struct daemon d;
    int fd;
    SSL *s;
    char buf[8];

    (void)state;
    start_own(&d, extra);
    fd = tcp_connect(d.port);
    send_all(fd, hdr, strlen(hdr));
    s = tls_on(fd);
    set_timeout(fd, 5000L * slow);
    tls_send(s, "pp\n", 3);
    assert_int_equal(tls_recv(s, buf, 3), 3);
    assert_memory_equal(buf, "pp\n", 3);
    tls_close(s);
    assert_int_equal(stop_daemon(&d, SIGTERM, 10000), 0);
    cleanup(&d);
}

/* --max-conns and --max-conns-per-ip count connections still in their handshake: a second from
 * the address of one that never says a word is closed at once, and so is a third from anywhere
 * once two fill --max-conns; once one of them goes, a TLS client is served. */
static void test_max_conns_counts_handshakes(void **state)
{
    const char *extra[] = {"--max-conns", "2", "--max-conns-per-ip", "1", "--accept-threads",
                           "1",           NULL};
    struct daemon d;
    int a, b, c;
    SSL *s;
    char buf[4];

    (void)state;
    start_own(&d, extra);
    a = tcp_connect(d.port); /* from 127.0.0.1 */
    sleep_ms(200);           /* accepted: live, handshaking */
    c = tcp_connect(d.port); /* 127.0.0.1 again: over --max-conns-per-ip */
    assert_true(closed_by_server(c, 5000));
    close(c);
    b = connect_from(d.port, "127.0.0.2");
    assert_true(b >= 0);
    sleep_ms(200); /* both live, handshaking: --max-conns is full */
    c = connect_from(d.port, "127.0.0.3");
    assert_true(c >= 0);
    assert_true(closed_by_server(c, 5000));
    close(c);
    close(a);
    /* its close is seen by the worker that owns it, then the count falls: a bounded retry */
    for (long until = now_ms() + 10000L * slow;;) {
        int fd = tcp_connect(d.port);

        set_timeout(fd, 5000L * slow);
        s = SSL_new(cctx);
        SSL_set_fd(s, fd);
        if (SSL_connect(s) == 1)
            break;
        ERR_clear_error();
        SSL_free(s);
        close(fd);
        if (now_ms() > until)
            fail_msg("no TLS client served after a handshaking connection closed");
        sleep_ms(50);
    }
    set_timeout(SSL_get_fd(s), 5000L * slow);
    tls_send(s, "ok", 2);
    assert_int_equal(tls_recv(s, buf, 2), 2);
    tls_close(s);
    close(b);
    assert_int_equal(stop_daemon(&d, SIGTERM, 10000), 0);
    {
        const char *acc = strstr(log_text(&d), "stats: accept: "), *shed;

        assert_non_null(acc);
        assert_non_null(shed = strstr(acc, " shed="));
        assert_true(atoi(shed + 6) >= 1); /* the third, and any retry that came too soon */
        assert_non_null(shed = strstr(acc, " shed_per_ip="));
        assert_true(atoi(shed + 13) >= 1);
    }
    cleanup(&d);
}

/* Lua over TLS: lua/echo.lua answers 1 MiB through --max-pending 64K, byte-exact, and the
 * client's close_notify ends it as an end of input (everything answered, then the server's
 * close_notify); lua/http_hello.lua's close after an HTTP/1.0 response is a close_notify. */
static void test_lua_over_tls(void **state)
{
    const char *extra[] = {
        "--lua", "lua/echo.lua", "--max-pending", "64K", "--listen", "127.0.0.1:0", NULL};
    const char *http[] = {"--lua", "lua/http_hello.lua", "--listen", "127.0.0.1:0", NULL};
    const char *req = "GET / HTTP/1.0\r\n\r\n";
    size_t total = 1u << 20;
    char *out = malloc(total), *in = malloc(total), b;
    struct daemon d;
    SSL *s;

    (void)state;
    start_own(&d, extra);
    s = tls_connect(d.port);
    set_timeout(SSL_get_fd(s), 10000L * slow);
    for (size_t i = 0; i < total; i++)
        out[i] = (char)(random() >> 3);
    {
        /* written and read in turns of 64 KiB: the script answers each whole */
        size_t got = 0;

        for (size_t off = 0; off < total; off += 65536) {
            tls_send(s, out + off, 65536);
            got += tls_recv(s, in + got, off + 65536 - got);
        }
        assert_int_equal(got, total);
    }
    assert_memory_equal(in, out, total);
    tls_send(s, "tail", 4);
    assert_int_equal(SSL_shutdown(s), 0);
    assert_int_equal(tls_recv(s, in, 4), 4);
    assert_memory_equal(in, "tail", 4);
    assert_int_equal(SSL_read(s, &b, 1), 0);
    assert_int_equal(SSL_get_error(s, 0), SSL_ERROR_ZERO_RETURN);
    tls_close(s);
    assert_int_equal(stop_daemon(&d, SIGTERM, 10000), 0);
    cleanup(&d);

    start_own(&d, http);
    s = tls_connect(d.port);
    set_timeout(SSL_get_fd(s), 10000L * slow);
    tls_send(s, req, strlen(req));
    {
        size_t got = 0;
        int r;

        while ((r = SSL_read(s, in + got, (int)(total - got))) > 0)
            got += (size_t)r;
        in[got] = '\0';
        assert_int_equal(SSL_get_error(s, r), SSL_ERROR_ZERO_RETURN);
        assert_non_null(strstr(in, "HTTP/1.0 200 OK") ? in : strstr(in, "HTTP/1.1 200 OK"));
    }
    tls_close(s);
    assert_int_equal(stop_daemon(&d, SIGTERM, 10000), 0);
    cleanup(&d);
    free(out);
    free(in);
}

/* The same in Lua mode (its own read loop): lua/echo.lua waits for the rest of the record too. */
static void test_part_of_a_record_waits_lua(void **state)
{
    const char *extra[] = {"--lua", "lua/echo.lua", "--admin", "127.0.0.1:0", NULL};
    struct daemon d;

    (void)state;
    start_own(&d, extra);
    hold_part_of_a_record(d.port, admin_port(&d));
    assert_int_equal(stop_daemon(&d, SIGTERM, 10000), 0);
    cleanup(&d);
}

/* The same two in a group of one worker, registered level-triggered (no EPOLLONESHOT, no re-arm
 * while what it waits for stays the same): a part of a record raises no event, whole records
 * read ahead still do. (The shared daemon's TLS plan is groups of several workers.) */
static void test_records_in_a_solo_group(void **state)
{
    const char *extra[] = {"--groups", "1", "--workers", "1", "--admin", "127.0.0.1:0", NULL};
    struct daemon d;

    (void)state;
    start_own(&d, extra);
    if (!strstr(log_text(&d), "1 group, 1 worker"))
        fail_msg("not a group of one worker: %s", log_text(&d));
    hold_part_of_a_record(d.port, admin_port(&d));
    many_records_in_one_segment(d.port);
    assert_int_equal(stop_daemon(&d, SIGTERM, 10000), 0);
    cleanup(&d);
}

/* A TLS listener gives the plan Lua's shape (README, "Choosing G and W"): on 2 CPUs one group
 * of 2 workers, where the same daemon without it has a group per CPU. */
static void test_default_plan_tls(void **state)
{
    const char *cpus[] = {"--cpus", "0-1", NULL};
    const char *plain[] = {"--listen", "127.0.0.1:0", "--cpus", "0-1", NULL};
    cpu_set_t allowed;
    struct daemon d;

    (void)state;
    if (sched_getaffinity(0, sizeof(allowed), &allowed) < 0 || !CPU_ISSET(0, &allowed) ||
        !CPU_ISSET(1, &allowed))
        skip(); /* needs CPUs 0 and 1 */
    start_own(&d, cpus);
    if (!strstr(log_text(&d), "1 group, 2 workers"))
        fail_msg("with --listen-tls on CPUs 0-1, not one group of 2 workers: %s", log_text(&d));
    assert_int_equal(stop_daemon(&d, SIGTERM, 10000), 0);
    cleanup(&d);
    if (spawn(&d, plain, 0, NULL) < 0)
        fail_msg("lfepolld did not start: %s", log_text(&d));
    if (!strstr(log_text(&d), "2 groups, 2 workers"))
        fail_msg("with --listen alone on CPUs 0-1, not a group per CPU: %s", log_text(&d));
    assert_int_equal(stop_daemon(&d, SIGTERM, 10000), 0);
    cleanup(&d);
}

/* --takeover: the successor, started with the same --listen-tls, serves TLS on the socket it
 * was handed; the predecessor ends its TLS connection between requests with a close_notify. */
static void test_takeover_keeps_tls(void **state)
{
    char addr[64], sock[128];
    struct daemon a, b;
    SSL *s, *c;
    char buf[4];

    (void)state;
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", free_port());
    snprintf(sock, sizeof(sock), "%s/takeover.sock", dir);
    {
        const char *args[] = {"--listen-tls",
                              addr,
                              "--tls-cert",
                              cert,
                              "--tls-key",
                              key,
                              "--takeover",
                              sock,
                              "--drain-timeout",
                              "1s",
                              "--listen",
                              "127.0.0.1:0",
                              NULL};

        if (spawn(&a, args, 0, NULL) < 0)
            fail_msg("A did not start: %s", log_text(&a));
        c = tls_connect(a.port);
        set_timeout(SSL_get_fd(c), 5000L * slow);
        tls_send(c, "a1", 2);
        assert_int_equal(tls_recv(c, buf, 2), 2);
        if (spawn(&b, args, 0, NULL) < 0)
            fail_msg("B did not start: %s", log_text(&b));
    }
    assert_non_null(strstr(log_text(&b), "with TLS"));
    /* A's connection, once A drains: its next request answered, then A's close_notify (and
     * FIN) between requests, so that the client goes to B */
    for (long until = now_ms() + 10000L * slow;; sleep_ms(50)) {
        struct pollfd p = {.fd = SSL_get_fd(c), .events = POLLIN};

        tls_send(c, "a2", 2);
        assert_int_equal(tls_recv(c, buf, 2), 2);
        assert_memory_equal(buf, "a2", 2);
        if (poll(&p, 1, 200) == 1)
            break;
        if (now_ms() > until)
            fail_msg("A's connection never ended between requests during the hand-over");
    }
    assert_int_equal(SSL_read(c, buf, 1), 0);
    assert_int_equal(SSL_get_error(c, 0), SSL_ERROR_ZERO_RETURN);
    tls_close(c);
    assert_int_equal(stop_daemon(&a, 0, 10000), 0); /* A drained and left after the hand-over */
    s = tls_connect(b.port);
    set_timeout(SSL_get_fd(s), 5000L * slow);
    tls_send(s, "tk", 2);
    assert_int_equal(tls_recv(s, buf, 2), 2);
    tls_close(s);
    assert_int_equal(stop_daemon(&b, SIGTERM, 10000), 0);
    cleanup(&a);
    cleanup(&b);
}

/* Socket activation: lfd as fd 3 (LISTEN_FDS=1, LISTEN_PID its own), tls_addr as its
 * --listen-tls; output into log. Returns the child's pid. */
static pid_t activate(int lfd, const char *tls_addr, const char *log)
{
    pid_t pid = fork();

    assert_true(pid >= 0);
    if (pid == 0) {
        const char *argv[] = {lfepolld, "--listen-tls", tls_addr, "--tls-cert",
                              cert,     "--tls-key",    key,      NULL};
        char p[32];
        int out = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);

        dup2(out, 1);
        dup2(out, 2);
        if (dup2(lfd, 3) < 0)
            _exit(126);
        snprintf(p, sizeof(p), "%d", (int)getpid());
        setenv("LISTEN_PID", p, 1);
        setenv("LISTEN_FDS", "1", 1);
        execv(lfepolld, (char *const *)argv);
        _exit(127);
    }
    return pid;
}

static int wait_exit(pid_t pid, long timeout_ms)
{
    long deadline = now_ms() + timeout_ms * slow;
    int st;

    while (now_ms() < deadline) {
        if (waitpid(pid, &st, WNOHANG) == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        sleep_ms(10);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1;
}

/* A socket from systemd bound where --listen-tls asks speaks TLS; a --listen-tls that names
 * none of them is a one-line error. */
static void test_socket_activation_tls(void **state)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    char log[160], addr[64], other[64], text[4096] = "";
    pid_t pid;
    ssize_t n;
    int fd;

    (void)state;
    snprintf(log, sizeof(log), "%s/activated.log", dir);
    assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(lfd, 16), 0);
    getsockname(lfd, (struct sockaddr *)&a, &al);
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", ntohs(a.sin_port));
    snprintf(other, sizeof(other), "127.0.0.1:%d", ntohs(a.sin_port) == 1 ? 2 : 1);
    pid = activate(lfd, other, log);
    assert_int_equal(wait_exit(pid, 5000), 2);
    fd = open(log, O_RDONLY);
    n = read(fd, text, sizeof(text) - 1);
    close(fd);
    text[n > 0 ? n : 0] = '\0';
    if (count_lines(text) != 1 || !strstr(text, "none of the 1 sockets from systemd"))
        fail_msg("want one line on the --listen-tls no socket matches, got: %s", text);
    pid = activate(lfd, addr, log);
    /* the socket's queue holds the connection until lfepolld serves it */
    fd = tcp_connect(ntohs(a.sin_port));
    set_timeout(fd, 10000L * slow);
    {
        SSL *s = tls_on(fd);
        char buf[4];

        tls_send(s, "sa", 2);
        assert_int_equal(tls_recv(s, buf, 2), 2);
        assert_memory_equal(buf, "sa", 2);
        tls_close(s);
    }
    kill(pid, SIGTERM);
    assert_int_equal(wait_exit(pid, 10000), 0);
    close(lfd);
}

static void test_start_errors(void **state)
{
    char none[160];

    (void)state;
    snprintf(none, sizeof(none), "%s/none.pem", dir);
    {
        const char *a[] = {"--listen-tls", "127.0.0.1:0", "--tls-cert", none,
                           "--tls-key",    key,           NULL};
        bad_start(a, 1, "cannot read it: No such file or directory");
    }
    {
        const char *a[] = {"--listen-tls", "127.0.0.1:0", "--tls-cert", expired,
                           "--tls-key",    key,           NULL};
        bad_start(a, 1, "the certificate expired on");
    }
    {
        const char *a[] = {"--listen-tls", "127.0.0.1:0", "--tls-cert", cert,
                           "--tls-key",    otherkey,      NULL};
        bad_start(a, 1, "does not match the certificate of --tls-cert");
    }
    {
        const char *a[] = {"--listen-tls", "127.0.0.1:0", "--tls-cert", key,
                           "--tls-key",    key,           NULL};
        bad_start(a, 1, "no PEM certificate in it");
    }
    {
        const char *a[] = {"--listen-tls", "127.0.0.1:0", "--tls-cert", cert,
                           "--tls-key",    cert,          NULL};
        bad_start(a, 1, "no PEM private key in it");
    }
    {
        const char *a[] = {"--listen-tls", "127.0.0.1:0", "--tls-cert", cert,
                           "--tls-key",    encrypted,     NULL};
        bad_start(a, 1, "the key is encrypted");
    }
    {
        const char *a[] = {"--listen-tls", "127.0.0.1:0", "--tls-cert", cert, NULL};
        bad_start(a, 2, "--listen-tls needs --tls-cert FILE and --tls-key FILE");
    }
}

/* conn.tls in Lua, under --tls-alpn h2,http/1.1 and --tls-verify-client optional: Python's ssl
 * client over TLS 1.3 with SNI "localhost", ALPN x and http/1.1 and a certificate of the CA
 * whose name holds a line break (CN "lfe", newline, "client", O "x,y": the subject comes as
 * one line, RFC 2253's escapes), then over TLS 1.2 to an address (no SNI) with no ALPN and no
 * certificate: each line is answered with the version, suite, name, protocol and subject (as
 * Python's own side reports them; "-" for none), the table a read gave changed to no effect; over a
 * plain listener conn.tls is nil. */
static void test_lua_conn_tls(void **state)
{
    char cmd[3072];
    const char *extra[] = {
        "--lua", "tests/lua/tlsinfo.lua", "--tls-alpn", "h2,http/1.1", "--tls-client-ca",
        ca,      "--tls-verify-client",   "optional",   NULL};
    const char *plain[] = {"--listen", "127.0.0.1:0", "--lua", "tests/lua/tlsinfo.lua", NULL};
    struct daemon d;
    char buf[16];
    int fd;

    (void)state;
    assert_int_equal(
        sh("cd %s && exec 2>/dev/null && "
           "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
           "-keyout cli.key -out cli.csr -subj \"$(printf '/CN=lfe\\nclient/O=x,y')\" && "
           "openssl x509 -req -in cli.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
           "-days 2 -out cli.pem",
           dir),
        0);
    start_own(&d, extra);
    snprintf(cmd, sizeof(cmd),
             "timeout %d python3 -c '\n"
             "import socket, ssl, sys\n"
             "def ask(name, v, alpn, cert):\n"
             "    ctx = ssl.create_default_context(cafile=sys.argv[1] + \"/ca.pem\")\n"
             "    ctx.maximum_version = v\n"
             "    ctx.check_hostname = False\n"
             "    if alpn: ctx.set_alpn_protocols(alpn)\n"
             "    if cert: ctx.load_cert_chain(sys.argv[1] + \"/cli.pem\", sys.argv[1] + "
             "\"/cli.key\")\n"
             "    raw = socket.create_connection((\"127.0.0.1\", int(sys.argv[2])))\n"
             "    s = ctx.wrap_socket(raw, server_hostname=name)\n"
             "    s.sendall(b\"what\\n\")\n"
             "    got = b\"\"\n"
             "    while not got.endswith(b\"\\n\"):\n"
             "        b = s.recv(300)\n"
             "        assert b, \"EOF\"\n"
             "        got += b\n"
             "    sni = name if name[0].isalpha() else \"-\"\n"
             "    want = \"%%s %%s %%s %%s %%s\\n\" %% (s.version(), s.cipher()[0], sni,\n"
             "        s.selected_alpn_protocol() or \"-\", \"O=x\\\\,y,CN=lfe\\\\0Aclient\" if "
             "cert else \"-\")\n"
             "    assert got.decode() == want, (got, want)\n"
             "    s.close()\n"
             "ask(\"localhost\", ssl.TLSVersion.TLSv1_3, [\"x\", \"http/1.1\"], True)\n"
             "ask(\"127.0.0.1\", ssl.TLSVersion.TLSv1_2, None, False)\n"
             "' %s %d",
             10 * slow, dir, d.port);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(stop_daemon(&d, SIGTERM, 10000), 0);
    cleanup(&d);
    assert_int_equal(spawn(&d, plain, 0, NULL), 0);
    fd = tcp_connect(d.port);
    send_all(fd, "what\n", 5);
    assert_int_equal(read_exact(fd, buf, 6, 5000L * slow), 6);
    assert_memory_equal(buf, "plain\n", 6);
    close(fd);
    assert_int_equal(stop_daemon(&d, SIGTERM, 10000), 0);
    cleanup(&d);
}

/* A certificate whose validity starts in 2099 (`openssl ca -startdate`: openssl 3.0's req and
 * x509 cannot set a start in the future): refused at start in one line naming the file. */
static void test_start_error_not_yet_valid(void **state)
{
    char future[160], want[256];
    const char *a[] = {"--listen-tls", "127.0.0.1:0", "--tls-cert", future, "--tls-key", key, NULL};

    (void)state;
    snprintf(future, sizeof(future), "%s/future.pem", dir);
    assert_int_equal(sh("cd %s && exec 2>/dev/null && : >index.txt && echo 01 >serial && "
                        "printf '[ca]\\ndefault_ca=c\\n[c]\\ndatabase=index.txt\\n"
                        "new_certs_dir=.\\nserial=serial\\ndefault_md=sha256\\npolicy=p\\n"
                        "[p]\\ncommonName=supplied\\n' >ca.cnf && "
                        "openssl ca -batch -notext -config ca.cnf -cert ca.pem -keyfile ca.key "
                        "-in srv.csr -startdate 20990101000000Z -enddate 21000101000000Z "
                        "-out future.pem",
                        dir),
                     0);
    snprintf(want, sizeof(want),
             "--tls-cert %s: the certificate is not valid before Jan  1 00:00:00 2099 GMT", future);
    bad_start(a, 1, want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_echo_line),
        cmocka_unit_test(test_tls12_no_renegotiation),
        cmocka_unit_test(test_slow_reader_gets_every_byte),
        cmocka_unit_test(test_garbage_instead_of_client_hello),
        cmocka_unit_test(test_plain_http_on_tls_port),
        cmocka_unit_test(test_trickled_hello_ends_at_deadline),
        cmocka_unit_test(test_reset_mid_handshake),
        cmocka_unit_test(test_close_notify_after_data),
        cmocka_unit_test(test_fin_without_close_notify),
        cmocka_unit_test(test_oversized_record_after_handshake),
        cmocka_unit_test(test_part_of_a_record_waits),
        cmocka_unit_test(test_many_records_in_one_segment),
        cmocka_unit_test(test_python_ssl_client),
        cmocka_unit_test(test_resumed_and_metrics),
        cmocka_unit_test(test_resumption_sends_a_new_ticket),
        cmocka_unit_test_teardown(test_shared_daemon_stops, teardown),
        cmocka_unit_test_teardown(test_sigterm_sends_close_notify, teardown),
        cmocka_unit_test_teardown(test_proxy_header_then_tls, teardown),
        cmocka_unit_test_teardown(test_max_conns_counts_handshakes, teardown),
        cmocka_unit_test_teardown(test_lua_over_tls, teardown),
        cmocka_unit_test_teardown(test_lua_conn_tls, teardown),
        cmocka_unit_test_teardown(test_part_of_a_record_waits_lua, teardown),
        cmocka_unit_test_teardown(test_records_in_a_solo_group, teardown),
        cmocka_unit_test_teardown(test_default_plan_tls, teardown),
        cmocka_unit_test_teardown(test_takeover_keeps_tls, teardown),
        cmocka_unit_test_teardown(test_socket_activation_tls, teardown),
        cmocka_unit_test_teardown(test_start_errors, teardown),
        cmocka_unit_test_teardown(test_start_error_not_yet_valid, teardown),
    };

    if (harness_init() < 0) /* before the run: it sets TEST_FILTER's filter */
        return 1;
    return cmocka_run_group_tests(tests, setup, group_teardown);
}
