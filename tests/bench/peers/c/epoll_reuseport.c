/* epoll_reuseport: the many-core echo peer: N threads, each with its own SO_REUSEPORT listener
 * and its own edge-triggered epoll loop, so the kernel spreads new connections over them and no
 * two threads ever share a socket, a lock or a cache line of state.
 *
 *   epoll_reuseport PORT NTHREADS [CPULIST]
 *
 * CPULIST (as taskset writes it: 0-7 or 0,2,4-6) pins thread i to the list's (i mod length)th
 * CPU; each must be in the affinity mask the process started with (a pin outside taskset's set
 * would take the load generator's CPU and make the figures wrong). A connection is registered
 * once, EPOLLIN|EPOLLOUT|EPOLLET: no epoll_ctl per request. All listeners are bound before any
 * thread runs, so the first connections already spread over all of them. */
#include "cpulist.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUF_SIZE (64 * 1024)
#define MAX_THREADS 1024

/* A connection: owned by the thread that accepted it (its epoll data), freed when it closes.
 * Nothing is indexed by fd number, so no two threads ever touch the same memory, even when
 * the kernel gives a closed connection's number to another thread's new one. */
struct conn {
    int fd;
    char *rest;      /* the unsent rest of a partial write (allocated on the first one) */
    size_t len, off; /* its length, and how much of it is out */
};

/* What one thread owns. */
struct loop {
    pthread_t th;
    int lfd, ep, cpu; /* cpu -1: not pinned */
};

static int listen_on(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)); /* copied to accepted ones */
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 4096)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Echoes all that is readable. Returns -1 when the connection is to be closed. */
static int serve(struct conn *c, char *buf)
{
    ssize_t r, w;

    if (c->len) { /* the rest of the last echo before reading more (backpressure) */
        w = write(c->fd, c->rest + c->off, c->len - c->off);
        if (w < 0)
            return errno == EAGAIN || errno == EINTR ? 0 : -1;
        if ((c->off += (size_t)w) < c->len)
            return 0;
        c->len = c->off = 0;
    }
    for (;;) {
        r = read(c->fd, buf, BUF_SIZE);
        if (r == 0)
            return -1;
        if (r < 0)
            return errno == EAGAIN || errno == EINTR ? 0 : -1;
        w = write(c->fd, buf, (size_t)r);
        if (w < 0 && errno != EAGAIN && errno != EINTR)
            return -1;
        if (w < 0)
            w = 0;
        if (w < r) { /* the socket is full: its EPOLLOUT edge brings us back */
            if (!c->rest && !(c->rest = malloc(BUF_SIZE)))
                return -1;
            memcpy(c->rest, buf + w, (size_t)(r - w));
            c->len = (size_t)(r - w);
            return 0;
        }
        if (r < BUF_SIZE) /* a short read emptied the queue; new data raises a new edge */
            return 0;
    }
}

static void *loop_run(void *arg)
{
    struct loop *l = arg;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.ptr = NULL}, evs[256];
    char *buf = malloc(BUF_SIZE); /* the thread's own, on its own CPU's memory */

    if (!buf) {
        fprintf(stderr, "epoll_reuseport: out of memory\n");
        exit(1);
    }
    epoll_ctl(l->ep, EPOLL_CTL_ADD, l->lfd, &ev);
    for (;;) {
        int n = epoll_wait(l->ep, evs, 256, -1);
        for (int i = 0; i < n; i++) {
            struct conn *c = evs[i].data.ptr; /* NULL: the listener */
            int fd;
            if (c) {
                if (serve(c, buf) < 0) {
                    close(c->fd); /* the last reference: it leaves the epoll set */
                    free(c->rest);
                    free(c);
                }
                continue;
            }
            /* edge-triggered: accept until EAGAIN (EMFILE too ends the burst; the next
             * connection's edge retries) */
            while ((fd = accept4(l->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                if (!(c = calloc(1, sizeof(*c)))) {
                    close(fd);
                    continue;
                }
                c->fd = fd;
                ev = (struct epoll_event){.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.ptr = c};
                epoll_ctl(l->ep, EPOLL_CTL_ADD, fd, &ev);
            }
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    static struct loop loops[MAX_THREADS];
    static int cpus[CPU_SETSIZE];
    int n = argc >= 3 ? atoi(argv[2]) : 0, port = argc >= 2 ? atoi(argv[1]) : 0, ncpus = 0;
    struct rlimit rl;

    if (argc < 3 || argc > 4 || port < 1 || port > 65535 || n < 1 || n > MAX_THREADS) {
        fprintf(stderr, "usage: epoll_reuseport PORT NTHREADS [CPULIST]  (1 <= NTHREADS <= %d)\n",
                MAX_THREADS);
        return 2;
    }
    if (argc == 4 && (ncpus = cpulist_parse("epoll_reuseport", argv[3], cpus, CPU_SETSIZE)) < 0)
        return 2;
    signal(SIGPIPE, SIG_IGN);
    if (!getrlimit(RLIMIT_NOFILE, &rl)) { /* 1000 connections need more than the usual 1024 */
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    for (int i = 0; i < n; i++) {
        loops[i].cpu = ncpus ? cpus[i % ncpus] : -1;
        loops[i].lfd = listen_on(port);
        loops[i].ep = epoll_create1(EPOLL_CLOEXEC);
        if (loops[i].lfd < 0 || loops[i].ep < 0) {
            fprintf(stderr, "epoll_reuseport: listener %d on 127.0.0.1:%d: %s\n", i, port,
                    strerror(errno));
            return 1;
        }
    }
    for (int i = 0; i < n; i++) {
        pthread_attr_t at;
        cpu_set_t one;
        int err;
        pthread_attr_init(&at);
        if (loops[i].cpu >= 0) { /* pinned from birth: no first slice on another CPU */
            CPU_ZERO(&one);
            CPU_SET(loops[i].cpu, &one);
            pthread_attr_setaffinity_np(&at, sizeof(one), &one);
        }
        err = pthread_create(&loops[i].th, &at, loop_run, &loops[i]);
        pthread_attr_destroy(&at);
        if (err) {
            fprintf(stderr, "epoll_reuseport: thread %d: %s\n", i, strerror(err));
            return 1;
        }
    }
    pthread_join(loops[0].th, NULL); /* the loops never return; the process ends by a signal */
    return 0;
}
