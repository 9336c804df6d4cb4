/* uring_echo: the io_uring echo peer, as a user would write one today: N threads, each with its
 * own ring and its own SO_REUSEPORT listener; multishot accept, multishot receive into provided
 * buffers (a buffer ring), and the echo sent from the very buffer it was received in.
 *
 *   uring_echo PORT NTHREADS [CPULIST]
 *
 * CPULIST pins thread i as in epoll_reuseport (each CPU must be in the starting affinity mask).
 * Exits 1 with "io_uring is not available" where the kernel refuses io_uring (too old, or
 * kernel.io_uring_disabled).
 *
 * DESIGN. Everything a thread touches is its own (struct shard): the ring, the buffer ring, the
 * listener and the connections it accepted; no locks. A connection has at most one receive
 * (multishot) and one send in flight, and it is freed only when neither is: the kernel may
 * still write a completion naming it until then. One send at a time keeps the echo in order: two
 * sends queued on one socket may complete out of order when the first meets a full socket.
 * A received buffer waits in the connection's queue (linked through shard.next[]) until it
 * has been sent, then goes back to the buffer ring. When the ring runs dry a multishot receive
 * ends with ENOBUFS; that connection waits on the starved list and is re-armed when a buffer
 * comes back, so a client that does not read holds buffers but never spins the loop. */
#include "cpulist.h"

#include <arpa/inet.h>
#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_THREADS 1024
#define RING_SIZE 4096
#define NBUF 4096 /* provided buffers per thread (a power of two) */
#define BUF_SIZE 4096
#define BGID 1

/* user_data: a connection's address with the operation in its two low bits. */
enum { OP_NONE, OP_RECV, OP_SEND, OP_ACCEPT };

/* A connection: owned by the shard that accepted it. */
struct conn {
    int fd;
    bool recv_armed, sending; /* an operation the kernel may still complete */
    bool eof;                 /* the client has closed: send the rest, then close */
    bool dead;                /* an error: drop the rest, close once nothing is in flight */
    bool cancelled;           /* the receive was asked to stop */
    bool starved;             /* on the starved list */
    int head, tail;           /* buffers to send, oldest first (-1: none) */
    uint32_t off;             /* bytes of the head buffer already sent */
    struct conn *next_starved;
};

/* One thread and all it owns. */
struct shard {
    pthread_t th;
    int lfd, cpu, err;
    const char *failed; /* the setup step that failed, with err */
    struct io_uring ring;
    struct io_uring_buf_ring *br;
    char *bufs;
    struct conn *starved;
    int next[NBUF];     /* the queue link of each buffer */
    uint32_t len[NBUF]; /* bytes received into each buffer */
};

static pthread_barrier_t ready;

static void settle(struct shard *s, struct conn *c);

