/* tls_epoll_echo: the floor for TLS, as epoll_st is for plain text: one thread, level-triggered
 * epoll, OpenSSL 3, non-blocking handshakes, one SSL_read and one SSL_write per readable event.
 *
 *   tls_epoll_echo --cert CHAIN.pem --key KEY.pem --port PORT
 *
 * The handshake's want-read and want-write become the connection's registration (EPOLLIN or
 * EPOLLOUT). Echo is byte-exact: a write the socket does not take whole is kept (the
 * connection's tail) and retried with the same bytes on EPOLLOUT, and reading pauses until it
 * is out (backpressure). Records the socket holds beyond the one read stay in the kernel and
 * level-triggered epoll reports them again; what OpenSSL holds decrypted (SSL_pending) is
 * echoed in the same event. On the client's close_notify or EOF the server sends its own
 * close_notify and closes. SSL_MODE_RELEASE_BUFFERS: an idle connection keeps no record buffers.
 * OpenSSL's defaults otherwise (TLS 1.2 and 1.3, its groups X25519 first, the server session
 * cache and session tickets on), as a user who writes such a loop gets them. No handshake
 * deadline and no connection cap beyond the descriptor limit: this is a benchmark peer, run on
 * 127.0.0.1 only. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUF_SIZE (16 * 1024) /* one TLS record's plaintext at most */

struct conn {
    SSL *ssl;
    int handshaking;
    uint32_t events; /* what epoll has for it: changed only when that changes */
    char *tail;      /* the plaintext SSL_write must be given again, BUF_SIZE bytes */
    int tail_len;
};

static struct conn *conns; /* by fd: the process has one thread, it owns them all */
static int max_fd;

static int listen_on(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)); /* copied to every accept */
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 4096)) {
        close(fd);
        return -1;
    }
    return fd;
}

static void watch(int ep, int op, int fd, uint32_t events)
{
    struct epoll_event ev = {.events = events, .data.fd = fd};

    epoll_ctl(ep, op, fd, &ev);
}

/* A connection waits for EPOLLIN or EPOLLOUT: one epoll_ctl where that changes, none where not. */
static void wait_for(int ep, int fd, uint32_t events)
{
    if (conns[fd].events != events) {
        conns[fd].events = events;
        watch(ep, EPOLL_CTL_MOD, fd, events);
    }
}

static void conn_close(int fd, int notify)
{
    struct conn *c = &conns[fd];

    if (notify)
        SSL_shutdown(c->ssl); /* our close_notify: one try, a full socket gets none */
    SSL_free(c->ssl);
    free(c->tail);
    memset(c, 0, sizeof(*c));
    close(fd); /* the last reference: it leaves the epoll set */
}

/* What an SSL call's failure means for the connection: 0 to wait for EPOLLIN or EPOLLOUT
 * (registered here), -1 to close it, -2 to close it with a close_notify (the peer's EOF). */
static int want(int ep, int fd, SSL *ssl, int r)
{
    switch (SSL_get_error(ssl, r)) {
    case SSL_ERROR_WANT_READ:
        wait_for(ep, fd, EPOLLIN);
        return 0;
    case SSL_ERROR_WANT_WRITE:
        wait_for(ep, fd, EPOLLOUT);
        return 0;
    case SSL_ERROR_ZERO_RETURN: /* close_notify, or a bare EOF (SSL_OP_IGNORE_UNEXPECTED_EOF) */
        return -2;
    default:
        return -1;
    }
}

/* The unsent tail, written again with the same bytes; reading resumes once it is out. */
static int flush_tail(int ep, int fd)
{
    struct conn *c = &conns[fd];
    int w = SSL_write(c->ssl, c->tail, c->tail_len);

    if (w <= 0)
        return want(ep, fd, c->ssl, w) == 0 ? 0 : -1;
    c->tail_len = 0;
    wait_for(ep, fd, EPOLLIN);
    return 0;
}

