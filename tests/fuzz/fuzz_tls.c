/* fuzz_tls: the server's TLS handshake and record path (src/tls.c: tls_handshake, tls_read,
 * tls_write, tls_notify, tls_facts) on an SSL made from lfepolld's own configuration (opt_parse
 * and tls_conf_new, --tls-alpn h2,http/1.1, an ECDSA P-256 certificate made in memory once and
 * handed over as /proc/self/fd paths of memfds: no file is written). The server's SSL is moved from
 * its socket onto one end of a BIO pair whose buffer size the input picks (so its writes meet
 * WANT_WRITE as a full socket gives it); the harness holds the other end.
 *
 * The first byte picks the mode. Raw (even): the rest is a client's bytes, fed in pieces as the
 * pair takes them (a real ClientHello is among the seeds). Live (odd): an OpenSSL client on
 * memory BIOs, TLS 1.2 or 1.3, sends plaintext the input gives, in pieces, and reads the echo;
 * one byte of its stream to the server may be changed (xor) at an offset the input picks.
 *
 * Invariants: a step returns a value of enum tls_step, a failure one of enum tls_fail, and a
 * failed or broken connection is marked CONN_TLS_DEAD (reads give 0, writes -EPIPE after it);
 * a read returns at most what was asked; whatever plaintext the server reads, and whatever the
 * client gets back, is a prefix of what the client sent (a changed byte never turns into other
 * plaintext); with no byte changed the handshake finishes, the echo comes back byte-exact, the
 * client's close_notify ends the server's input (CONN_RDCLOSED), tls_facts (conn.tls) names
 * the version, suite, SNI and ALPN protocol the client's side has, and the server's own
 * close_notify reaches the client; nothing leaks (LeakSanitizer). */
#include "fuzz.h"

#include "conn.h"
#include "opt.h"
#include "tls.h"
#include "tls_conf.h"

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#define PAYLOAD_MAX 16384
#define STEPS_MAX 4000

static SSL_CTX *client_ctx[2];

/* A PEM-writing function's output as a memfd, for a path under /proc/self/fd. */
static int pem_fd(const char *name, int (*put)(BIO *, const void *), const void *obj)
{
    BIO *b = BIO_new(BIO_s_mem());
    char *p;
    long n;
    int fd = memfd_create(name, MFD_CLOEXEC);

    FZ_CHECK(b && fd >= 0 && put(b, obj), "cannot write %s", name);
    n = BIO_get_mem_data(b, &p);
    FZ_CHECK(write(fd, p, (size_t)n) == n, "short write of %s", name);
    BIO_free(b);
    return fd;
}

static int put_cert(BIO *b, const void *x)
{
    return PEM_write_bio_X509(b, (X509 *)x);
}

static int put_key(BIO *b, const void *k)
{
    return PEM_write_bio_PrivateKey(b, (EVP_PKEY *)k, NULL, NULL, 0, NULL, NULL);
}

/* A self-signed certificate for k, valid from an hour ago for a day. */
static X509 *self_signed(EVP_PKEY *k)
{
    X509 *x = X509_new();
    X509_NAME *n;

    FZ_CHECK(x, "X509_new");
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), -3600);
    X509_gmtime_adj(X509_getm_notAfter(x), 86400);
    X509_set_pubkey(x, k);
    n = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)"fuzz.test", -1, -1,
                               0);
    X509_set_issuer_name(x, n);
    FZ_CHECK(X509_sign(x, k, EVP_sha256()) > 0, "X509_sign");
    return x;
}

/* lfepolld's configuration, built as main builds it (opt_parse, then tls_conf_new) from the
 * certificate and key in memfds, with --tls-alpn; kept for the process (o must outlive it). */
static struct tls_conf *server_conf;
static struct opt server_opt;
static char cert_path[64], key_path[64], words[9][64]; /* argv's, which server_opt points into */

static void make_server_conf(void)
{
    EVP_PKEY *k = EVP_EC_gen("P-256");
    const char *args[] = {"lfepolld",  "--listen-tls", "127.0.0.1:0", "--tls-cert", cert_path,
                          "--tls-key", key_path,       "--tls-alpn",  "h2,http/1.1"};
    char *argv[10] = {NULL}, err[512] = "";
    X509 *x;
    int cfd, kfd;

    FZ_CHECK(k, "EVP_EC_gen");
    x = self_signed(k);
    cfd = pem_fd("fuzz-cert", put_cert, x);
    kfd = pem_fd("fuzz-key", put_key, k);
    snprintf(cert_path, sizeof(cert_path), "/proc/self/fd/%d", cfd);
    snprintf(key_path, sizeof(key_path), "/proc/self/fd/%d", kfd);
    for (int i = 0; i < 9; i++)
        argv[i] = strcpy(words[i], args[i]);
    FZ_CHECK(opt_parse(&server_opt, 9, argv, stderr, err, sizeof(err)) == OPT_RUN, "opt_parse: %s",
             err);
    server_conf = tls_conf_new(&server_opt, err, sizeof(err));
    FZ_CHECK(server_conf, "tls_conf_new: %s", err);
    close(cfd); /* read: a reload is not fuzzed */
    close(kfd);
    X509_free(x);
    EVP_PKEY_free(k);
}

