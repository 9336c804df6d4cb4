/* tls: lfbench's TLS over OpenSSL 3: a context per thread, a client per connection.
 *
 * Resumption: the context keeps the newest session a server gave it (SSL_CTX_sess_set_new_cb:
 * TLS 1.3 tickets come after the handshake, read with the first response; a TLS 1.2 session at
 * its end), and a connection that is to offer one gets it (SSL_set_session). Whether the server
 * took it is SSL_session_reused's answer, never assumed.
 *
 * Failures are named from what the connection saw, kept by a message callback that runs only
 * during the handshake: the first record header (bytes that are no TLS record are a plain-text
 * server), the first handshake message (our own ClientHello back is an echo server), and the
 * alert the server sent. */
#include "btls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tls_ctx {
    SSL_CTX *ctx;
    SSL_SESSION *saved; /* the newest session a server gave (owned), or NULL */
    const char *sni;    /* the server name sent, or NULL (an address: none) */
    bool keep;          /* --tls-resume: sessions are kept */
};

struct tls_conn {
    SSL *ssl;
    struct tls_ctx *x;
    uint8_t hdr[5];  /* the first record header read */
    int nhdr;        /* its bytes (0: none yet) */
    uint8_t sent[5]; /* the first record header written (our ClientHello's) */
    int nsent;
    int first_hs;        /* the first handshake message's type read, -1: none */
    int alert;           /* the alert the server sent, -1: none */
    bool fatal;          /* a fatal error: no close_notify may follow */
    bool done;           /* the handshake completed */
    int end;             /* tls_read: 0 none, 1 end met behind the bytes returned, 2 returned */
    bool truncated;      /* the end came without close_notify */
    int end_errno;       /* a pending error end: its errno (end 1) */
    struct tls_err pend; /* ... and its words */
    bool rwait;          /* the last read wanted the socket: what TLS holds is part of a record */
    bool raw_short;      /* the last read(2) under TLS took less than it asked: socket drained */
};

/* The socket BIO's callback: whether its last read(2) drained the socket. OpenSSL reads ahead
 * (a read takes what the socket holds, up to a record buffer); when the bytes it took are all
 * returned and that read was short, the socket is empty and the next edge brings what comes,
 * so btls_read stops there rather than reading again to see EAGAIN. */
static long on_bio(BIO *b, int oper, const char *argp, size_t len, int argi, long argl, int ret,
                   size_t *processed)
{
    (void)argp;
    (void)argi;
    (void)argl;
    if (oper == (BIO_CB_READ | BIO_CB_RETURN)) {
        struct tls_conn *s = (struct tls_conn *)BIO_get_callback_arg(b);

        s->raw_short = ret <= 0 || !processed || *processed < len;
    }
    return ret;
}

/* The library's latest error as words (and the queue cleared). */
static void lib_words(char *buf, size_t len)
{
    unsigned long e = ERR_get_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;

    snprintf(buf, len, "%s", r ? r : e ? "an error the library does not name" : "no reason given");
    ERR_clear_error();
}

static int new_session(SSL *ssl, SSL_SESSION *sess)
{
    struct tls_ctx *x = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));

    if (!x->keep || !SSL_SESSION_is_resumable(sess))
        return 0;
    if (x->saved)
        SSL_SESSION_free(x->saved);
    x->saved = sess;
    return 1; /* the reference is ours */
}

/* --tls-alpn's "h2,http/1.1" in the wire form (each name after its length). 0 or -1. */
static int alpn_wire(const char *list, unsigned char *out, unsigned *len)
{
    unsigned n = 0;

    for (const char *p = list; *p;) {
        size_t l = strcspn(p, ",");
        if (l == 0 || l > 255 || n + 1 + l > 255)
            return -1;
        out[n++] = (unsigned char)l;
        memcpy(out + n, p, l);
        n += (unsigned)l;
        p += l + (p[l] == ',');
    }
    *len = n;
    return n ? 0 : -1;
}

