/* echoload: the independent closed-loop echo load generator of the benchmarks; checks every byte.
 *
 * It shares no code with lfbench (client/), so that a figure both agree on is not an artefact
 * of one client. It talks to 127.0.0.0/8 only, and every run is bounded by -d (or -n) plus -g.
 *
 *   long:  the connections are opened before the clock starts; each keeps DEPTH requests in
 *          flight (writev of the next ones as soon as an echo completes).
 *   short: every request has a connection of its own: connect, write, read the whole echo,
 *          close (the client closes first, so TIME_WAIT stays here). Source addresses rotate
 *          over 127.0.0.2.. (-a): one address gives about 14k connects/s before connect()
 *          spends its time looking for a port still out of TIME_WAIT.
 *
 * Request n of connection c is the window pat[start(c, n) .. + SIZE) of a fixed pseudo-random
 * pattern; consecutive requests start at different places, so a lost, shifted, duplicated or
 * foreign byte differs from what is expected; the first wrong byte (or a byte more than was
 * sent) counts one mismatch and ends that connection, what it still owed counting as lost (after
 * a wrong byte, what follows on the stream proves nothing). When the time (or -n) is up no
 * request starts; those in flight have GRACE seconds to come back, and what has not is counted
 * as lost.
 * Latency: first byte written (short: connect started) to last byte echoed.
 *
 * Prints one line: qps= requests= errors= connect_errors= mismatches= lost= p50_us= p99_us=
 * p999_us= duration= client_cpu= [cpuN_busy= ...]. Exit 0: all verified; 1: a mismatch, a lost
 * request, a broken connection or nothing completed; 2: bad usage or setup failed. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define MAX_DEPTH 64
#define MAX_CPUS 1024
#define RD_SIZE (64 * 1024)
#define PAT_STARTS 8191 /* distinct start offsets of a request in the pattern (prime) */
#define HIST_SUB 4      /* 16 linear sub-buckets per power of two: within about 6% */
#define HIST_N (64 << HIST_SUB)

/* The configuration: written by main before the threads start, read-only after. */
static struct {
    struct sockaddr_in to;
    int conns, threads, size, depth, srcs, rcvbuf;
    bool shortm, cpus;
    double dur, warm, grace;
    long count;
} cf = {.conns = 100, .threads = 1, .size = 64, .depth = 1, .srcs = 64, .dur = 5, .grace = 2};

static unsigned char *pat;                  /* PAT_STARTS + size bytes */
static uint64_t t_meas, t_end, t_quit, t_0; /* CLOCK_MONOTONIC ns; fixed before the start */
static pthread_barrier_t go_bar;

/* One connection slot: owned by one thread. Long mode: one socket for the whole run. Short
 * mode: a socket per request, req counting the requests the slot has made. Byte counters are
 * stream positions (long mode: request k is bytes k*size .. (k+1)*size). */
struct slot {
    int fd, id;
    bool retired;          /* short mode: time is up, no more connections */
    uint64_t sent, echoed; /* bytes written, bytes echoed back and verified */
    uint64_t req;          /* short mode: the slot's request number */
    uint64_t t0[MAX_DEPTH];
};

/* Everything one thread owns. Summed by main after the join. */
struct worker {
    pthread_t th;
    struct slot *s;
    int ep, n, live;    /* live: slots with a connection to come (long: one still open) */
    bool retry;         /* short mode: a connect failed; reopen the slot after 1 ms */
    unsigned src;       /* short mode: next source address */
    long budget;        /* requests this thread may still start (-n) */
    uint64_t in_flight; /* long mode: started and not yet echoed */
    uint64_t done, errors, cerrors, mismatches, lost, last_done;
    uint64_t hist[HIST_N];
    unsigned char rd[RD_SIZE];
};

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static const unsigned char *expect(int id, uint64_t req)
{
    return pat + ((uint64_t)id * 977u + req * 31u) % PAT_STARTS;
}

static int hist_bucket(uint64_t ns)
{
    int top;

    if (ns < (1u << HIST_SUB))
        return (int)ns;
    top = 63 - __builtin_clzll(ns);
    return ((top - HIST_SUB + 1) << HIST_SUB) +
           (int)((ns >> (top - HIST_SUB)) & ((1u << HIST_SUB) - 1));
}

static double hist_value(int b)
{
    int top;

    if (b < (1 << HIST_SUB))
        return b;
    top = (b >> HIST_SUB) + HIST_SUB - 1;
    return ldexp(1.0 + ((b & ((1 << HIST_SUB) - 1)) + 0.5) / (1 << HIST_SUB), top);
}

