/* pool: where a connection enters and leaves the pool (conn_new, conn_close) and the eventfd
 * kick that wakes a pool thread; the structures they work on are in pool.h. */
#include "pool.h"

#include "sysc.h"
#include "tls.h"

#include <stdlib.h>
#include <sys/eventfd.h>

void pool_kick_paused(struct server *s)
{
    for (int i = 0; i < s->nacc; i++)
        if (__atomic_load_n(&s->acc[i].paused, __ATOMIC_RELAXED))
            pool_kick(s->acc[i].wakefd);
}

void pool_kick(int efd)
{
    eventfd_write(efd, 1);
}

struct conn *conn_new(int fd, enum conn_kind kind)
{
    struct conn *c = calloc(1, kind == CONN_LUA ? sizeof(struct lconn) : sizeof(struct conn));

    if (!c)
        return NULL;
    c->fd = fd;
    c->phase = conn_first_phase(kind);
    if (kind == CONN_LUA)
        lconn_of(c)->sc.fd = fd;
    return c;
}

void conn_close(struct server *s, struct group *g, struct conn *c, enum conn_why why,
                struct worker *w)
{
    /* The script hears the end of every connection it saw start, and of no other. */
    if (s->lua && w && conn_started(c))
        script_on_close(w->script, &lconn_of(c)->sc, why);
    if (c->flags & CONN_PENDING)
        __atomic_sub_fetch(&s->npending, 1, __ATOMIC_RELAXED);
    if (c->phase == CONN_PH_WRCLOSED || c->phase == CONN_PH_LINGER)
        __atomic_sub_fetch(&s->nwrclosed, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&s->table[c->fd], NULL, __ATOMIC_RELEASE);
    if (s->iplimit)
        iplimit_release(s->iplimit, __atomic_load_n(&s->ipslot[c->fd], __ATOMIC_RELAXED));
    /* No EPOLL_CTL_DEL first: the registration is disarmed (its EPOLLONESHOT event was delivered
     * to this worker and not re-armed), or in a solo group only this thread waits on its epoll
     * fd, or it was never made, so no other thread can be handed it,
     * and close() of the only reference to the socket removes it from the epoll set. One
     * syscall less per connection. */
    if (c->ssl) { /* its close_notify first, if the handshake finished and nothing broke it */
        tls_notify(c);
        tls_free(c);
    }
    sysc_close(c->fd);
    obuf_free(&c->out);
    if (s->lua)
        lconn_release(lconn_of(c));
    free(c);
    if (g)
        __atomic_sub_fetch(&g->live, 1, __ATOMIC_RELAXED);
    __atomic_sub_fetch(&s->live, 1, __ATOMIC_RELAXED);
    if (w)
        STAT_ADD(&w->st, closed, 1);
    if (__atomic_load_n(&s->accept_paused, __ATOMIC_RELAXED))
        pool_kick_paused(s); /* a descriptor came free: a paused accept thread may resume */
}
