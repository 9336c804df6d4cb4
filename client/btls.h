/* tls: lfbench's TLS, one small interface over the library (OpenSSL 3), so that another can
 * take its place behind these functions alone.
 *
 * A context (struct tls_ctx) belongs to one load thread: its settings (versions, ciphers, the
 * CA store, a client certificate) and the session it keeps for resumption. Contexts are never
 * shared between threads (OpenSSL 3.0 takes locks on a shared one). A connection (struct
 * tls_conn) belongs to the connection that made it, on the same thread. Every call is
 * non-blocking: the socket is, and a call that would wait says which way it waits. */
#ifndef LFE_BTLS_H
#define LFE_BTLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "bopt.h"

struct tls_ctx;
struct tls_conn;

/* Why a handshake or a read failed. */
enum tls_fail {
    TLS_F_VERIFY,    /* the server's certificate did not verify (why: the X.509 reason) */
    TLS_F_ALERT,     /* the server sent an alert (why: its name) */
    TLS_F_NOT_TLS,   /* the server answered the ClientHello with bytes that are not TLS */
    TLS_F_CLOSED,    /* the server closed the connection during the handshake */
    TLS_F_SYSCALL,   /* the socket failed (errno: ECONNRESET, EPIPE...) */
    TLS_F_TRUNCATED, /* the stream ended without close_notify (only tls_read says it) */
    TLS_F_OTHER,     /* anything else the library refused (why: its words) */
};

/* What a failure was: its kind, the socket's errno for TLS_F_SYSCALL, and one line. */
struct tls_err {
    enum tls_fail kind;
    int sys_errno;
    char why[256];
};

/* What a handshake step came to. */
enum tls_step { TLS_DONE, TLS_WANT_READ, TLS_WANT_WRITE, TLS_FAILED };

/* A context for one thread, from the options (o->tls set). NULL with one line in err: a file
 * that cannot be read or is not what it must be (a key that does not match the certificate
 * too), a cipher list or group list the library does not know. The check at start-up makes
 * one and frees it, so that each of those is said before any connection. */
struct tls_ctx *btls_ctx_new(const struct bopt *o, char *err, size_t errlen);

void btls_ctx_free(struct tls_ctx *x);

/* A TLS client on the connected socket fd. offer: offer the session the context kept from an
 * earlier connection, if it has one. NULL when out of memory. *offered says whether a session
 * went out in the ClientHello. */
struct tls_conn *btls_conn_new(struct tls_ctx *x, int fd, bool offer, bool *offered);

/* Frees s; clean: the connection ends in order, and a close_notify goes out first (once,
 * without waiting). The socket is the caller's. */
void btls_conn_free(struct tls_conn *s, bool clean);

/* Drives the handshake as far as the socket lets it. TLS_WANT_*: call again on the next event
 * of that direction; TLS_FAILED: *e says why. */
enum tls_step btls_handshake(struct tls_conn *s, struct tls_err *e);

/* After TLS_DONE: whether the server resumed the offered session (the library's word), the
 * protocol and the cipher agreed (static strings). */
bool btls_resumed(const struct tls_conn *s);
const char *btls_protocol(const struct tls_conn *s);
const char *btls_cipher(const struct tls_conn *s);

/* Reads plaintext into buf, as read(2) does: bytes (up to n: fewer means nothing more is
 * there now), 0 at the end of the stream (tls_truncated says whether it came without
 * close_notify), or -1 with errno EAGAIN (nothing now), EPROTO (*e says why) or the socket's. */
ssize_t btls_read(struct tls_conn *s, void *buf, size_t n, struct tls_err *e);

/* Whether the library holds more for tls_read than the socket shows: plaintext of a record
 * already read, or an end of stream met behind the last bytes returned. */
bool btls_more(const struct tls_conn *s);

/* Whether the end of stream tls_read returned came without the server's close_notify. */
bool btls_truncated(const struct tls_conn *s);

/* Writes buf as write(2) does: the bytes taken (fewer than n: the socket is full, and an
 * EPOLLOUT edge comes), or -1 with errno (EAGAIN, EPIPE, ECONNRESET, EPROTO). A call after a
 * short write must start at the first byte not taken and may give more after it. */
ssize_t btls_write(struct tls_conn *s, const void *buf, size_t n);

/* The library's name and version, for the summary. */
const char *btls_library(void);

#endif /* LFE_BTLS_H */
