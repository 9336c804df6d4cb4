/* tls: one connection's TLS, over OpenSSL: the handshake a step at a time, plaintext reads and
 * writes, the close_notify. Non-blocking throughout: a step that needs the socket says which
 * way (want read, want write), and the worker makes that the connection's registration. */
#include "tls.h"

#include <errno.h>
#include <limits.h>

#include <openssl/err.h>
#include <openssl/x509.h>

/* This thread's error queue emptied, as SSL_get_error needs it before each call. Looked at
 * first: OpenSSL 3.0's ERR_clear_error frees two strings in each of its 16 slots, empty or not
 * (32 calls of free a call), and it ran twice an echo request: about 4% of a worker's CPU on
 * 64-byte TLS echo (perf, 2026-12-03). The queue is empty but after a failure. */
static void err_reset(void)
{
    if (ERR_peek_error())
        ERR_clear_error();
}

int tls_attach(struct conn *c, SSL_CTX *ctx)
{
    SSL *s = SSL_new(ctx);

    if (!s || !SSL_set_fd(s, c->fd)) {
        SSL_free(s);
        ERR_clear_error();
        return -ENOMEM;
    }
    SSL_set_accept_state(s);
    c->ssl = s;
    return 0;
}

enum tls_fail tls_fail_of(int ssl_error, int reason)
{
    if (ssl_error == SSL_ERROR_SYSCALL || ssl_error == SSL_ERROR_ZERO_RETURN)
        return TLS_FAIL_RESET; /* the socket failed, or the peer's FIN (or close_notify) came */
    if (ssl_error != SSL_ERROR_SSL)
        return TLS_FAIL_PROTOCOL;
    switch (reason) {
    case SSL_R_HTTP_REQUEST:
    case SSL_R_HTTPS_PROXY_REQUEST:
        return TLS_FAIL_HTTP;
    case SSL_R_UNEXPECTED_EOF_WHILE_READING:
        return TLS_FAIL_RESET;
    case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE:
    case SSL_R_CERTIFICATE_VERIFY_FAILED:
    case SSL_R_NO_CERTIFICATES_RETURNED:
        return TLS_FAIL_CLIENT_CERT;
    case ERR_R_MALLOC_FAILURE:
        return TLS_FAIL_NOMEM;
    default:
        return TLS_FAIL_PROTOCOL;
    }
}

enum tls_step tls_handshake(struct conn *c, enum tls_fail *why)
{
    int r, e;

    err_reset(); /* SSL_get_error reads this thread's queue */
    r = SSL_do_handshake(c->ssl);
    if (r == 1)
        return TLS_DONE;
    e = SSL_get_error(c->ssl, r);
    if (e == SSL_ERROR_WANT_READ)
        return TLS_WANT_READ;
    if (e == SSL_ERROR_WANT_WRITE)
        return TLS_WANT_WRITE;
    *why = tls_fail_of(e, ERR_GET_REASON(ERR_peek_error()));
    ERR_clear_error();
    c->flags |= CONN_TLS_DEAD; /* OpenSSL sent its alert, if any: no close_notify after it */
    return TLS_FAILED;
}

bool tls_resumed(const struct conn *c)
{
    return SSL_session_reused(c->ssl) == 1;
}

/* The verified client certificate's subject into buf ("" when none). */
static void peer_subject(const SSL *s, char *buf, size_t len)
{
    X509 *x = SSL_get0_peer_certificate(s);
    BIO *b;
    int n = 0;

    buf[0] = '\0';
    if (!x || SSL_get_verify_result(s) != X509_V_OK || !(b = BIO_new(BIO_s_mem())))
        return;
    /* RFC 2253's flags escape control characters and bytes past ASCII: one printable line */
    if (X509_NAME_print_ex(b, X509_get_subject_name(x), 0, XN_FLAG_RFC2253) >= 0)
        n = BIO_read(b, buf, (int)len - 1);
    buf[n > 0 ? n : 0] = '\0';
    BIO_free(b);
    ERR_clear_error();
}

