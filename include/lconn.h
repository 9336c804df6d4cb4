/* lconn: a connection served by a Lua script: framing, callbacks, replies. */
#ifndef LFE_LCONN_H
#define LFE_LCONN_H

#include "conn.h"
#include "frame.h"
#include "script.h"

/* A connection in Lua mode. The struct conn comes first: epoll hands out a struct conn *, and
 * in Lua mode it points at one of these. */
struct lconn {
    struct conn c;
    struct obuf in;        /* an incomplete frame (or frames held back by --max-pending) */
    struct framing fr;     /* fixed when the connection starts */
    size_t scanned;        /* bytes at the start of in known to hold no delimiter */
    struct script_conn sc; /* id and conn.ctx */
    size_t lingered;       /* bytes dropped since the script closed it */
    long linger_since;     /* CONN_LINGER: when its FIN went (CLOCK_MONOTONIC ms) */
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

#endif /* LFE_LCONN_H */
