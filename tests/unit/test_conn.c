/* Unit tests of conn_echo: EINTR, EAGAIN, short writes, backpressure, half-close, errors and OOM,
 * with read(2), send(2), getsockopt(2) and malloc faked through -Wl,--wrap. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "conn.h"

/* A scripted syscall result: ret >= 0 is a byte count (read: bytes delivered from the peer's
 * stream; send: most bytes the socket takes), ret < 0 fails with err. */
struct step {
    ssize_t ret;
    int err;
};

#define MAXSTEPS 64
static struct step rsteps[MAXSTEPS], wsteps[MAXSTEPS];
static int nr, nw, ir, iw;
static unsigned char in[1 << 20], out[1 << 20]; /* the peer's stream, and what came back */
static size_t in_off, out_len;
static size_t read_asks[MAXSTEPS]; /* count argument of each read */
static int sockerr;                 /* SO_ERROR for getsockopt */
static bool fail_malloc;

static void script_read(ssize_t ret, int err)
{
    rsteps[nr++] = (struct step){ret, err};
}

static void script_send(ssize_t ret, int err)
{
    wsteps[nw++] = (struct step){ret, err};
}

ssize_t __wrap_read(int fd, void *buf, size_t count);
ssize_t __wrap_read(int fd, void *buf, size_t count)
{
    struct step s;

    (void)fd;
    if (ir < MAXSTEPS)
        read_asks[ir] = count;
    if (ir == nr) { /* script exhausted: the socket is empty */
        ir++;
        errno = EAGAIN;
        return -1;
    }
    s = rsteps[ir++];
    if (s.ret < 0) {
        errno = s.err;
        return -1;
    }
    if ((size_t)s.ret > count)
        s.ret = (ssize_t)count;
    memcpy(buf, in + in_off, (size_t)s.ret);
    in_off += (size_t)s.ret;
    return s.ret;
}

ssize_t __wrap_send(int fd, const void *buf, size_t len, int flags);
ssize_t __wrap_send(int fd, const void *buf, size_t len, int flags)
{
    struct step s = {(ssize_t)len, 0};

    (void)fd;
    assert_true(flags & MSG_NOSIGNAL);
    if (iw < nw)
        s = wsteps[iw++];
    if (s.ret < 0) {
        errno = s.err;
        return -1;
    }
    if ((size_t)s.ret > len)
        s.ret = (ssize_t)len;
    memcpy(out + out_len, buf, (size_t)s.ret);
    out_len += (size_t)s.ret;
    return s.ret;
}

int __wrap_getsockopt(int fd, int level, int name, void *val, socklen_t *len);
int __wrap_getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
    (void)fd;
    assert_int_equal(level, SOL_SOCKET);
    assert_int_equal(name, SO_ERROR);
    *(int *)val = sockerr;
    *len = sizeof(int);
    return 0;
}