static void make_client_ctx(void)
{
    for (int i = 0; i < 2; i++) {
        client_ctx[i] = SSL_CTX_new(TLS_client_method());
        FZ_CHECK(client_ctx[i], "SSL_CTX_new");
        SSL_CTX_set_verify(client_ctx[i], SSL_VERIFY_NONE, NULL);
        SSL_CTX_set_max_proto_version(client_ctx[i], i ? TLS1_3_VERSION : TLS1_2_VERSION);
    }
}

/* The server: a connection as the worker holds it, its SSL on one end of a BIO pair. */
struct srv {
    struct conn c;
    BIO *net;    /* the harness's end of the pair */
    bool done;   /* the handshake finished */
    bool failed; /* the handshake failed, or a read or write broke the connection */
    size_t got;  /* plaintext bytes read */
    char out[PAYLOAD_MAX + 1];
    size_t olen, ooff; /* read, not yet echoed: out[ooff..olen) */
};

static void srv_open(struct srv *s, size_t pair_size)
{
    BIO *ssl_end;

    memset(&s->c, 0, sizeof(s->c));
    s->c.fd = -1;
    s->c.flags = CONN_TLS;
    s->done = s->failed = false;
    s->got = s->olen = s->ooff = 0;
    /* as the worker does: the current generation's context, for this connection's SSL */
    FZ_CHECK(tls_attach(&s->c, tls_conf_ctx(server_conf)) == 0, "tls_attach");
    FZ_CHECK(BIO_new_bio_pair(&ssl_end, pair_size, &s->net, pair_size), "BIO_new_bio_pair");
    SSL_set_bio(s->c.ssl, ssl_end, ssl_end); /* frees the socket BIO tls_attach made */
}

static bool srv_drain(struct srv *s, BIO *to);

/* The connection's end as the worker's: its close_notify (moved to to, or dropped), then free. */
static void srv_close(struct srv *s, BIO *to)
{
    tls_notify(&s->c);
    srv_drain(s, to);
    tls_free(&s->c);
    FZ_CHECK(!s->c.ssl, "tls_free left the SSL");
    BIO_free(s->net);
}

/* What sent (the client's plaintext, sent_len of it) must begin with. */
static void check_prefix(const char *p, size_t len, size_t off, const uint8_t *sent,
                         size_t sent_len, const char *who)
{
    if (!sent) /* raw mode: no plaintext can come without a finished handshake */
        FZ_CHECK(false, "%s: %zu bytes of plaintext from raw input", who, len);
    FZ_CHECK(off + len <= sent_len, "%s: %zu bytes past the %zu the client sent", who,
             off + len - sent_len, sent_len);
    FZ_CHECK(!memcmp(p, sent + off, len), "%s: plaintext the client never sent at %zu", who, off);
}

static void check_dead(struct srv *s)
{
    char b[16];

    FZ_CHECK(s->c.flags & CONN_TLS_DEAD, "a failure without CONN_TLS_DEAD");
    FZ_CHECK(tls_read(&s->c, b, sizeof(b)) == 0, "a read after the failure gave something");
    FZ_CHECK(tls_write(&s->c, "x", 1) == -EPIPE, "a write after the failure was not -EPIPE");
    FZ_CHECK(!tls_has_pending(&s->c), "pending input after the failure");
    s->failed = true;
}

/* One step of the server as the worker runs it: the handshake, else the echo (write what is
 * pending, else read). Returns whether anything moved. */
