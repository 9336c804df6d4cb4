/* uv_echo: the libuv echo peer, one loop on one thread, written as a libuv user would.
 *
 * Every read lands in one buffer (safe: one thread, and the bytes are written or copied before
 * the next read). uv_try_write sends at once; only when the socket is full is the rest copied
 * into a queued uv_write, and reading stops until it is out (backpressure).
 *
 *   uv_echo PORT */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

/* A queued write of the rest of an echo; freed by its callback. */
struct rest {
    uv_write_t req;
    char *copy; /* the bytes (uv_write keeps its own copy of the uv_buf_t, not of these) */
};

static char rd[64 * 1024];

static void on_alloc(uv_handle_t *h, size_t want, uv_buf_t *b)
{
    (void)h, (void)want;
    *b = uv_buf_init(rd, sizeof(rd));
}

static void on_close(uv_handle_t *h)
{
    free(h);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b);

static void on_written(uv_write_t *req, int status)
{
    struct rest *r = (struct rest *)req;

    if (status == 0)
        uv_read_start(req->handle, on_alloc, on_read);
    else if (!uv_is_closing((uv_handle_t *)req->handle))
        uv_close((uv_handle_t *)req->handle, on_close);
    free(r->copy);
    free(r);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    uv_buf_t out;
    struct rest *r;
    int w;

    if (n < 0) { /* UV_EOF or an error */
        uv_close((uv_handle_t *)s, on_close);
        return;
    }
    if (n == 0) /* EAGAIN */
        return;
    out = uv_buf_init(b->base, (unsigned)n);
    w = uv_try_write(s, &out, 1);
    if (w == n)
        return;
    if (w < 0 && w != UV_EAGAIN) {
        uv_close((uv_handle_t *)s, on_close);
        return;
    }
    if (w < 0)
        w = 0;
    r = malloc(sizeof(*r));
    if (!r || !(r->copy = malloc((size_t)(n - w)))) {
        free(r);
        uv_close((uv_handle_t *)s, on_close);
        return;
    }
    memcpy(r->copy, b->base + w, (size_t)(n - w));
    out = uv_buf_init(r->copy, (unsigned)(n - w));
    uv_read_stop(s);
    if (uv_write(&r->req, s, &out, 1, on_written)) {
        free(r->copy);
        free(r);
        uv_close((uv_handle_t *)s, on_close);
    }
}

static void on_connection(uv_stream_t *server, int status)
{
    uv_tcp_t *c;

    if (status < 0) /* e.g. EMFILE: libuv retries on the next connection */
        return;
    if (!(c = malloc(sizeof(*c))))
        return;
    uv_tcp_init(server->loop, c);
    if (uv_accept(server, (uv_stream_t *)c)) {
        uv_close((uv_handle_t *)c, on_close);
        return;
    }
    uv_tcp_nodelay(c, 1);
    uv_read_start((uv_stream_t *)c, on_alloc, on_read);
}

int main(int argc, char **argv)
{
    int port = argc == 2 ? atoi(argv[1]) : 0, err;
    struct sockaddr_in a;
    uv_tcp_t server;

    if (port < 1 || port > 65535) {
        fprintf(stderr, "usage: uv_echo PORT\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    uv_ip4_addr("127.0.0.1", port, &a);
    uv_tcp_init(uv_default_loop(), &server);
    err = uv_tcp_bind(&server, (const struct sockaddr *)&a, 0);
    if (!err)
        err = uv_listen((uv_stream_t *)&server, 4096, on_connection);
    if (err) {
        fprintf(stderr, "uv_echo: cannot listen on 127.0.0.1:%d: %s\n", port, uv_strerror(err));
        return 1;
    }
    return uv_run(uv_default_loop(), UV_RUN_DEFAULT);
}
