/* badserver: a single-threaded test server for lfbench's integration tests.
 *   badserver PORT echo        correct echo
 *   badserver PORT flip N      echo, but corrupt the first byte of every Nth read
 *   badserver PORT drop N      echo, but drop the last byte of every Nth read
 *   badserver PORT reset N     echo N reads per connection, then reset it (SO_LINGER 0) at
 *                              once: the client sees the reset while idle
 *   badserver PORT line        answer each '\n'-terminated line with "OK\n"
 *   badserver PORT len32       answer each '\n'-terminated line with a len32 frame "hello"
 * Prints "ready" on stdout once listening. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAXFD 65536
static int nreads_conn[MAXFD];

int main(int argc, char **argv)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    const char *mode = argc > 2 ? argv[2] : "echo";
    long every = argc > 3 ? atol(argv[3]) : 0, nreads = 0;
    int one = 1, lfd, ep;
    static char buf[1 << 16], out[1 << 17];
    struct epoll_event ev = {.events = EPOLLIN}, evs[64];

    if (argc < 2) {
        fprintf(stderr, "usage: badserver PORT [echo|flip N|drop N|reset N|line|len32]\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
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
    for (;;) {
        int n = epoll_wait(ep, evs, 64, -1);
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            ssize_t r, o = 0;

            if (fd == lfd) {
                int c = accept(lfd, NULL, NULL);
                if (c >= 0 && c < MAXFD) {
                    nreads_conn[c] = 0;
                    ev.data.fd = c;
                    epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev);
                } else if (c >= 0) {
                    close(c);
                }
                continue;
            }
            r = read(fd, buf, sizeof(buf)); /* blocking socket: fine for small test loads */
            if (r <= 0) {
                close(fd);
                continue;
            }
            nreads++;
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
            for (ssize_t w = 0; w < o;) {
                ssize_t k = write(fd, out + w, (size_t)(o - w));
                if (k <= 0)
                    break;
                w += k;
            }
            if (!strcmp(mode, "reset") && ++nreads_conn[fd] >= every) {
                struct linger lg = {1, 0};
                setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
                close(fd);
            }
        }
    }
}
