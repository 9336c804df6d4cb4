/* soak: lfepolld in echo mode and in Lua mode (lua/kv.lua) for SOAK_SECONDS under a mix of long,
 * short, pipelined, slow-reading, half-closing, resetting and garbage-sending clients on
 * 127.0.0.1, every reply checked (kv: against a model of each client's own keys). Then, with the
 * clients gone: descriptors back to their baseline, RSS within 1% of it, the counters adding up
 * (accepted = closed + live, no error counted that the mix cannot cause), nothing unexpected in
 * the log, a clean exit on SIGTERM.
 *
 * Timeline: both daemons start (--max-pending 64K, see main); a warm-up (a tenth of the time,
 * 20 to 60 s) brings the allocator, the workers' buffers and lfe.shared to their working size;
 * the clients stop, and once no connection is left the baseline is taken (raised to the first
 * round's anonymous memory where that is higher: a high-water mark, not a trend). The main phase
 * runs in rounds of a minute, each followed by the same measurement (a checkpoint line: a leak is a
 * trend, a high-water mark a step that stays); the last one is compared with the baseline.
 * Prints "ok"/"FAIL" per check and ends with "N passed, N failed" (exit 1 if any failed).
 *
 * What "RSS within 1%" compares. VmRSS is anonymous memory plus file pages, and the file pages
 * (3.7 MB of code and libraries, more than the daemon's own memory) move when the kernel evicts
 * them under memory pressure: 680 KiB once in a 10-minute run, on a machine shared with builds.
 * So the change in anonymous memory must be within 1% of the baseline's VmRSS (or 128 KiB, the
 * swing measured without a leak: SOAK_ANON_SWING_KB), the Lua heaps
 * left out (their garbage swings with the collector's cycle; the daemon reports them exactly,
 * and they are bounded on their own). jemalloc runs with its caches off (MALLOC_CONF=
 * dirty_decay_ms:0,muzzy_decay_ms:0,tcache:false,narenas:1 unless MALLOC_CONF is set; `MALLOC_CONF=
 * make soak` runs it as shipped): otherwise an idle daemon's RSS holds the pages of the largest
 * burst the run happened to have (+53% after 60 s) and the per-thread caches' luck (+-60 KiB).
 *
 *   SOAK_SECONDS=600 LFEPOLLD=./lfepolld soak      (make soak does this)
 *   SOAK_KINDS=slow,garbage                        only those clients
 *   TEST_KEEP_LOGS=1                               keep the daemons' logs */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

#define THREADS_PER_TARGET 6
#define NKEYS 32   /* kv: keys each client thread owns */
#define NCTR 8     /* kv: counters each client thread owns */
#define PATN 65521 /* echo pattern table: prime, so a shifted byte never lines up again */
#define BIG 32768  /* kv: the value a slow reader asks for, again and again */

enum kind { LONG, SHORT, PIPELINED, SLOW, HALF, RESET, GARBAGE, NKINDS };
static const char *const kind_name[NKINDS] = {"long",       "short", "pipelined", "slow",
                                              "half-close", "reset", "garbage"};
static const int kind_weight[NKINDS] = {15, 25, 15, 10, 15, 10, 10};

/* What a daemon holds once idle. */
struct mem {
    long fds;    /* open descriptors */
    long rss;    /* VmRSS, KiB: anon + file + shmem */
    long anon;   /* RssAnon, KiB: heap, stacks (what a leak grows) */
    long file;   /* RssFile, KiB: code and data pages of the binary and its libraries */
    long lua_kb; /* the Lua heaps, summed (kv): live data plus garbage not yet collected */
    long shared; /* lfe.shared's bytes (kv) */
};

/* One daemon under test. */
struct target {
    const char *name; /* "echo" or "kv" */
    bool kv;
    struct daemon d;
    uint64_t ok[NKINDS], failed[NKINDS]; /* atomics: sessions */
    struct mem base, end;                /* after the warm-up, at the end */
};

/* One client thread and what it owns: its random stream and, in kv mode, the state its keys
 * must have in lfe.shared (no other client touches them). */
struct cli {
    struct target *t;
    int id;
    pthread_t tid;
    uint64_t rng;
    char *val[NKEYS];
    long long ctr[NCTR];
    bool primed;
};

static unsigned char pat[PATN];
static uint64_t slow_bytes;   /* what an echo slow reader sends: past tcp_wmem's max, twice */
static volatile int stopping; /* atomic: the phase is over, sessions wind down */
static int nfail_printed;     /* atomic */

static uint64_t rnd(struct cli *c)
{
    c->rng ^= c->rng << 13;
    c->rng ^= c->rng >> 7;
    c->rng ^= c->rng << 17;
    return c->rng;
}

static long between(struct cli *c, long lo, long hi)
{
    return lo + (long)(rnd(c) % (uint64_t)(hi - lo + 1));
}

static bool over(void)
{
    return __atomic_load_n(&stopping, __ATOMIC_RELAXED);
}

/* Fills why; returns -1. */
static int failf(char *why, size_t wl, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int failf(char *why, size_t wl, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, wl, fmt, ap);
    va_end(ap);
    return -1;
}

/* --- sockets ------------------------------------------------------------------------------ */

static int dial(struct cli *c, bool small_rcvbuf)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)c->t->d.port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

    if (fd < 0)
        return -errno;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (small_rcvbuf) {
        /* a slow reader's own buffer stays small: the server must be the one holding back */
        int rcv = 64 << 10;
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
    }
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    fcntl(fd, F_SETFL, O_NONBLOCK);
    return fd;
}

/* Closes with a reset (SO_LINGER 0): the server sees ECONNRESET, not a FIN. */
static void reset_close(int fd)
{
    struct linger lg = {1, 0};

    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    close(fd);
}

