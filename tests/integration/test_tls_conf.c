/* test_tls_conf: the TLS listeners' configuration against real clients (openssl s_client,
 * Python's ssl module, and an OpenSSL client here where a test must see a ticket's bytes):
 * certificates chosen by SNI, client certificates required and optional, resumption by ticket
 * and by the session cache and neither, the ticket keys' rotation, ALPN, versions, suites and
 * groups, SIGHUP with a new certificate and with a broken one, and the one-line errors at start.
 * The certificates are made at test time (tls_conf_certs.sh), once for the suite. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "harness.h"

static char dir[64];                            /* the certificates, made once (setup_certs) */
static const char here[] = "tests/integration"; /* the helpers; tests run from the top */

/* dir/name (one of 128 buffers: a test's argument list holds several). */
static const char *at(const char *name)
{
    static char buf[128][160];
    static int k;

    k = (k + 1) % 128;
    snprintf(buf[k], sizeof(buf[k]), "%s/%s", dir, name);
    return buf[k];
}

/* What a shell command prints (stdout and stderr), malloc'd. */
static char *run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *run(const char *fmt, ...)
{
    char cmd[2048], *out = malloc(1 << 16);
    size_t n = 0;
    va_list ap;
    FILE *p;

    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    assert_non_null(out);
    assert_non_null(p = popen(cmd, "r"));
    while (n < (1 << 16) - 1) {
        size_t r = fread(out + n, 1, (1 << 16) - 1 - n, p);

        if (r == 0)
            break;
        n += r;
    }
    out[n] = '\0';
    pclose(p);
    return out;
}

static void copy(const char *from, const char *to)
{
    free(run("cp %s %s", from, to));
}

static int setup_certs(void **state)
{
    char *out;

    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/lfe-tlsconf-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    out = run("%s/tls_conf_certs.sh %s 2>&1 && echo made", here, dir);
    if (!strstr(out, "made")) {
        fprintf(stderr, "the certificates were not made: %s\n", out);
        free(out);
        return -1;
    }
    free(out);
    return 0;
}

static int remove_certs(void **state)
{
    (void)state;
    free(run("rm -rf %s", dir));
    return 0;
}

/* The port of d's TLS listener, from its log. */
static int tls_port(struct daemon *d)
{
    const char *t = log_text(d), *p = strstr(t, " with TLS");
    const char *q = p;

    if (!p)
        fail_msg("no TLS listener in the log: %s", t);
    while (q > t && q[-1] != ':')
        q--;
    return atoi(q);
}

/* lfepolld with a TLS listener and args; fails the test when it does not start. */
static int start_tls(struct daemon *d, const char *const *args)
{
    const char *argv[48] = {"--listen-tls", "127.0.0.1:0"};
    int n = 2;

    for (; args && *args; args++)
        argv[n++] = *args;
    argv[n] = NULL;
    if (spawn(d, argv, 0, NULL) < 0)
        fail_msg("lfepolld did not start: %s", log_text(d));
    return tls_port(d);
}

#define CERT_A "--tls-cert", at("a.pem"), "--tls-key", at("a.key")
#define CERT_B "--tls-cert", at("b.pem"), "--tls-key", at("b.key")

/* Python's client (tls_conf_client.py): what it printed, malloc'd. */
static char *py(int port, const char *args)
{
    return run("timeout %d python3 %s/tls_conf_client.py %d --ca %s %s 2>&1", 20 * slow, here, port,
               at("ca.pem"), args);
}

/* openssl s_client, its input empty: what it printed, malloc'd. */
static char *s_client(int port, const char *args)
{
    return run("timeout %d openssl s_client -connect 127.0.0.1:%d -CAfile %s %s </dev/null 2>&1",
               10 * slow, port, at("ca.pem"), args);
}

static void want(char *out, const char *needle, const char *what)
{
    if (!strstr(out, needle))
        fail_msg("%s: want '%s' in: %s", what, needle, out);
    free(out);
}

static void want_not(char *out, const char *needle, const char *what)
{
    if (strstr(out, needle))
        fail_msg("%s: did not want '%s' in: %s", what, needle, out);
    free(out);
}

/* --- an OpenSSL client, for what the others do not show: a ticket's bytes --- */

struct tc {
    SSL_CTX *ctx;
    SSL *ssl;
    int fd;
};

static SSL_SESSION *newest; /* the newest session a server gave any tc */

static int keep_session(SSL *s, SSL_SESSION *sess)
{
    (void)s;
    SSL_SESSION_free(newest);
    newest = sess;
    return 1; /* it is ours now */
}

