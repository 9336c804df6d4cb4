/* script: Lua 5.4 request handlers, the daemon's one door into the Lua wing (src/lua/). One
 * lua_State per worker thread, never shared and never locked; a shared environment (the loaded
 * source, lfe.shared, the timeout watchdog); and the connection served by a script (struct
 * lconn, lconn.c), whose framing (frame.h) it brings along. The wing's other headers are its
 * own. */
#ifndef LFE_SCRIPT_H
#define LFE_SCRIPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "conn.h"
#include "frame.h" /* struct framing: a Lua connection holds one */
#include "obuf.h"
#include "stats.h"

#define SCRIPT_CTX_MAX (1u << 20) /* bytes of serialized conn.ctx per connection */
#define SCRIPT_SOCKS_MAX 64       /* lfe.connect sockets one callback holds open at once */
#define SCRIPT_POOL_MAX 256       /* kept-alive lfe.connect sockets per worker */
/* Descriptors one worker's Lua state may hold: main keeps them out of --max-conns. */
#define SCRIPT_FDS (SCRIPT_SOCKS_MAX + SCRIPT_POOL_MAX)

struct script_env;

struct script_opts {
    const char *path;    /* the script file */
    size_t mem_cap;      /* bytes per lua_State; 0 = no cap */
    int timeout_ms;      /* per callback; 0 = none */
    bool unsafe;         /* open every standard library */
    size_t shared_bytes; /* lfe.shared capacity */
    size_t max_output;   /* bytes one callback may queue (conn:send + its reply); 0 = no bound */
    size_t ctx_max;      /* serialized conn.ctx per connection; 0 = SCRIPT_CTX_MAX */
    size_t ctx_total;    /* serialized conn.ctx of all connections together; 0 = no bound */
    int wall_ms;         /* --lua-wall-timeout-ms: a callback's time, waits included; 0 none */
    int io_timeout_ms;   /* --lua-io-timeout-ms: lfe.connect's and a socket's default */
};

/* What the Lua side keeps per connection (inside the connection, owned by whoever owns it). */
struct script_conn {
    uint64_t id;            /* connection number, from 1 */
    int fd;                 /* the socket (conn.peer) */
    char *peer;             /* --proxy-protocol: the client's address from its header, as
                             * text (malloc'd), or NULL: the socket's own peer */
    struct ssl_st *ssl;     /* --listen-tls: the connection's TLS (its struct conn's, the
                             * handshake finished: conn.tls), or NULL: plain TCP */
    uint32_t ctxlen;        /* bytes at ctx */
    char *ctx;              /* conn.ctx serialized between callbacks; NULL when empty */
    uint32_t ctx_ver;       /* bumped at each save */
    const void *ctx_owner;  /* the script whose state cached the table of that save, or NULL */
    struct script_env *env; /* what ctx is charged to (--lua-ctx-mb), set at the first save */
};

enum script_rc {
    SCRIPT_OK,      /* any reply was appended to out */
    SCRIPT_CLOSE,   /* the script closes the connection after what it sent */
    SCRIPT_ERROR,   /* a runtime error (logged, rate-limited): close the connection */
    SCRIPT_TIMEOUT, /* aborted after --lua-timeout-ms: close the connection */
    SCRIPT_NOMEM,   /* over --lua-mem-mb: close the connection */
};

struct script;

/* Reads and checks the script in a scratch state: a missing file, a syntax or load-time error,
 * no on_data, a bad framing all return NULL with one line ("FILE:LINE: what") in err. */
struct script_env *script_env_new(const struct script_opts *o, char *err, size_t errlen);

/* Starts the timeout watchdog thread (call with the process's signal mask in place: the thread
 * inherits it). 0 or -errno. */
int script_env_start(struct script_env *e);

/* Re-reads the file and checks it in a scratch state. On success the new source becomes the
 * current generation, which each worker loads between requests; returns the generation. On
 * failure returns -1 with err filled, and every worker keeps the script it has. Main thread. */
long script_env_reload(struct script_env *e, char *err, size_t errlen);

/* Whether the current generation has on_connect (connections are then registered for
 * EPOLLOUT too, so on_connect runs before the client sends anything). */
bool script_env_connect_first(struct script_env *e);

/* One line about lfe.shared (keys, bytes, capacity, evictions). */
void script_env_print(struct script_env *e, FILE *f);