static void fill(unsigned char *buf, uint32_t seed, uint64_t off, size_t n)
{
    size_t p = (size_t)((off + (uint64_t)seed * 7919u) % PATN);

    for (size_t i = 0; i < n; i++) {
        buf[i] = pat[p];
        if (++p == PATN)
            p = 0;
    }
}

/* Echo: sends total bytes of stream seed in writes of at most chunk bytes while reading back
 * and checking every byte; reading starts after noread_ms (a slow reader). shut: SHUT_WR once
 * all is sent, then the server must close after the last byte. 0 or -1 with why filled. */
static int xfer(int fd, uint32_t seed, uint64_t total, size_t chunk, long noread_ms, bool shut,
                char *why, size_t wlen)
{
    static __thread unsigned char out[65536], in[65536], want[65536];
    long t0 = now_ms(), deadline = t0 + noread_ms + 30000L * slow;
    uint64_t tx = 0, rx = 0;
    bool shut_done = false;

    if (chunk > sizeof(out))
        chunk = sizeof(out);
    while (rx < total || (shut && !shut_done)) {
        struct pollfd p = {.fd = fd};
        long now = now_ms(), wait = deadline - now;
        bool reading = now - t0 >= noread_ms;
        ssize_t n;

        if (wait <= 0) {
            snprintf(why, wlen, "timed out: sent %llu, got %llu of %llu", (unsigned long long)tx,
                     (unsigned long long)rx, (unsigned long long)total);
            return -1;
        }
        if (tx < total)
            p.events |= POLLOUT;
        if (reading)
            p.events |= POLLIN;
        else if (t0 + noread_ms - now < wait)
            wait = t0 + noread_ms - now;
        if (poll(&p, 1, (int)wait) < 0 && errno != EINTR)
            return failf(why, wlen, "poll: %s", strerror(errno));
        if ((p.revents & POLLOUT) && tx < total) {
            size_t k = total - tx < chunk ? (size_t)(total - tx) : chunk;

            fill(out, seed, tx, k);
            n = send(fd, out, k, MSG_NOSIGNAL);
            if (n < 0 && errno != EAGAIN && errno != EINTR)
                return failf(why, wlen, "send: %s", strerror(errno));
            if (n > 0)
                tx += (uint64_t)n;
        }
        if (shut && tx == total && !shut_done && rx < total) {
            shutdown(fd, SHUT_WR);
            shut_done = true;
        }
        if (!reading || !(p.revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        n = recv(fd, in, sizeof(in), 0);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (n < 0)
            return failf(why, wlen, "recv after %llu of %llu bytes: %s", (unsigned long long)rx,
                         (unsigned long long)total, strerror(errno));
        if (n == 0) {
            if (rx == total && shut_done)
                return 0; /* everything back, then the server's close */
            return failf(why, wlen, "early EOF after %llu of %llu bytes", (unsigned long long)rx,
                         (unsigned long long)total);
        }
        if (rx + (uint64_t)n > total)
            return failf(why, wlen, "%zd bytes more than were sent", n);
        fill(want, seed, rx, (size_t)n);
        if (memcmp(in, want, (size_t)n) != 0)
            return failf(why, wlen, "wrong bytes at offset %llu", (unsigned long long)rx);
        rx += (uint64_t)n;
        if (rx == total && shut && !shut_done) {
            shutdown(fd, SHUT_WR);
            shut_done = true;
        }
        if (rx == total && shut_done) {
            /* the close must follow */
            char b;

            p = (struct pollfd){.fd = fd, .events = POLLIN};
            if (poll(&p, 1, (int)(10000L * slow)) <= 0)
                return failf(why, wlen, "no close after the last byte");
            n = recv(fd, &b, 1, 0);
            if (n != 0 && !(n < 0 && errno == ECONNRESET))
                return failf(why, wlen, "bytes after the last one, or no close");
            return 0;
        }
    }
    return 0;
}

/* --- kv: commands with the replies the model predicts ---------------------------------- */

struct lines {
    char buf[1 << 17];
    size_t len;
};

/* Reads one line (without its \n) within deadline: 1, 0 at EOF, -1 on error or timeout. */
static int read_line(int fd, struct lines *r, long deadline, char *line, size_t cap, size_t *llen)
{
    for (;;) {
        char *nl = memchr(r->buf, '\n', r->len);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        long wait = deadline - now_ms();
        ssize_t n;

        if (nl) {
            size_t l = (size_t)(nl - r->buf);

            if (l >= cap)
                return -1;
            memcpy(line, r->buf, l);
            line[l] = '\0';
            *llen = l;
            memmove(r->buf, nl + 1, r->len - l - 1);
            r->len -= l + 1;
            return 1;
        }
        if (r->len == sizeof(r->buf) || wait <= 0 || poll(&p, 1, (int)wait) <= 0)
            return -1;
        n = recv(fd, r->buf + r->len, sizeof(r->buf) - r->len, 0);
        if (n == 0)
            return 0;
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (n < 0)
            return errno == ECONNRESET ? 0 : -1;
        r->len += (size_t)n;
    }
}

static int send_until(int fd, const char *p, size_t n, long deadline)
{
    while (n) {
        struct pollfd pf = {.fd = fd, .events = POLLOUT};
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

        if (w > 0) {
            p += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EINTR)
            return -1;
        if (now_ms() > deadline || poll(&pf, 1, 1000) < 0)
            return -1;
    }
    return 0;
}

/* Appends one random command to cmd and its expected reply to want (both growing strings). */
static void kv_command(struct cli *c, char *cmd, size_t *clen, char *want, size_t *wlen)
{
    int k = (int)between(c, 0, NKEYS - 1), r = (int)between(c, 0, 99);
    char key[32], val[256];

    snprintf(key, sizeof(key), "s%dk%d", c->id, k);
    if (r < 35) { /* SET: values start with a letter, so kv.lua keeps them as strings */
        int n = (int)between(c, 1, 200);

        val[0] = 'v';
        for (int i = 1; i < n; i++)
            val[i] = "abcdefghijklmnopqrstuvwxyz0123456789 "[rnd(c) % 37];
        val[n] = '\0';
        *clen += (size_t)sprintf(cmd + *clen, "SET %s %s\n", key, val);
        *wlen += (size_t)sprintf(want + *wlen, "STORED\n");
        free(c->val[k]);
        c->val[k] = strdup(val);
    } else if (r < 70) {
        *clen += (size_t)sprintf(cmd + *clen, "GET %s\n", key);
        if (c->val[k])
            *wlen += (size_t)sprintf(want + *wlen, "VALUE %s\n", c->val[k]);
        else
            *wlen += (size_t)sprintf(want + *wlen, "NOT_FOUND\n");
    } else if (r < 80) {
        *clen += (size_t)sprintf(cmd + *clen, "DEL %s\n", key);
        *wlen += (size_t)sprintf(want + *wlen, c->val[k] ? "DELETED\n" : "NOT_FOUND\n");
        free(c->val[k]);
        c->val[k] = NULL;
    } else {
        int i = (int)between(c, 0, NCTR - 1);
        long n = between(c, -1000, 1000);

        c->ctr[i] += n;
        *clen += (size_t)sprintf(cmd + *clen, "INCR s%dc%d %ld\n", c->id, i, n);
        *wlen += (size_t)sprintf(want + *wlen, "%lld\n", c->ctr[i]);
    }
}

/* Reads the replies to a batch and compares them with want, line by line. */
static int kv_expect(int fd, struct lines *r, const char *want, size_t wlen, long deadline,
                     char *why, size_t whylen)
{
    static __thread char line[BIG + 256];
    size_t off = 0, l;

    while (off < wlen) {
        const char *nl = memchr(want + off, '\n', wlen - off);
        size_t wl = (size_t)(nl - (want + off));
        int rc = read_line(fd, r, deadline, line, sizeof(line), &l);

        if (rc <= 0)
            return failf(why, whylen, "%s waiting for '%.60s'",
                         rc == 0 ? "EOF" : "error or timeout", want + off);
        if (l != wl || memcmp(line, want + off, l) != 0)
            return failf(why, whylen, "want '%.60s', got '%.60s'", want + off, line);
        off += wl + 1;
    }
    return 0;
}

/* --- sessions ------------------------------------------------------------------------------ */

static int echo_session(struct cli *c, enum kind k, char *why, size_t wl)
{
    uint32_t seed = (uint32_t)rnd(c);
    int fd = dial(c, k == SLOW), rc = 0;

    if (fd < 0)
        return failf(why, wl, "connect: %s", strerror(-fd));
    switch (k) {
    case LONG: { /* one connection, request after request, for a while */
        long end = now_ms() + between(c, 5000, 30000);
        uint64_t off = 0;

        while (rc == 0 && now_ms() < end && !over()) {
            uint64_t n = (uint64_t)between(c, 1, 65536);

            /* the stream goes on across requests: seed fixed, offset advances */
            rc = xfer(fd, seed + (uint32_t)off, n, 65536, 0, false, why, wl);
            off += n;
            sleep_ms(between(c, 0, 20));
        }
        break;
    }
    case SHORT: /* a burst of connections with one small request each */
        close(fd);
        for (int i = 0; i < 20 && rc == 0 && !over(); i++) {
            fd = dial(c, false);
            if (fd < 0)
                return failf(why, wl, "connect: %s", strerror(-fd));
            rc = xfer(fd, (uint32_t)rnd(c), (uint64_t)between(c, 1, 2048), 2048, 0,
                      between(c, 0, 1), why, wl);
            if (i < 19)
                close(fd);
        }
        break;
    case PIPELINED: /* many small writes ahead of the reads */
        for (int i = 0; i < 10 && rc == 0 && !over(); i++)
            rc = xfer(fd, seed + (uint32_t)i, (uint64_t)between(c, 16 << 10, 256 << 10),
                      (size_t)between(c, 1, 4096), 0, false, why, wl);
        break;
    case SLOW: /* more than the socket buffers hold, nothing read for 1-2 s: the server must
                * hold back at --max-pending */
        rc = xfer(fd, seed, slow_bytes, 65536, between(c, 1000, 2000), false, why, wl);
        break;
    case HALF: /* everything sent, then FIN: all must come back, then the server's close */
        rc = xfer(fd, seed, (uint64_t)between(c, 1, 2 << 20), 65536, 0, true, why, wl);
        break;
    case RESET: { /* some bytes, maybe a few read, then a reset */
        static __thread unsigned char buf[65536];
        size_t n = (size_t)between(c, 0, sizeof(buf));

        fill(buf, seed, 0, n);
        if (n && send(fd, buf, n, MSG_NOSIGNAL) < 0 && errno != EAGAIN)
            break;
        sleep_ms(between(c, 0, 50));
        if (recv(fd, buf, sizeof(buf), 0) < 0) {
            /* nothing back yet: fine */
        }
        reset_close(fd);
        return 0;
    }
    case GARBAGE: { /* random bytes, then leave without reading: the echo has nowhere to go */
        static __thread unsigned char buf[65536];
        size_t n = (size_t)between(c, 1, sizeof(buf));

        for (size_t i = 0; i < n; i++)
            buf[i] = (unsigned char)rnd(c);
        if (send(fd, buf, n, MSG_NOSIGNAL) < 0 && errno != EAGAIN)
            break;
        if (between(c, 0, 1))
            reset_close(fd);
        else
            close(fd);
        return 0;
    }
    default:
        break;
    }
    close(fd);
    return rc;
}

static int kv_session(struct cli *c, enum kind k, char *why, size_t wl)
{
    static __thread char cmd[1 << 17], want[1 << 20];
    static __thread struct lines r;
    long deadline = now_ms() + 30000L * slow;
    size_t clen = 0, wlen = 0;
    int fd = dial(c, k == SLOW), rc = 0;

    r.len = 0;
    if (fd < 0)
        return failf(why, wl, "connect: %s", strerror(-fd));
    switch (k) {
    case LONG: { /* one command at a time for a while */
        long end = now_ms() + between(c, 5000, 30000);

        while (rc == 0 && now_ms() < end && !over()) {
            clen = wlen = 0;
            kv_command(c, cmd, &clen, want, &wlen);
            rc = send_until(fd, cmd, clen, deadline) < 0
                     ? (failf(why, wl, "send: %s", strerror(errno)))
                     : kv_expect(fd, &r, want, wlen, deadline, why, wl);
            sleep_ms(between(c, 0, 10));
        }
        break;
    }
    case SHORT: /* a burst of connections with one command each */
        close(fd);
        for (int i = 0; i < 20 && rc == 0 && !over(); i++) {
            fd = dial(c, false);
            if (fd < 0)
                return failf(why, wl, "connect: %s", strerror(-fd));
            r.len = clen = wlen = 0;
            kv_command(c, cmd, &clen, want, &wlen);
            rc = send_until(fd, cmd, clen, deadline) < 0
                     ? (failf(why, wl, "send: %s", strerror(errno)))
                     : kv_expect(fd, &r, want, wlen, deadline, why, wl);
            if (i < 19)
                close(fd);
        }
        break;
    case PIPELINED: /* 64 commands in one write, then the 64 replies in order */
        for (int i = 0; i < 10 && rc == 0 && !over(); i++) {
            clen = wlen = 0;
            for (int j = 0; j < 64; j++)
                kv_command(c, cmd, &clen, want, &wlen);
            rc = send_until(fd, cmd, clen, deadline) < 0
                     ? (failf(why, wl, "send: %s", strerror(errno)))
                     : kv_expect(fd, &r, want, wlen, deadline, why, wl);
        }
        break;
    case SLOW: { /* a 32 KiB value asked for 300 times (9.6 MB), unread for 1-2 s */
        static __thread char big[BIG + 1];
        char key[32];

        snprintf(key, sizeof(key), "s%dbig", c->id);
        big[0] = 'v';
        for (int i = 1; i < BIG; i++)
            big[i] = (char)('a' + rnd(c) % 26);
        big[BIG] = '\0';
        clen = (size_t)snprintf(cmd, sizeof(cmd), "SET %s %s\n", key, big);
        if (send_until(fd, cmd, clen, deadline) < 0 ||
            kv_expect(fd, &r, "STORED\n", 7, deadline, why, wl) < 0) {
            rc = -1;
            break;
        }
        clen = 0;
        for (int i = 0; i < 300; i++)
            clen += (size_t)sprintf(cmd + clen, "GET %s\n", key);
        if (send_until(fd, cmd, clen, deadline) < 0) {
            rc = failf(why, wl, "send: %s", strerror(errno));
            break;
        }
        sleep_ms(between(c, 1000, 2000));
        for (int i = 0; i < 300 && rc == 0; i++) {
            wlen = (size_t)snprintf(want, sizeof(want), "VALUE %s\n", big);
            rc = kv_expect(fd, &r, want, wlen, deadline + 30000L * slow, why, wl);
        }
        break;
    }
    case HALF: /* commands, FIN, the replies, then the server's close */
        for (int j = 0, n = (int)between(c, 1, 64); j < n; j++)
            kv_command(c, cmd, &clen, want, &wlen);
        if (send_until(fd, cmd, clen, deadline) < 0) {
            rc = failf(why, wl, "send: %s", strerror(errno));
            break;
        }
        shutdown(fd, SHUT_WR);
        rc = kv_expect(fd, &r, want, wlen, deadline, why, wl);
        if (rc == 0) {
            char line[64];
            size_t l;

            if (read_line(fd, &r, deadline, line, sizeof(line), &l) != 0)
                rc = failf(why, wl, "no close after the last reply");
        }
        break;
    case RESET: /* throwaway keys (whether they ran is unknown), part of a line, a reset */
        clen = (size_t)sprintf(cmd, "SET r%d x\nINCR r%dc 1\nGET r%d", c->id, c->id, c->id);
        send_until(fd, cmd, (size_t)between(c, 0, (long)clen), deadline);
        sleep_ms(between(c, 0, 20));
        reset_close(fd);
        return 0;
    case GARBAGE: {
        /* Lines of random bytes, none starting with a letter (never a command): each gets an
         * ERROR reply. One session in ten then sends a line past max_frame (64 KiB): the
         * server must close the connection. */
        int n = (int)between(c, 1, 100);
        bool oversize = between(c, 0, 9) == 0;
        char line[256];
        size_t l;

        for (int j = 0; j < n; j++) {
            int len = (int)between(c, 0, 200);

            char first = (char)between(c, 0, 0x40);

            cmd[clen++] = first == '\n' ? ' ' : first;
            for (int i = 1; i < len; i++) {
                char b = (char)rnd(c);

                cmd[clen++] = b == '\n' ? ' ' : b;
            }
            cmd[clen++] = '\n';
        }
        if (send_until(fd, cmd, clen, deadline) < 0) {
            rc = failf(why, wl, "send: %s", strerror(errno));
            break;
        }
        for (int j = 0; j < n && rc == 0; j++) {
            int got = read_line(fd, &r, deadline, line, sizeof(line), &l);

            if (got <= 0 || strncmp(line, "ERROR", 5) != 0)
                rc = failf(why, wl, "garbage line %d: want ERROR, got %s", j,
                           got <= 0 ? "no reply" : line);
        }
        if (rc == 0 && oversize) {
            memset(cmd, '#', 70000);
            send_until(fd, cmd, 70000, deadline); /* may fail: the server closes */
            if (read_line(fd, &r, deadline, line, sizeof(line), &l) != 0)
                rc = failf(why, wl, "a line over max_frame did not close");
        }
        break;
    }
    default:
        break;
    }
    close(fd);
    return rc;
}

static unsigned kinds_on = (1u << NKINDS) - 1; /* SOAK_KINDS=slow,garbage: only those */

static enum kind pick(struct cli *c)
{
    int total = 0, r;

    for (int k = 0; k < NKINDS; k++)
        total += kinds_on & (1u << k) ? kind_weight[k] : 0;
    r = (int)between(c, 0, total - 1);
    for (int k = 0; k < NKINDS; k++)
        if ((kinds_on & (1u << k)) && (r -= kind_weight[k]) < 0)
            return (enum kind)k;
    return LONG;
}

/* kv: every key and counter this thread owns set once, its big value too, so that lfe.shared
 * holds its steady-state size from the warm-up on (values vary in length, not in number). */
static int kv_prime(struct cli *c, char *why, size_t wl)
{
    static __thread char cmd[BIG + 128], want[64];
    static __thread struct lines r;
    long deadline = now_ms() + 30000L * slow;
    int fd = dial(c, false), rc = 0;
    size_t n;

    if (fd < 0)
        return failf(why, wl, "connect: %s", strerror(-fd));
    r.len = 0;
    for (int k = 0; k < NKEYS + NCTR + 1 && rc == 0; k++) {
        if (k < NKEYS) {
            n = (size_t)snprintf(cmd, sizeof(cmd), "SET s%dk%d v%0199d\n", c->id, k, 0);
            free(c->val[k]);
            c->val[k] = strndup(cmd + strlen(cmd) - 201, 200);
            snprintf(want, sizeof(want), "STORED\n");
        } else if (k < NKEYS + NCTR) {
            n = (size_t)snprintf(cmd, sizeof(cmd), "INCR s%dc%d 0\n", c->id, k - NKEYS);
            snprintf(want, sizeof(want), "%lld\n", c->ctr[k - NKEYS]);
        } else {
            n = (size_t)snprintf(cmd, sizeof(cmd), "SET s%dbig v%0*d\n", c->id, BIG - 1, 0);
            snprintf(want, sizeof(want), "STORED\n");
        }
        rc = send_until(fd, cmd, n, deadline) < 0
                 ? failf(why, wl, "send: %s", strerror(errno))
                 : kv_expect(fd, &r, want, strlen(want), deadline, why, wl);
    }
    close(fd);
    return rc;
}

static void *client_main(void *arg)
{
    struct cli *c = arg;
    char why[256];

    if (c->t->kv && !c->primed) {
        c->primed = true;
        if (kv_prime(c, why, sizeof(why)) < 0) {
            __atomic_add_fetch(&c->t->failed[LONG], 1, __ATOMIC_RELAXED);
            fprintf(stderr, "soak: kv client %d, priming: %s\n", c->id, why);
        }
    }

    while (!over()) {
        enum kind k = pick(c);
        int rc =
            c->t->kv ? kv_session(c, k, why, sizeof(why)) : echo_session(c, k, why, sizeof(why));

        if (rc == 0) {
            __atomic_add_fetch(&c->t->ok[k], 1, __ATOMIC_RELAXED);
            continue;
        }
        __atomic_add_fetch(&c->t->failed[k], 1, __ATOMIC_RELAXED);
        if (__atomic_add_fetch(&nfail_printed, 1, __ATOMIC_RELAXED) <= 20)
            fprintf(stderr, "soak: %s client %d, %s session: %s\n", c->t->name, c->id, kind_name[k],
                    why);
    }
    return NULL;
}

/* --- the daemon's side ------------------------------------------------------------------ */

static long fd_count(pid_t pid)
{
    char path[64];
    DIR *d;
    struct dirent *e;
    long n = 0;

    snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
    d = opendir(path);
    if (!d)
        return -1;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* How far anonymous memory outside Lua may move between two idle checkpoints without a leak,
 * where 1% of RSS is less. In kv mode it swings by up to 65 KiB with no trend: 1163, 1178, 1230,
 * 1191 KiB at the checkpoints of one 300 s run (2026-11-24), and +64 and +65 KiB at the end of
 * two 60 s CI runs whose 1% was 52 KiB (the C side of the Lua handlers: conn.ctx copies,
 * lfe.shared's entries and chains, reply buffers, freed at different times). A leak is a trend:
 * a 10-minute make soak still shows one of 128 KiB or more. */
#define SOAK_ANON_SWING_KB 128

/* A field of /proc/PID/status in KiB ("VmRSS", "RssAnon", "RssFile"), or -1. */
static long status_kb(pid_t pid, const char *field)
{
    char path[64], line[256];
    size_t fl = strlen(field);
    FILE *f;
    long v = -1;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    f = fopen(path, "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, field, fl) == 0 && line[fl] == ':')
            v = atol(line + fl + 1);
    fclose(f);
    return v;
}

/* The whole log (malloc'd). */
static char *whole_log(const struct daemon *d)
{
    FILE *f = fopen(d->log, "r");
    char *buf = NULL;
    size_t len = 0, cap = 0, n;

    if (!f)
        return strdup("");
    do {
        if (cap - len < 65536) {
            cap = cap ? cap * 2 : 1 << 17;
            buf = realloc(buf, cap);
        }
        n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
    } while (n > 0);
    fclose(f);
    buf[len] = '\0';
    return buf;
}

/* field=value on the last line starting with prefix ("live" comes from the prefix itself). */
static long stat_value(const char *text, const char *prefix, const char *field)
{
    const char *line = NULL, *p = text, *f, *end;
    char key[64];

    while ((p = strstr(p, prefix))) {
        line = p;
        p += strlen(prefix);
    }
    if (!line)
        return -1;
    end = strchr(line, '\n');
    snprintf(key, sizeof(key), "%s=", field);
    for (f = line; (f = strstr(f, key)); f++)
        if ((f[-1] == ' ' || f[-1] == ':') && (!end || f < end))
            return atol(f + strlen(key));
    return -1;
}

/* SIGUSR1, then the log once the new stats block is complete (malloc'd), or NULL. */
static char *stats(struct daemon *d)
{
    char *t = whole_log(d);
    int before = 0;
    long deadline = now_ms() + 5000L * slow;

    for (const char *p = t; (p = strstr(p, "stats: accept:")); p++)
        before++;
    free(t);
    kill(d->pid, SIGUSR1);
    while (now_ms() < deadline) {
        const char *last = NULL;
        int n = 0;

        sleep_ms(20);
        t = whole_log(d);
        for (const char *p = t; (p = strstr(p, "stats: accept:")); p++) {
            n++;
            last = p;
        }
        if (n > before && strchr(last, '\n'))
            return t;
        free(t);
    }
    return NULL;
}

/* Waits until the daemon has no connection left; returns its stats text (malloc'd) or NULL. */
static char *quiesce(struct target *t)
{
    long deadline = now_ms() + 30000L * slow;

    while (now_ms() < deadline) {
        char *s = stats(&t->d);

        if (s && stat_value(s, "stats: total ", "live") == 0)
            return s;
        free(s);
        sleep_ms(200);
    }
    return NULL;
}

/* The Lua heaps (lua_kb, summed over the worker lines of the last stats block) and lfe.shared's
 * bytes: what part of RSS the scripts' own memory explains. */
static void lua_mem(const char *s, long *lua_kb, long *shared)
{
    const char *block = NULL;

    /* the last block only: it starts at its first worker's line */
    for (const char *p = s; p && (p = strstr(p, "stats: worker 0.0 ")); p++)
        block = p;
    *lua_kb = 0;
    for (const char *p = block; p && (p = strstr(p, "stats: worker ")); p++) {
        const char *f = strstr(p, " lua_kb="), *nl = strchr(p, '\n');

        if (f && (!nl || f < nl))
            *lua_kb += atol(f + 8);
    }
    *shared = s ? stat_value(s, "stats: lua:", "shared_bytes") : -1;
}

/* Descriptors and memory once idle: sampled for a second, the sample with the least anonymous
 * memory taken (a worker may still be handing a page back). */
static void measure(struct target *t, struct mem *m)
{
    char *s = quiesce(t);

    lua_mem(s, &m->lua_kb, &m->shared);
    free(s);
    sleep_ms(500);
    m->fds = fd_count(t->d.pid);
    m->anon = -1;
    for (int i = 0; i < 10; i++) {
        long anon = status_kb(t->d.pid, "RssAnon");

        if (anon > 0 && (m->anon < 0 || anon < m->anon)) {
            m->anon = anon;
            m->rss = status_kb(t->d.pid, "VmRSS");
            m->file = status_kb(t->d.pid, "RssFile");
        }
        sleep_ms(100);
    }
}

static void print_mem(const struct target *t, const char *when, const struct mem *m)
{
    printf("soak: %s %s: %ld descriptors, RSS %ld KiB (anon %ld, file %ld)", t->name, when, m->fds,
           m->rss, m->anon, m->file);
    if (t->kv)
        printf(", Lua heaps %ld KiB, lfe.shared %ld bytes", m->lua_kb, m->shared);
    printf("\n");
}

/* "+0.41%" */
static const char *pct(long from, long to)
{
    static char buf[4][32];
    static int i;
    long x100 = from > 0 ? (to - from) * 10000 / from : 0;

    i = (i + 1) % 4;
    snprintf(buf[i], sizeof(buf[i]), "%c%ld.%02ld%%", x100 < 0 ? '-' : '+', labs(x100) / 100,
             labs(x100) % 100);
    return buf[i];
}

/* --- phases and checks ------------------------------------------------------------------ */

static struct target targets[2] = {{.name = "echo"}, {.name = "kv", .kv = true}};
static struct cli clis[2 * THREADS_PER_TARGET];

static void run_phase(long ms)
{
    long t0 = now_ms();

    __atomic_store_n(&stopping, 0, __ATOMIC_RELAXED);
    for (int i = 0; i < 2 * THREADS_PER_TARGET; i++)
        pthread_create(&clis[i].tid, NULL, client_main, &clis[i]);
    while (now_ms() - t0 < ms)
        sleep_ms(100);
    __atomic_store_n(&stopping, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < 2 * THREADS_PER_TARGET; i++)
        pthread_join(clis[i].tid, NULL);
}

/* Between rounds of the main phase, clients gone: one line of what each daemon holds, so that
 * a leak shows as a trend and a high-water mark as a step that stays. */
static void checkpoint(long elapsed_ms, struct mem *last)
{
    printf("soak: %4lds", elapsed_ms / 1000);
    for (int i = 0; i < 2; i++) {
        struct target *t = &targets[i];
        uint64_t ok = 0, bad = 0;

        measure(t, &last[i]);
        for (int k = 0; k < NKINDS; k++) {
            ok += __atomic_load_n(&t->ok[k], __ATOMIC_RELAXED);
            bad += __atomic_load_n(&t->failed[k], __ATOMIC_RELAXED);
        }
        printf("  %s: %llu sessions (%llu failed), %ld fds, anon %ld KiB", t->name,
               (unsigned long long)ok, (unsigned long long)bad, last[i].fds, last[i].anon);
        if (t->kv)
            printf(" (Lua %ld)", last[i].lua_kb);
        printf(", RSS %ld", last[i].rss);
    }
    printf("\n");
    fflush(stdout);
}

static int npass, nfail;

static void check(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(bool ok, const char *fmt, ...)
{
    va_list ap;

    printf("%s ", ok ? "ok  " : "FAIL");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    if (ok)
        npass++;
    else
        nfail++;
}

/* A line the mix can cause: startup, stats, the stop, and in kv mode the note for a line past
 * max_frame (and its rate limit). Anything else, warnings and errors above all, is not. */
static bool expected_line(const char *l, bool kv)
{
    static const char *const ok[] = {"info: listening on ",
                                     "info: mode ",
                                     "info: group ",
                                     "info: limits: ",
                                     "info: draining ",
                                     "info: SIGTERM: stopping",
                                     "info: stopped",
                                     "exceeds net.core.somaxconn",
                                     "caps the default backlog", /* a stock kernel's somaxconn */
                                     NULL};
    static const char *const ok_kv[] = {"framing: a frame is over max_frame",
                                        "more failed callbacks were not logged", NULL};

    if (strncmp(l, "stats: ", 7) == 0 || !*l)
        return true;
    for (const char *const *p = ok; *p; p++)
        if (strstr(l, *p))
            return true;
    for (const char *const *p = ok_kv; kv && *p; p++)
        if (strstr(l, *p))
            return true;
    return false;
}

static void check_target(struct target *t, long duration_ms)
{
    char *s = quiesce(t), *log, *line, *save = NULL;
    uint64_t ok = 0, bad = 0;
    long accepted, closed, live;
    int unexpected = 0;

    printf("%s: sessions", t->name);
    for (int k = 0; k < NKINDS; k++) {
        printf(" %s=%llu", kind_name[k], (unsigned long long)t->ok[k]);
        if (t->failed[k])
            printf("(+%llu failed)", (unsigned long long)t->failed[k]);
        ok += t->ok[k];
        bad += t->failed[k];
    }
    printf("\n");
    check(bad == 0 && ok > 0, "%s: %llu client sessions verified, %llu failed", t->name,
          (unsigned long long)ok, (unsigned long long)bad);
    check(t->end.fds == t->base.fds, "%s: descriptors %ld at the baseline, %ld at the end", t->name,
          t->base.fds, t->end.fds);
    if (sanitizer) {
        check(true, "%s: memory not compared under the %s sanitizer (RSS %ld KiB, then %ld KiB)",
              t->name, sanitizer, t->base.rss, t->end.rss);
    } else {
        /* RSS less what moves without a leak (see the top of the file): file pages and the
         * Lua heaps' garbage. What is left is anonymous memory outside Lua. */
        long b = t->base.anon - t->base.lua_kb, e = t->end.anon - t->end.lua_kb;

        check(labs(e - b) * 100 <= t->base.rss || labs(e - b) <= SOAK_ANON_SWING_KB,
              "%s: RSS %ld KiB at the baseline, %ld KiB at the end; anonymous memory%s %ld KiB "
              "then %ld KiB: %+ld KiB, %s of RSS (within 1%%, or %d KiB)",
              t->name, t->base.rss, t->end.rss, t->kv ? " outside Lua" : "", b, e, e - b,
              pct(t->base.rss, t->base.rss + e - b), SOAK_ANON_SWING_KB);
        if (t->kv)
            check(t->end.lua_kb <= 2 * t->base.lua_kb + 256,
                  "%s: Lua heaps %ld KiB at the baseline, %ld KiB at the end (at most twice, plus "
                  "256 KiB: the collector's swing)",
                  t->name, t->base.lua_kb, t->end.lua_kb);
    }
    if (!s) {
        check(false, "%s: connections still live 30 s after the clients left", t->name);
        return;
    }
    accepted = stat_value(s, "stats: accept:", "accepted");
    closed = stat_value(s, "stats: total ", "closed");
    live = stat_value(s, "stats: total ", "live");
    check(accepted > 0 && accepted == closed + live && live == 0,
          "%s: accepted %ld = closed %ld + live %ld", t->name, accepted, closed, live);
    {
        /* what the mix cannot cause: every one of these must still be 0 */
        static const char *const acc_zero[] = {"shed", "emfile", "enomem", "err_other", NULL};
        static const char *const tot_zero[] = {
            "err_io", "err_nomem", "err_epoll", "lua_errors", "lua_timeouts", "lua_nomem", NULL};
        char list[512] = "";

        for (const char *const *p = acc_zero; *p; p++)
            if (stat_value(s, "stats: accept:", *p) != 0)
                snprintf(list + strlen(list), sizeof(list) - strlen(list), " accept.%s=%ld", *p,
                         stat_value(s, "stats: accept:", *p));
        for (const char *const *p = tot_zero; *p; p++)
            if (stat_value(s, "stats: total ", *p) != 0)
                snprintf(list + strlen(list), sizeof(list) - strlen(list), " %s=%ld", *p,
                         stat_value(s, "stats: total ", *p));
        check(!list[0], "%s: no error counter moved that the mix cannot move%s", t->name, list);
        printf("%s: resets seen %ld, paused reads %ld, short writes %ld, frames over max_frame "
               "%ld, bytes in %ld\n",
               t->name, stat_value(s, "stats: total ", "err_reset"),
               stat_value(s, "stats: total ", "paused"),
               stat_value(s, "stats: total ", "short_writes"),
               stat_value(s, "stats: total ", "frames_big"),
               stat_value(s, "stats: total ", "bytes_in"));
    }
    free(s);
    (void)duration_ms;
    check(stop_daemon(&t->d, SIGTERM, 10000) == 0, "%s: exits 0 on SIGTERM", t->name);
    log = whole_log(&t->d);
    for (line = strtok_r(log, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        /* "HH:MM:SS.mmm lfepolld[pid]: level: text" or a stats line */
        const char *text = strstr(line, "]: ");

        text = text && strlen(line) > 22 && strncmp(line + 12, " lfepolld[", 10) == 0 ? text + 3
                                                                                      : line;
        if (!expected_line(text, t->kv) && unexpected++ < 10)
            printf("%s: unexpected log line: %s\n", t->name, line);
    }
    free(log);
    check(unexpected == 0, "%s: nothing unexpected in the log (%d lines)", t->name, unexpected);
}

int main(void)
{
    /* --max-pending 64K: slow readers meet backpressure as with the default, and a worker's
     * reply buffer (kept at its largest size up to 1 MiB, by design) reaches its ceiling in the
     * warm-up instead of wandering between a few KiB and 1 MiB. */
    static const char *const echo_args[] = {"--max-pending", "64K", NULL};
    static const char *const kv_args[] = {"--lua", "lua/kv.lua", "--max-pending", "64K", NULL};
    const char *env = getenv("SOAK_SECONDS");
    long total_ms = (env ? atol(env) : 600) * 1000, warm_ms;
    uint64_t seed = 0x2545F4914F6CDD1Dull;

    if (harness_init() < 0)
        return 2;
    if (getenv("SOAK_KINDS") && *getenv("SOAK_KINDS")) {
        kinds_on = 0;
        for (int k = 0; k < NKINDS; k++) {
            const char *p = strstr(getenv("SOAK_KINDS"), kind_name[k]);

            if (p && (p[strlen(kind_name[k])] == ',' || !p[strlen(kind_name[k])]))
                kinds_on |= 1u << k;
        }
        if (!kinds_on) {
            fprintf(stderr, "SOAK_KINDS: none of long, short, pipelined, slow, half-close, "
                            "reset, garbage\n");
            return 2;
        }
    }
    if (total_ms < 40000) {
        fprintf(stderr, "SOAK_SECONDS must be at least 40\n");
        return 2;
    }
    slow_bytes = 2 * (uint64_t)tcp_wmem_max() + (2u << 20);
    warm_ms = total_ms / 10 < 20000 ? 20000 : total_ms / 10 > 60000 ? 60000 : total_ms / 10;
    for (int i = 0; i < PATN; i++) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        pat[i] = (unsigned char)(seed >> 24);
    }
    /* freed pages go back to the kernel at once: RSS then shows what the daemon holds */
    /* MALLOC_CONF= : the allocator as shipped */
    setenv("MALLOC_CONF", "dirty_decay_ms:0,muzzy_decay_ms:0,tcache:false,narenas:1", 0);
    for (int i = 0; i < 2; i++)
        if (spawn(&targets[i].d, i ? kv_args : echo_args, 0, NULL) < 0) {
            fprintf(stderr, "soak: lfepolld (%s) did not start: %s\n", targets[i].name,
                    log_text(&targets[i].d));
            return 1;
        }
    for (int i = 0; i < 2 * THREADS_PER_TARGET; i++)
        clis[i] = (struct cli){.t = &targets[i / THREADS_PER_TARGET],
                               .id = i,
                               .rng = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1)};
    printf("soak: %ld s: echo on port %d (pid %d), kv on port %d (pid %d); warm-up %ld s, %d "
           "client threads each\n",
           total_ms / 1000, targets[0].d.port, (int)targets[0].d.pid, targets[1].d.port,
           (int)targets[1].d.pid, warm_ms / 1000, THREADS_PER_TARGET);
    fflush(stdout);
    run_phase(warm_ms);
    for (int i = 0; i < 2; i++) {
        struct target *t = &targets[i];

        measure(t, &t->base);
        print_mem(t, "baseline after the warm-up", &t->base);
    }
    fflush(stdout);
    /* the main phase in rounds of a minute (a third of it in shorter runs), a checkpoint after
     * each; the last one is the end */
    {
        long main_ms = total_ms - warm_ms, round = main_ms > 180000 ? 60000 : main_ms / 3;
        struct mem now[2];

        for (long done = 0, rounds = 0; done < main_ms; rounds++) {
            long ms = main_ms - done < round + round / 2 ? main_ms - done : round;

            run_phase(ms);
            done += ms;
            checkpoint(warm_ms + done, now);
            /* A high-water mark the first round reaches (a worker's buffers at their ceiling,
             * the allocator's arenas around the Lua states) is not a leak: the baseline takes
             * it, and a leak has the other rounds to show. A 60 s run's warm-up is 20 s. */
            for (int i = 0; rounds == 0 && done < main_ms && i < 2; i++) {
                struct target *t = &targets[i];

                if (now[i].anon - now[i].lua_kb > t->base.anon - t->base.lua_kb) {
                    t->base.anon = now[i].anon;
                    t->base.lua_kb = now[i].lua_kb;
                    print_mem(t, "baseline raised to the first round's", &t->base);
                }
            }
        }
        for (int i = 0; i < 2; i++) {
            targets[i].end = now[i];
            print_mem(&targets[i], "at the end", &targets[i].end);
        }
    }
    for (int i = 0; i < 2; i++)
        check_target(&targets[i], total_ms);
    for (int i = 0; i < 2; i++) {
        if (getenv("TEST_KEEP_LOGS")) {
            printf("%s: daemon log kept: %s\n", targets[i].name, targets[i].d.log);
            targets[i].d.log[0] = '\0';
        }
        cleanup(&targets[i].d);
    }
    for (int i = 0; i < 2 * THREADS_PER_TARGET; i++)
        for (int k = 0; k < NKEYS; k++)
            free(clis[i].val[k]);
    printf("%d passed, %d failed\n", npass, nfail);
    return nfail ? 1 : 0;
}
