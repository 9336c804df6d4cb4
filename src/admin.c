/* admin: the --admin HTTP/1.1 listener (GET /metrics, /health, /stats) on a thread of its own.
 *
 * One thread, one epoll: the listener, a stop eventfd and at most ADMIN_MAX_CONNS connections.
 * Each connection carries one request: its answer says "Connection: close", then the write side
 * is shut and what the client still sends is read and dropped until it closes (closing with
 * unread bytes would reset the answer away). Every connection has a deadline, so a client that
 * sends half a request, or never reads, holds a slot for ADMIN_TIMEOUT_MS at most; over
 * ADMIN_MAX_CONNS the one closest to its deadline is closed to make room for the new one. Bodies
 * are rendered into memory, then written without blocking.
 */
#include "admin.h"

#include "log.h"
#include "metrics.h"
#include "net.h"
#include "report.h"
#include "server.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define TAG_LISTEN UINT64_MAX
#define TAG_STOP (UINT64_MAX - 1)
#define TAG_RELEASE (UINT64_MAX - 2)

struct aconn {
    int fd;        /* -1: free slot */
    bool answered; /* the answer is queued: now writing it, then dropping input */
    size_t inlen;  /* bytes of the request so far */
    char *out;     /* the answer (malloc'd), NULL until answered */
    size_t outlen, outoff;
    long deadline; /* CLOCK_MONOTONIC ms */
    char in[ADMIN_MAX_REQUEST];
};

struct admin {
    struct server *s;
    long stall_ms;
    int lfd, epfd, stopfd, relfd; /* relfd: admin_release's eventfd */
    bool started;
    pthread_t tid;
    time_t logged;        /* last "too many admin connections" line */
    time_t logged_accept; /* last "admin: accept" failure line */
    long paused_until;    /* accept failed (EMFILE): the listener is out of epoll until then */
    struct aconn *conns[ADMIN_MAX_CONNS];
};

static long now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
}

struct admin *admin_new(const char *hostport, int fd, struct server *s, long stall_ms, char *err,
                        size_t errlen)
{
    struct admin *a = calloc(1, sizeof(*a));
    struct epoll_event ev = {.events = EPOLLIN};
    char why[256];

    if (!a) {
        if (fd >= 0)
            close(fd);
        snprintf(err, errlen, "--admin: out of memory");
        return NULL;
    }
    a->s = s;
    a->stall_ms = stall_ms;
    a->epfd = a->stopfd = a->relfd = -1;
    a->lfd = fd >= 0 ? fd : net_listen(hostport, 64, why, sizeof(why));
    if (a->lfd < 0) {
        snprintf(err, errlen, "--admin: %s", why);
        goto out_free;
    }
    a->epfd = epoll_create1(EPOLL_CLOEXEC);
    a->stopfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    a->relfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (a->epfd < 0 || a->stopfd < 0 || a->relfd < 0)
        goto out_errno;
    ev.data.u64 = TAG_LISTEN;
    if (epoll_ctl(a->epfd, EPOLL_CTL_ADD, a->lfd, &ev) < 0)
        goto out_errno;
    ev.data.u64 = TAG_STOP;
    if (epoll_ctl(a->epfd, EPOLL_CTL_ADD, a->stopfd, &ev) < 0)
        goto out_errno;
    ev.data.u64 = TAG_RELEASE;
    if (epoll_ctl(a->epfd, EPOLL_CTL_ADD, a->relfd, &ev) < 0)
        goto out_errno;
    return a;

out_errno:
    snprintf(err, errlen, "--admin: epoll/eventfd: %s", strerror(errno));
out_free:
    admin_free(a);
    return NULL;
}

int admin_listener(const struct admin *a)
{
    return a ? a->lfd : -1;
}

/* The admin thread (or the caller, before it starts): out of the epoll set, then closed. */
static void release_listener(struct admin *a)
{
    if (a->lfd < 0)
        return;
    epoll_ctl(a->epfd, EPOLL_CTL_DEL, a->lfd, NULL);
    close(a->lfd);
    a->lfd = -1;
}