static bool srv_step(struct srv *s, const uint8_t *sent, size_t sent_len, size_t rdsize)
{
    enum tls_fail why = (enum tls_fail) - 1;
    ssize_t r;

    if (s->failed || (s->c.flags & CONN_RDCLOSED && s->ooff == s->olen))
        return false;
    if (!s->done) {
        enum tls_step st = tls_handshake(&s->c, &why);

        FZ_CHECK(st <= TLS_FAILED, "tls_handshake returned %d", (int)st);
        if (st == TLS_FAILED) {
            FZ_CHECK(why <= TLS_FAIL_NOMEM, "a failure with reason %d", (int)why);
            check_dead(s);
            return true;
        }
        if (st == TLS_DONE)
            s->done = true;
        return st == TLS_DONE;
    }
    if (s->ooff < s->olen) {
        r = tls_write(&s->c, s->out + s->ooff, s->olen - s->ooff);
        FZ_CHECK(r <= (ssize_t)(s->olen - s->ooff), "tls_write took %zd of %zu", r,
                 s->olen - s->ooff);
        if (r < 0)
            check_dead(s);
        else
            s->ooff += (size_t)r;
        if (s->ooff == s->olen)
            s->ooff = s->olen = 0;
        return r != 0;
    }
    r = tls_read(&s->c, s->out, rdsize);
    FZ_CHECK(r <= (ssize_t)rdsize, "tls_read gave %zd for %zu", r, rdsize);
    if (r < 0) {
        check_dead(s);
        return true;
    }
    if (r > 0) {
        check_prefix(s->out, (size_t)r, s->got, sent, sent_len, "the server read");
        s->got += (size_t)r;
        s->olen = (size_t)r;
    }
    return r > 0 || (s->c.flags & CONN_RDCLOSED);
}

/* Moves what the server wrote out of the pair: into the client's BIO, or dropped. */
static bool srv_drain(struct srv *s, BIO *to)
{
    char b[4096];
    bool moved = false;
    int n;

    while ((n = BIO_read(s->net, b, sizeof(b))) > 0) {
        moved = true;
        if (to)
            FZ_CHECK(BIO_write(to, b, n) == n, "a memory BIO refused bytes");
    }
    return moved;
}

/* Raw: the input, in pieces as the pair takes them, each followed by the server's steps. */
static void run_raw(struct fz *f)
{
    struct srv *s = calloc(1, sizeof(*s));
    size_t pair = fz_range(f, 64, 20000), rd = fz_range(f, 1, PAYLOAD_MAX);

    FZ_CHECK(s, "calloc");
    srv_open(s, pair);
    for (int i = 0; i < STEPS_MAX; i++) {
        bool moved = false;
        int w = 0;

        if (f->n) {
            w = BIO_write(s->net, f->p, f->n > INT_MAX ? INT_MAX : (int)f->n);
            if (w > 0) {
                f->p += w;
                f->n -= (size_t)w;
                moved = true;
            }
        }
        while (srv_step(s, NULL, SIZE_MAX, rd))
            moved = true;
        moved |= srv_drain(s, NULL);
        if (!moved || s->failed)
            break;
    }
    srv_close(s, NULL);
    free(s);
}

/* The client of live mode: an OpenSSL client on two memory BIOs. */
struct cli {
    SSL *ssl;
    BIO *in, *out;      /* in: what the server sent it; out: what it sends */
    uint8_t q[1 << 15]; /* its bytes on their way to the server, maybe changed */
    size_t qlen, qoff, sent_wire;
    size_t sent, echoed;
    bool shut;
};

/* Moves the client's bytes to the server, changing the byte at offset flip (xor x). */
static bool cli_to_srv(struct cli *c, struct srv *s, size_t flip, uint8_t x)
{
    bool moved = false;
    int n;

    if (c->qoff == c->qlen) {
        c->qoff = c->qlen = 0;
        n = BIO_read(c->out, c->q, sizeof(c->q));
        if (n > 0) {
            c->qlen = (size_t)n;
            if (x && flip >= c->sent_wire && flip < c->sent_wire + (size_t)n)
                c->q[flip - c->sent_wire] ^= x;
            c->sent_wire += (size_t)n;
        }
    }
    if (c->qoff < c->qlen) {
        n = BIO_write(s->net, c->q + c->qoff, (int)(c->qlen - c->qoff));
        if (n > 0) {
            c->qoff += (size_t)n;
            moved = true;
        }
    }
    return moved;
}