/* A TLS connection to port offering sess (or none); true when its handshake finished. */
static bool tc_open(struct tc *c, int port, SSL_SESSION *sess)
{
    struct timeval tv = {10 * slow, 0};

    c->ctx = SSL_CTX_new(TLS_client_method());
    assert_non_null(c->ctx);
    SSL_CTX_set_session_cache_mode(c->ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL);
    SSL_CTX_sess_set_new_cb(c->ctx, keep_session);
    assert_int_equal(SSL_CTX_load_verify_locations(c->ctx, at("ca.pem"), NULL), 1);
    SSL_CTX_set_verify(c->ctx, SSL_VERIFY_PEER, NULL);
    c->fd = tcp_connect(port);
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    c->ssl = SSL_new(c->ctx);
    SSL_set_fd(c->ssl, c->fd);
    SSL_set_tlsext_host_name(c->ssl, "a.test");
    if (sess)
        SSL_set_session(c->ssl, sess);
    return SSL_connect(c->ssl) == 1;
}

/* Whether c echoes a line (which also brings a TLS 1.3 server's tickets in). */
static bool tc_echo(struct tc *c)
{
    char buf[32];
    int n = 0, r;

    if (SSL_write(c->ssl, "ping over tls\n", 14) != 14)
        return false;
    while (n < 14 && (r = SSL_read(c->ssl, buf + n, 14 - n)) > 0)
        n += r;
    return n == 14 && !memcmp(buf, "ping over tls\n", 14);
}

/* The subject of the certificate c was served, in OpenSSL's one-line form (static buffer). */
static const char *tc_subject(struct tc *c)
{
    static char buf[256];
    X509 *x = SSL_get1_peer_certificate(c->ssl);

    buf[0] = '\0';
    if (x)
        X509_NAME_oneline(X509_get_subject_name(x), buf, sizeof(buf));
    X509_free(x);
    return buf;
}

static void tc_close(struct tc *c)
{
    SSL_shutdown(c->ssl); /* else OpenSSL marks the session (the one kept) not resumable */
    SSL_free(c->ssl);
    SSL_CTX_free(c->ctx);
    close(c->fd);
    ERR_clear_error();
}

/* A session with a ticket, fresh from a full handshake (the caller frees it). */
static SSL_SESSION *fresh_ticket(int port)
{
    struct tc c;
    SSL_SESSION *s;

    SSL_SESSION_free(newest);
    newest = NULL;
    assert_true(tc_open(&c, port, NULL));
    assert_true(tc_echo(&c));
    tc_close(&c);
    assert_non_null(newest);
    s = newest;
    newest = NULL;
    return s;
}

/* The name of the key that sealed sess's ticket: its first 16 bytes (OpenSSL's ticket form). */
static void key_name(const SSL_SESSION *sess, unsigned char name[16])
{
    const unsigned char *t;
    size_t len;

    SSL_SESSION_get0_ticket(sess, &t, &len);
    assert_true(len > 16);
    memcpy(name, t, 16);
}

/* Whether a connection offering sess resumed it (and echoed). */
static bool resumes(int port, SSL_SESSION *sess)
{
    struct tc c;
    bool r;

    assert_true(tc_open(&c, port, sess));
    assert_true(tc_echo(&c));
    r = SSL_session_reused(c.ssl);
    tc_close(&c);
    return r;
}

/* What cc's args ask (tls_conf_client.py's options, where the two do the same). */
struct cc_opts {
    const char *sni, *alpn, *min, *max, *ciphers, *cert, *key;
    bool resume;
};

static void cc_parse(char *args, struct cc_opts *o)
{
    for (char *w = strtok(args, " "); w; w = strtok(NULL, " ")) {
        const char **v = !strcmp(w, "--sni")       ? &o->sni
                         : !strcmp(w, "--alpn")    ? &o->alpn
                         : !strcmp(w, "--min")     ? &o->min
                         : !strcmp(w, "--max")     ? &o->max
                         : !strcmp(w, "--ciphers") ? &o->ciphers
                         : !strcmp(w, "--cert")    ? &o->cert
                         : !strcmp(w, "--key")     ? &o->key
                                                   : NULL;

        if (!strcmp(w, "--resume"))
            o->resume = true;
        else if (!v || !(*v = strtok(NULL, " ")))
            fail_msg("cc: '%s' is not an option of this client", w);
    }
}