/* The p-quantile of h (n values), in µs. */
static double quantile_us(const uint64_t *h, uint64_t n, double p)
{
    uint64_t want = (uint64_t)(p * (double)n), seen = 0;

    if (want >= n)
        want = n - 1;
    for (int b = 0; b < HIST_N && n; b++)
        if ((seen += h[b]) > want)
            return hist_value(b) / 1000;
    return 0;
}

static bool time_up(const struct worker *w, uint64_t now)
{
    return now >= t_end || w->budget <= 0;
}

/* An echo completed: counted only inside the measured window (-n: always). */
static void completed(struct worker *w, uint64_t t0, uint64_t now)
{
    if (now < t_meas || (!cf.count && now >= t_end))
        return;
    w->done++;
    w->hist[hist_bucket(now - t0)]++;
    w->last_done = now;
}

/* Compares n received bytes with what the stream owes from position pos on. */
static bool verify(int id, uint64_t pos, const unsigned char *b, size_t n)
{
    uint64_t size = (uint64_t)cf.size;

    while (n) {
        size_t off = pos % size, k = size - off < n ? size - off : n;
        if (memcmp(b, expect(id, pos / size) + off, k))
            return false;
        b += k, pos += k, n -= k;
    }
    return true;
}

/* ---- long mode: persistent connections, DEPTH requests in flight ---- */

static uint64_t begun(const struct slot *s)
{
    return (s->sent + (uint64_t)cf.size - 1) / (uint64_t)cf.size;
}

/* The connection broke: what it owed is lost. */
static void long_broken(struct worker *w, struct slot *s)
{
    uint64_t owed = begun(s) - s->echoed / (uint64_t)cf.size;

    w->errors++;
    w->lost += owed;
    w->in_flight -= owed;
    w->live--;
    close(s->fd); /* also leaves the epoll set: the only reference */
    s->fd = -1;
}

/* Writes up to the pipeline window. Registered once for EPOLLIN|EPOLLOUT edge-triggered, a
 * partial write is finished on the next EPOLLOUT edge: no epoll_ctl per request. */
static void long_send(struct worker *w, struct slot *s, uint64_t now)
{
    uint64_t size = (uint64_t)cf.size, first = s->sent / size, b0 = begun(s), limit;
    struct iovec iov[MAX_DEPTH + 1];
    int n = 0;
    ssize_t r;

    limit = s->echoed / size + (uint64_t)cf.depth;
    if (time_up(w, now))
        limit = b0; /* only the rest of a request already begun */
    else if (limit - b0 > (uint64_t)w->budget)
        limit = b0 + (uint64_t)w->budget;
    for (uint64_t k = first; k < limit; k++) {
        uint64_t off = k == first ? s->sent % size : 0;
        if (off == 0)
            s->t0[k % (uint64_t)cf.depth] = now;
        iov[n].iov_base = (void *)(expect(s->id, k) + off);
        iov[n++].iov_len = size - off;
    }
    if (n == 0)
        return;
    r = writev(s->fd, iov, n);
    if (r < 0) {
        if (errno != EAGAIN && errno != EINTR)
            long_broken(w, s);
        return;
    }
    s->sent += (uint64_t)r;
    w->in_flight += begun(s) - b0;
    w->budget -= (long)(begun(s) - b0);
}

