/* load: an epoll client for the integration tests; every byte echoed is checked against the
 * pattern stream its connection sent. */
#include "load.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PATN 65521 /* prime: a shifted, dropped or foreign byte never lines up again */
#define RING 1024  /* most requests in flight per connection */
#define CHUNK 65536

static unsigned char pat[PATN];

struct lc {
    int fd;              /* -1 when closed */
    uint32_t id;         /* stream id: the pattern starts at id * 7919 */
    uint64_t tx, rx;     /* bytes sent and received on this connection */
    uint64_t ends[RING]; /* end offset of each issued request */
    uint32_t issued, done;
    uint64_t rng;
    bool wants_out, shut, waiting_eof;
};

static long now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
}

static void fill(unsigned char *buf, uint32_t id, uint64_t off, size_t n)
{
    size_t p = (size_t)((off + (uint64_t)id * 7919) % PATN);

    for (size_t i = 0; i < n; i++) {
        buf[i] = pat[p];
        if (++p == PATN)
            p = 0;
    }
}

static size_t pick_size(struct lc *c, const struct load *l)
{
    double u, lo = log((double)l->min_size), hi = log((double)l->max_size);
    size_t n;

    c->rng ^= c->rng << 13;
    c->rng ^= c->rng >> 7;
    c->rng ^= c->rng << 17;
    u = (double)(c->rng >> 11) / (double)(1ull << 53);
    n = (size_t)exp(lo + (hi - lo) * u);
    return n < l->min_size ? l->min_size : n > l->max_size ? l->max_size : n;
}

static int open_conn(struct lc *c, const struct load *l, int ep, uint32_t id)
{
    struct sockaddr_storage ss = {0};
    socklen_t sl;
    struct epoll_event ev;
    int one = 1;

    memset(c, 0, sizeof(*c));
    c->id = id;
    c->rng = 0x9e3779b97f4a7c15ull ^ ((uint64_t)id * 0x100000001b3ull) ^ 1;
    c->fd = socket(l->ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (c->fd < 0)
        return -errno;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (l->noread_ms > 0) {
        /* A slow reader's own receive buffer is locked small: with autotuning and a large
         * tcp_rmem it could otherwise absorb what the server should be holding back. */
        int rcv = 64 << 10;
        setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
    }
    if (l->ipv6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t)l->port);
        a->sin6_addr = in6addr_loopback;
        sl = sizeof(*a);
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_port = htons((uint16_t)l->port);
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        sl = sizeof(*a);
    }
    if (connect(c->fd, (struct sockaddr *)&ss, sl) < 0 && errno != EINPROGRESS) {
        int e = errno;
        close(c->fd);
        c->fd = -1;
        return -e;
    }
    c->wants_out = true;
    ev.events = (l->noread_ms > 0 ? 0 : EPOLLIN) | EPOLLOUT;
    ev.data.ptr = c;
    epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
    return 0;
}

static void close_conn(struct lc *c)
{
    close(c->fd);
    c->fd = -1;
}

/* Issues requests up to the pipeline depth; returns the byte offset to send up to. */
static uint64_t issue(struct lc *c, const struct load *l, bool stopping)
{
    int reqs = l->short_total > 0 ? 1 : l->reqs;

    while (!stopping && c->issued - c->done < (uint32_t)l->depth && c->issued < (uint32_t)reqs) {
        uint64_t prev = c->issued ? c->ends[(c->issued - 1) % RING] : 0;
        c->ends[c->issued % RING] = prev + pick_size(c, l);
        c->issued++;
    }
    return c->issued ? c->ends[(c->issued - 1) % RING] : 0;
}

static void set_events(int ep, struct lc *c, bool reading, bool out)
{
    struct epoll_event ev = {.events = (reading ? EPOLLIN : 0) | (out ? EPOLLOUT : 0),
                             .data.ptr = c};

    if (out != c->wants_out || !reading) {
        c->wants_out = out;
        epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
    }
}