#define BAD(...)                                                                                   \
    do {                                                                                           \
        snprintf(err, errlen, __VA_ARGS__);                                                        \
        goto out_free;                                                                             \
    } while (0)

/* The client certificate and its key, each checked: a file that is not there or not PEM, a
 * key that is not the certificate's. 0, or -1 with one line in err. */
static int load_client_cert(SSL_CTX *ctx, const struct bopt *o, char *err, size_t errlen)
{
    char why[160];

    if (SSL_CTX_use_certificate_chain_file(ctx, o->tls_cert) != 1) {
        lib_words(why, sizeof(why));
        snprintf(err, errlen, "--tls-cert %s: cannot use it as a certificate (%s); give a PEM file",
                 o->tls_cert, why);
        return -1;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, o->tls_key, SSL_FILETYPE_PEM) != 1) {
        if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH)
            goto mismatch; /* a key, but another certificate's */
        lib_words(why, sizeof(why));
        snprintf(err, errlen, "--tls-key %s: cannot use it as a private key (%s); give a PEM file",
                 o->tls_key, why);
        return -1;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
    mismatch:
        ERR_clear_error();
        snprintf(err, errlen,
                 "--tls-key %s is not the key of --tls-cert %s: give the key the certificate "
                 "was made for",
                 o->tls_key, o->tls_cert);
        return -1;
    }
    return 0;
}

