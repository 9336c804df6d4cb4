/* acceptor: the accept thread; drains the listen queues and hands connections to groups. */
#include "log.h"
#include "net.h"
#include "pool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

static long group_load(void *ctx, unsigned g)
{
    struct server *s = ctx;

    return __atomic_load_n(&s->groups[g].live, __ATOMIC_RELAXED);
}

static void set_listening(struct server *s, bool on)
{
    for (int i = 0; i < s->nlisten; i++) {
        struct epoll_event ev = {.events = on ? EPOLLIN : 0, .data.u32 = (uint32_t)i};

        epoll_ctl(s->acc_epfd, EPOLL_CTL_MOD, s->lfds[i], &ev);
    }
}

/* Out of descriptors or memory: stop polling the listeners instead of spinning on a queue we
 * cannot drain (a level-triggered listener would report it again at once). Connections wait in
 * the kernel's backlog until a worker closes one (it kicks acc_wakefd) or ACCEPT_RETRY_MS pass
 * (ENFILE and ENOMEM can be relieved by other processes). */
static void pause_accepting(struct server *s, int err)
{
    static time_t last_log; /* accept thread only */
    time_t now = time(NULL);

    set_listening(s, false);
    __atomic_store_n(&s->accept_paused, 1, __ATOMIC_RELAXED);
    if (now != last_log) { /* at most one line a second under a flood */
        last_log = now;
        log_warn("accept: %s with %ld connections open: accepting paused until one closes; "
                 "raise ulimit -n (or fs.file-max) or lower --max-conns",
                 strerror(err), __atomic_load_n(&s->live, __ATOMIC_RELAXED));
    }
}

/* Accepts everything queued on listener li. Returns false when accepting paused. */
static bool accept_all(struct server *s, int li)
{
    for (;;) {
        int fd = net_accept(s->lfds[li]);
        struct epoll_event ev;
        struct group *g;
        struct conn *c;

        if (fd < 0) {
            switch (fd) {
            case -EAGAIN:
                return true;
            case -EMFILE:
            case -ENFILE:
                STAT_ADD(&s->ast, emfile, 1);
                pause_accepting(s, -fd);
                return false;
            case -ENOBUFS:
            case -ENOMEM:
                STAT_ADD(&s->ast, enomem, 1);
                pause_accepting(s, -fd);
                return false;
            default:
                /* EPERM (a firewall), EPROTO...: that connection is lost, the queue is not. The
                 * listener stays level-triggered: epoll reports what is left. */
                STAT_ADD(&s->ast, err_other, 1);
                log_debug("accept: %s", strerror(-fd));
                return true;
            }
        }
        if (__atomic_load_n(&s->live, __ATOMIC_RELAXED) >= s->max_conns ||
            (size_t)fd >= s->table_size) {
            close(fd); /* over --max-conns: shed at once, the client sees the close */
            STAT_ADD(&s->ast, shed, 1);
            continue;
        }
        c = calloc(1, s->lua ? sizeof(struct lconn) : sizeof(*c));
        if (!c) {
            close(fd);
            STAT_ADD(&s->ast, enomem, 1);
            continue;
        }
        c->fd = fd;
        g = &s->groups[dispatch_pick(&s->disp, group_load, s)];
        __atomic_add_fetch(&g->live, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&s->live, 1, __ATOMIC_RELAXED);
        __atomic_store_n(&s->table[fd], c, __ATOMIC_RELEASE);
        ev.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
        if (s->lua) {
            ((struct lconn *)c)->sc.id = ++s->next_id;
            ((struct lconn *)c)->sc.fd = fd;
            /* on_connect may speak first: have a worker run it now, not at the first input. */
            if (__atomic_load_n(&s->lua_connect_first, __ATOMIC_RELAXED))
                ev.events |= EPOLLOUT;
        }
        ev.data.ptr = c;
        /* From here a worker may own, close and free c: do not touch it again. */
        HANDOFF_RELEASE(c);
        if (epoll_ctl(g->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
            log_warn("epoll_ctl(ADD) into group %d: %s; connection closed", g->idx,
                     strerror(errno));
            __atomic_store_n(&s->table[fd], NULL, __ATOMIC_RELAXED);
            __atomic_sub_fetch(&g->live, 1, __ATOMIC_RELAXED);
            __atomic_sub_fetch(&s->live, 1, __ATOMIC_RELAXED);
            close(fd);
            free(c);
            STAT_ADD(&s->ast, err_other, 1);
            continue;
        }
        STAT_ADD(g, accepted, 1);
        STAT_ADD(&s->ast, accepted, 1);
    }
}

void *acceptor_main(void *arg)
{
    struct server *s = arg;
    struct epoll_event evs[OPT_MAX_LISTEN + 1];

    for (;;) {
        bool paused = __atomic_load_n(&s->accept_paused, __ATOMIC_RELAXED);
        int n = epoll_wait(s->acc_epfd, evs, OPT_MAX_LISTEN + 1, paused ? ACCEPT_RETRY_MS : -1);

        if (n < 0) {
            if (errno == EINTR)
                continue;
            log_err("accept thread: epoll_wait: %s; no longer accepting", strerror(errno));
            return NULL;
        }
        if (__atomic_load_n(&s->draining, __ATOMIC_ACQUIRE))
            return NULL;
        for (int i = 0; i < n; i++) {
            eventfd_t v;

            if (evs[i].data.u32 == ACCEPT_WAKE)
                eventfd_read(s->acc_wakefd, &v); /* non-blocking: just clear it */
        }
        if (paused) {
            /* Retry every listener: the first EMFILE pauses again, without spinning. */
            __atomic_store_n(&s->accept_paused, 0, __ATOMIC_RELAXED);
            set_listening(s, true);
            for (int li = 0; li < s->nlisten; li++)
                if (!accept_all(s, li))
                    break;
            continue;
        }
        for (int i = 0; i < n; i++)
            if (evs[i].data.u32 != ACCEPT_WAKE && !accept_all(s, (int)evs[i].data.u32))
                break;
    }
}
