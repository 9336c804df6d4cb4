/* tls_lib.h: the few calls tests/bench/tls_libs/main.c makes of a TLS library (one per file). */
#ifndef LFE_TLS_LIB_H
#define LFE_TLS_LIB_H

#include <stdbool.h>

/* How the handshaking threads hold their library state. */
enum ctx_kind {
    CTX_SHARED, /* one context (SSL_CTX, credentials) for every thread */
    CTX_THREAD, /* a context per thread */
    CTX_LIBCTX, /* OpenSSL only: a context per thread, each in its own OSSL_LIB_CTX */
};

/* What every client offers, whichever library: TLS 1.3 only, TLS_AES_128_GCM_SHA256, X25519
 * only (one key share, no HelloRetryRequest), SNI and the certificate checked against HOST. */
#define TLS_HOST "localhost"

struct tls_lib {
    const char *name;
    const char *(*version)(void);
    /* The library's global initialisation; 0 or -1 (message on stderr). */
    int (*init)(void);
    /* A client context trusting the CA file; NULL (message on stderr) when the library
     * cannot make one, or does not have KIND. Thread-safe as the library is. */
    void *(*ctx_new)(const char *ca, enum ctx_kind kind);
    void (*ctx_free)(void *ctx);
    /* One connection on FD (connected, blocking; the caller closes it): the handshake,
     * offering *SESS when it is not NULL, then the server's one byte. With KEEP, *SESS is
     * replaced by the session to offer next (the newest ticket). Returns 1 when the library
     * says the session was resumed, 0 when the handshake was full, -1 on an error (a line
     * on stderr). */
    int (*conn)(void *ctx, int fd, void **sess, bool keep);
    void (*sess_free)(void *sess);
};

extern const struct tls_lib tls_lib;

#endif