/* What the server is checked against: the CA store, and --tls-insecure. 0, or -1 (err). */
static int load_trust(SSL_CTX *ctx, const struct bopt *o, char *err, size_t errlen)
{
    char why[160];

    if (o->tls_insecure) {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
        return 0;
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    /* the name (or address) the certificate must be for: every connection inherits it */
    if (o->tls_name_ip
            ? X509_VERIFY_PARAM_set1_ip_asc(SSL_CTX_get0_param(ctx), o->tls_name) != 1
            : X509_VERIFY_PARAM_set1_host(SSL_CTX_get0_param(ctx), o->tls_name, 0) != 1) {
        ERR_clear_error();
        snprintf(err, errlen, "'%s' cannot be checked as a server name", o->tls_name);
        return -1;
    }
    if (o->tls_ca && SSL_CTX_load_verify_locations(ctx, o->tls_ca, NULL) != 1) {
        lib_words(why, sizeof(why));
        snprintf(err, errlen,
                 "--tls-ca %s: cannot read CA certificates from it (%s); give a PEM file of "
                 "one or more certificates",
                 o->tls_ca, why);
        return -1;
    }
    if (!o->tls_ca && SSL_CTX_set_default_verify_paths(ctx) != 1) {
        lib_words(why, sizeof(why));
        snprintf(err, errlen,
                 "the system's CA store cannot be read (%s): give --tls-ca FILE, or "
                 "--tls-insecure",
                 why);
        return -1;
    }
    return 0;
}

struct tls_ctx *btls_ctx_new(const struct bopt *o, char *err, size_t errlen)
{
    struct tls_ctx *x = calloc(1, sizeof(*x));
    unsigned char alpn[256];
    unsigned alen;

    if (!x || !(x->ctx = SSL_CTX_new(TLS_client_method()))) {
        snprintf(err, errlen, "out of memory for a TLS context");
        goto out_free;
    }
    SSL_CTX_set_app_data(x->ctx, x);
    /* No SSL_MODE_RELEASE_BUFFERS, though an idle connection keeps its ~34 KiB of record
     * buffers: it frees and allocates them around every record, and that is measurable per
     * request on a long connection. callgrind, 2,200 64-byte echo requests on one connection
     * (OpenSSL 3.0): btls_read and btls_write took 14,590 instructions a request without it,
     * 16,497 with it (+13%, twice the malloc and free), about 5% of all lfbench's per request.
     * A client's CPU is its measurement's limit; memory is cheaper (10,000 idle connections:
     * about 340 MiB). */
    SSL_CTX_set_mode(x->ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    /* read ahead: one read(2) takes a whole flight, not each record's header and then its body
     * (21 reads a full handshake's connection without it, strace, 2026-12-03) */
    SSL_CTX_set_read_ahead(x->ctx, 1);
    SSL_CTX_set_min_proto_version(x->ctx, o->tls_min);
    SSL_CTX_set_max_proto_version(x->ctx, o->tls_max);
    if (o->tls_ciphers && SSL_CTX_set_cipher_list(x->ctx, o->tls_ciphers) != 1)
        BAD("--tls-ciphers '%s': no cipher of it is known to OpenSSL (TLS 1.2 names, e.g. "
            "ECDHE-ECDSA-AES128-GCM-SHA256; see openssl ciphers)",
            o->tls_ciphers);
    if (o->tls_ciphersuites && SSL_CTX_set_ciphersuites(x->ctx, o->tls_ciphersuites) != 1)
        BAD("--tls-ciphersuites '%s' is not a list of TLS 1.3 suites OpenSSL knows (e.g. "
            "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256)",
            o->tls_ciphersuites);
    if (o->tls_groups && SSL_CTX_set1_groups_list(x->ctx, o->tls_groups) != 1)
        BAD("--tls-groups '%s' is not a list of groups OpenSSL knows (e.g. X25519:P-256)",
            o->tls_groups);
    if (o->tls_alpn) {
        if (alpn_wire(o->tls_alpn, alpn, &alen) < 0)
            BAD("--tls-alpn '%s' is not a list of protocol names (e.g. http/1.1 or h2,http/1.1)",
                o->tls_alpn);
        if (SSL_CTX_set_alpn_protos(x->ctx, alpn, alen) != 0)
            BAD("out of memory for --tls-alpn");
    }
    if (load_trust(x->ctx, o, err, errlen) < 0)
        goto out_free;
    if (o->tls_cert && load_client_cert(x->ctx, o, err, errlen) < 0)
        goto out_free;
    x->sni = o->tls_sni;
    x->keep = o->tls_resume > 0;
    if (x->keep) {
        SSL_CTX_set_session_cache_mode(x->ctx,
                                       SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
        SSL_CTX_sess_set_new_cb(x->ctx, new_session);
    } else {
        SSL_CTX_set_session_cache_mode(x->ctx, SSL_SESS_CACHE_OFF);
    }
    return x;

out_free:
    ERR_clear_error();
    btls_ctx_free(x);
    return NULL;
}

#undef BAD

void btls_ctx_free(struct tls_ctx *x)
{
    if (!x)
        return;
    if (x->saved)
        SSL_SESSION_free(x->saved);
    SSL_CTX_free(x->ctx);
    free(x);
}

/* During the handshake: what came in, to name a failure. */
static void on_msg(int write_p, int version, int type, const void *buf, size_t len, SSL *ssl,
                   void *arg)
{
    struct tls_conn *s = arg;
    const uint8_t *b = buf;

    (void)version;
    (void)ssl;
    if (write_p) {
        if (type == SSL3_RT_HEADER && s->nsent == 0 && len >= sizeof(s->sent)) {
            memcpy(s->sent, b, sizeof(s->sent));
            s->nsent = (int)sizeof(s->sent);
        }
        return;
    }
    if (type == SSL3_RT_HEADER && s->nhdr == 0 && len > 0) {
        s->nhdr = len < sizeof(s->hdr) ? (int)len : (int)sizeof(s->hdr);
        memcpy(s->hdr, b, (size_t)s->nhdr);
    } else if (type == SSL3_RT_HANDSHAKE && s->first_hs < 0 && len > 0) {
        s->first_hs = b[0];
    } else if (type == SSL3_RT_ALERT && len >= 2 && s->alert < 0) {
        s->alert = b[1];
    }
}

struct tls_conn *btls_conn_new(struct tls_ctx *x, int fd, bool offer, bool *offered)
{
    struct tls_conn *s = calloc(1, sizeof(*s));

    *offered = false;
    if (!s || !(s->ssl = SSL_new(x->ctx))) {
        free(s);
        return NULL;
    }
    s->x = x;
    s->first_hs = s->alert = -1;
    if (SSL_set_fd(s->ssl, fd) != 1) { /* no memory for its BIO */
        SSL_free(s->ssl);
        free(s);
        return NULL;
    }
    BIO_set_callback_ex(SSL_get_rbio(s->ssl), on_bio);
    BIO_set_callback_arg(SSL_get_rbio(s->ssl), (char *)s);
    SSL_set_connect_state(s->ssl);
    if (x->sni && SSL_set_tlsext_host_name(s->ssl, x->sni) != 1) {
        SSL_free(s->ssl);
        free(s);
        return NULL;
    }
    SSL_set_msg_callback(s->ssl, on_msg);
    SSL_set_msg_callback_arg(s->ssl, s);
    if (offer && x->saved && SSL_set_session(s->ssl, x->saved) == 1)
        *offered = true;
    return s;
}

void btls_conn_free(struct tls_conn *s, bool clean)
{
    if (!s)
        return;
    if (clean && s->done && !s->fatal)
        SSL_shutdown(s->ssl); /* the close_notify; the server's is not waited for */
    SSL_free(s->ssl);
    free(s);
}

/* Whether the first record header read is no TLS record's: a content type outside 20-23, or a
 * major version other than 3. */
static bool not_tls(const struct tls_conn *s)
{
    return s->nhdr >= 1 && (s->hdr[0] < 20 || s->hdr[0] > 23 || (s->nhdr >= 2 && s->hdr[1] != 3));
}

/* The first header's bytes as text, for the message: "HTTP/" or \x.. escapes. */
static void hdr_text(const struct tls_conn *s, char *buf, size_t len)
{
    size_t n = 0;

    for (int i = 0; i < s->nhdr && n + 5 < len; i++) {
        uint8_t b = s->hdr[i];
        if (b >= 0x20 && b < 0x7f && b != '"' && b != '\\')
            buf[n++] = (char)b;
        else
            n += (size_t)snprintf(buf + n, len - n, "\\x%02x", b);
    }
    buf[n] = '\0';
}

/* The alert the server sent, from the library's error (a received alert is its reason,
 * SSL_AD_REASON_OFFSET + the alert), else from what the message callback saw; -1: none. */
static int alert_of(const struct tls_conn *s, unsigned long lib_err)
{
    int r = ERR_GET_REASON(lib_err);

    if (r >= SSL_AD_REASON_OFFSET && r < SSL_AD_REASON_OFFSET + 256)
        return r - SSL_AD_REASON_OFFSET;
    return s->alert;
}

/* A handshake that failed with SSL_ERROR_SSL: why, from what was seen. */
static void name_failure(struct tls_conn *s, unsigned long lib_err, struct tls_err *e)
{
    long vr = SSL_get_verify_result(s->ssl);
    const char *reason = lib_err ? ERR_reason_error_string(lib_err) : NULL;
    char text[32];

    if (!reason)
        reason = "no reason given";
    if (not_tls(s)) {
        hdr_text(s, text, sizeof(text));
        e->kind = TLS_F_NOT_TLS;
        snprintf(e->why, sizeof(e->why),
                 "the server did not answer TLS (its first bytes: \"%s\"): is it plain TCP? "
                 "drop --tls, or give the TLS port",
                 text);
    } else if (s->first_hs == SSL3_MT_CLIENT_HELLO ||
               (s->nsent && s->nhdr == s->nsent && !memcmp(s->hdr, s->sent, sizeof(s->sent)))) {
        /* the first record back is ours, its header byte for byte: an echo */
        e->kind = TLS_F_NOT_TLS;
        snprintf(e->why, sizeof(e->why),
                 "the server sent our ClientHello back: a plain-text echo server, not TLS; "
                 "drop --tls, or give the TLS port");
    } else if (ERR_GET_REASON(lib_err) == SSL_R_CERTIFICATE_VERIFY_FAILED && vr != X509_V_OK) {
        e->kind = TLS_F_VERIFY;
        snprintf(e->why, sizeof(e->why),
                 "the server's certificate did not verify: %s (give its CA with --tls-ca FILE, "
                 "the name it is for with --tls-sni NAME, or --tls-insecure)",
                 X509_verify_cert_error_string(vr));
    } else if (alert_of(s, lib_err) >= 0) {
        e->kind = TLS_F_ALERT;
        snprintf(e->why, sizeof(e->why), "the server refused the handshake with the alert \"%s\"",
                 SSL_alert_desc_string_long(alert_of(s, lib_err)));
    } else {
        e->kind = TLS_F_OTHER;
        snprintf(e->why, sizeof(e->why), "the TLS handshake failed: %s", reason);
    }
}

/* SSL_ERROR_SYSCALL, or SSL_ERROR_SSL on an unexpected EOF: the socket's error or its end. */
static void name_end(struct tls_conn *s, struct tls_err *e, bool handshake)
{
    if (errno && errno != EAGAIN) {
        e->kind = TLS_F_SYSCALL;
        e->sys_errno = errno;
        snprintf(e->why, sizeof(e->why), "%s: %s",
                 handshake ? "the TLS handshake failed" : "a TLS read failed", strerror(errno));
    } else if (handshake && not_tls(s)) {
        name_failure(s, 0, e);
    } else {
        e->kind = handshake ? TLS_F_CLOSED : TLS_F_TRUNCATED;
        snprintf(e->why, sizeof(e->why), "%s",
                 handshake ? "the server closed the connection during the TLS handshake "
                             "(is it TLS? does it take this version and these ciphers?)"
                           : "the server ended the stream without a TLS close_notify: the "
                             "response may have been cut short");
    }
}

enum tls_step btls_handshake(struct tls_conn *s, struct tls_err *e)
{
    int r, se;
    unsigned long le;

    errno = 0;
    r = SSL_do_handshake(s->ssl);
    if (r == 1) {
        s->done = true;
        SSL_set_msg_callback(s->ssl, NULL); /* only the handshake's failures are named */
        return TLS_DONE;
    }
    se = SSL_get_error(s->ssl, r);
    if (se == SSL_ERROR_WANT_READ)
        return TLS_WANT_READ;
    if (se == SSL_ERROR_WANT_WRITE)
        return TLS_WANT_WRITE;
    s->fatal = true;
    memset(e, 0, sizeof(*e));
    le = ERR_peek_last_error();
    if (se == SSL_ERROR_SYSCALL ||
        (se == SSL_ERROR_SSL && ERR_GET_REASON(le) == SSL_R_UNEXPECTED_EOF_WHILE_READING))
        name_end(s, e, true);
    else
        name_failure(s, le, e);
    ERR_clear_error();
    return TLS_FAILED;
}

bool btls_resumed(const struct tls_conn *s)
{
    return SSL_session_reused(s->ssl) == 1;
}

const char *btls_protocol(const struct tls_conn *s)
{
    return SSL_get_version(s->ssl);
}

const char *btls_cipher(const struct tls_conn *s)
{
    return SSL_get_cipher_name(s->ssl);
}

/* SSL_read failed (se): the end of the stream, or an error, kept in s. */
static void take_end(struct tls_conn *s, int se)
{
    unsigned long le = ERR_peek_last_error();

    memset(&s->pend, 0, sizeof(s->pend));
    s->end = 1;
    s->end_errno = 0;
    if (se == SSL_ERROR_ZERO_RETURN) {
        s->truncated = false; /* close_notify */
    } else if (se == SSL_ERROR_SYSCALL ||
               (se == SSL_ERROR_SSL && ERR_GET_REASON(le) == SSL_R_UNEXPECTED_EOF_WHILE_READING)) {
        s->fatal = true;
        name_end(s, &s->pend, false);
        if (s->pend.kind == TLS_F_SYSCALL)
            s->end_errno = s->pend.sys_errno;
        else
            s->truncated = true;
    } else {
        int alert = alert_of(s, le);

        s->fatal = true;
        s->end_errno = EPROTO;
        s->pend.kind = alert >= 0 ? TLS_F_ALERT : TLS_F_OTHER;
        if (alert >= 0) /* TLS 1.3: a refused client certificate comes after our Finished */
            snprintf(s->pend.why, sizeof(s->pend.why),
                     "the server ended the connection with the alert \"%s\"",
                     SSL_alert_desc_string_long(alert));
        else
            snprintf(s->pend.why, sizeof(s->pend.why), "a TLS read failed: %s",
                     ERR_reason_error_string(le) ? ERR_reason_error_string(le) : "no reason given");
    }
    ERR_clear_error();
}

/* The kept end of the stream, returned once. */
static ssize_t give_end(struct tls_conn *s, struct tls_err *e)
{
    s->end = 2;
    if (!s->end_errno)
        return 0;
    *e = s->pend;
    errno = s->end_errno;
    return -1;
}

ssize_t btls_read(struct tls_conn *s, void *buf, size_t n, struct tls_err *e)
{
    size_t got = 0;

    if (s->end)
        return give_end(s, e);
    /* SSL_read gives at most one record: read on until the buffer is full or the socket empty,
     * so that a short read means what it means on a plain socket (edge-triggered: drained) */
    while (got < n) {
        int r, se;

        errno = 0; /* SSL_ERROR_SYSCALL with errno 0 is the end of the stream */
        r = SSL_read(s->ssl, (uint8_t *)buf + got, (int)(n - got > 1 << 30 ? 1 << 30 : n - got));

        if (r > 0) {
            got += (size_t)r;
            s->rwait = false;
            if (s->raw_short && !SSL_has_pending(s->ssl))
                return (ssize_t)got; /* all it took is returned, and the socket was empty */
            continue;
        }
        se = SSL_get_error(s->ssl, r);
        if (se == SSL_ERROR_WANT_READ || se == SSL_ERROR_WANT_WRITE) {
            s->rwait = se == SSL_ERROR_WANT_READ;
            if (got)
                return (ssize_t)got;
            errno = EAGAIN;
            return -1;
        }
        take_end(s, se);
        return got ? (ssize_t)got : give_end(s, e);
    }
    return (ssize_t)got;
}

bool btls_more(const struct tls_conn *s)
{
    /* plaintext, or whole records read ahead and not opened (no edge comes for them); not the
     * start of a record after a read that wanted the socket: its rest brings an edge */
    return s->end == 1 || SSL_pending(s->ssl) > 0 || (!s->rwait && SSL_has_pending(s->ssl));
}

bool btls_truncated(const struct tls_conn *s)
{
    return s->truncated;
}

ssize_t btls_write(struct tls_conn *s, const void *buf, size_t n)
{
    size_t put = 0;

    /* with partial writes on, SSL_write returns after each record: write on until the socket
     * is full, as an edge-triggered socket needs */
    while (put < n) {
        int r, se;

        errno = 0;
        r = SSL_write(s->ssl, (const uint8_t *)buf + put,
                      (int)(n - put > 1 << 30 ? 1 << 30 : n - put));

        if (r > 0) {
            put += (size_t)r;
            continue;
        }
        se = SSL_get_error(s->ssl, r);
        if (se == SSL_ERROR_WANT_WRITE || se == SSL_ERROR_WANT_READ)
            break;
        s->fatal = true;
        if (se != SSL_ERROR_SYSCALL || !errno)
            errno = se == SSL_ERROR_SYSCALL ? EPIPE : EPROTO;
        ERR_clear_error();
        if (put)
            return (ssize_t)put;
        return -1;
    }
    if (put == 0) {
        errno = EAGAIN;
        return -1;
    }
    return (ssize_t)put;
}

const char *btls_library(void)
{
    return OpenSSL_version(OPENSSL_VERSION);
}