/* Edge-triggered: read until a short read (the queue was empty; more data raises a new edge). */
static void long_recv(struct worker *w, struct slot *s)
{
    uint64_t size = (uint64_t)cf.size;
    ssize_t r = RD_SIZE;

    while (r == RD_SIZE && s->fd >= 0) {
        uint64_t now;
        r = read(s->fd, w->rd, RD_SIZE);
        if (r < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (r <= 0) { /* the server must not close or reset first */
            long_broken(w, s);
            return;
        }
        now = now_ns();
        if (s->echoed + (uint64_t)r > s->sent) { /* more than was sent */
            w->mismatches++;
            long_broken(w, s);
            return;
        }
        if (!verify(s->id, s->echoed, w->rd, (size_t)r)) {
            w->mismatches++;
            long_broken(w, s);
            return;
        }
        for (uint64_t k = s->echoed / size; k < (s->echoed + (uint64_t)r) / size; k++) {
            completed(w, s->t0[k % (uint64_t)cf.depth], now);
            w->in_flight--;
        }
        s->echoed += (uint64_t)r;
        long_send(w, s, now);
    }
}

static void long_event(struct worker *w, struct slot *s, uint32_t ev)
{
    if (ev & (EPOLLIN | EPOLLERR | EPOLLHUP)) /* errors and EOF come out of read() */
        long_recv(w, s);
    if (s->fd >= 0 && (ev & EPOLLOUT))
        long_send(w, s, now_ns());
}

/* ---- short mode: a connection per request ---- */

static void short_open(struct worker *w, struct slot *s, uint64_t now)
{
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.ptr = s};
    int one = 1, fd;

    s->sent = s->echoed = 0;
    s->fd = -1;
    if (time_up(w, now)) {
        s->retired = true;
        w->live--;
        return;
    }
    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd >= 0 && cf.srcs) {
        struct sockaddr_in from = {.sin_family = AF_INET};
        from.sin_addr.s_addr = htonl(INADDR_LOOPBACK + 1 + w->src++ % (unsigned)cf.srcs);
        /* the port is chosen at connect(), for the 4-tuple, not at bind() for the address */
        setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
        if (bind(fd, (struct sockaddr *)&from, sizeof(from)))
            goto failed;
    }
    if (fd < 0 || (connect(fd, (struct sockaddr *)&cf.to, sizeof(cf.to)) && errno != EINPROGRESS))
        goto failed;
    if (epoll_ctl(w->ep, EPOLL_CTL_ADD, fd, &ev))
        goto failed;
    s->fd = fd;
    s->t0[0] = now;
    w->budget--;
    return;
failed: /* e.g. EADDRNOTAVAIL, no port free: not the server's fault; try again in 1 ms */
    w->cerrors++;
    w->retry = true;
    if (fd >= 0)
        close(fd);
}

/* The slot's request is over (echoed, or broken): the next one on a new connection. */
static void short_next(struct worker *w, struct slot *s)
{
    close(s->fd);
    s->req++;
    short_open(w, s, now_ns());
}