void admin_release(struct admin *a)
{
    if (!a)
        return;
    if (!a->started)
        release_listener(a);
    else
        eventfd_write(a->relfd, 1);
}

void admin_name(const struct admin *a, char *buf, size_t len)
{
    net_local_name(a->lfd, buf, len);
}

static void drop(struct admin *a, int i)
{
    struct aconn *c = a->conns[i];

    close(c->fd); /* also removes it from the epoll set: the only reference */
    free(c->out);
    free(c);
    a->conns[i] = NULL;
}

/* Queues the whole answer: status line, headers, and body unless head_only. */
static void answer(struct aconn *c, int code, const char *reason, const char *type,
                   const char *extra, const char *body, size_t blen, bool head_only)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    if (!f)
        return; /* no memory: the connection ends without an answer */
    fprintf(f,
            "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%sCache-Control: "
            "no-store\r\nConnection: close\r\n\r\n",
            code, reason, type, blen, extra ? extra : "");
    if (!head_only)
        fwrite(body, 1, blen, f);
    if (fclose(f) != 0) {
        free(text);
        return;
    }
    c->out = text;
    c->outlen = len;
    c->outoff = 0;
}

/* Renders one page with fn into memory, then answers 200 with it. */
static void answer_page(struct admin *a, struct aconn *c, void (*fn)(struct server *, FILE *),
                        const char *type, bool head_only)
{
    char *body = NULL;
    size_t blen = 0;
    FILE *f = open_memstream(&body, &blen);

    if (!f)
        return;
    fn(a->s, f);
    if (fclose(f) == 0)
        answer(c, 200, "OK", type, NULL, body, blen, head_only);
    free(body);
}

/* A complete request head is in c->in[0, end): answer it. */
static void serve(struct admin *a, struct aconn *c, size_t end)
{
    static const char text[] = "text/plain; charset=utf-8";
    char method[16], path[256], version[16], why[256], body[320];
    size_t ll = 0;
    char line[ADMIN_MAX_REQUEST];
    bool head;
    char *q;

    while (ll < end && c->in[ll] != '\r' && c->in[ll] != '\n')
        ll++; /* the request line ends at its CR or LF (head_end) */
    memcpy(line, c->in, ll);
    line[ll] = '\0';
    if (sscanf(line, "%15s %255s %15s", method, path, version) != 3 ||
        (strcmp(version, "HTTP/1.1") != 0 && strcmp(version, "HTTP/1.0") != 0)) {
        static const char m[] = "bad request: want 'GET /metrics HTTP/1.1'\n";
        answer(c, 400, "Bad Request", text, NULL, m, sizeof(m) - 1, false);
        return;
    }
    head = strcmp(method, "HEAD") == 0;
    if (!head && strcmp(method, "GET") != 0) {
        static const char m[] = "method not allowed: GET or HEAD\n";
        answer(c, 405, "Method Not Allowed", text, "Allow: GET, HEAD\r\n", m, sizeof(m) - 1, false);
        return;
    }
    if ((q = strchr(path, '?')))
        *q = '\0'; /* a scraper may add parameters: none changes the page */
    if (strcmp(path, "/metrics") == 0) {
        answer_page(a, c, report_write_metrics, METRICS_CONTENT_TYPE, head);
    } else if (strcmp(path, "/stats") == 0) {
        answer_page(a, c, report_print_stats, text, head);
    } else if (strcmp(path, "/health") == 0) {
        bool ok = report_healthy(a->s, a->stall_ms, why, sizeof(why));
        int n = snprintf(body, sizeof(body), "%s\n", why);

        answer(c, ok ? 200 : 503, ok ? "OK" : "Service Unavailable", text, NULL, body, (size_t)n,
               head);
    } else {
        static const char m[] = "not found: /metrics, /health or /stats\n";
        answer(c, 404, "Not Found", text, NULL, m, sizeof(m) - 1, head);
    }
}