/* One step of the client: its handshake, then the payload in pieces, reading the echo. */
static bool cli_step(struct cli *c, const uint8_t *pay, size_t len, size_t piece)
{
    char b[4096];
    bool moved = false;
    int n;

    if (!SSL_is_init_finished(c->ssl)) {
        n = SSL_do_handshake(c->ssl);
        ERR_clear_error();
        return n == 1;
    }
    if (c->sent < len) {
        size_t k = len - c->sent < piece ? len - c->sent : piece;

        n = SSL_write(c->ssl, pay + c->sent, (int)k);
        if (n > 0) {
            c->sent += (size_t)n;
            moved = true;
        }
    }
    while ((n = SSL_read(c->ssl, b, sizeof(b))) > 0) {
        check_prefix(b, (size_t)n, c->echoed, pay, len, "the client got back");
        c->echoed += (size_t)n;
        moved = true;
    }
    ERR_clear_error();
    if (c->sent == len && c->echoed == len && !c->shut) {
        SSL_shutdown(c->ssl); /* its close_notify: the server's input ends there */
        c->shut = true;
        moved = true;
    }
    return moved;
}

/* conn.tls's facts: what the client's side of the same handshake says. */
static void check_facts(struct srv *s, struct cli *c)
{
    struct tls_facts f;

    tls_facts(s->c.ssl, &f);
    FZ_CHECK(f.version && !strcmp(f.version, SSL_get_version(c->ssl)), "version %s, client %s",
             f.version, SSL_get_version(c->ssl));
    FZ_CHECK(f.cipher && !strcmp(f.cipher, SSL_CIPHER_get_name(SSL_get_current_cipher(c->ssl))),
             "suite %s", f.cipher);
    FZ_CHECK(f.sni && !strcmp(f.sni, "fuzz.test"), "SNI %s", f.sni ? f.sni : "(none)");
    /* --tls-alpn h2,http/1.1 against the client's http/1.1, xyz */
    FZ_CHECK(f.alpn_len == 8 && !memcmp(f.alpn, "http/1.1", 8), "ALPN %.*s", (int)f.alpn_len,
             f.alpn ? (const char *)f.alpn : "");
    FZ_CHECK(!f.subject[0], "a client subject without a client certificate: %s", f.subject);
}

static void run_live(struct fz *f)
{
    struct srv *s = calloc(1, sizeof(*s));
    struct cli *c = calloc(1, sizeof(*c));
    bool v13 = fz_u8(f) & 1;
    size_t pair = fz_range(f, 64, 20000), rd = fz_range(f, 1, PAYLOAD_MAX);
    size_t piece = fz_range(f, 1, PAYLOAD_MAX), flip = fz_range(f, 0, 8192);
    uint8_t x = fz_u8(f);
    const uint8_t *pay = f->p;
    size_t len = f->n > PAYLOAD_MAX ? PAYLOAD_MAX : f->n;
    int quiet = 0;

    FZ_CHECK(s && c, "calloc");
    srv_open(s, pair);
    c->ssl = SSL_new(client_ctx[v13]);
    c->in = BIO_new(BIO_s_mem());
    c->out = BIO_new(BIO_s_mem());
    FZ_CHECK(c->ssl && c->in && c->out, "the client");
    SSL_set_bio(c->ssl, c->in, c->out);
    SSL_set_tlsext_host_name(c->ssl, "fuzz.test");
    SSL_set_alpn_protos(c->ssl, (const unsigned char *)"\x08http/1.1\x03xyz", 13);
    SSL_set_connect_state(c->ssl);
    for (int i = 0; i < STEPS_MAX && quiet < 3; i++) {
        bool moved = cli_step(c, pay, len, piece);

        moved |= cli_to_srv(c, s, flip, x);
        while (srv_step(s, pay, len, rd))
            moved = true;
        moved |= srv_drain(s, c->in);
        quiet = moved ? 0 : quiet + 1;
    }
    if (!x || flip >= c->sent_wire) {
        FZ_CHECK(s->done && !s->failed, "no byte changed, yet the handshake %s",
                 s->failed ? "failed" : "did not finish");
        FZ_CHECK(c->echoed == len, "no byte changed, yet %zu of %zu came back", c->echoed, len);
        FZ_CHECK(s->c.flags & CONN_RDCLOSED, "the client's close_notify did not end the input");
        check_facts(s, c);
    }
    srv_close(s, c->in);
    if (!x || flip >= c->sent_wire) {
        char b[16];
        int n = SSL_read(c->ssl, b, sizeof(b));

        FZ_CHECK(n <= 0 && SSL_get_error(c->ssl, n) == SSL_ERROR_ZERO_RETURN,
                 "the server's close_notify did not reach the client (read %d)", n);
        ERR_clear_error();
    }
    SSL_free(c->ssl);
    free(c);
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fz f = {data, size};

    if (!server_conf) {
        make_server_conf();
        make_client_ctx();
    }
    if (fz_u8(&f) & 1)
        run_live(&f);
    else
        run_raw(&f);
    ERR_clear_error();
    return 0;
}