static void short_event(struct worker *w, struct slot *s, uint32_t ev)
{
    ssize_t r;

    if (s->sent == 0) { /* still connecting */
        if (ev & (EPOLLERR | EPOLLHUP)) {
            w->cerrors++; /* refused or reset before a byte was sent */
            w->budget++;
            w->retry = true;
            close(s->fd);
            s->fd = -1;
            return;
        }
        if (!(ev & EPOLLOUT))
            return;
        if (now_ns() >= t_end) { /* nothing sent, nothing owed */
            short_next(w, s);
            return;
        }
    }
    if (s->sent < (uint64_t)cf.size && (ev & EPOLLOUT)) {
        r = write(s->fd, expect(s->id, s->req) + s->sent, (size_t)cf.size - s->sent);
        if (r < 0 && errno != EAGAIN && errno != EINTR)
            goto broken;
        if (r > 0)
            s->sent += (uint64_t)r;
    }
    if (!(ev & (EPOLLIN | EPOLLERR | EPOLLHUP)))
        return;
    for (;;) { /* edge-triggered: until EAGAIN or the whole echo */
        r = read(s->fd, w->rd, RD_SIZE);
        if (r < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (r <= 0)
            goto broken;
        if (s->echoed + (uint64_t)r > s->sent ||
            memcmp(w->rd, expect(s->id, s->req) + s->echoed, (size_t)r)) {
            w->mismatches++;
            goto broken;
        }
        s->echoed += (uint64_t)r;
        if (s->echoed == (uint64_t)cf.size) {
            completed(w, s->t0[0], now_ns());
            short_next(w, s);
            return;
        }
    }
broken:
    w->errors++;
    if (s->sent)
        w->lost++;
    short_next(w, s);
}

/* ---- threads ---- */

static void *worker_run(void *arg)
{
    struct worker *w = arg;
    struct epoll_event evs[256];
    uint64_t now;

    pthread_barrier_wait(&go_bar);
    now = now_ns();
    for (int i = 0; i < w->n; i++)
        if (cf.shortm)
            short_open(w, &w->s[i], now);
        else
            long_send(w, &w->s[i], now);
    while ((now = now_ns()) < t_quit) {
        int n;
        if (w->live == 0 || (!cf.shortm && time_up(w, now) && w->in_flight == 0))
            break;
        n = epoll_wait(w->ep, evs, 256, w->retry ? 1 : 10);
        for (int i = 0; i < n; i++)
            if (cf.shortm)
                short_event(w, evs[i].data.ptr, evs[i].events);
            else
                long_event(w, evs[i].data.ptr, evs[i].events);
        if (w->retry) {
            w->retry = false;
            for (int i = 0; i < w->n; i++)
                if (w->s[i].fd < 0 && !w->s[i].retired)
                    short_open(w, &w->s[i], now_ns());
        }
    }
    if (!cf.shortm)
        w->lost += w->in_flight; /* out of grace: never came back */
    for (int i = 0; i < w->n; i++) {
        if (w->s[i].fd < 0)
            continue;
        if (cf.shortm && w->s[i].sent)
            w->lost++;
        close(w->s[i].fd);
    }
    return NULL;
}

/* ---- measurement of CPU ---- */

/* Busy and total jiffies of each CPU (cpuN lines of /proc/stat), indexed by N. Returns the
 * highest N + 1, or 0. */
static int cpu_ticks(uint64_t *busy, uint64_t *total)
{
    FILE *f = fopen("/proc/stat", "r");
    char line[512];
    int top = 0;

    if (!f)
        return 0;
    while (fgets(line, sizeof(line), f)) {
        unsigned long long v[8] = {0};
        int cpu;
        if (strncmp(line, "cpu", 3) || line[3] < '0' || line[3] > '9')
            continue;
        if (sscanf(line + 3, "%d %llu %llu %llu %llu %llu %llu %llu %llu", &cpu, &v[0], &v[1],
                   &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) < 5 ||
            cpu < 0 || cpu >= MAX_CPUS)
            continue;
        total[cpu] = v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
        busy[cpu] = total[cpu] - v[3] - v[4]; /* not idle, not iowait */
        if (cpu + 1 > top)
            top = cpu + 1;
    }
    fclose(f);
    return top;
}

static double process_cpu_s(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static void sleep_until(uint64_t t)
{
    uint64_t now;

    while ((now = now_ns()) < t) {
        struct timespec ts = {.tv_sec = (time_t)((t - now) / 1000000000u),
                              .tv_nsec = (long)((t - now) % 1000000000u)};
        nanosleep(&ts, NULL);
    }
}

/* ---- options ---- */

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: echoload -p PORT [-H 127.0.0.1] [-m long|short] [-c CONNS=100] [-t THREADS=1]\n"
        "                [-s BYTES=64] [-D DEPTH=1] [-d SECONDS=5] [-w WARMUP=0] [-n REQUESTS]\n"
        "                [-g GRACE=2] [-a SOURCES=64] [-r RCVBUF] [-u]\n"
        "  -D  long mode: requests in flight per connection (pipelining), 1..%d\n"
        "  -n  stop after REQUESTS requests (-d, then 60 by default, is only a bound)\n"
        "  -g  seconds for the echoes in flight to come back after the end\n"
        "  -a  short mode: source addresses 127.0.0.2 .. 127.0.0.(1+SOURCES), in turn\n"
        "      (0: the kernel's choice, one address)\n"
        "  -r  long mode: the client's SO_RCVBUF (a small one with big requests drives the\n"
        "      server through its partial writes)\n"
        "  -u  also print each CPU's busy %% over the measured window (cpuN_busy=)\n",
        MAX_DEPTH);
}

/* optarg as a number in [lo, hi], or exit 2 saying which option and why. */
static double num_arg(int opt, const char *what, double lo, double hi)
{
    char *end;
    double v;

    errno = 0;
    v = strtod(optarg, &end);
    if (errno || end == optarg || *end || v < lo || v > hi) {
        fprintf(stderr, "echoload: -%c %s: want %s from %.15g to %.15g\n", opt, optarg, what, lo,
                hi);
        exit(2);
    }
    return v;
}

