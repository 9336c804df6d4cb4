/* badserver: a single-threaded test server for lfbench's integration tests.
 *   badserver PORT echo        correct echo
 *   badserver PORT flip N      echo, but corrupt the first byte of every Nth read
 *   badserver PORT drop N      echo, but drop the last byte of every Nth read
 *   badserver PORT reset N     echo N reads per connection, then reset it (SO_LINGER 0) at
 *                              once: the client sees the reset while idle
 *   badserver PORT trunc N     echo, but every Nth read answer half of it and close (FIN)
 *   badserver PORT between N   echo N reads per connection, then close it cleanly: the FIN in
 *                              the segment of the last echo (a stopping lfepolld does so)
 *   badserver PORT unanswered N  echo, but every Nth read close (FIN) without answering it
 *   badserver PORT truncrst N  the same, closing with a reset
 *   badserver PORT extra S N   read S bytes, answer them and N bytes more in one write
 *   badserver PORT stall F [T] echo, but from F ms after the first request (the first byte any
 *                              connection sent: a connect alone, a readiness probe's, is none)
 *                              until T ms after it (for ever without T) neither accept, read nor
 *                              answer
 *   badserver PORT lifo K [CPU] echo, holding each request (up to 256 bytes) until K
 *                              connections have one (or nothing came for 5 ms), then answer the
 *                              newest first; with CPU, on that CPU under SCHED_FIFO, so a client
 *                              pinned there runs only once all K answers are written (exits 3
 *                              if it cannot: not root)
 *   badserver PORT delay MS    echo each read MS ms after it came (never sooner, and within
 *                              microseconds of it: the last 2 ms are polled), in order
 *   badserver PORT nth N S fin|rst [FILE]  echo a connection's first N-1 requests of S bytes,
 *                              byte for byte as they come; at the first byte of its Nth, answer
 *                              no more: fin sends a FIN 20 ms later (the client's pipeline fills
 *                              meanwhile) and reads on, discarding, until the client closes; rst
 *                              resets it (SO_LINGER 0) at once, right behind the last echo. With
 *                              FILE, the requests answered in all so far are written to it (a
 *                              decimal line, rewritten at each)
 *   badserver PORT pauseat AT MS  echo, but from the wall-clock time AT (epoch milliseconds)
 *                              for MS ms neither accept, read nor answer: one pause that several
 *                              clients see at the same instant
 *   badserver PORT http503 RATE  answer each read (one HTTP request) with 200 while the rate of
 *                              requests stays within RATE a second (a token bucket holding 50 ms
 *                              of them), and with 503 beyond: a server that sheds load
 *   badserver PORT line        answer each '\n'-terminated line with "OK\n"
 *   badserver PORT len32       answer each '\n'-terminated line with a len32 frame "hello"
 *   badserver PORT http KIND   answer each read (one HTTP request) with a response of KIND:
 *                              chunked (well-formed: extensions, trailers), eof (well-formed,
 *                              close-delimited: the body runs to the close), garbage, badcl (two
 *                              Content-Lengths), badchunk (a chunk size that is not hex), fold
 *                              (an obs-fold header), hugehead (70 KiB of head), short
 *                              (Content-Length 10, 5 bytes, close), endless (a chunked body
 *                              that never ends: 32 KiB chunks for as long as the client reads)
 * Prints "ready" on stdout once listening. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAXFD 65536

/* http KIND: what each request gets, and whether the connection closes after it */
static const struct {
    const char *kind, *resp;
    int close;
} http_kinds[] = {
    {"chunked",
     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=\"v\"\r\nhello\r\n"
     "A\r\n0123456789\r\n0\r\nX-Trailer: t\r\n\r\n",
     0},
    {"eof", "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nthe body runs to the close", 1},
    {"garbage", "HELLO THERE\r\n\r\n", 0},
    {"badcl", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", 0},
    {"badchunk", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
     0},
    {"fold", "HTTP/1.1 200 OK\r\nX-A: 1\r\n folded\r\nContent-Length: 0\r\n\r\n", 0},
    {"hugehead", NULL, 0},
    {"short", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello", 1},
    {"endless", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", 0},
};
#define LIFO_MAX 4096
static int nreads_conn[MAXFD];
static char endless[MAXFD];       /* http endless: the connection is being sent its body */
static size_t endless_off[MAXFD]; /* ... and how much of the chunk it has been sent */

/* http endless: the body's chunks, written while the socket takes them (it is non-blocking). */
static void write_endless(int fd)
{
    static char chunk[32768 + 10];
    static size_t len;
    ssize_t w;

    if (!len) {
        len = (size_t)sprintf(chunk, "8000\r\n");
        memset(chunk + len, 'x', 32768);
        len += 32768;
        memcpy(chunk + len, "\r\n", 2);
        len += 2;
    }
    while ((w = write(fd, chunk + endless_off[fd], len - endless_off[fd])) > 0)
        endless_off[fd] = (endless_off[fd] + (size_t)w) % len;
}

/* delay: echoes waiting for their time, oldest first (a ring) */
#define DELAY_MAX 4096
static struct later {
    int fd; /* -1: its connection went away */
    uint64_t due_ns;
    ssize_t len;
    char data[512];
} later[DELAY_MAX];
static int later_head, later_n;

/* nth: bytes of the stream received per connection, and whether it is discarding (fin); the
 * FINs to send, oldest first (a ring) */
#define FIN_HOLD_NS (20 * 1000000ull)
static long long got_conn[MAXFD];
static char closing[MAXFD];
static struct fin_at {
    int fd; /* -1: its connection went away */
    uint64_t due_ns;
} fins[DELAY_MAX];
static int fins_head, fins_n;

/* lifo: the requests held, oldest first */
static struct held {
    int fd;
    ssize_t len;
    char data[256];
} held[LIFO_MAX];
static int nheld;

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t now_ms(void)
{
    return now_ns() / 1000000;
}

static void write_all(int fd, const char *p, ssize_t n)
{
    for (ssize_t w = 0; w < n;) {
        ssize_t k = write(fd, p + w, (size_t)(n - w));
        if (k <= 0)
            break;
        w += k;
    }
}

/* delay: writes the echoes that are due; returns the ms until the next one, or -1 if none. */
static int answer_due(void)
{
    while (later_n > 0) {
        struct later *l = &later[later_head];
        uint64_t now = now_ns();

        /* Never early, and on time: epoll_wait waits whole ms, so the last 2 ms are polled */
        if (l->due_ns > now)
            return l->due_ns - now < 2000000 ? 0 : (int)((l->due_ns - now) / 1000000) - 1;
        if (l->fd >= 0)
            write_all(l->fd, l->data, l->len);
        later_head = (later_head + 1) % DELAY_MAX;
        later_n--;
    }
    return -1;
}

/* nth fin: sends the FINs that are due; returns the ms until the next one, or -1 if none. */
static int fin_due(void)
{
    while (fins_n > 0) {
        struct fin_at *f = &fins[fins_head];
        uint64_t now = now_ns();

        if (f->due_ns > now)
            return (int)((f->due_ns - now + 999999) / 1000000);
        if (f->fd >= 0)
            shutdown(f->fd, SHUT_WR);
        fins_head = (fins_head + 1) % DELAY_MAX;
        fins_n--;
    }
    return -1;
}

/* nth: the requests answered in all, into FILE */
static long long nth_answered;
static const char *nth_file;

/* FILE is replaced whole (written beside it, then renamed over it): a reader sees the count
 * before or after, never the empty file that rewriting it in place shows in between. */
static void nth_write(void)
{
    char tmp[4096];
    FILE *f;

    if (!nth_file || snprintf(tmp, sizeof(tmp), "%s.tmp", nth_file) >= (int)sizeof(tmp) ||
        !(f = fopen(tmp, "w")))
        return;
    fprintf(f, "%lld\n", nth_answered);
    if (fclose(f) || rename(tmp, nth_file))
        unlink(tmp);
}

static void nth_count(long long answered_before, long long answered_after)
{
    if (answered_after == answered_before)
        return;
    nth_answered += answered_after - answered_before;
    nth_write();
}

static void answer_held(void)
{
    while (nheld > 0) {
        nheld--;
        write_all(held[nheld].fd, held[nheld].data, held[nheld].len);
    }
}

int main(int argc, char **argv)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    const char *mode = argc > 2 ? argv[2] : "echo";
    long every = argc > 3 ? atol(argv[3]) : 0, arg2 = argc > 4 ? atol(argv[4]) : -1, nreads = 0;
    int one = 1, lfd, ep;
    uint64_t first = 0; /* when the first request came (stall) */
    static char buf[1 << 16], out[1 << 17];
    struct epoll_event ev = {.events = EPOLLIN}, evs[64];

    int http = -1; /* http KIND: its index in http_kinds */
    static char huge[70 * 1024];

    if (!strcmp(mode, "http")) {
        for (int k = 0; k < (int)(sizeof(http_kinds) / sizeof(http_kinds[0])); k++)
            if (argc > 3 && !strcmp(argv[3], http_kinds[k].kind))
                http = k;
        if (http < 0) {
            fprintf(stderr, "badserver: http KIND: chunked, eof, garbage, badcl, badchunk, fold, "
                            "hugehead, short or endless\n");
            return 2;
        }
        memset(huge, 'h', sizeof(huge));
        memcpy(huge, "HTTP/1.1 200 OK\r\nX-Huge: ", 26);
    }
    if (argc < 2) {
        fprintf(stderr,
                "usage: badserver PORT [echo|flip N|drop N|reset N|trunc N|truncrst N|between N|"
                "unanswered N|"
                "extra S N|stall F [T]|pauseat AT MS|http503 RATE|lifo K [CPU]|delay MS|"
                "nth N S fin|rst [FILE]|line|len32|"
                "http KIND]\n");
        return 2;
    }
    if ((!strcmp(mode, "delay") && every < 1) ||
        (!strcmp(mode, "nth") && (every < 1 || arg2 < 1 || argc < 6 ||
                                  (strcmp(argv[5], "fin") && strcmp(argv[5], "rst"))))) {
        fprintf(stderr, "badserver: delay MS takes MS of at least 1; nth N S fin|rst [FILE] takes "
                        "N and S of at least 1\n");
        return 2;
    }
    if (!strcmp(mode, "nth") && argc > 6) {
        nth_file = argv[6];
        nth_write();
    }
    if ((!strcmp(mode, "extra") && (every < 1 || every > (long)sizeof(buf) || arg2 < 0 ||
                                    every + arg2 > (long)sizeof(out))) ||
        (!strcmp(mode, "lifo") && (every < 1 || every > LIFO_MAX))) {
        fprintf(stderr,
                "badserver: extra S N takes S up to %zu and S+N up to %zu; lifo K up to "
                "%d\n",
                sizeof(buf), sizeof(out), LIFO_MAX);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    if (!strcmp(mode, "lifo") && arg2 >= 0) {
        struct sched_param sp = {.sched_priority = 1};
        cpu_set_t one;

        CPU_ZERO(&one);
        CPU_SET((int)arg2, &one);
        if (sched_setaffinity(0, sizeof(one), &one) || sched_setscheduler(0, SCHED_FIFO, &sp)) {
            perror("badserver: lifo CPU: sched_setaffinity/SCHED_FIFO");
            return 3;
        }
    }
    a.sin_port = htons((uint16_t)atoi(argv[1]));
    lfd = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    setsockopt(lfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 1024)) {
        perror("badserver: bind/listen");
        return 1;
    }
    ep = epoll_create1(0);
    ev.data.fd = lfd;
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    printf("ready\n");
    fflush(stdout);
    double tokens = every / 20.0 + 1; /* http503: a bucket of 50 ms of RATE */
    uint64_t tokens_t = now_ms();

    for (;;) {
        int n;

        if (!strcmp(mode, "pauseat") && wall_ms() >= (uint64_t)every) {
            while (wall_ms() < (uint64_t)every + (uint64_t)arg2)
                usleep(500);
            mode = "echo";
        }
        if (!strcmp(mode, "stall") && first && now_ms() >= first + (uint64_t)every) {
            /* the kernel still completes handshakes and queues requests meanwhile */
            if (arg2 < 0)
                for (;;)
                    pause();
            while (now_ms() < first + (uint64_t)arg2)
                usleep(1000);
            mode = "echo";
        }
        n = epoll_wait(ep, evs, 64,
                       nheld                                                ? 5
                       : !strcmp(mode, "stall") || !strcmp(mode, "pauseat") ? 1
                       : !strcmp(mode, "delay")                             ? answer_due()
                       : !strcmp(mode, "nth")                               ? fin_due()
                                                                            : -1);
        if (n == 0 && nheld)
            answer_held();
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            ssize_t r, o = 0;

            if (fd == lfd) {
                int c = accept(lfd, NULL, NULL);
                if (c >= 0 && c < MAXFD) {
                    nreads_conn[c] = 0;
                    endless[c] = 0;
                    endless_off[c] = 0;
                    got_conn[c] = 0;
                    closing[c] = 0;
                    ev.data.fd = c;
                    epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev);
                } else if (c >= 0) {
                    close(c);
                }
                continue;
            }
            if (!strcmp(mode, "extra")) { /* blocking socket: the request is all there soon */
                r = recv(fd, buf, (size_t)every, MSG_WAITALL);
                if (r < every) {
                    close(fd);
                    continue;
                }
                memcpy(out, buf, (size_t)r);
                memset(out + r, '!', (size_t)arg2);
                write_all(fd, out, r + arg2);
                continue;
            }
            if (endless[fd] && (evs[i].events & EPOLLOUT))
                write_endless(fd);
            if (endless[fd] && !(evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
                continue;
            if (!first && recv(fd, buf, 1, MSG_PEEK) > 0) {
                first = now_ms(); /* the first request: a connect alone (a probe) is none */
                if (!strcmp(mode, "stall") && every == 0)
                    break; /* stall 0: not even this one is read; the stall begins above */
            }
            r = read(fd, buf, !strcmp(mode, "lifo") ? sizeof(held[0].data) : sizeof(buf));
            if (r < 0 && endless[fd] && errno == EAGAIN)
                continue;
            if (r <= 0) {
                for (int k = 0; k < nheld; k++) /* a connection that went away is not answered */
                    if (held[k].fd == fd)
                        held[k].len = 0;
                for (int k = 0; k < later_n; k++) /* nor its fd number's next owner */
                    if (later[(later_head + k) % DELAY_MAX].fd == fd)
                        later[(later_head + k) % DELAY_MAX].fd = -1;
                for (int k = 0; k < fins_n; k++)
                    if (fins[(fins_head + k) % DELAY_MAX].fd == fd)
                        fins[(fins_head + k) % DELAY_MAX].fd = -1;
                close(fd);
                continue;
            }
            nreads++;
            if (!strcmp(mode, "delay")) {
                uint64_t due = now_ns() + (uint64_t)every * 1000000ull;

                for (ssize_t k = 0; k < r; k += (ssize_t)sizeof(later[0].data)) {
                    struct later *l;

                    while (later_n == DELAY_MAX) { /* full: the oldest is answered first */
                        int ms = answer_due();
                        if (ms > 0)
                            usleep((useconds_t)ms * 1000);
                    }
                    l = &later[(later_head + later_n++) % DELAY_MAX];
                    l->fd = fd;
                    l->due_ns = due;
                    l->len = r - k < (ssize_t)sizeof(l->data) ? r - k : (ssize_t)sizeof(l->data);
                    memcpy(l->data, buf + k, (size_t)l->len);
                }
                continue;
            }
            if (!strcmp(mode, "nth")) {
                long long limit = (long long)(every - 1) * arg2, echo = r;

                if (closing[fd])
                    continue; /* fin: its requests are not answered; its close is waited for */
                if (got_conn[fd] + echo > limit)
                    echo = limit - got_conn[fd];
                /* counted first: the client may have read the answer and ended before the
                 * file is written, never the other way round */
                nth_count(got_conn[fd] / arg2, (got_conn[fd] + echo) / arg2);
                write_all(fd, buf, (ssize_t)echo);
                got_conn[fd] += r;
                if (got_conn[fd] <= limit)
                    continue;
                if (!strcmp(argv[5], "fin")) {
                    closing[fd] = 1;
                    while (fins_n == DELAY_MAX) { /* full: the oldest goes first */
                        usleep(1000);
                        fin_due();
                    }
                    fins[(fins_head + fins_n++) % DELAY_MAX] =
                        (struct fin_at){fd, now_ns() + FIN_HOLD_NS};
                } else {
                    struct linger lg = {1, 0};
                    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
                    close(fd);
                }
                continue;
            }
            if (!strcmp(mode, "http503")) {
                static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
                                  busy[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: "
                                           "4\r\n\r\nbusy";
                uint64_t t = now_ms();

                tokens += (double)every * (double)(t - tokens_t) / 1000.0;
                tokens_t = t;
                if (tokens > every / 20.0 + 1)
                    tokens = every / 20.0 + 1;
                if (tokens >= 1) {
                    tokens -= 1;
                    write_all(fd, ok, sizeof(ok) - 1);
                } else {
                    write_all(fd, busy, sizeof(busy) - 1);
                }
                continue;
            }
            if (http >= 0 && endless[fd])
                continue; /* what else it sends goes unanswered: the body never ends */
            if (http >= 0 && !strcmp(http_kinds[http].kind, "endless")) {
                struct epoll_event out = {.events = EPOLLIN | EPOLLOUT, .data.fd = fd};
                write_all(fd, http_kinds[http].resp, (ssize_t)strlen(http_kinds[http].resp));
                fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
                endless[fd] = 1;
                epoll_ctl(ep, EPOLL_CTL_MOD, fd, &out);
                continue;
            }
            if (http >= 0) {
                if (http_kinds[http].resp)
                    write_all(fd, http_kinds[http].resp, (ssize_t)strlen(http_kinds[http].resp));
                else
                    write_all(fd, huge, sizeof(huge)); /* no end to the head */
                if (http_kinds[http].close)
                    close(fd);
                continue;
            }
            if (!strcmp(mode, "lifo")) {
                if (nheld < LIFO_MAX) {
                    held[nheld].fd = fd;
                    held[nheld].len = r;
                    memcpy(held[nheld++].data, buf, (size_t)r);
                }
                if (nheld >= every || nheld == LIFO_MAX)
                    answer_held();
                continue;
            }
            if (!strcmp(mode, "line") || !strcmp(mode, "len32")) {
                for (ssize_t k = 0; k < r; k++) {
                    if (buf[k] != '\n')
                        continue;
                    if (mode[1] == 'i') {
                        memcpy(out + o, "OK\n", 3);
                        o += 3;
                    } else {
                        memcpy(out + o, "\0\0\0\5hello", 9);
                        o += 9;
                    }
                }
            } else {
                memcpy(out, buf, (size_t)r);
                o = r;
                if (every && nreads % every == 0 && !strcmp(mode, "flip"))
                    out[0] ^= 0x5a;
                if (every && nreads % every == 0 && !strcmp(mode, "drop"))
                    o--;
            }
            if (every && nreads % every == 0 && !strcmp(mode, "unanswered")) {
                close(fd); /* the request was read: a FIN, not a reset */
                continue;
            }
            if (!strcmp(mode, "between") && ++nreads_conn[fd] >= every) {
                int on = 1;

                nreads_conn[fd] = 0;
                setsockopt(fd, IPPROTO_TCP, TCP_CORK, &on, sizeof(on));
                write_all(fd, out, o);
                shutdown(fd, SHUT_WR); /* sends the held echo and the FIN together */
                close(fd);
                continue;
            }
            if (every && nreads % every == 0 && !strncmp(mode, "trunc", 5)) {
                write_all(fd, out, o / 2);
                if (!strcmp(mode, "truncrst")) {
                    struct linger lg = {1, 0};
                    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
                }
                close(fd);
                continue;
            }
            write_all(fd, out, o);
            if (!strcmp(mode, "reset") && ++nreads_conn[fd] >= every) {
                struct linger lg = {1, 0};
                setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
                close(fd);
            }
        }
    }
}