/* One event on a connection. Returns < 0 when it is to be closed (-2: with a close_notify). */
static int serve(int ep, int fd, char *buf)
{
    struct conn *c = &conns[fd];
    int r, w;

    ERR_clear_error();
    if (c->handshaking) {
        if ((r = SSL_do_handshake(c->ssl)) <= 0)
            return want(ep, fd, c->ssl, r) == 0 ? 0 : -1;
        c->handshaking = 0; /* a request sent with the client's Finished is read now */
    }
    if (c->tail_len)
        return flush_tail(ep, fd);
    do {
        if ((r = SSL_read(c->ssl, buf, BUF_SIZE)) <= 0)
            return want(ep, fd, c->ssl, r);
        if ((w = SSL_write(c->ssl, buf, r)) <= 0) {
            if (!c->tail && !(c->tail = malloc(BUF_SIZE)))
                return -1;
            memcpy(c->tail, buf, (size_t)r); /* SSL_write wants these bytes again */
            c->tail_len = r;
            return want(ep, fd, c->ssl, w) == 0 ? 0 : -1;
        }
    } while (SSL_pending(c->ssl) > 0);
    return 0;
}

static void accept_some(int ep, int lfd, SSL_CTX *ctx)
{
    for (int i = 0; i < 16; i++) { /* level-triggered: what is left comes again */
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        SSL *ssl;

        if (fd < 0)
            return;
        if (fd >= max_fd || !(ssl = SSL_new(ctx)) || !SSL_set_fd(ssl, fd)) {
            close(fd);
            continue;
        }
        SSL_set_accept_state(ssl);
        conns[fd] = (struct conn){.ssl = ssl, .handshaking = 1, .events = EPOLLIN};
        watch(ep, EPOLL_CTL_ADD, fd, EPOLLIN);
    }
}

static int usage(const char *why)
{
    fprintf(
        stderr,
        "tls_epoll_echo: %s (usage: tls_epoll_echo --cert CHAIN.pem --key KEY.pem --port PORT)\n",
        why);
    return 2;
}

/* The context: the chain and key, checked against each other; a one-line error if not. */
static SSL_CTX *make_ctx(const char *cert, const char *key)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    char err[256];

    if (!ctx)
        return NULL;
    /* the tail is written again from its own copy, not from where SSL_write first saw it */
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF); /* EOF: answered with close_notify */
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
        ERR_error_string_n(ERR_get_error(), err, sizeof(err));
        fprintf(stderr, "tls_epoll_echo: certificate %s: %s\n", cert, err);
    } else if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
        ERR_error_string_n(ERR_get_error(), err, sizeof(err));
        fprintf(stderr, "tls_epoll_echo: key %s: %s\n", key, err);
    } else if (SSL_CTX_check_private_key(ctx) != 1) {
        fprintf(stderr, "tls_epoll_echo: key %s does not match certificate %s\n", key, cert);
    } else {
        return ctx;
    }
    SSL_CTX_free(ctx);
    return NULL;
}

int main(int argc, char **argv)
{
    static char buf[BUF_SIZE];
    const char *cert = NULL, *key = NULL;
    struct epoll_event evs[256];
    struct rlimit rl;
    SSL_CTX *ctx;
    int lfd, ep, port = 0;

    for (int i = 1; i < argc; i += 2) {
        if (i + 1 >= argc)
            return usage("an option without its value");
        if (!strcmp(argv[i], "--cert"))
            cert = argv[i + 1];
        else if (!strcmp(argv[i], "--key"))
            key = argv[i + 1];
        else if (!strcmp(argv[i], "--port"))
            port = atoi(argv[i + 1]);
        else
            return usage("unknown option");
    }
    if (!cert || !key || port < 1 || port > 65535)
        return usage("--cert, --key and --port (1 to 65535) are needed");
    signal(SIGPIPE, SIG_IGN);
    if (!(ctx = make_ctx(cert, key)))
        return 1;
    if (!getrlimit(RLIMIT_NOFILE, &rl)) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    max_fd = rl.rlim_cur > 1 << 20 ? 1 << 20 : (int)rl.rlim_cur;
    conns = calloc((size_t)max_fd, sizeof(*conns));
    lfd = listen_on(port);
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (!conns || lfd < 0 || ep < 0) {
        fprintf(stderr, "tls_epoll_echo: cannot listen on 127.0.0.1:%d: %s\n", port,
                strerror(errno));
        SSL_CTX_free(ctx);
        free(conns);
        return 1;
    }
    watch(ep, EPOLL_CTL_ADD, lfd, EPOLLIN);
    for (;;) {
        int n = epoll_wait(ep, evs, 256, -1);
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd, r;
            if (fd == lfd) {
                accept_some(ep, lfd, ctx);
                continue;
            }
            if ((r = serve(ep, fd, buf)) < 0)
                conn_close(fd, r == -2);
        }
    }
}
