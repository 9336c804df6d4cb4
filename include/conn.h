/* conn: a client connection: the phases of its life, the socket I/O every mode shares, and the
 * byte-exact echo state machine. Its life (conn_new, conn_close) is the pool's: src/pool.h. */
#ifndef LFE_CONN_H
#define LFE_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "obuf.h"
#include "stats.h"

/* The phases of a connection's life: one byte of struct conn, written only by its owner, before
 * the re-arm publishes it (the idle sweep reads it: idle.c).
 *   echo: [PROXY ->] [HANDSHAKE ->] SERVING [-> WRCLOSED]
 *   Lua:  [PROXY ->] [HANDSHAKE ->] NEW -> SERVING [-> CLOSING [-> LINGER]]
 *
 * phase     event or cause                                next      where
 * accept    --proxy-protocol                              PROXY     acceptor.c
 * accept    a --listen-tls listener's                     HANDSHK   acceptor.c
 * accept    otherwise: Lua / echo                         NEW/SERV  pool.c conn_new
 * PROXY     the header whole, TLS (the handshake starts)  HANDSHK   worker.c proxy_read
 * PROXY     the header whole (what follows it runs now)   NEW/SERV  worker.c proxy_read
 * PROXY     no header, a bad one, EOF, --proxy-timeout    closed    worker.c
 * HANDSHK   finished (what came with it is served now)    NEW/SERV  worker.c handshake
 * HANDSHK   failed, EOF, reset, --tls-handshake-timeout   closed    worker.c
 * NEW       its first event: on_connect runs              SERVING   lconn.c start
 * NEW       EPOLLERR (the script never hears of it)       closed    lconn.c
 * SERVING   the script closes it (CONN_WHY_CLOSED)        CLOSING   lconn.c serve
 * SERVING   echo at a hand-over: FIN between requests     WRCLOSED  worker.c drain_echo
 *           (TLS: its close_notify, then the FIN)
 * SERVING   end of input, all answered; an error          closed    conn.c, lconn.c serve
 * CLOSING   replies written; a close could reset them     LINGER    lconn.c linger_start
 * CLOSING   replies written, nothing to lose; an error    closed    lconn.c wind_down
 * LINGER    its FIN; an error; LINGER_MAX read, acked     closed    lconn.c linger
 * LINGER    its window passed (the idle sweep)            closed    worker.c close_idle
 * WRCLOSED  the peer's FIN, an error                      closed    worker.c drain_discard
 * any       --idle-timeout, a failed re-arm, the stop     closed    worker.c, server.c
 */
enum conn_phase {
    CONN_PH_PROXY,     /* --proxy-protocol: its header is still to come; out holds the part read
                        * so far (never output: nothing is written before it ends) */
    CONN_PH_NEW,       /* Lua: on_connect has not run yet; the framing is not fixed */
    CONN_PH_SERVING,   /* requests are read and answered */
    CONN_PH_CLOSING,   /* Lua: the script closed it: its pending replies go, then it closes */
    CONN_PH_LINGER,    /* Lua: closed by the script while its peer still sent: FIN sent, input
                        * read and dropped until the peer's FIN (lconn.c, linger) */
    CONN_PH_WRCLOSED,  /* echo, at a stop: FIN sent between requests; input is discarded */
    CONN_PH_HANDSHAKE, /* TLS: its handshake runs; dated by its start, as a PROXY header */
};

/* Facts orthogonal to the phase: struct conn's flags. */
#define CONN_RDCLOSED 0x1u /* the peer shut down its side: read returned 0 */
#define CONN_SEEN 0x2u     /* a worker has taken an event of it (counts "accepted" once) */
#define CONN_RACED 0x4u    /* CONN_PH_WRCLOSED, and input came after its FIN (drain_raced, once) */
#define CONN_NOREAD                                                                                \
    0x8u /* re-armed without EPOLLIN (output at --max-pending, or input ended): input              \
          * waiting in the socket is not an event, and the idle sweep does not count it */
#define CONN_PENDING 0x10u /* counted in the server's npending: output pending at its re-arm */

/* TLS (tls.c): a --listen-tls connection, its handshake before it serves; the TLS state broken
 * (a failed handshake, a TLS error: no close_notify after it); its close_notify sent; its last
 * read waiting for room to write. */
#define CONN_TLS 0x100u
#define CONN_TLS_DEAD 0x200u
#define CONN_TLS_NOTIFIED 0x400u
#define CONN_TLS_WOUT 0x800u
/* TLS: its last read wanted the socket: what TLS holds is part of a record, and only the socket
 * (an event) can bring the rest */
#define CONN_TLS_RWAIT 0x1000u

/* In a solo group (one worker, level-triggered: src/worker.c), the events the registration
 * asks for now, so that a worker re-arms only when they change. */
#define CONN_REG_IN 0x20u
#define CONN_REG_OUT 0x40u
#define CONN_REG_RDHUP 0x80u
#define CONN_REG_MASK (CONN_REG_IN | CONN_REG_OUT | CONN_REG_RDHUP)