/* The same figures as script_env_print in the Prometheus text format (metrics.h). */
void script_env_metrics(struct script_env *e, FILE *f);

/* Stops the watchdog and frees everything; every script must be freed first. */
void script_env_free(struct script_env *e);

/* A worker's state, loaded from the current generation; counters go to st. NULL with err. */
struct script *script_new(struct script_env *e, const char *name, struct worker_stats *st,
                          char *err, size_t errlen);

/* Makes the calling thread the one that runs sc (the watchdog signals it on a timeout). */
void script_env_bind(struct script *sc);

/* Between requests: if a newer generation exists, loads it and drops the old state. Returns 1
 * when switched, 0 when already current, -1 when the new one failed here (logged; the old one
 * stays). */
int script_refresh(struct script *sc);

/* The framing of the loaded generation, and its max frame. */
const struct framing *script_framing(const struct script *sc);

/* Lua memory in use by sc's state, bytes (any thread; approximate). */
size_t script_mem(const struct script *sc);

/* Callbacks. Output (conn:send, then the returned string) is appended to out; on an error what
 * the failed call appended is taken back. */
enum script_rc script_on_connect(struct script *sc, struct script_conn *c, struct outbuf *out);
enum script_rc script_on_data(struct script *sc, struct script_conn *c, const char *frame,
                              size_t len, struct outbuf *out);
/* on_close(conn, reason), reason as conn_why_name() says ("eof", "closed", "error", ...).
 * Output is discarded. */
void script_on_close(struct script *sc, struct script_conn *c, enum conn_why why);

/* Logs a problem with a connection through the same rate limit as script errors. */
void script_note(struct script *sc, const struct script_conn *c, const char *where,
                 const char *what);

/* fn(arg) runs on sc's thread before each wait of a callback (lfe.sleep, a socket): the worker
 * gives the rest of its batch back to the group there. */
void script_set_wait_hook(struct script *sc, void (*fn)(void *), void *arg);

/* Whether sc's worker is waiting in lfe.sleep or on a socket now (not stuck in a callback).
 * Any thread. */
bool script_waiting(struct script *sc);

/* A stop began: every call that waits (lfe.sleep, a socket) ends by deadline_ms (CLOCK_MONOTONIC
 * ms) with "stopping", those waiting now included. Any thread; e may be NULL. */
void script_env_stop(struct script_env *e, long deadline_ms);

/* Frees the connection's Lua-side data (ctx, peer). */
void script_conn_release(struct script_conn *c);

void script_free(struct script *sc);

/* --- lconn.c: a connection served by a Lua script: framing, callbacks, replies --- */

/* A connection in Lua mode. The struct conn comes first: epoll hands out a struct conn *, and
 * in Lua mode it points at one of these. */
struct lconn {
    struct conn c;
    struct obuf in;        /* an incomplete frame (or frames held back by --max-pending) */
    struct framing fr;     /* fixed when the connection starts */
    size_t scanned;        /* bytes at the start of in known to hold no delimiter */
    struct script_conn sc; /* id and conn.ctx */
    size_t lingered;       /* bytes dropped since the script closed it */
    long linger_since;     /* CONN_PH_LINGER: when its FIN went (CLOCK_MONOTONIC ms) */
    long linger_ms;        /* ...when its window began: the FIN, or the sweeper's last sight of
                            * the peer taking some of the reply (written by the sweeper while it
                            * holds the idle word) */
    int linger_outq;       /* ...the reply bytes not yet acknowledged then (SIOCOUTQ) */
};

/* The Lua connection c is (in Lua mode every struct conn is the head of one: conn_new). */
static inline struct lconn *lconn_of(struct conn *c)
{
    return (struct lconn *)c;
}

/* Handles one epoll event on a Lua connection, like conn_echo: on the first event runs
 * on_connect; splits what it reads into frames and runs on_data for each (stopping while
 * --max-pending bytes wait for the peer); writes the replies. out is the worker's reply
 * buffer. Returns the events to re-arm with, or 0 when the connection is finished: then *end
 * says why, and the caller ends it with conn_close (which runs on_close). */
uint32_t lconn_event(struct lconn *lc, uint32_t events, const struct conn_io *io, struct script *sc,
                     struct outbuf *out, enum conn_why *end);

/* Frees the Lua-side buffers of a connection being closed (not the struct). */
void lconn_release(struct lconn *lc);

#endif /* LFE_SCRIPT_H */
