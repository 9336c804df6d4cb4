/* epoll_st: the fewest-syscalls echo peer: one thread, level-triggered epoll, one read() and one
 * write() per readable event.
 *
 * EPOLLOUT is asked for only while a write is partial, and reading pauses until the rest is
 * out (backpressure: a client that does not read stops being read). TCP_NODELAY is set once
 * on the listener: Linux copies it to every accepted socket, one setsockopt per accept saved.
 *
 *   epoll_st PORT [--drop N | --flip N]
 *
 * --drop N, --flip N: BROKEN on purpose, to show that a load generator catches it: on every
 * Nth read the last byte is not echoed (--drop) or the first is changed (--flip). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUF_SIZE (64 * 1024)

/* The unsent rest of a partial write, per fd (the process has one thread: it owns them all). */
struct tail {
    char *buf;
    size_t len, off;
};

static struct tail *tails;
static int max_fd;

static int listen_on(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 4096)) {
        close(fd);
        return -1;
    }
    return fd;
}

static void watch(int ep, int op, int fd, uint32_t events)
{
    struct epoll_event ev = {.events = events, .data.fd = fd};

    epoll_ctl(ep, op, fd, &ev);
}

/* One event on a connection. Returns -1 when it is to be closed. */
static int serve(int ep, int fd, char *buf, long every, int flip)
{
    static unsigned long reads;
    struct tail *t = &tails[fd];
    ssize_t r, w;

    if (t->len) { /* asked for EPOLLOUT: the rest first, then back to reading */
        w = write(fd, t->buf + t->off, t->len - t->off);
        if (w < 0)
            return errno == EAGAIN || errno == EINTR ? 0 : -1;
        if ((t->off += (size_t)w) == t->len) {
            t->len = t->off = 0;
            watch(ep, EPOLL_CTL_MOD, fd, EPOLLIN);
        }
        return 0;
    }
    r = read(fd, buf, BUF_SIZE);
    if (r < 0)
        return errno == EAGAIN || errno == EINTR ? 0 : -1;
    if (r == 0)
        return -1;
    if (every && ++reads % (unsigned long)every == 0) { /* the broken modes */
        if (flip)
            buf[0] ^= 0x5a;
        else
            r--;
    }
    w = write(fd, buf, (size_t)r);
    if (w < 0 && errno != EAGAIN && errno != EINTR)
        return -1;
    if (w < 0)
        w = 0;
    if (w < r) {
        if (!t->buf && !(t->buf = malloc(BUF_SIZE)))
            return -1;
        memcpy(t->buf, buf + w, (size_t)(r - w));
        t->len = (size_t)(r - w);
        watch(ep, EPOLL_CTL_MOD, fd, EPOLLOUT);
    }
    return 0;
}

int main(int argc, char **argv)
{
    static char buf[BUF_SIZE];
    struct epoll_event evs[256];
    struct rlimit rl;
    int lfd, ep, port = argc >= 2 ? atoi(argv[1]) : 0, flip = 0;
    long every = 0;

    if (argc == 4 && (!strcmp(argv[2], "--drop") || (flip = !strcmp(argv[2], "--flip"))))
        every = atol(argv[3]);
    if (port < 1 || port > 65535 || (argc != 2 && argc != 4) || (argc == 4 && every < 1)) {
        fprintf(stderr, "usage: epoll_st PORT [--drop N | --flip N]  (N >= 1: break every Nth "
                        "read on purpose)\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    if (!getrlimit(RLIMIT_NOFILE, &rl)) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    max_fd = rl.rlim_cur > 1 << 20 ? 1 << 20 : (int)rl.rlim_cur;
    tails = calloc((size_t)max_fd, sizeof(*tails));
    lfd = listen_on(port);
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (!tails || lfd < 0 || ep < 0) {
        fprintf(stderr, "epoll_st: cannot listen on 127.0.0.1:%d: %s\n", port, strerror(errno));
        return 1;
    }
    watch(ep, EPOLL_CTL_ADD, lfd, EPOLLIN);
    for (;;) {
        int n = epoll_wait(ep, evs, 256, -1);
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == lfd) { /* one accept per event: level-triggered, the rest come again */
                int c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (c >= max_fd)
                    close(c);
                else if (c >= 0)
                    watch(ep, EPOLL_CTL_ADD, c, EPOLLIN);
                continue;
            }
            if (serve(ep, fd, buf, every, flip) < 0) {
                tails[fd].len = tails[fd].off = 0;
                close(fd); /* the last reference: it leaves the epoll set */
            }
        }
    }
}