static int listen_on(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

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

/* A free SQE; when the queue is full, what is in it is submitted first. */
static struct io_uring_sqe *sqe_get(struct shard *s)
{
    struct io_uring_sqe *sqe;

    while (!(sqe = io_uring_get_sqe(&s->ring)))
        io_uring_submit(&s->ring);
    return sqe;
}

static void arm_accept(struct shard *s)
{
    struct io_uring_sqe *sqe = sqe_get(s);

    io_uring_prep_multishot_accept(sqe, s->lfd, NULL, NULL, SOCK_CLOEXEC);
    io_uring_sqe_set_data64(sqe, OP_ACCEPT);
}

static void arm_recv(struct shard *s, struct conn *c)
{
    struct io_uring_sqe *sqe = sqe_get(s);

    io_uring_prep_recv_multishot(sqe, c->fd, NULL, 0, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = BGID;
    io_uring_sqe_set_data64(sqe, (uintptr_t)c | OP_RECV);
    c->recv_armed = true;
}

/* Buffer bid back to the kernel; the connections that ran dry may receive again. */
static void buf_return(struct shard *s, int bid)
{
    struct conn *c;

    io_uring_buf_ring_add(s->br, s->bufs + (size_t)bid * BUF_SIZE, BUF_SIZE, (unsigned short)bid,
                          io_uring_buf_ring_mask(NBUF), 0);
    io_uring_buf_ring_advance(s->br, 1);
    while ((c = s->starved)) {
        s->starved = c->next_starved;
        c->starved = false;
        if (!c->dead && !c->eof)
            arm_recv(s, c);
        else
            settle(s, c); /* it broke while it waited: it may close now */
    }
}

static void send_head(struct shard *s, struct conn *c)
{
    struct io_uring_sqe *sqe;

    if (c->sending || c->dead || c->head < 0)
        return;
    sqe = sqe_get(s);
    io_uring_prep_send(sqe, c->fd, s->bufs + (size_t)c->head * BUF_SIZE + c->off,
                       s->len[c->head] - c->off, MSG_NOSIGNAL);
    io_uring_sqe_set_data64(sqe, (uintptr_t)c | OP_SEND);
    c->sending = true;
}

/* Closes c when nothing of it is in flight and nothing is owed (or it is dead). */
static void settle(struct shard *s, struct conn *c)
{
    if (c->dead && c->recv_armed && !c->cancelled) {
        struct io_uring_sqe *sqe = sqe_get(s);
        io_uring_prep_cancel64(sqe, (uintptr_t)c | OP_RECV, 0);
        io_uring_sqe_set_data64(sqe, OP_NONE);
        c->cancelled = true;
    }
    if (c->recv_armed || c->sending || c->starved || !(c->dead || (c->eof && c->head < 0)))
        return;
    while (c->head >= 0) {
        int bid = c->head;
        c->head = s->next[bid];
        buf_return(s, bid);
    }
    close(c->fd);
    free(c);
}

static void on_accept(struct shard *s, struct io_uring_cqe *cqe)
{
    struct conn *c;

    if (!(cqe->flags & IORING_CQE_F_MORE)) /* the multishot ended (an error, e.g. EMFILE) */
        arm_accept(s);
    if (cqe->res < 0)
        return;
    if (!(c = calloc(1, sizeof(*c)))) {
        close(cqe->res);
        return;
    }
    c->fd = cqe->res;
    c->head = c->tail = -1;
    arm_recv(s, c);
}

static void on_recv(struct shard *s, struct conn *c, struct io_uring_cqe *cqe)
{
    bool more = cqe->flags & IORING_CQE_F_MORE;

    if (!more)
        c->recv_armed = false;
    if (cqe->res > 0 && (cqe->flags & IORING_CQE_F_BUFFER)) {
        int bid = (int)(cqe->flags >> IORING_CQE_BUFFER_SHIFT);
        s->len[bid] = (uint32_t)cqe->res;
        s->next[bid] = -1;
        if (c->tail >= 0)
            s->next[c->tail] = bid;
        else
            c->head = bid;
        c->tail = bid;
        send_head(s, c);
        if (!more && !c->dead) /* ended for its own reasons (an overflowed queue): again */
            arm_recv(s, c);
    } else if (cqe->res == 0) {
        c->eof = true;
    } else if (cqe->res == -ENOBUFS && !c->dead) {
        c->starved = true;
        c->next_starved = s->starved;
        s->starved = c;
    } else if (cqe->res < 0) {
        c->dead = true; /* a reset, or -ECANCELED after settle asked */
    }
    settle(s, c);
}

static void on_send(struct shard *s, struct conn *c, struct io_uring_cqe *cqe)
{
    c->sending = false;
    if (cqe->res < 0) {
        c->dead = true;
    } else if ((c->off += (uint32_t)cqe->res) == s->len[c->head]) {
        int bid = c->head;
        c->head = s->next[bid];
        if (c->head < 0)
            c->tail = -1;
        c->off = 0;
        buf_return(s, bid);
    }
    send_head(s, c);
    settle(s, c);
}

/* The ring and its buffers, made on the thread that will use them (SINGLE_ISSUER). */
static int shard_setup(struct shard *s)
{
    struct io_uring_buf_reg reg = {.ring_entries = NBUF, .bgid = BGID};
    struct io_uring_params p;
    /* the fewest wake-ups first: work is done when this thread waits, not by interrupts */
    static const unsigned flags[] = {IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
                                     IORING_SETUP_COOP_TASKRUN, 0};
    int err = -EINVAL;

    for (unsigned i = 0; i < sizeof(flags) / sizeof(flags[0]) && err == -EINVAL; i++) {
        memset(&p, 0, sizeof(p));
        p.flags = flags[i];
        err = io_uring_queue_init_params(RING_SIZE, &s->ring, &p);
    }
    if (err) {
        s->failed = "io_uring is not available (io_uring_queue_init)";
        return err;
    }
    s->br = mmap(NULL, NBUF * sizeof(struct io_uring_buf), PROT_READ | PROT_WRITE,
                 MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
    s->bufs = malloc((size_t)NBUF * BUF_SIZE);
    if (s->br == MAP_FAILED || !s->bufs) {
        s->failed = "buffers";
        return -ENOMEM;
    }
    reg.ring_addr = (uintptr_t)s->br;
    if ((err = io_uring_register_buf_ring(&s->ring, &reg, 0))) {
        s->failed = "io_uring is not available (provided buffer rings need Linux 5.19)";
        return err;
    }
    io_uring_buf_ring_init(s->br);
    for (int i = 0; i < NBUF; i++)
        io_uring_buf_ring_add(s->br, s->bufs + (size_t)i * BUF_SIZE, BUF_SIZE, (unsigned short)i,
                              io_uring_buf_ring_mask(NBUF), i);
    io_uring_buf_ring_advance(s->br, NBUF);
    arm_accept(s);
    return 0;
}

static void *shard_run(void *arg)
{
    struct shard *s = arg;
    struct io_uring_cqe *cqe;

    s->err = shard_setup(s);
    pthread_barrier_wait(&ready);
    if (s->err)
        return NULL;
    for (;;) {
        unsigned head, n = 0;
        int err = io_uring_submit_and_wait(&s->ring, 1);
        if (err < 0 && err != -EINTR && err != -EBUSY && err != -EAGAIN) {
            fprintf(stderr, "uring_echo: io_uring_enter: %s\n", strerror(-err));
            exit(1);
        }
        io_uring_for_each_cqe(&s->ring, head, cqe)
        {
            uint64_t ud = io_uring_cqe_get_data64(cqe);
            struct conn *c = (struct conn *)(uintptr_t)(ud & ~(uint64_t)3);
            switch (ud & 3) {
            case OP_ACCEPT:
                on_accept(s, cqe);
                break;
            case OP_RECV:
                on_recv(s, c, cqe);
                break;
            case OP_SEND:
                on_send(s, c, cqe);
                break;
            default:
                break; /* a cancel's own completion */
            }
            n++;
        }
        io_uring_cq_advance(&s->ring, n);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    static struct shard shards[MAX_THREADS];
    static int cpus[CPU_SETSIZE];
    int n = argc >= 3 ? atoi(argv[2]) : 0, port = argc >= 2 ? atoi(argv[1]) : 0, ncpus = 0;
    struct rlimit rl;

    if (argc < 3 || argc > 4 || port < 1 || port > 65535 || n < 1 || n > MAX_THREADS) {
        fprintf(stderr, "usage: uring_echo PORT NTHREADS [CPULIST]  (1 <= NTHREADS <= %d)\n",
                MAX_THREADS);
        return 2;
    }
    if (argc == 4 && (ncpus = cpulist_parse("uring_echo", argv[3], cpus, CPU_SETSIZE)) < 0)
        return 2;
    signal(SIGPIPE, SIG_IGN);
    if (!getrlimit(RLIMIT_NOFILE, &rl)) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    for (int i = 0; i < n; i++) { /* all listeners first: the first connections spread too */
        shards[i].cpu = ncpus ? cpus[i % ncpus] : -1;
        if ((shards[i].lfd = listen_on(port)) < 0) {
            fprintf(stderr, "uring_echo: listener %d on 127.0.0.1:%d: %s\n", i, port,
                    strerror(errno));
            return 1;
        }
    }
    pthread_barrier_init(&ready, NULL, (unsigned)n + 1);
    for (int i = 0; i < n; i++) {
        pthread_attr_t at;
        cpu_set_t one;
        int err;
        pthread_attr_init(&at);
        if (shards[i].cpu >= 0) {
            CPU_ZERO(&one);
            CPU_SET(shards[i].cpu, &one);
            pthread_attr_setaffinity_np(&at, sizeof(one), &one);
        }
        err = pthread_create(&shards[i].th, &at, shard_run, &shards[i]);
        pthread_attr_destroy(&at);
        if (err) {
            fprintf(stderr, "uring_echo: thread %d: %s\n", i, strerror(err));
            return 1;
        }
    }
    pthread_barrier_wait(&ready);
    for (int i = 0; i < n; i++)
        if (shards[i].err) {
            fprintf(stderr, "uring_echo: thread %d: %s: %s\n", i, shards[i].failed,
                    strerror(-shards[i].err));
            return 1;
        }
    pthread_join(shards[0].th, NULL); /* the loops never return; the process ends by a signal */
    return 0;
}