/* Why a connection ends: on_close's reason in Lua mode (conn_why_name), a counter otherwise. */
enum conn_why {
    CONN_WHY_NONE,          /* not ending */
    CONN_WHY_EOF,           /* the peer closed its side and everything was answered */
    CONN_WHY_CLOSED,        /* the script closed it */
    CONN_WHY_ERROR,         /* a script error */
    CONN_WHY_TIMEOUT,       /* a callback past --lua-timeout-ms */
    CONN_WHY_MEMORY,        /* out of memory (--lua-mem-mb, or a buffer) */
    CONN_WHY_FRAME_TOO_BIG, /* a frame over max_frame */
    CONN_WHY_RESET,         /* the peer reset or vanished */
    CONN_WHY_IO_ERROR,      /* another socket or epoll error */
    CONN_WHY_SHUTDOWN,      /* the daemon is stopping */
    CONN_WHY_IDLE,          /* no event for --idle-timeout */
};

/* The reason as a script sees it: "eof", "closed", "error", ... ("" for CONN_WHY_NONE). */
const char *conn_why_name(enum conn_why why);

/* The reason for a socket error (errno value): a reset for a peer that reset or vanished. */
enum conn_why conn_why_io(int err);

enum conn_kind {
    CONN_ECHO, /* a struct conn */
    CONN_LUA,  /* a struct lconn, which starts with one */
};

/* A connection. Allocated by the accept thread, then owned by exactly one worker at a time: the
 * one whose epoll_wait returned it (EPOLLONESHOT disarms it) until that worker re-arms it with
 * EPOLL_CTL_MOD or closes and frees it; in a solo group, its one worker. Idle, it holds no buffer:
 * only this struct. */
struct ssl_st;

struct conn {
    int fd;               /* the socket; never used after close */
    uint16_t flags;       /* CONN_*: the facts above */
    uint8_t phase;        /* enum conn_phase */
    struct obuf out;      /* bytes read but not yet written back */
    struct ssl_st *ssl;   /* CONN_TLS: its TLS state (tls.c), made at its first handshake
                           * step; NULL before, and for a plain connection */
    int64_t tls_start_ns; /* CONN_TLS: CLOCK_MONOTONIC at that first step (the handshake's
                           * time, lfepolld_tls_handshake_seconds) */
};

/* What a worker lends the connection for one event. */
struct conn_io {
    char *buf;          /* worker's scratch read buffer */
    size_t bufsize;     /* its size */
    size_t max_pending; /* cap on c->out: reading pauses at it */
    struct worker_stats *st;
};

/* Per-event read budget: at most this many full buffers before re-arming, so one fast sender
 * cannot monopolise a worker; the re-arm (EPOLL_CTL_MOD) re-polls and reports the rest. */
#define CONN_READS_PER_EVENT 4

/* Handles one epoll event (events as returned by epoll_wait) on c: writes pending output,
 * reads what the socket has (while pending output stays under the cap), echoes it, keeps
 * what the socket did not take. Never blocks; retries EINTR. Returns the epoll events to
 * re-arm with (EPOLLIN|EPOLLRDHUP and/or EPOLLOUT, without EPOLLONESHOT), or 0 when the
 * connection is finished (peer closed and everything echoed, or an error: counted in io->st)
 * and must be closed. Caller must own c. */
uint32_t conn_echo(struct conn *c, uint32_t events, const struct conn_io *io);

/* Shared with the Lua state machine (lconn.c). */
ssize_t conn_send_some(int fd, const char *p, size_t n); /* bytes taken (maybe 0) or -errno */
/* As conn_send_some on c, through its TLS when it has one (tls_write). */
ssize_t conn_write_some(struct conn *c, const char *p, size_t n);
/* Reads up to n bytes into buf: bytes read (> 0), 0 when the socket has nothing now or the peer
 * closed its side (then CONN_RDCLOSED is set), or -errno. Retries EINTR. Through c's TLS when
 * it has one (tls_read: plaintext; the peer's close_notify is its end). */
ssize_t conn_read_some(struct conn *c, char *buf, size_t n);
/* As conn_read_some, from the socket itself even when c has TLS (bytes to drop). */
ssize_t conn_read_raw(struct conn *c, char *buf, size_t n);
/* After a read of n bytes (> 0) of the want asked: whether to stop reading until the next
 * event, the socket likely empty (plain: a short read; TLS: nothing left in the library). */
bool conn_drained(const struct conn *c, size_t n, size_t want);
/* The events to re-arm an open connection with: input and output while output is pending
 * under the cap, output only at it (reading pauses: counted), input only with nothing pending. */
uint32_t conn_rearm_events(const struct conn *c, const struct conn_io *io);
/* After EPOLLERR: the socket's pending error (SO_ERROR), counted in io. */
int conn_sock_error(struct conn *c, const struct conn_io *io);
int conn_flush(struct conn *c, const struct conn_io *io); /* 0 (maybe still pending) or -errno */
void conn_count_error(int err, const struct conn_io *io);

#endif /* LFE_CONN_H */