void *__real_malloc(size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_malloc(size_t n)
{
    if (fail_malloc) {
        fail_malloc = false;
        return NULL;
    }
    return __real_malloc(n);
}

static struct conn c;
static struct worker_stats st;
static char rbuf[1024];
static struct conn_io io = {.buf = rbuf, .bufsize = sizeof(rbuf), .max_pending = 1 << 20, .st = &st};

static int setup(void **state)
{
    (void)state;
    nr = nw = ir = iw = 0;
    in_off = out_len = 0;
    sockerr = 0;
    for (size_t i = 0; i < sizeof(in); i++)
        in[i] = (unsigned char)(i * 131 + (i >> 8));
    memset(&c, 0, sizeof(c));
    memset(&st, 0, sizeof(st));
    io.max_pending = 1 << 20;
    c.fd = 99;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    obuf_free(&c.out);
    return 0;
}

/* Everything read so far came back, in order, with nothing extra. */
static void assert_echoed(size_t n)
{
    assert_int_equal(in_off, n);
    assert_int_equal(out_len, n);
    assert_memory_equal(out, in, n);
}

static void test_simple_echo(void **state)
{
    (void)state;
    script_read(100, 0);
    assert_int_equal(conn_echo(&c, EPOLLIN, &io), EPOLLIN | EPOLLRDHUP);
    assert_echoed(100);
    assert_int_equal(ir, 1); /* a short read means drained: no second read */
    assert_int_equal(st.reads, 1);
    assert_int_equal(st.bytes_in, 100);
    assert_int_equal(st.bytes_out, 100);
}

static void test_eintr_retried(void **state)
{
    (void)state;
    script_read(-1, EINTR);
    script_read(50, 0);
    script_send(-1, EINTR);
    assert_int_equal(conn_echo(&c, EPOLLIN, &io), EPOLLIN | EPOLLRDHUP);
    assert_echoed(50);
}

static void test_eagain_is_no_more(void **state)
{
    (void)state;
    script_read(-1, EAGAIN);
    assert_int_equal(conn_echo(&c, EPOLLIN, &io), EPOLLIN | EPOLLRDHUP);
    assert_echoed(0);
    assert_int_equal(st.err_io + st.err_reset, 0);
}

static void test_short_write_keeps_the_rest(void **state)
{
    (void)state;
    script_read(1000, 0);
    script_send(300, 0);
    assert_int_equal(conn_echo(&c, EPOLLIN, &io), EPOLLIN | EPOLLRDHUP | EPOLLOUT);
    assert_int_equal(obuf_len(&c.out), 700);
    assert_int_equal(st.short_writes, 1);
    /* The socket drains: the rest goes out, then reading goes on. */
    script_read(-1, EAGAIN);
    assert_int_equal(conn_echo(&c, EPOLLOUT, &io), EPOLLIN | EPOLLRDHUP);
    assert_int_equal(obuf_len(&c.out), 0);
    assert_null(c.out.data);
    assert_echoed(1000);
}

static void test_new_input_queues_behind_pending(void **state)
{
    (void)state;
    script_read(500, 0);
    script_send(100, 0);
    conn_echo(&c, EPOLLIN, &io);
    /* Still blocked on output; more input arrives: it must go after the pending bytes. */
    script_send(-1, EAGAIN); /* flush attempt */
    script_read(200, 0);
    assert_int_equal(conn_echo(&c, EPOLLIN | EPOLLOUT, &io), EPOLLIN | EPOLLRDHUP | EPOLLOUT);
    assert_int_equal(obuf_len(&c.out), 600);
    script_read(-1, EAGAIN);
    assert_int_equal(conn_echo(&c, EPOLLOUT, &io), EPOLLIN | EPOLLRDHUP);
    assert_echoed(700);
}

static void test_backpressure_caps_pending(void **state)
{
    int reads;

    (void)state;
    io.max_pending = 2500;
    /* The peer never reads (sends fail with EAGAIN) and keeps sending. */
    for (int i = 0; i < 10; i++)
        script_read(1024, 0);
    script_send(-1, EAGAIN);
    assert_int_equal(conn_echo(&c, EPOLLIN, &io), EPOLLOUT);
    /* Exactly the cap, and the last read asked only for the room left. */
    assert_int_equal(obuf_len(&c.out), 2500);
    assert_int_equal(ir, 3);
    assert_int_equal(read_asks[2], 2500 - 2048);
    assert_int_equal(st.paused, 1);
    /* At the cap, an event that still cannot write reads nothing. */
    reads = ir;
    script_send(-1, EAGAIN);
    assert_int_equal(conn_echo(&c, EPOLLOUT, &io), EPOLLOUT);
    assert_int_equal(ir, reads);
    /* Part drains: reading resumes only into the room made. */
    script_send(1000, 0);
    script_send(-1, EAGAIN);
    assert_int_equal(conn_echo(&c, EPOLLOUT, &io), EPOLLOUT);
    assert_int_equal(read_asks[reads], 1000);
    assert_int_equal(obuf_len(&c.out), 2500);
    /* The peer drains all: everything comes back in order. */
    nr = ir; /* the peer stops sending */
    assert_int_equal(conn_echo(&c, EPOLLOUT, &io), EPOLLIN | EPOLLRDHUP);
    assert_echoed(3500);
}

static void test_read_budget(void **state)
{
    (void)state;
    for (int i = 0; i < 10; i++)
        script_read(1024, 0); /* a fast sender: every read fills the buffer */
    assert_int_equal(conn_echo(&c, EPOLLIN, &io), EPOLLIN | EPOLLRDHUP);
    assert_int_equal(ir, CONN_READS_PER_EVENT);
    assert_echoed(CONN_READS_PER_EVENT * 1024);
}

static void test_half_close_echoes_all_then_closes(void **state)
{
    (void)state;
    script_read(500, 0);
    script_send(100, 0);
    script_read(0, 0); /* FIN */
    assert_int_equal(conn_echo(&c, EPOLLIN | EPOLLRDHUP, &io), EPOLLOUT);
    assert_true(c.flags & CONN_RDCLOSED);
    script_send(150, 0);
    script_send(-1, EAGAIN);
    assert_int_equal(conn_echo(&c, EPOLLOUT, &io), EPOLLOUT);
    assert_int_equal(obuf_len(&c.out), 250);
    assert_int_equal(conn_echo(&c, EPOLLOUT, &io), 0); /* all out: close */
    assert_echoed(500);
}

static void test_rdhup_reads_to_eof_at_once(void **state)
{
    (void)state;
    script_read(30, 0);
    script_read(0, 0);
    assert_int_equal(conn_echo(&c, EPOLLIN | EPOLLRDHUP, &io), 0);
    assert_echoed(30);
}

static void test_errors_close_and_count(void **state)
{
    (void)state;
    script_read(-1, ECONNRESET);
    assert_int_equal(conn_echo(&c, EPOLLIN, &io), 0);
    assert_int_equal(st.err_reset, 1);

    setup(NULL);
    script_read(10, 0);
    script_send(-1, EPIPE);
    assert_int_equal(conn_echo(&c, EPOLLIN, &io), 0);
    assert_int_equal(st.err_reset, 1);

    setup(NULL);
    script_read(-1, EIO);
    assert_int_equal(conn_echo(&c, EPOLLIN, &io), 0);
    assert_int_equal(st.err_io, 1);

    setup(NULL);
    sockerr = ECONNREFUSED;
    assert_int_equal(conn_echo(&c, EPOLLIN | EPOLLERR, &io), 0);
    assert_int_equal(st.err_io, 1);
    assert_int_equal(ir, 0); /* no read after EPOLLERR */

    setup(NULL);
    script_read(10, 0);
    script_send(2, 0);
    conn_echo(&c, EPOLLIN, &io);
    script_send(-1, ETIMEDOUT); /* flushing pending output fails */
    assert_int_equal(conn_echo(&c, EPOLLOUT, &io), 0);
    assert_int_equal(st.err_reset, 1);
}

static void test_oom_closes(void **state)
{
    (void)state;
    script_read(1000, 0);
    script_send(10, 0);
    fail_malloc = true;
    assert_int_equal(conn_echo(&c, EPOLLIN, &io), 0);
    assert_int_equal(st.err_nomem, 1);
    assert_int_equal(obuf_len(&c.out), 0);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_simple_echo),
        T(test_eintr_retried),
        T(test_eagain_is_no_more),
        T(test_short_write_keeps_the_rest),
        T(test_new_input_queues_behind_pending),
        T(test_backpressure_caps_pending),
        T(test_read_budget),
        T(test_half_close_echoes_all_then_closes),
        T(test_rdhup_reads_to_eof_at_once),
        T(test_errors_close_and_count),
        T(test_oom_closes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
