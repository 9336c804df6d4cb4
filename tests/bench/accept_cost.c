/* accept_cost: what the accept thread's and the re-arm's system calls cost one thread, alone.
 * Times, in thread CPU ns per call on a loopback listener: accept4 on an empty queue (the call
 * that ends a drain), getsockopt(TCP_INFO) on a listener (how many wait: acceptor.c's queued),
 * epoll_wait(0) with the listener ready and with it empty, and an EPOLL_CTL_MOD EPOLLONESHOT
 * re-arm of a connected socket (a worker's one extra syscall per request). Where liburing is
 * installed (LFE_HAVE_URING), also a batch of B such re-arms through io_uring
 * (IORING_OP_EPOLL_CTL, one submit and the completions reaped) against B epoll_ctl calls, per
 * re-arm, for B = 1, 2, 4 ... 64: the experiment of issue 26 (docs/bench.md, "Many cores").
 *   build/bench/accept_cost [CALLS]      (200000 by default; run it pinned: taskset -c 0) */
#include <arpa/inet.h>
#ifdef LFE_HAVE_URING
#include <liburing.h>
#endif
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double cpu_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void die(const char *what)
{
    perror(what);
    exit(1);
}

#ifdef LFE_HAVE_URING
enum { NCONN = 64 };

/* NCONN connections to lfd, their accepted ends registered EPOLLONESHOT in ep; then each batch
 * size, re-armed by epoll_ctl and through a ring, rounds times each. */
static void rearm_batches(int lfd, const struct sockaddr_in *a, int ep, long rounds)
{
    int cl[NCONN], sv[NCONN];
    struct epoll_event evs[NCONN];
    struct io_uring ring;
    struct io_uring_cqe *cqe;

    for (int i = 0; i < NCONN; i++) {
        struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT, .data.u32 = i};

        cl[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (cl[i] < 0 || connect(cl[i], (const struct sockaddr *)a, sizeof(*a)) < 0)
            die("connect to the listener");
        do
            sv[i] = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        while (sv[i] < 0);
        if (epoll_ctl(ep, EPOLL_CTL_ADD, sv[i], &ev) < 0)
            die("register a connection");
    }
    if (io_uring_queue_init(NCONN, &ring, IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN))
        die("io_uring_queue_init");
    for (int b = 1; b <= NCONN; b *= 2) {
        double t0 = cpu_ns(), t1, t2;

        for (long r = 0; r < rounds; r++)
            for (int i = 0; i < b; i++) {
                struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT,
                                         .data.u32 = i};

                if (epoll_ctl(ep, EPOLL_CTL_MOD, sv[i], &ev) < 0)
                    die("epoll_ctl(MOD)");
            }
        t1 = cpu_ns();
        for (long r = 0; r < rounds; r++) {
            for (int i = 0; i < b; i++) {
                struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);

                evs[i] = (struct epoll_event){.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT,
                                              .data.u32 = i};
                io_uring_prep_epoll_ctl(sqe, ep, sv[i], EPOLL_CTL_MOD, &evs[i]);
                io_uring_sqe_set_data64(sqe, (uint64_t)i);
            }
            io_uring_submit(&ring);
            while (io_uring_peek_cqe(&ring, &cqe) == 0) {
                if (cqe->res < 0)
                    die("IORING_OP_EPOLL_CTL");
                io_uring_cqe_seen(&ring, cqe);
            }
        }
        t2 = cpu_ns();
        printf("re-arm, batch of %2d: epoll_ctl   %4.0f ns, io_uring %4.0f ns a re-arm\n", b,
               (t1 - t0) / (double)(rounds * b), (t2 - t1) / (double)(rounds * b));
    }
    io_uring_queue_exit(&ring);
    for (int i = 0; i < NCONN; i++) {
        close(sv[i]);
        close(cl[i]);
    }
}
#endif

int main(int argc, char **argv)
{
    long calls = argc > 1 ? atol(argv[1]) : 200000;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    struct epoll_event ev = {.events = EPOLLIN}, out[4];
    struct tcp_info ti;
    int lfd, ep, cfd, sfd;
    double t0;
    long sum = 0;

    if (calls <= 0) {
        fprintf(stderr, "usage: %s [CALLS > 0]\n", argv[0]);
        return 2;
    }
    lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        getsockname(lfd, (struct sockaddr *)&a, &al) < 0 || listen(lfd, 128) < 0)
        die("listener on 127.0.0.1");
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) < 0)
        die("epoll");

    t0 = cpu_ns();
    for (long i = 0; i < calls; i++)
        if (accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC) >= 0)
            die("accept4 found a connection nobody made");
    printf("accept4, empty queue (EAGAIN)     %6.0f ns\n", (cpu_ns() - t0) / (double)calls);

    t0 = cpu_ns();
    for (long i = 0; i < calls; i++)
        sum += epoll_wait(ep, out, 4, 0);
    printf("epoll_wait(0), listener empty     %6.0f ns\n", (cpu_ns() - t0) / (double)calls);

    cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (cfd < 0 || connect(cfd, (struct sockaddr *)&a, sizeof(a)) < 0)
        die("connect to the listener");
    usleep(10000); /* the handshake completes into the accept queue */

    t0 = cpu_ns();
    for (long i = 0; i < calls; i++) {
        al = sizeof(ti);
        if (getsockopt(lfd, IPPROTO_TCP, TCP_INFO, &ti, &al) < 0)
            die("getsockopt(TCP_INFO)");
        sum += ti.tcpi_unacked;
    }
    printf("getsockopt(TCP_INFO), listener    %6.0f ns (queue %u)\n",
           (cpu_ns() - t0) / (double)calls, ti.tcpi_unacked);

    t0 = cpu_ns();
    for (long i = 0; i < calls; i++)
        sum += epoll_wait(ep, out, 4, 0);
    printf("epoll_wait(0), listener ready     %6.0f ns\n", (cpu_ns() - t0) / (double)calls);

    sfd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    ev.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
    if (sfd < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev) < 0)
        die("accept and register the connection");
    t0 = cpu_ns();
    for (long i = 0; i < calls; i++)
        if (epoll_ctl(ep, EPOLL_CTL_MOD, sfd, &ev) < 0)
            die("epoll_ctl(MOD)");
    printf("epoll_ctl(MOD) re-arm, connection %6.0f ns\n", (cpu_ns() - t0) / (double)calls);
    close(sfd);
    close(cfd);
#ifdef LFE_HAVE_URING
    rearm_batches(lfd, &a, ep, calls / 10);
#endif
    close(ep);
    close(lfd);
    return sum < 0; /* keeps the loops' results live */
}