/* Finds the end of the request head: an empty line. As RFC 9112 section 2.2 lets a recipient,
 * a line may end in LF alone and a CR before the LF is ignored, so "\r\n\r\n", "\n\n",
 * "\r\n\n" and "\n\r\n" all end it, and serve() reads the request line up to its CR or LF. */
static size_t head_end(const struct aconn *c)
{
    for (size_t i = 0; i + 1 < c->inlen; i++) {
        if (c->in[i] != '\n')
            continue;
        if (c->in[i + 1] == '\n')
            return i + 2;
        if (i + 2 < c->inlen && c->in[i + 1] == '\r' && c->in[i + 2] == '\n')
            return i + 3;
    }
    return 0;
}

/* Input, output or both on connection i. */
static void on_conn(struct admin *a, int i, uint32_t events)
{
    struct aconn *c = a->conns[i];

    if (!c->answered) {
        for (;;) {
            ssize_t n = recv(c->fd, c->in + c->inlen, sizeof(c->in) - c->inlen, 0);
            size_t end;

            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                return;
            if (n <= 0) {
                drop(a, i); /* gone before asking anything whole */
                return;
            }
            c->inlen += (size_t)n;
            if ((end = head_end(c))) {
                serve(a, c, end);
            } else if (c->inlen == sizeof(c->in)) {
                static const char m[] = "request header fields too large\n";
                answer(c, 431, "Request Header Fields Too Large", "text/plain", NULL, m,
                       sizeof(m) - 1, false);
            } else {
                continue;
            }
            if (!c->out) {
                drop(a, i);
                return;
            }
            c->answered = true;
            c->deadline = now_ms() + ADMIN_TIMEOUT_MS;
            break;
        }
    }
    while (c->outoff < c->outlen) {
        ssize_t n = send(c->fd, c->out + c->outoff, c->outlen - c->outoff, MSG_NOSIGNAL);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.u64 = (uint64_t)i};
            epoll_ctl(a->epfd, EPOLL_CTL_MOD, c->fd, &ev);
            return;
        }
        if (n < 0) {
            drop(a, i);
            return;
        }
        c->outoff += (size_t)n;
        if (c->outoff == c->outlen) {
            struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)i};
            shutdown(c->fd, SHUT_WR);
            epoll_ctl(a->epfd, EPOLL_CTL_MOD, c->fd, &ev);
        }
    }
    /* Answered: read and drop whatever else comes until the client closes. */
    for (;;) {
        char sink[4096];
        ssize_t n = recv(c->fd, sink, sizeof(sink), 0);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (n <= 0) {
            drop(a, i);
            return;
        }
    }
    (void)events;
}

/* accept4 failed with err (EMFILE, ENFILE, ENOMEM...): the listener is level-triggered, so it
 * would be reported again at once and the thread would spin while a monitor most needs an
 * answer. It leaves the epoll set for ADMIN_RETRY_MS instead (resume_listener). */
static void pause_listener(struct admin *a, int err)
{
    struct epoll_event ev = {.events = 0, .data.u64 = TAG_LISTEN};
    time_t now = time(NULL);

    epoll_ctl(a->epfd, EPOLL_CTL_MOD, a->lfd, &ev);
    a->paused_until = now_ms() + ADMIN_RETRY_MS;
    if (now != a->logged_accept) {
        a->logged_accept = now;
        log_warn("admin: accept: %s: the admin listener pauses %d ms at a time until it can "
                 "accept again%s",
                 strerror(err), ADMIN_RETRY_MS,
                 err == EMFILE || err == ENFILE ? "; raise ulimit -n or lower --max-conns" : "");
    }
}

static void resume_listener(struct admin *a)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = TAG_LISTEN};

    a->paused_until = 0;
    if (a->lfd >= 0)
        epoll_ctl(a->epfd, EPOLL_CTL_MOD, a->lfd, &ev);
}