void tls_facts(const SSL *s, struct tls_facts *f)
{
    const SSL_CIPHER *ci = SSL_get_current_cipher(s);

    f->version = SSL_get_version(s);
    f->cipher = ci ? SSL_CIPHER_get_name(ci) : NULL;
    f->sni = SSL_get_servername(s, TLSEXT_NAMETYPE_host_name);
    SSL_get0_alpn_selected(s, &f->alpn, &f->alpn_len);
    if (!f->alpn_len)
        f->alpn = NULL;
    peer_subject(s, f->subject, sizeof(f->subject));
}

/* After a read or a write that did not go through: 0 (try again on an event) or -errno, and
 * the facts it leaves on c. */
static ssize_t io_failed(struct conn *c, int e, bool reading)
{
    int err = errno;

    switch (e) {
    case SSL_ERROR_WANT_READ:
        if (reading)
            c->flags = (c->flags & ~CONN_TLS_WOUT) | CONN_TLS_RWAIT;
        return 0;
    case SSL_ERROR_WANT_WRITE:
        if (reading)
            c->flags |= CONN_TLS_WOUT; /* the read's answer waits for room (a key update) */
        return 0;
    case SSL_ERROR_ZERO_RETURN: /* close_notify, or (SSL_OP_IGNORE_UNEXPECTED_EOF) a FIN */
        c->flags |= CONN_RDCLOSED;
        return 0;
    case SSL_ERROR_SYSCALL:
        ERR_clear_error();
        c->flags |= CONN_TLS_DEAD;
        return -(err ? err : ECONNRESET);
    default:
        ERR_clear_error();
        c->flags |= CONN_TLS_DEAD;
        return -EPROTO;
    }
}

ssize_t tls_read(struct conn *c, char *buf, size_t n)
{
    int r;

    if (c->flags & (CONN_RDCLOSED | CONN_TLS_DEAD))
        return 0;
    err_reset();
    r = SSL_read(c->ssl, buf, n > INT_MAX ? INT_MAX : (int)n);
    if (r > 0) {
        c->flags &= ~(CONN_TLS_WOUT | CONN_TLS_RWAIT);
        return r;
    }
    return io_failed(c, SSL_get_error(c->ssl, r), true);
}

ssize_t tls_write(struct conn *c, const char *p, size_t n)
{
    int r;

    if (n == 0)
        return 0;
    if (c->flags & CONN_TLS_DEAD)
        return -EPIPE;
    err_reset();
    r = SSL_write(c->ssl, p, n > INT_MAX ? INT_MAX : (int)n);
    if (r > 0)
        return r;
    return io_failed(c, SSL_get_error(c->ssl, r), false);
}

bool tls_has_pending(const struct conn *c)
{
    /* SSL_has_pending counts the start of a record too: after a read that wanted the socket,
     * what it holds is that (OpenSSL opens every whole record before it reads) */
    return c->ssl && !(c->flags & (CONN_RDCLOSED | CONN_TLS_DEAD)) &&
           (SSL_pending(c->ssl) > 0 || (!(c->flags & CONN_TLS_RWAIT) && SSL_has_pending(c->ssl)));
}

bool tls_has_input(const struct conn *c)
{
    return c->ssl && !(c->flags & (CONN_RDCLOSED | CONN_TLS_DEAD)) && SSL_has_pending(c->ssl);
}

void tls_notify(struct conn *c)
{
    if (!c->ssl || (c->flags & (CONN_TLS_DEAD | CONN_TLS_NOTIFIED)) ||
        !SSL_is_init_finished(c->ssl))
        return;
    c->flags |= CONN_TLS_NOTIFIED;
    err_reset();
    SSL_shutdown(c->ssl); /* 0 (sent, the peer's not seen yet), 1, or it could not send now */
    ERR_clear_error();
}

void tls_free(struct conn *c)
{
    SSL_free(c->ssl);
    c->ssl = NULL;
}
