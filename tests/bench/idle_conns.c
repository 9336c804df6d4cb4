/* idle_conns: opens N TCP connections to 127.0.0.1:PORT, holds them idle until stdin closes or
 * a signal arrives. Prints "open N" once all are connected. For tests/bench/idle_rss.sh. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    struct rlimit rl;
    int n, port, ok = 0;
    char c;

    if (argc != 3 || (port = atoi(argv[1])) <= 0 || (n = atoi(argv[2])) <= 0) {
        fprintf(stderr, "usage: idle_conns PORT N\n");
        return 2;
    }
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    for (int i = 0; i < n; i++) {
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_port = htons((uint16_t)port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
            perror("idle_conns: connect");
            return 1;
        }
        ok++;
    }
    printf("open %d\n", ok);
    fflush(stdout);
    while (read(STDIN_FILENO, &c, 1) > 0)
        ;
    return 0;
}
