/* main.c: client TLS 1.3 handshakes against one local server, with the library tls_lib.h names
 * (openssl.c, gnutls.c or wolfssl.c linked in): per run, handshakes per client CPU second
 * (getrusage of the handshaking threads, not the wall clock: a shared machine's load does not
 * count), full or resumed, over N threads. tests/bench/tls_libs.sh runs it; docs/bench.md has the
 * figures. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tls_lib.h"

#define MAX_THREADS 64
#define MAX_ERRORS 10 /* a thread stops after this many failed connections */

struct opts {
    int port, threads;
    const char *ca;
    bool resume;
    enum ctx_kind ctx;
    double seconds; /* the measured window, or */
    long count;     /* handshakes per thread (callgrind runs: a fixed amount of work) */
};

/* One handshaking thread's; only it writes them, main reads them after the join. */
struct worker {
    pthread_t tid;
    const struct opts *o;
    void *ctx;
    long hs, resumed, errors;
    double cpu_s, usr_s;
    long nvcsw;
};

static struct opts opt = {.threads = 1, .ctx = CTX_THREAD, .seconds = 3};
static pthread_barrier_t start;
static struct sockaddr_in addr;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double tv(struct timeval t)
{
    return t.tv_sec + t.tv_usec / 1e6;
}

static double cpu(struct rusage *r)
{
    return tv(r->ru_utime) + tv(r->ru_stime);
}

/* One connection: TCP connect, then the library's handshake and read. 1 resumed, 0 full, -1. */
static int one(struct worker *w, void **sess)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1, rc;

    if (fd < 0) {
        perror("socket");
        return -1;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
        fprintf(stderr, "connect 127.0.0.1:%d: %s\n", w->o->port, strerror(errno));
        close(fd);
        return -1;
    }
    rc = tls_lib.conn(w->ctx, fd, sess, w->o->resume);
    close(fd);
    return rc;
}

static void *run(void *arg)
{
    struct worker *w = arg;
    void *sess = NULL;
    struct rusage r0, r1;
    double end;
    int rc;

    /* a first connection outside the window: the library's lazy set-up, and the ticket */
    if (one(w, &sess) < 0)
        w->errors++;
    pthread_barrier_wait(&start);
    getrusage(RUSAGE_THREAD, &r0);
    end = now() + w->o->seconds;
    while (w->errors < MAX_ERRORS && (w->o->count ? w->hs < w->o->count : now() < end)) {
        rc = one(w, &sess);
        if (rc < 0) {
            w->errors++;
            continue;
        }
        w->hs++;
        w->resumed += rc;
    }
    getrusage(RUSAGE_THREAD, &r1);
    w->cpu_s = cpu(&r1) - cpu(&r0);
    w->usr_s = tv(r1.ru_utime) - tv(r0.ru_utime);
    w->nvcsw = r1.ru_nvcsw - r0.ru_nvcsw;
    tls_lib.sess_free(sess);
    return NULL;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: tls_libs_%s --port N --ca FILE [--resume] [--threads N] "
            "[--ctx shared|thread|libctx] [--seconds S | --count N]\n",
            tls_lib.name);
    exit(2);
}

static void parse(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--resume")) {
            opt.resume = true;
            continue;
        }
        if (!v)
            usage();
        i++;
        if (!strcmp(a, "--port"))
            opt.port = atoi(v);
        else if (!strcmp(a, "--ca"))
            opt.ca = v;
        else if (!strcmp(a, "--threads"))
            opt.threads = atoi(v);
        else if (!strcmp(a, "--seconds"))
            opt.seconds = atof(v);
        else if (!strcmp(a, "--count"))
            opt.count = atol(v);
        else if (!strcmp(a, "--ctx"))
            opt.ctx = !strcmp(v, "shared")   ? CTX_SHARED
                      : !strcmp(v, "thread") ? CTX_THREAD
                      : !strcmp(v, "libctx") ? CTX_LIBCTX
                                             : (usage(), CTX_THREAD);
        else
            usage();
    }
    if (opt.port < 1 || opt.port > 65535 || !opt.ca || opt.threads < 1 ||
        opt.threads > MAX_THREADS || opt.seconds <= 0 || opt.count < 0)
        usage();
}

int main(int argc, char **argv)
{
    static struct worker w[MAX_THREADS];
    static const char *kinds[] = {"shared", "thread", "libctx"};
    void *shared = NULL;
    long hs = 0, resumed = 0, errors = 0, nvcsw = 0;
    double cpu_s = 0, usr_s = 0, t0, wall;

    parse(argc, argv);
    signal(SIGPIPE, SIG_IGN); /* a close_notify to a server that has closed */
    addr.sin_family = AF_INET;
    addr.sin_port = htons((unsigned short)opt.port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (tls_lib.init() < 0)
        return 1;
    if (opt.ctx == CTX_SHARED && !(shared = tls_lib.ctx_new(opt.ca, CTX_SHARED)))
        return 1;
    pthread_barrier_init(&start, NULL, (unsigned)opt.threads + 1);
    for (int i = 0; i < opt.threads; i++) {
        w[i].o = &opt;
        w[i].ctx = shared ? shared : tls_lib.ctx_new(opt.ca, opt.ctx);
        if (!w[i].ctx)
            return 1;
    }
    for (int i = 0; i < opt.threads; i++)
        if (pthread_create(&w[i].tid, NULL, run, &w[i]) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            return 1;
        }
    pthread_barrier_wait(&start);
    t0 = now();
    for (int i = 0; i < opt.threads; i++) {
        pthread_join(w[i].tid, NULL);
        hs += w[i].hs, resumed += w[i].resumed, errors += w[i].errors;
        cpu_s += w[i].cpu_s, usr_s += w[i].usr_s, nvcsw += w[i].nvcsw;
        if (!shared)
            tls_lib.ctx_free(w[i].ctx);
    }
    wall = now() - t0;
    if (shared)
        tls_lib.ctx_free(shared);
    printf("lib=%s mode=%s threads=%d ctx=%s hs=%ld resumed=%ld errors=%ld cpu_s=%.3f usr_s=%.3f "
           "wall_s=%.3f hs_per_cpu_s=%.1f hs_per_s=%.1f vcsw_per_hs=%.2f version=\"%s\"\n",
           tls_lib.name, opt.resume ? "resumed" : "full", opt.threads, kinds[opt.ctx], hs, resumed,
           errors, cpu_s, usr_s, wall, cpu_s > 0 ? hs / cpu_s : 0, wall > 0 ? hs / wall : 0,
           hs ? (double)nvcsw / hs : 0, tls_lib.version());
    if (opt.resume && resumed < hs) {
        /* a "resumed" figure made of full handshakes would mislead: say so and fail */
        fprintf(stderr,
                "tls_libs_%s: the server resumed %ld of %ld handshakes offered a session "
                "(does it issue tickets?): no resumed figure\n",
                tls_lib.name, resumed, hs);
        return 1;
    }
    return errors || !hs ? 1 : 0;
}
