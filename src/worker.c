/* worker: a follower thread of one epoll group; takes events, runs the handler, re-arms. */
#include "log.h"
#include "pool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

/* At most one line a second per worker for a failure that could come in a flood (the counters
 * say how many). Thread-local rather than in struct worker: it is this file's business only. */
static bool log_now(void)
{
    static __thread time_t last;
    time_t now = time(NULL);

    if (now == last)
        return false;
    last = now;
    return true;
}

static void handle(struct worker *w, struct conn *c, uint32_t events, const struct conn_io *io)
{
    struct server *s = w->srv;
    bool had = obuf_len(&c->out) != 0, has;
    enum conn_why why = CONN_WHY_EOF;
    uint32_t want = w->script ? lconn_event(lconn_of(c), events, io, w->script, &w->lout, &why)
                              : conn_echo(c, events, io);
    struct epoll_event ev;
    int fd = c->fd; /* after the re-arm, c belongs to whichever worker epoll hands it to */

    STAT_ADD(&w->st, events, 1);
    if (!(c->flags & CONN_SEEN)) {
        c->flags |= CONN_SEEN;
        STAT_ADD(&w->st, accepted, 1);
    }
    has = obuf_len(&c->out) != 0;
    if (!want) {
        if (had)
            __atomic_sub_fetch(&s->npending, 1, __ATOMIC_RELAXED);
        conn_close(s, w->g, c, why, w);
        return;
    }
    if (had != has)
        __atomic_add_fetch(&s->npending, has ? 1 : -1, __ATOMIC_RELAXED);
    ev.events = want | EPOLLONESHOT;
    ev.data.ptr = c;
    HANDOFF_RELEASE(c);
    if (epoll_ctl(w->g->epfd, EPOLL_CTL_MOD, fd, &ev) < 0) {
        /* Failed: the registration is unchanged (still disarmed), so c is still ours. Its
         * pending output is lost: the client sees the close; the script hears io_error. */
        STAT_ADD(&w->st, err_epoll, 1);
        if (log_now())
            log_warn("worker %d.%d: epoll_ctl(MOD) on fd %d: %s; connection closed", w->g->idx,
                     w->idx, fd, strerror(errno));
        if (has)
            __atomic_sub_fetch(&s->npending, 1, __ATOMIC_RELAXED);
        conn_close(s, w->g, c, CONN_WHY_IO_ERROR, w);
        return;
    }
    STAT_ADD(&w->st, rearms, 1);
}

void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct server *s = w->srv;
    struct conn_io io = {
        .buf = w->buf, .bufsize = WORKER_BUF, .max_pending = s->opt->max_pending, .st = &w->st};
    bool stop = false;
    struct timespec t0, t1;
    int64_t start;

    if (w->script)
        script_bind(w->script);
    while (!stop) {
        int n = epoll_wait(w->g->epfd, w->evs, s->opt->batch, -1);

        if (n < 0) {
            if (errno == EINTR)
                continue;
            log_err("worker %d.%d: epoll_wait: %s; worker stops", w->g->idx, w->idx,
                    strerror(errno));
            break;
        }
        clock_gettime(CLOCK_MONOTONIC, &t0);
        start = t0.tv_sec * 1000000000LL + t0.tv_nsec;
        __atomic_store_n(&w->busy_since_ns, start, __ATOMIC_RELAXED);
        __atomic_store_n(&w->busy, 1, __ATOMIC_RELEASE);
        if (w->script)
            script_refresh(w->script); /* between requests: a reloaded script starts here */
        for (int i = 0; i < n; i++) {
            struct conn *c = w->evs[i].data.ptr;

            if (!c) {
                /* The stop eventfd. It is level-triggered and never read, so it stays ready and
                 * every worker of the group sees it. The rest of the batch is still ours. */
                stop = true;
                continue;
            }
            HANDOFF_ACQUIRE(c);
            handle(w, c, w->evs[i].events, &io);
            /* Service time, epoll_wait's return to the re-arm: one vDSO clock read an event. */
            clock_gettime(CLOCK_MONOTONIC, &t1);
            svc_record(&w->svc, (uint64_t)(t1.tv_sec * 1000000000LL + t1.tv_nsec - start));
        }
        __atomic_store_n(&w->busy, 0, __ATOMIC_RELEASE);
    }
    return NULL;
}