int load_run(struct load *l)
{
    static unsigned char buf[CHUNK];
    struct epoll_event evs[256];
    struct lc *cs = calloc((size_t)l->conns, sizeof(*cs));
    long start = now_ms(), opened = 0, finished = 0;
    int ep = epoll_create1(0), live = 0;
    bool stopping = false, reading = l->noread_ms <= 0;
    uint64_t s = 88172645463325252ull;

    for (int i = 0; i < PATN; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        pat[i] = (unsigned char)(s >> 24);
    }
    if (l->depth < 1)
        l->depth = 1;
    for (int i = 0; i < l->conns; i++) {
        if (l->short_total > 0 && opened >= l->short_total)
            break;
        if (open_conn(&cs[i], l, ep, (uint32_t)opened++) < 0) {
            l->errors++;
            cs[i].fd = -1;
            continue;
        }
        issue(&cs[i], l, false);
        live++;
    }
    while (live > 0) {
        long el = now_ms() - start;
        int n;

        if (el > l->timeout_ms) {
            l->timed_out = true;
            break;
        }
        if (!reading && el >= l->noread_ms) {
            reading = true;
            for (int i = 0; i < l->conns; i++)
                if (cs[i].fd >= 0) {
                    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = &cs[i]};
                    cs[i].wants_out = true;
                    epoll_ctl(ep, EPOLL_CTL_MOD, cs[i].fd, &ev);
                }
        }
        if (l->tick && !stopping && l->tick(el, l->tick_arg)) {
            stopping = true;
            for (int i = 0; i < l->conns; i++)
                if (cs[i].fd >= 0 && cs[i].done == cs[i].issued)
                    cs[i].waiting_eof = true;
        }
        n = epoll_wait(ep, evs, 256, 10);
        for (int k = 0; k < n; k++) {
            struct lc *c = evs[k].data.ptr;
            uint64_t target;
            bool closed = false;

            if (c->fd < 0)
                continue;
            target = c->issued ? c->ends[(c->issued - 1) % RING] : 0;
            if ((evs[k].events & EPOLLOUT) && c->tx < target) {
                size_t want = target - c->tx < CHUNK ? (size_t)(target - c->tx) : CHUNK;
                ssize_t w;

                fill(buf, c->id, c->tx, want);
                w = send(c->fd, buf, want, MSG_NOSIGNAL);
                if (w > 0)
                    c->tx += (uint64_t)w;
                else if (w < 0 && errno != EAGAIN) {
                    l->errors++;
                    closed = true;
                }
                if (!closed && l->half_close && c->tx == target && c->issued == (uint32_t)l->reqs &&
                    !c->shut) {
                    shutdown(c->fd, SHUT_WR);
                    c->shut = true;
                }
            }
            while (!closed && reading && (evs[k].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
                ssize_t r = read(c->fd, buf, sizeof(buf));
                unsigned char exp[CHUNK];

                if (r < 0) {
                    if (errno == EAGAIN)
                        break;
                    if (c->waiting_eof && c->rx == c->tx) { /* closed after its work: fine */
                        l->server_closed++;
                    } else {
                        l->errors++;
                    }
                    closed = true;
                    break;
                }
                if (r == 0) {
                    if (c->rx == c->tx && (c->shut || c->waiting_eof)) {
                        if (c->waiting_eof)
                            l->server_closed++;
                        finished++;
                    } else {
                        l->early_eof++;
                    }
                    closed = true;
                    break;
                }
                fill(exp, c->id, c->rx, (size_t)r);
                if (c->rx + (uint64_t)r > c->tx) {
                    l->mismatches += c->rx + (uint64_t)r - c->tx; /* more than was sent */
                } else if (memcmp(exp, buf, (size_t)r) != 0) {
                    for (ssize_t i = 0; i < r; i++)
                        l->mismatches += exp[i] != buf[i];
                }
                c->rx += (uint64_t)r;
                l->bytes += (uint64_t)r;
                while (c->done < c->issued && c->rx >= c->ends[c->done % RING]) {
                    c->done++;
                    l->requests++;
                }
                if ((size_t)r < sizeof(buf))
                    break;
            }
            if (!closed && c->done == c->issued) {
                int reqs = l->short_total > 0 ? 1 : l->reqs;

                if (stopping)
                    c->waiting_eof = true;
                else if (c->issued == (uint32_t)reqs && !l->half_close) {
                    finished++;
                    closed = true;
                }
            }
            if (closed) {
                close_conn(c);
                live--;
                if (l->short_total > 0 && opened < l->short_total && !stopping) {
                    if (open_conn(c, l, ep, (uint32_t)opened++) == 0) {
                        issue(c, l, false);
                        live++;
                    } else {
                        l->errors++;
                    }
                }
                continue;
            }
            target = issue(c, l, stopping);
            set_events(ep, c, reading, c->tx < target);
        }
    }
    for (int i = 0; i < l->conns; i++)
        if (cs[i].fd >= 0)
            close(cs[i].fd);
    close(ep);
    free(cs);
    return !l->timed_out && l->mismatches == 0 && l->early_eof == 0 && l->errors == 0 ? 0 : -1;
}