static void parse(int argc, char **argv)
{
    const char *host = "127.0.0.1";
    bool dur_set = false;
    int opt, port = 0;

    while ((opt = getopt(argc, argv, "H:p:m:c:t:s:D:d:w:n:g:a:r:uh")) != -1) {
        switch (opt) {
        case 'H':
            host = strcmp(optarg, "localhost") ? optarg : "127.0.0.1";
            break;
        case 'p':
            port = (int)num_arg(opt, "a TCP port", 1, 65535);
            break;
        case 'm':
            if (strcmp(optarg, "long") && strcmp(optarg, "short")) {
                fprintf(stderr, "echoload: -m %s: want long or short\n", optarg);
                exit(2);
            }
            cf.shortm = !strcmp(optarg, "short");
            break;
        case 'c':
            cf.conns = (int)num_arg(opt, "connections", 1, 1000000);
            break;
        case 't':
            cf.threads = (int)num_arg(opt, "threads", 1, 1024);
            break;
        case 's':
            cf.size = (int)num_arg(opt, "bytes per request", 1, 1 << 24);
            break;
        case 'D':
            cf.depth = (int)num_arg(opt, "requests in flight", 1, MAX_DEPTH);
            break;
        case 'd':
            cf.dur = num_arg(opt, "seconds", 0.001, 86400), dur_set = true;
            break;
        case 'w':
            cf.warm = num_arg(opt, "seconds", 0, 3600);
            break;
        case 'n':
            cf.count = (long)num_arg(opt, "requests", 1, 1e15);
            break;
        case 'g':
            cf.grace = num_arg(opt, "seconds", 0, 3600);
            break;
        case 'a':
            cf.srcs = (int)num_arg(opt, "source addresses", 0, 65000);
            break;
        case 'r':
            cf.rcvbuf = (int)num_arg(opt, "bytes", 1, INT_MAX);
            break;
        case 'u':
            cf.cpus = true;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            exit(2);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "echoload: unexpected argument '%s' (options only: -h)\n", argv[optind]);
        exit(2);
    }
    if (!port) {
        fprintf(stderr, "echoload: no port: give the server's with -p PORT\n");
        exit(2);
    }
    if (cf.threads > cf.conns) {
        fprintf(stderr, "echoload: -t %d is more threads than connections (-c %d)\n", cf.threads,
                cf.conns);
        exit(2);
    }
    cf.to.sin_family = AF_INET;
    cf.to.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &cf.to.sin_addr) != 1) {
        fprintf(stderr, "echoload: -H %s: want an IPv4 address in 127.0.0.0/8\n", host);
        exit(2);
    }
    if (ntohl(cf.to.sin_addr.s_addr) >> 24 != 127) {
        fprintf(stderr, "echoload: -H %s: loopback only (127.0.0.0/8)\n", host);
        exit(2);
    }
    if (cf.count) {
        cf.warm = 0;
        if (!dur_set)
            cf.dur = 60;
    }
}

/* Long mode: every connection, blocking, before the clock starts (2 s each, 10 s in all). */
static int open_long(struct slot *s)
{
    time_t start = time(NULL);

    for (int i = 0; i < cf.conns; i++) {
        struct timeval tmo = {.tv_sec = 2};
        int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || time(NULL) - start > 10) {
            fprintf(stderr, "echoload: opening connection %d: %s\n", i,
                    fd < 0 ? strerror(errno) : "over 10 s for all of them");
            return -1;
        }
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tmo, sizeof(tmo));
        if (cf.rcvbuf)
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &cf.rcvbuf, sizeof(cf.rcvbuf));
        if (connect(fd, (struct sockaddr *)&cf.to, sizeof(cf.to))) {
            fprintf(stderr, "echoload: connection %d to port %d: %s\n", i, ntohs(cf.to.sin_port),
                    strerror(errno));
            close(fd);
            return -1;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        fcntl(fd, F_SETFL, O_NONBLOCK);
        s[i].fd = fd;
    }
    return 0;
}

