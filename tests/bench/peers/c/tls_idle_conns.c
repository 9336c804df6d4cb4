/* tls_idle_conns: opens N TLS connections to 127.0.0.1:PORT, one after another, each a full
 * handshake (OpenSSL's defaults: TLS 1.3, X25519; the certificate is not verified: the peers are
 * run on certificates made for the run), then holds them idle until stdin closes. Prints
 * "open N" once all are up, or one line saying which connection failed and why (exit 1).
 *
 *   tls_idle_conns PORT N
 *
 * Each SSL object is freed once its handshake is done (the descriptor stays open and nothing
 * more is sent: no close_notify), so that the client's memory does not grow with N. For
 * tests/bench/tls_server.sh: the server's memory per idle TLS connection. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

static int open_one(SSL_CTX *ctx, int port, char *err, size_t len)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), ok;
    SSL *ssl;

    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        snprintf(err, len, "connect: %m");
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (!(ssl = SSL_new(ctx)) || !SSL_set_fd(ssl, fd)) {
        snprintf(err, len, "SSL_new: out of memory");
        SSL_free(ssl);
        close(fd);
        return -1;
    }
    ok = SSL_connect(ssl) == 1;
    if (!ok)
        ERR_error_string_n(ERR_get_error(), err, len);
    SSL_free(ssl); /* the socket BIO does not own the descriptor: it stays open */
    if (!ok) {
        close(fd);
        return -1;
    }
    return fd;
}

int main(int argc, char **argv)
{
    struct rlimit rl;
    int n, port, ok = 0;
    SSL_CTX *ctx;
    char c, err[256] = "";

    if (argc != 3 || (port = atoi(argv[1])) <= 0 || port > 65535 || (n = atoi(argv[2])) <= 0) {
        fprintf(stderr, "usage: tls_idle_conns PORT N  (PORT 1 to 65535, N connections >= 1)\n");
        return 2;
    }
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    if (!(ctx = SSL_CTX_new(TLS_client_method()))) {
        fprintf(stderr, "tls_idle_conns: SSL_CTX_new failed\n");
        return 1;
    }
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF); /* every handshake a full one */
    for (int i = 0; i < n; i++) {
        if (open_one(ctx, port, err, sizeof(err)) < 0) {
            fprintf(stderr, "tls_idle_conns: connection %d of %d to 127.0.0.1:%d: %s\n", i + 1, n,
                    port, err);
            SSL_CTX_free(ctx);
            return 1;
        }
        ok++;
    }
    printf("open %d\n", ok);
    fflush(stdout);
    while (read(STDIN_FILENO, &c, 1) > 0)
        ;
    SSL_CTX_free(ctx); /* the descriptors close at exit */
    return 0;
}