static void on_accept(struct admin *a)
{
    for (;;) {
        int fd = net_accept(a->lfd), i;
        struct epoll_event ev = {.events = EPOLLIN};
        time_t now;

        if (fd == -EAGAIN)
            return;
        if (fd < 0) {
            pause_listener(a, -fd);
            return;
        }
        for (i = 0; i < ADMIN_MAX_CONNS && a->conns[i]; i++)
            ;
        if (i == ADMIN_MAX_CONNS) {
            /* Full: the connection that has waited longest is let go, so a flood of clients
             * that never finish a request cannot keep a scraper out. */
            int old = 0;

            for (int k = 1; k < ADMIN_MAX_CONNS; k++)
                if (a->conns[k]->deadline < a->conns[old]->deadline)
                    old = k;
            drop(a, old);
            i = old;
            now = time(NULL);
            if (now != a->logged) {
                a->logged = now;
                log_warn("admin: %d connections open: the oldest closed to make room",
                         ADMIN_MAX_CONNS);
            }
        }
        if (!(a->conns[i] = malloc(sizeof(struct aconn)))) {
            close(fd);
            continue;
        }
        memset(a->conns[i], 0, offsetof(struct aconn, in));
        a->conns[i]->fd = fd;
        a->conns[i]->deadline = now_ms() + ADMIN_TIMEOUT_MS;
        ev.data.u64 = (uint64_t)i;
        if (epoll_ctl(a->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
            drop(a, i);
    }
}

static void *admin_main(void *arg)
{
    struct admin *a = arg;
    struct epoll_event evs[ADMIN_MAX_CONNS + 3];

    for (;;) {
        long now = now_ms(), wait = 250;
        int n;

        if (a->paused_until && a->paused_until - now < wait)
            wait = a->paused_until > now ? a->paused_until - now : 0;
        n = epoll_wait(a->epfd, evs, ADMIN_MAX_CONNS + 3, (int)wait);

        if (n < 0 && errno != EINTR) {
            log_err("admin: epoll_wait: %s; the admin listener stops", strerror(errno));
            return NULL;
        }
        for (int k = 0; k < n; k++) {
            uint64_t tag = evs[k].data.u64;

            if (tag == TAG_STOP)
                return NULL;
            if (tag == TAG_RELEASE) {
                eventfd_t v;

                eventfd_read(a->relfd, &v);
                release_listener(a);
            } else if (tag == TAG_LISTEN && a->lfd >= 0) {
                on_accept(a);
            } else if (tag == TAG_LISTEN) {
                continue; /* released in this batch */
            } else if (a->conns[tag]) {
                on_conn(a, (int)tag, evs[k].events);
            }
        }
        now = now_ms();
        for (int i = 0; i < ADMIN_MAX_CONNS; i++)
            if (a->conns[i] && now >= a->conns[i]->deadline)
                drop(a, i); /* half a request, or an answer never read */
        if (a->paused_until && now >= a->paused_until)
            resume_listener(a); /* still failing: on_accept pauses it again */
    }
}

int admin_start(struct admin *a, const void *cpus)
{
    pthread_attr_t attr;
    int rc;

    pthread_attr_init(&attr);
    if (cpus)
        pthread_attr_setaffinity_np(&attr, sizeof(cpu_set_t), cpus);
    rc = pthread_create(&a->tid, &attr, admin_main, a);
    pthread_attr_destroy(&attr);
    if (rc)
        return -rc;
    pthread_setname_np(a->tid, "lfe-admin");
    a->started = true;
    return 0;
}

void admin_free(struct admin *a)
{
    if (!a)
        return;
    if (a->started) {
        eventfd_write(a->stopfd, 1);
        pthread_join(a->tid, NULL);
    }
    for (int i = 0; i < ADMIN_MAX_CONNS; i++)
        if (a->conns[i])
            drop(a, i);
    if (a->lfd >= 0)
        close(a->lfd);
    if (a->epfd >= 0)
        close(a->epfd);
    if (a->stopfd >= 0)
        close(a->stopfd);
    if (a->relfd >= 0)
        close(a->relfd);
    free(a);
}
