/* tls_conf: what the TLS listeners serve with: an OpenSSL context per --tls-cert, chosen by
 * SNI, with the versions, ciphers, groups, ALPN, client certificates, session tickets and cache
 * the options ask; rebuilt on SIGHUP. Built by main at start, before any thread; the workers make
 * each connection's SSL from it (tls.c). */
#ifndef LFE_TLS_CONF_H
#define LFE_TLS_CONF_H

#include <stddef.h>

#include <openssl/ssl.h>

struct opt;

/* The TLS configuration: owns the contexts of the current generation, and the session ticket
 * keys every generation shares. */
struct tls_conf;

/* Builds the configuration for o's --tls-* options: a context per --tls-cert and its --tls-key
 * (the first the default, the others for the SNI names their certificates hold), TLS 1.2 and
 * 1.3 (or what --tls-min-version and --tls-max-version leave), renegotiation refused, record
 * buffers released while a connection is idle, partial writes (a write that the socket takes in
 * part keeps its place in the caller's buffer). Each refusal is one line in err naming the file
 * or the option and why: unreadable, no PEM certificate (or key) in it, a certificate expired or
 * not yet valid, an encrypted key, a key that does not match the certificate, a cipher list,
 * suite list, group list or ALPN list OpenSSL cannot use, a client CA file without a
 * certificate. o must outlive the configuration. Returns the configuration, or NULL with err.
 * Not thread-safe (start-up); one configuration per process at a time. */
struct tls_conf *tls_conf_new(const struct opt *o, char *err, size_t errlen);

/* Gives OpenSSL glibc's allocator where jemalloc is the process's (LFE_JEMALLOC); nothing
 * otherwise. First thing in main: OpenSSL takes it only before its first allocation. */
void tls_alloc_init(void);

/* The context a new connection's SSL is made from (SSL_new, which takes its own reference):
 * the current generation's default. It stays valid on this thread until the thread's next call.
 * Any thread; no lock but once after each reload. NULL when out of memory. */
SSL_CTX *tls_conf_ctx(const struct tls_conf *t);

/* SIGHUP: reads every certificate and key (and the client CA file) again and builds a new
 * generation, which new connections get from then on; connections already open keep theirs, and
 * the ticket keys stay. Returns 0, or -1 with one line in err (as tls_conf_new's) when the
 * running generation stays. Main thread only. */
int tls_conf_reload(const struct tls_conf *t, char *err, size_t errlen);

/* Frees t (NULL: nothing), once no connection made from it is left and no thread will call
 * tls_conf_ctx again (an SSL holds a reference to its context, so one still open keeps the
 * context alive). */
void tls_conf_free(struct tls_conf *t);

#endif /* LFE_TLS_CONF_H */