/* One connection of cc: its facts appended to out, as tls_conf_client.py prints them. */
static void cc_one(int port, const struct cc_opts *o, SSL_SESSION *sess, char *out, size_t len)
{
    static const int v[] = {TLS1_2_VERSION, TLS1_3_VERSION};
    unsigned char wire[256];
    const unsigned char *sel;
    unsigned sl = 0, wl = 0;
    char subj[256] = "";
    X509 *x;
    struct tc c;

#define SAY(...) snprintf(out + strlen(out), len - strlen(out), __VA_ARGS__)
    c.ctx = SSL_CTX_new(TLS_client_method());
    assert_non_null(c.ctx);
    SSL_CTX_set_session_cache_mode(c.ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL);
    SSL_CTX_sess_set_new_cb(c.ctx, keep_session);
    assert_int_equal(SSL_CTX_load_verify_locations(c.ctx, at("ca.pem"), NULL), 1);
    SSL_CTX_set_verify(c.ctx, SSL_VERIFY_PEER, NULL);
    if (o->min)
        SSL_CTX_set_min_proto_version(c.ctx, v[!strcmp(o->min, "1.3")]);
    if (o->max)
        SSL_CTX_set_max_proto_version(c.ctx, v[!strcmp(o->max, "1.3")]);
    if (o->ciphers)
        assert_int_equal(SSL_CTX_set_cipher_list(c.ctx, o->ciphers), 1);
    if (o->cert)
        assert_int_equal(SSL_CTX_use_certificate_chain_file(c.ctx, o->cert) &
                             SSL_CTX_use_PrivateKey_file(c.ctx, o->key, SSL_FILETYPE_PEM),
                         1);
    for (const char *p = o->alpn; p && *p;) {
        size_t n = strcspn(p, ",");

        wire[wl++] = (unsigned char)n;
        memcpy(wire + wl, p, n);
        wl += (unsigned)n;
        p += n + (p[n] == ',');
    }
    if (wl)
        SSL_CTX_set_alpn_protos(c.ctx, wire, wl);
    c.fd = tcp_connect(port);
    {
        struct timeval tv = {10 * slow, 0};

        setsockopt(c.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    }
    c.ssl = SSL_new(c.ctx);
    SSL_set_fd(c.ssl, c.fd);
    if (o->sni)
        SSL_set_tlsext_host_name(c.ssl, o->sni);
    if (sess)
        SSL_set_session(c.ssl, sess);
    if (SSL_connect(c.ssl) != 1) {
        SAY("error: %s\n", ERR_reason_error_string(ERR_peek_last_error()));
        tc_close(&c);
        return;
    }
    SAY("handshake ok\nversion %s\ncipher %s\n", SSL_get_version(c.ssl),
        SSL_CIPHER_get_name(SSL_get_current_cipher(c.ssl)));
    SSL_get0_alpn_selected(c.ssl, &sel, &sl);
    SAY("alpn %.*s\n", sl ? (int)sl : 4, sl ? (const char *)sel : "none");
    if ((x = SSL_get1_peer_certificate(c.ssl))) {
        X509_NAME *nm = X509_get_subject_name(x);

        for (int i = 0; i < X509_NAME_entry_count(nm); i++) {
            X509_NAME_ENTRY *e = X509_NAME_get_entry(nm, i);
            const ASN1_STRING *d = X509_NAME_ENTRY_get_data(e);

            snprintf(subj + strlen(subj), sizeof(subj) - strlen(subj), "%s%s=%.*s", i ? "," : "",
                     OBJ_nid2sn(OBJ_obj2nid(X509_NAME_ENTRY_get_object(e))), ASN1_STRING_length(d),
                     (const char *)ASN1_STRING_get0_data(d));
        }
        X509_free(x);
    }
    SAY("subject %s\n%s\n", subj, tc_echo(&c) ? "echo ok" : "echo lost");
    if (sess)
        SAY("reused %s\n", SSL_session_reused(c.ssl) ? "True" : "False");
    tc_close(&c);
#undef SAY
}

/* The OpenSSL client here, for what needs no other client: what it saw, in
 * tls_conf_client.py's words (malloc'd). args as that script's: --sni, --alpn, --min, --max,
 * --ciphers, --cert and --key, --resume. */
static char *cc(int port, const char *args)
{
    char *copy = strdup(args), *out = calloc(1, 4096);
    struct cc_opts o = {0};

    assert_non_null(copy);
    assert_non_null(out);
    cc_parse(copy, &o);
    SSL_SESSION_free(newest);
    newest = NULL;
    cc_one(port, &o, NULL, out, 4096);
    if (o.resume && newest) {
        SSL_SESSION *s = newest;

        newest = NULL;
        cc_one(port, &o, s, out, 4096);
        SSL_SESSION_free(s);
    } else if (o.resume) {
        snprintf(out + strlen(out), 4096 - strlen(out), "reused False (no session to offer)\n");
    }
    free(copy);
    return out;
}

static double metric(struct daemon *d, const char *name)
{
    char *body;
    double v;

    assert_int_equal(http_get(admin_port(d), "/metrics", &body), 200);
    v = metric_sum(body, name);
    free(body);
    return v;
}

/* --- the tests --- */

/* Five certificates: SNI picks the one holding the name (exact before a wildcard, then the first
 * given; the CN of one without subjectAltName), anything else gets the first; seen by s_client
 * and by Python. */
static void test_sni_picks_the_certificate(void **state)
{
    const char *const args[] = {CERT_A,       CERT_B,       "--tls-cert", at("c.pem"), "--tls-key",
                                at("c.key"),  "--tls-cert", at("a2.pem"), "--tls-key", at("a2.key"),
                                "--tls-cert", at("d.pem"),  "--tls-key",  at("d.key"), NULL};
    struct daemon d;
    int port;

    (void)state;
    port = start_tls(&d, args);
    want(s_client(port, "-servername b.test -verify_return_error -brief"),
         "Peer certificate: CN = b.test", "SNI b.test");
    want(s_client(port, "-servername any.w.test -verify_return_error -brief"),
         "Peer certificate: CN = b.test", "SNI any.w.test (the wildcard *.w.test)");
    want(s_client(port, "-servername x.w.test -verify_return_error -brief"),
         "Peer certificate: CN = c.test", "SNI x.w.test: c's exact name before b's wildcard");
    want(s_client(port, "-servername a.w.b.test -brief"), "Peer certificate: CN = a.test",
         "SNI two labels under a wildcard's: the default");
    want(s_client(port, "-servername a.test -verify_return_error -brief"),
         "Peer certificate: CN = a.test", "SNI a.test: the first of two holding it");
    want(s_client(port, "-servername d.test -verify_return_error -brief"),
         "Peer certificate: CN = d.test", "SNI d.test: the CN of a certificate without SAN");
    want(s_client(port, "-servername unknown.test -brief"), "Peer certificate: CN = a.test",
         "an unknown SNI gets the default");
    want(s_client(port, "-noservername -brief"), "Peer certificate: CN = a.test",
         "no SNI gets the default");
    want(py(port, "--sni B.TEST"), "subject CN=b.test", "SNI in capitals (Python)");
    want(cc(port, "--sni b.test"), "echo ok", "an echo over b.test's certificate");
    assert_int_equal(stop_daemon(&d, SIGTERM, 5000), 0);
    cleanup(&d);
}

/* --tls-verify-client on: no certificate fails, one of another CA fails, both counted; the right
 * one echoes. */
static void test_client_cert_required(void **state)
{
    const char *const args[] = {
        CERT_A,    "--tls-verify-client", "on", "--tls-client-ca", at("cca.pem"),
        "--admin", "127.0.0.1:0",         NULL};
    char cert[400], stranger[400];
    struct daemon d;
    int port;

    (void)state;
    port = start_tls(&d, args);
    snprintf(cert, sizeof(cert), "--cert %s --key %s", at("client.pem"), at("client.key"));
    snprintf(stranger, sizeof(stranger), "--cert %s --key %s", at("stranger.pem"),
             at("stranger.key"));
    want_not(cc(port, ""), "echo ok", "no client certificate (TLS 1.3)");
    want_not(cc(port, "--max 1.2"), "echo ok", "no client certificate (TLS 1.2)");
    want_not(cc(port, stranger), "echo ok", "a client certificate of another CA");
    want(py(port, cert), "echo ok", "the right client certificate");
    {
        char *o = run("timeout %d openssl s_client -connect 127.0.0.1:%d -CAfile %s -cert %s -key "
                      "%s -brief </dev/null 2>&1",
                      10 * slow, port, at("ca.pem"), at("client.pem"), at("client.key"));
        want(o, "CONNECTION ESTABLISHED", "s_client with the right client certificate");
        want(s_client(port, ""), "Acceptable client certificate CA names\nCN = cca test CA",
             "the certificate request names --tls-client-ca's CA");
    }
    assert_int_equal(metric(&d, "lfepolld_worker_tls_fail_client_cert_total"), 4);
    assert_int_equal(stop_daemon(&d, SIGTERM, 5000), 0);
    cleanup(&d);
}

/* --tls-verify-client optional: none echoes; the right one echoes; another CA's still fails. */
static void test_client_cert_optional(void **state)
{
    const char *const args[] = {
        CERT_A, "--tls-verify-client", "optional", "--tls-client-ca", at("cca.pem"), NULL};
    char cert[400], stranger[400];
    struct daemon d;
    int port;

    (void)state;
    port = start_tls(&d, args);
    snprintf(cert, sizeof(cert), "--cert %s --key %s", at("client.pem"), at("client.key"));
    snprintf(stranger, sizeof(stranger), "--cert %s --key %s", at("stranger.pem"),
             at("stranger.key"));
    want(py(port, ""), "echo ok", "no client certificate, optional");
    want(cc(port, cert), "echo ok", "the right client certificate, optional");
    want_not(cc(port, stranger), "echo ok", "a client certificate of another CA, optional");
    assert_int_equal(stop_daemon(&d, SIGTERM, 5000), 0);
    cleanup(&d);
}

/* Tickets on (the default): Python resumes (TLS 1.3), s_client resumes with -sess_out/-sess_in
 * (TLS 1.2); the same with tickets off and the cache on (session IDs, stateful TLS 1.3
 * tickets); with both off, no client resumes. */
static void test_resumption(void **state)
{
#define TWO_GROUPS "--groups", "2", "--workers", "1" /* a resumption on the other worker */
    const char *const on[] = {CERT_A, TWO_GROUPS, "--tls-session-cache", "0", NULL};
    const char *const cache[] = {CERT_A, TWO_GROUPS, "--tls-tickets", "off", NULL};
    const char *const none[] = {CERT_A, TWO_GROUPS, "--tls-tickets", "off", "--tls-session-cache",
                                "0",    NULL};
#undef TWO_GROUPS
    const char *const *cases[] = {on, cache, none};
    char sess[256];

    (void)state;
    snprintf(sess, sizeof(sess), "%s", at("s12.pem"));
    for (int i = 0; i < 3; i++) {
        bool resume = i < 2;
        struct daemon d;
        int port = start_tls(&d, cases[i]);
        char args[512];

        want(py(port, "--resume"), resume ? "reused True" : "reused False", "Python, TLS 1.3");
        want(cc(port, "--resume --max 1.2"), resume ? "reused True" : "reused False", "TLS 1.2");
        unlink(sess);
        snprintf(args, sizeof(args), "-tls1_2 -sess_out %s", sess);
        want(s_client(port, args), "New, TLSv1.2", "s_client's first connection");
        snprintf(args, sizeof(args), "-tls1_2 -sess_in %s", sess);
        if (resume || access(sess, F_OK) == 0) /* none to keep: s_client writes no file */
            want(s_client(port, args), resume ? "Reused, TLSv1.2" : "New, TLSv1.2",
                 "s_client offering its session");
        assert_int_equal(stop_daemon(&d, SIGTERM, 5000), 0);
        cleanup(&d);
    }
}

/* --tls-session-cache 1 (tickets off): a second session pushes the first out (and the full
 * handshake that finds it gone would push the second out: the second is tried first). */
static void test_session_cache_keeps_n(void **state)
{
    const char *const args[] = {CERT_A, "--tls-tickets", "off", "--tls-session-cache", "1", NULL};
    char first[160], second[160], a[400];
    struct daemon d;
    int port;

    (void)state;
    snprintf(first, sizeof(first), "%s", at("s1.pem"));
    snprintf(second, sizeof(second), "%s", at("s2.pem"));
    port = start_tls(&d, args);
    snprintf(a, sizeof(a), "-tls1_2 -sess_out %s", first);
    want(s_client(port, a), "New, TLSv1.2", "the first session");
    snprintf(a, sizeof(a), "-tls1_2 -sess_in %s", first);
    want(s_client(port, a), "Reused, TLSv1.2", "the first session, kept");
    snprintf(a, sizeof(a), "-tls1_2 -sess_out %s", second);
    want(s_client(port, a), "New, TLSv1.2", "the second session");
    snprintf(a, sizeof(a), "-tls1_2 -sess_in %s", second);
    want(s_client(port, a), "Reused, TLSv1.2", "the second session, kept");
    snprintf(a, sizeof(a), "-tls1_2 -sess_in %s", first);
    want(s_client(port, a), "New, TLSv1.2", "the first session, pushed out");
    assert_int_equal(stop_daemon(&d, SIGTERM, 5000), 0);
    cleanup(&d);
}

/* --tls-ticket-rotate 1s: a ticket sealed before one rotation still resumes, one sealed before
 * two does not. No clock is asserted: each rotation is seen in the name of the key that seals a
 * fresh ticket; a second rotation that comes between seeing the first and resuming starts the
 * round again (a few rounds at most). */
static void test_ticket_rotation(void **state)
{
    const char *const args[] = {CERT_A, "--tls-ticket-rotate",   "1s",  "--tls-session-cache",
                                "0",    "--tls-session-timeout", "77s", NULL};
    unsigned char a[16], b[16], now[16];
    struct daemon d;
    SSL_SESSION *t;
    int port, round;

    (void)state;
    port = start_tls(&d, args);
    t = fresh_ticket(port); /* --tls-session-timeout is the tickets' lifetime */
    assert_int_equal(SSL_SESSION_get_ticket_lifetime_hint(t), 77);
    SSL_SESSION_free(t);
    for (round = 0; round < 5; round++) {
        SSL_SESSION *t0 = fresh_ticket(port);
        long deadline = now_ms() + 10000L * slow;
        bool reused;

        key_name(t0, a);
        do { /* the first rotation */
            t = fresh_ticket(port);
            key_name(t, b);
            SSL_SESSION_free(t);
            if (now_ms() > deadline)
                fail_msg("the ticket key did not change within 10 s of --tls-ticket-rotate 1s");
            if (memcmp(a, b, 16))
                break;
            sleep_ms(50);
        } while (1);
        reused = resumes(port, t0);
        t = fresh_ticket(port);
        key_name(t, now);
        SSL_SESSION_free(t);
        if (!reused) {
            if (memcmp(now, b, 16)) { /* a second rotation came in between: again */
                SSL_SESSION_free(t0);
                continue;
            }
            fail_msg("a ticket sealed one rotation ago did not resume");
        }
        while (!memcmp(now, b, 16) || !memcmp(now, a, 16)) { /* the second rotation */
            if (now_ms() > deadline)
                fail_msg("the ticket key did not change twice within 10 s");
            sleep_ms(50);
            t = fresh_ticket(port);
            key_name(t, now);
            SSL_SESSION_free(t);
        }
        assert_false(resumes(port, t0));
        SSL_SESSION_free(t0);
        break;
    }
    assert_true(round < 5);
    assert_int_equal(stop_daemon(&d, SIGTERM, 5000), 0);
    cleanup(&d);
}

/* ALPN in the server's order, refused without overlap, served without ALPN; versions; suites;
 * groups. */
static void test_alpn_versions_suites_groups(void **state)
{
    const char *const args[] = {CERT_A,
                                "--tls-alpn",
                                "h2,http/1.1",
                                "--tls-ciphersuites",
                                "TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256",
                                "--tls-groups",
                                "P-256",
                                "--tls-ciphers",
                                "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-CHACHA20-POLY1305",
                                NULL};
    const char *const v13[] = {CERT_A, "--tls-min-version", "1.3", "--admin", "127.0.0.1:0", NULL};
    const char *const v12[] = {CERT_A, "--tls-max-version", "1.2", NULL};
    struct daemon d;
    int port;

    (void)state;
    port = start_tls(&d, args);
    want(py(port, "--alpn http/1.1,h2"), "alpn h2", "ALPN: the server's preference");
    want(cc(port, "--alpn x,http/1.1"), "alpn http/1.1", "ALPN: the one both speak");
    want_not(cc(port, "--alpn x,y"), "echo ok", "ALPN without overlap is refused");
    want(s_client(port, "-alpn x"), "no application protocol", "s_client hears why");
    want(cc(port, ""), "alpn none", "no ALPN offered is served");
    want(cc(port, ""), "cipher TLS_CHACHA20_POLY1305_SHA256", "the first suite, the server's");
    want(
        cc(port, "--max 1.2 --ciphers ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES128-GCM-SHA256"),
        "cipher ECDHE-ECDSA-AES128-GCM-SHA256", "--tls-ciphers: the server's first");
    want_not(cc(port, "--max 1.2 --ciphers ECDHE-ECDSA-AES256-GCM-SHA384"), "echo ok",
             "--tls-ciphers: a cipher outside it");
    want(s_client(port, "-groups X25519"), "handshake failure", "no group in common");
    want(s_client(port, "-groups X25519:P-256 -brief"), "Server Temp Key: ECDH, prime256v1",
         "--tls-groups P-256");
    assert_int_equal(stop_daemon(&d, SIGTERM, 5000), 0);
    cleanup(&d);
    port = start_tls(&d, v13);
    want_not(cc(port, "--max 1.2"), "echo ok", "TLS 1.2 to --tls-min-version 1.3");
    want(cc(port, ""), "version TLSv1.3", "TLS 1.3 to --tls-min-version 1.3");
    assert_int_equal(metric(&d, "lfepolld_worker_tls_fail_protocol_total"), 1);
    assert_int_equal(stop_daemon(&d, SIGTERM, 5000), 0);
    cleanup(&d);
    port = start_tls(&d, v12);
    want(cc(port, ""), "version TLSv1.2", "--tls-max-version 1.2");
    want_not(cc(port, "--min 1.3"), "echo ok", "TLS 1.3 only to --tls-max-version 1.2");
    assert_int_equal(stop_daemon(&d, SIGTERM, 5000), 0);
    cleanup(&d);
}

/* Waits (bounded) for the n-th line of the log holding needle; returns that line (static). */
static const char *await_line(struct daemon *d, const char *needle, int n)
{
    long deadline = now_ms() + 10000L * slow;
    static char line[1024];

    while (now_ms() < deadline) {
        const char *t = log_text(d), *p = t;
        int seen = 0;

        while ((p = strstr(p, needle)) && ++seen < n)
            p++;
        if (p) {
            const char *s = p, *e = strchr(p, '\n');

            while (s > t && s[-1] != '\n')
                s--;
            snprintf(line, sizeof(line), "%.*s", (int)((e ? e : p + strlen(p)) - s), s);
            return line;
        }
        sleep_ms(20);
    }
    fail_msg("no '%s' (#%d) in the log within 10 s: %s", needle, n, log_text(d));
    return NULL;
}

/* SIGHUP with a new certificate in the files: new connections get it, an open connection keeps
 * echoing; then broken files (garbage, a key of another certificate, an expired certificate):
 * each keeps the running certificate and says why in one line naming the file. */
static void test_sighup_reloads_certificates(void **state)
{
    char cert[160], key[160];
    const char *const args[] = {"--tls-cert", cert, "--tls-key", key, NULL};
    struct {
        const char *pem, *key, *why;
    } broken[] = {
        {"garbage.pem", "a2.key", "no PEM certificate in it"},
        {"b.pem", "a2.key", "does not match the certificate"},
        {"expired.pem", "expired.key", "the certificate expired on"},
    };
    struct daemon d;
    struct tc old, c;
    int port;

    (void)state;
    snprintf(cert, sizeof(cert), "%s", at("live.pem"));
    snprintf(key, sizeof(key), "%s", at("live.key"));
    copy(at("a.pem"), cert);
    copy(at("a.key"), key);
    port = start_tls(&d, args);
    assert_true(tc_open(&old, port, NULL));
    assert_true(tc_echo(&old));
    assert_string_equal(tc_subject(&old), "/CN=a.test");
    copy(at("a2.pem"), cert);
    copy(at("a2.key"), key);
    kill(d.pid, SIGHUP);
    await_line(&d, "TLS certificates and keys reloaded", 1);
    assert_true(tc_open(&c, port, NULL));
    assert_string_equal(tc_subject(&c), "/O=second/CN=a.test");
    assert_true(tc_echo(&c));
    tc_close(&c);
    assert_true(tc_echo(&old)); /* the open connection keeps its certificate and its session */
    want(py(port, ""), "subject O=second,CN=a.test", "Python after the reload");
    for (int i = 0; i < 3; i++) {
        const char *line;

        copy(at(broken[i].pem), cert);
        copy(at(broken[i].key), key);
        kill(d.pid, SIGHUP);
        line = await_line(&d, "TLS reload failed", i + 1);
        if (!strstr(line, "the running certificates stay") || !strstr(line, broken[i].why) ||
            !strstr(line, broken[i].pem[0] == 'b' ? key : cert))
            fail_msg("want the file and '%s' in: %s", broken[i].why, line);
        assert_true(tc_open(&c, port, NULL));
        assert_string_equal(tc_subject(&c), "/O=second/CN=a.test");
        assert_true(tc_echo(&c));
        tc_close(&c);
    }
    assert_true(tc_echo(&old));
    tc_close(&old);
    assert_int_equal(stop_daemon(&d, SIGTERM, 5000), 0);
    cleanup(&d);
}

/* A ticket from before a SIGHUP resumes after it (the keys stay), not after a restart (new
 * keys); a session in the cache does not survive a SIGHUP (a new generation starts an empty
 * cache). */
static void test_sighup_keeps_ticket_keys(void **state)
{
    const char *const tickets[] = {CERT_A, "--tls-session-cache", "0", NULL};
    const char *const cache[] = {CERT_A, "--tls-tickets", "off", NULL};
    char a[400];
    struct daemon d;
    SSL_SESSION *t;
    int port;

    (void)state;
    port = start_tls(&d, tickets);
    t = fresh_ticket(port);
    kill(d.pid, SIGHUP);
    await_line(&d, "TLS certificates and keys reloaded", 1);
    assert_true(resumes(port, t));
    assert_int_equal(stop_daemon(&d, SIGTERM, 5000), 0);
    cleanup(&d);
    port = start_tls(&d, tickets); /* a restart makes new keys */
    assert_false(resumes(port, t));
    SSL_SESSION_free(t);
    assert_int_equal(stop_daemon(&d, SIGTERM, 5000), 0);
    cleanup(&d);
    port = start_tls(&d, cache);
    snprintf(a, sizeof(a), "-tls1_2 -sess_out %s", at("s3.pem"));
    want(s_client(port, a), "New, TLSv1.2", "a session for the cache");
    snprintf(a, sizeof(a), "-tls1_2 -sess_in %s", at("s3.pem"));
    want(s_client(port, a), "Reused, TLSv1.2", "the cache before the SIGHUP");
    kill(d.pid, SIGHUP);
    await_line(&d, "TLS certificates and keys reloaded", 1);
    want(s_client(port, a), "New, TLSv1.2", "the cache after the SIGHUP");
    assert_int_equal(stop_daemon(&d, SIGTERM, 5000), 0);
    cleanup(&d);
}

/* As root with --user nobody: the files are read at start as root (a key only root may read),
 * a SIGHUP reads them as nobody, fails, and keeps the running certificate, in one line. */
static void test_sighup_reads_as_user(void **state)
{
    char cert[160], key[160];
    const char *const args[] = {"--tls-cert", cert, "--tls-key", key, "--user", "nobody", NULL};
    struct daemon d;
    int port;

    (void)state;
    if (geteuid() != 0 || !getpwnam("nobody")) {
        print_message("skipped: needs root and a user nobody\n");
        skip();
    }
    snprintf(cert, sizeof(cert), "%s", at("root.pem"));
    snprintf(key, sizeof(key), "%s", at("root.key"));
    copy(at("a.pem"), cert);
    copy(at("a.key"), key);
    assert_int_equal(chmod(key, 0600), 0); /* in a directory of mode 0700, root's */
    port = start_tls(&d, args);
    want(cc(port, ""), "echo ok", "served after the switch to nobody");
    kill(d.pid, SIGHUP);
    want(strdup(await_line(&d, "TLS reload failed", 1)),
         "root.pem: cannot read it: Permission denied", "the reload as nobody");
    want(cc(port, ""), "subject CN=a.test", "the running certificate stays");
    assert_int_equal(stop_daemon(&d, SIGTERM, 5000), 0);
    cleanup(&d);
}

/* --config: the TLS options from a file; the command line's --tls-cert pair replaces the
 * file's. */
static void test_config_file(void **state)
{
    char conf[160], cli[2][160];
    const char *const args[] = {"--config", conf, "--listen-tls", "127.0.0.1:0", NULL};
    const char *const argv[] = {"--config",    conf,         "--listen-tls",
                                "127.0.0.1:0", "--tls-cert", cli[0],
                                "--tls-key",   cli[1],       NULL};
    struct daemon d;
    FILE *f;
    int port;

    (void)state;
    snprintf(conf, sizeof(conf), "%s", at("lfepolld.conf"));
    snprintf(cli[0], sizeof(cli[0]), "%s", at("b.pem"));
    snprintf(cli[1], sizeof(cli[1]), "%s", at("b.key"));
    assert_non_null(f = fopen(conf, "w"));
    fprintf(f, "tls-cert = %s\ntls-key = %s\ntls-alpn = h2\ntls-min-version = 1.3\n", at("a.pem"),
            at("a.key"));
    fclose(f);
    if (spawn(&d, args, 0, NULL) < 0)
        fail_msg("lfepolld did not start: %s", log_text(&d));
    port = tls_port(&d);
    want(py(port, "--alpn h2"), "subject CN=a.test", "the file's certificate");
    want(cc(port, "--alpn h2"), "alpn h2", "the file's --tls-alpn");
    want_not(cc(port, "--max 1.2"), "echo ok", "the file's --tls-min-version");
    assert_int_equal(stop_daemon(&d, SIGTERM, 5000), 0);
    cleanup(&d);
    if (spawn(&d, argv, 0, NULL) < 0)
        fail_msg("lfepolld did not start: %s", log_text(&d));
    want(cc(tls_port(&d), "--sni a.test"), "subject CN=b.test",
         "the command line's pair replaces the file's (a.test is no longer served)");
    assert_int_equal(stop_daemon(&d, SIGTERM, 5000), 0);
    cleanup(&d);
}

/* Each bad configuration stops the start with one line saying what and why. */
static void test_start_errors(void **state)
{
    struct {
        const char *argv[12];
        int status; /* 2: the options do not go together; 1: a file or a list is refused */
        const char *needle;
    } bad[] = {
        {{CERT_A, "--tls-cert", at("expired.pem"), "--tls-key", at("expired.key")},
         1,
         "expired.pem: the certificate expired on"},
        {{CERT_A, "--tls-cert", at("b.pem"), "--tls-key", at("a.key")},
         1,
         "a.key: does not match the certificate of --tls-cert"},
        {{CERT_A, "--tls-cert", at("garbage.pem"), "--tls-key", at("b.key")},
         1,
         "garbage.pem: no PEM certificate in it"},
        {{CERT_A, "--tls-cert", at("b.pem")}, 2, "--tls-cert given 2 times and --tls-key 1"},
        {{CERT_A, "--tls-verify-client", "on", "--tls-client-ca", at("garbage.pem")},
         1,
         "garbage.pem: no PEM certificate in it"},
        {{CERT_A, "--tls-verify-client", "on", "--tls-client-ca", at("none.pem")},
         1,
         "none.pem: cannot read it"},
        {{CERT_A, "--tls-verify-client", "on"}, 2, "needs --tls-client-ca"},
        {{CERT_A, "--tls-ciphers", "NOSUCH"}, 1, "--tls-ciphers 'NOSUCH': OpenSSL knows no"},
        {{CERT_A, "--tls-ciphersuites", "TLS_AES_128_GCM_SHA256:NOSUCH"},
         1,
         "--tls-ciphersuites 'TLS_AES_128_GCM_SHA256:NOSUCH': not a list"},
        {{CERT_A, "--tls-groups", "X25519:NOSUCH"}, 1, "--tls-groups 'X25519:NOSUCH': not a"},
        {{CERT_A, "--tls-alpn", "h2,,x"}, 1, "--tls-alpn 'h2,,x': protocol names are"},
        {{CERT_A, "--tls-min-version", "1.3", "--tls-max-version", "1.2"}, 2, "no version left"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *argv[16] = {"--listen-tls", "127.0.0.1:0"};
        int n = 2;

        for (int k = 0; bad[i].argv[k]; k++)
            argv[n++] = bad[i].argv[k];
        bad_start(argv, bad[i].status, bad[i].needle);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_sni_picks_the_certificate, teardown),
        cmocka_unit_test_teardown(test_client_cert_required, teardown),
        cmocka_unit_test_teardown(test_client_cert_optional, teardown),
        cmocka_unit_test_teardown(test_resumption, teardown),
        cmocka_unit_test_teardown(test_session_cache_keeps_n, teardown),
        cmocka_unit_test_teardown(test_ticket_rotation, teardown),
        cmocka_unit_test_teardown(test_alpn_versions_suites_groups, teardown),
        cmocka_unit_test_teardown(test_sighup_reloads_certificates, teardown),
        cmocka_unit_test_teardown(test_sighup_keeps_ticket_keys, teardown),
        cmocka_unit_test_teardown(test_sighup_reads_as_user, teardown),
        cmocka_unit_test_teardown(test_config_file, teardown),
        cmocka_unit_test_teardown(test_start_errors, teardown),
    };
    if (harness_init() < 0)
        return 1;
    return cmocka_run_group_tests(tests, setup_certs, remove_certs);
}