int main(int argc, char **argv)
{
    static uint64_t hist[HIST_N], b0[MAX_CPUS], n0[MAX_CPUS], b1[MAX_CPUS], n1[MAX_CPUS];
    uint64_t done = 0, errors = 0, cerrors = 0, mism = 0, lost = 0, last = 0,
             x = 0x9e3779b97f4a7c15u;
    struct slot *slots;
    struct worker *ws;
    struct rlimit rl;
    double c0, c1, w0, w1, dur;
    int ncpu, rc = 2;

    parse(argc, argv);
    signal(SIGPIPE, SIG_IGN);
    if (!getrlimit(RLIMIT_NOFILE, &rl)) { /* 1000 connections need more than the usual 1024 */
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    pat = malloc((size_t)cf.size + PAT_STARTS);
    slots = calloc((size_t)cf.conns, sizeof(*slots));
    ws = calloc((size_t)cf.threads, sizeof(*ws));
    if (!pat || !slots || !ws) {
        fprintf(stderr, "echoload: out of memory\n");
        goto out;
    }
    for (size_t i = 0; i < (size_t)cf.size + PAT_STARTS; i++) { /* splitmix64: fixed, repeatable */
        uint64_t z = (x += 0x9e3779b97f4a7c15u);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
        pat[i] = (unsigned char)((z ^ (z >> 31)) >> 56);
    }
    for (int i = 0; i < cf.conns; i++)
        slots[i].id = i, slots[i].fd = -1;
    if (!cf.shortm && open_long(slots))
        goto out;
    for (int i = 0; i < cf.threads; i++) {
        struct worker *w = &ws[i];
        int lo = (int)((long)cf.conns * i / cf.threads);
        int hi = (int)((long)cf.conns * (i + 1) / cf.threads);
        w->s = slots + lo;
        w->n = w->live = hi - lo;
        w->budget = cf.count ? cf.count / cf.threads + (i < cf.count % cf.threads) : LONG_MAX;
        w->ep = epoll_create1(EPOLL_CLOEXEC);
        if (w->ep < 0) {
            fprintf(stderr, "echoload: epoll_create1: %s\n", strerror(errno));
            goto out;
        }
        for (int j = 0; j < w->n && !cf.shortm; j++) {
            struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.ptr = &w->s[j]};
            epoll_ctl(w->ep, EPOLL_CTL_ADD, w->s[j].fd, &ev);
        }
    }
    pthread_barrier_init(&go_bar, NULL, (unsigned)cf.threads + 1);
    for (int i = 0; i < cf.threads; i++)
        if (pthread_create(&ws[i].th, NULL, worker_run, &ws[i])) {
            /* those started wait at the barrier for ever: only exit ends them */
            fprintf(stderr, "echoload: cannot start thread %d of %d\n", i + 1, cf.threads);
            exit(2);
        }
    t_0 = now_ns();
    t_meas = t_0 + (uint64_t)(cf.warm * 1e9);
    t_end = t_meas + (uint64_t)(cf.dur * 1e9);
    t_quit = t_end + (uint64_t)(cf.grace * 1e9);
    pthread_barrier_wait(&go_bar);

    sleep_until(t_meas);
    c0 = process_cpu_s();
    w0 = (double)now_ns() / 1e9;
    ncpu = cpu_ticks(b0, n0);
    if (cf.count) /* the window ends when the last thread does */
        for (int i = 0; i < cf.threads; i++)
            pthread_join(ws[i].th, NULL);
    else
        sleep_until(t_end);
    c1 = process_cpu_s();
    w1 = (double)now_ns() / 1e9;
    cpu_ticks(b1, n1);
    for (int i = 0; i < cf.threads && !cf.count; i++)
        pthread_join(ws[i].th, NULL);

    for (int i = 0; i < cf.threads; i++) {
        struct worker *w = &ws[i];
        done += w->done, errors += w->errors, cerrors += w->cerrors;
        mism += w->mismatches, lost += w->lost;
        if (w->last_done > last)
            last = w->last_done;
        for (int b = 0; b < HIST_N; b++)
            hist[b] += w->hist[b];
    }
    dur = cf.count ? (last > t_0 ? (double)(last - t_0) / 1e9 : 0) : cf.dur;
    printf("qps=%.0f requests=%llu errors=%llu connect_errors=%llu mismatches=%llu lost=%llu "
           "p50_us=%.1f p99_us=%.1f p999_us=%.1f duration=%.3f client_cpu=%.1f",
           dur > 0 ? (double)done / dur : 0, (unsigned long long)done, (unsigned long long)errors,
           (unsigned long long)cerrors, (unsigned long long)mism, (unsigned long long)lost,
           quantile_us(hist, done, 0.50), quantile_us(hist, done, 0.99),
           quantile_us(hist, done, 0.999), dur, w1 > w0 ? 100 * (c1 - c0) / (w1 - w0) : 0);
    for (int i = 0; i < ncpu && cf.cpus; i++)
        printf(" cpu%d_busy=%.1f", i,
               n1[i] > n0[i] ? 100.0 * (double)(b1[i] - b0[i]) / (double)(n1[i] - n0[i]) : 0);
    printf("\n");
    fflush(stdout);
    rc = 0;
    if (mism || lost || errors || !done) {
        fprintf(stderr,
                "echoload: FAIL: %llu mismatched, %llu lost, %llu broken connections, %llu "
                "completed\n",
                (unsigned long long)mism, (unsigned long long)lost, (unsigned long long)errors,
                (unsigned long long)done);
        rc = 1;
    }
out:
    for (int i = 0; ws && i < cf.threads; i++)
        if (ws[i].ep > 0)
            close(ws[i].ep);
    free(ws);
    free(slots);
    free(pat);
    return rc;
}
