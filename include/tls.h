/* tls: one connection's TLS: its handshake step by step, its reads and writes in plaintext, its
 * close_notify. The context it is made from is tls_conf's. */
#ifndef LFE_TLS_H
#define LFE_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <openssl/ssl.h>

#include "conn.h"

/* Where a handshake stands after a step. */
enum tls_step {
    TLS_DONE,       /* finished: the connection serves plaintext from now on */
    TLS_WANT_READ,  /* wait for input (EPOLLIN) */
    TLS_WANT_WRITE, /* wait for room to write (EPOLLOUT) */
    TLS_FAILED,     /* failed: close it (why says the reason) */
};

/* Why a handshake failed (the tls_fail_* counters). */
enum tls_fail {
    TLS_FAIL_PROTOCOL,    /* garbage, or a ClientHello the server cannot agree with */
    TLS_FAIL_HTTP,        /* a plain HTTP request on a TLS port */
    TLS_FAIL_RESET,       /* the peer reset or closed in the middle of it */
    TLS_FAIL_CLIENT_CERT, /* a client certificate missing or refused */
    TLS_FAIL_NOMEM,       /* no memory for its state */
};

/* Makes c's TLS state (an SSL of ctx on c->fd, as the server). 0, or -ENOMEM. Caller owns c. */
int tls_attach(struct conn *c, SSL_CTX *ctx);

/* One step of c's handshake: as far as the socket allows now, without blocking. Returns where
 * it stands; on TLS_FAILED, *why says the reason (and c sends no close_notify at its close).
 * Caller owns c, which has its TLS state (tls_attach). */
enum tls_step tls_handshake(struct conn *c, enum tls_fail *why);

/* Whether c's finished handshake resumed a session (a ticket or the cache). */
bool tls_resumed(const struct conn *c);

/* What a finished handshake agreed (conn.tls): strings of s's own, valid while s lives. */
struct tls_facts {
    const char *version;       /* the protocol: "TLSv1.3", "TLSv1.2" */
    const char *cipher;        /* the suite, as OpenSSL names it ("TLS_AES_256_GCM_SHA384") */
    const char *sni;           /* the server name the client asked for (SNI), or NULL: none */
    const unsigned char *alpn; /* the protocol ALPN agreed (--tls-alpn), alpn_len bytes, or */
    unsigned alpn_len;         /* NULL and 0: none */
    char subject[256];         /* the client certificate's subject, one line (RFC 2253, with
                                * control and non-ASCII bytes escaped, cut at the size), when
                                * --tls-verify-client verified one; "" otherwise */
};

/* Fills f from s, whose handshake finished. Reads s only; any thread that owns s. */
void tls_facts(const SSL *s, struct tls_facts *f);

/* The reason of a failed handshake from OpenSSL's error (SSL_get_error's) and, for
 * SSL_ERROR_SSL, the reason code of its first queued error (ERR_GET_REASON). Pure. */
enum tls_fail tls_fail_of(int ssl_error, int reason);

/* As conn_read_some, through TLS: plaintext bytes (> 0), 0 when none now or at the peer's
 * close_notify or EOF (then CONN_RDCLOSED), or -errno (-EPROTO for a TLS error: no
 * close_notify is sent then). When the read needs the socket writable first (a key update's
 * answer), CONN_TLS_WOUT is set until a read goes through. */
ssize_t tls_read(struct conn *c, char *buf, size_t n);

/* As conn_send_some, through TLS: bytes of p taken (maybe 0: retry with the same bytes first,
 * from wherever they are then), or -errno. */
ssize_t tls_write(struct conn *c, const char *p, size_t n);

/* Whether a read could return input TLS already took from the socket (plaintext, or a whole
 * record not yet opened): no event will come for it. Not the start of a record whose rest is
 * still to come: the socket's event brings that (re-arming for it at once would spin). */
bool tls_has_pending(const struct conn *c);

/* Whether TLS holds any input not yet returned, whole records or a part of one: the peer has
 * sent something nobody read. */
bool tls_has_input(const struct conn *c);

/* Sends c's close_notify, once, when its handshake finished and no error broke it; as much as
 * the socket takes now (never waits). Caller owns c. */
void tls_notify(struct conn *c);

/* Frees c's TLS state (no close_notify: tls_notify first). NULL state: nothing. */
void tls_free(struct conn *c);

#endif /* LFE_TLS_H */
