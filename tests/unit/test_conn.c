/* Unit tests of conn_echo: EINTR, EAGAIN, short writes, backpressure, half-close, errors and OOM,
 * with read(2), send(2), getsockopt(2) and malloc faked (mock_sys.c). */
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
#include "mock_sys.h"

static struct conn c;
static struct worker_stats st;
static char rbuf[1024];
static struct conn_io io = {
    .buf = rbuf, .bufsize = sizeof(rbuf), .max_pending = 1 << 20, .st = &st};

static int setup(void **state)
{
    (void)state;
    mock_reset();
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
    assert_int_equal(mock.in_off, n);
    assert_int_equal(mock.out_len, n);
    assert_memory_equal(mock.out, mock.in, n);
}

static void test_simple_echo(void **state)
{
    (void)state;
    mock_read(100, 0);
    assert_int_equal(conn_echo(&c, EPOLLIN, &io), EPOLLIN | EPOLLRDHUP);
    assert_echoed(100);
    assert_int_equal(mock.ir, 1); /* a short read means drained: no second read */
    assert_int_equal(st.reads, 1);
    assert_int_equal(st.bytes_in, 100);
    assert_int_equal(st.bytes_out, 100);
}

static void test_eintr_retried(void **state)
{
    (void)state;
    mock_read(-1, EINTR);
    mock_read(50, 0);
    mock_send(-1, EINTR);
    assert_int_equal(conn_echo(&c, EPOLLIN, &io), EPOLLIN | EPOLLRDHUP);
    assert_echoed(50);
}

static void test_eagain_is_no_more(void **state)
{
    (void)state;
    mock_read(-1, EAGAIN);
    assert_int_equal(conn_echo(&c, EPOLLIN, &io), EPOLLIN | EPOLLRDHUP);
    assert_echoed(0);
    assert_int_equal(st.err_io + st.err_reset, 0);
}

static void test_short_write_keeps_the_rest(void **state)
{
    (void)state;
    mock_read(1000, 0);
    mock_send(300, 0);
    assert_int_equal(conn_echo(&c, EPOLLIN, &io), EPOLLIN | EPOLLRDHUP | EPOLLOUT);
    assert_int_equal(obuf_len(&c.out), 700);
    assert_int_equal(st.short_writes, 1);
    /* The socket drains: the rest goes out, then reading goes on. */
    mock_read(-1, EAGAIN);
    assert_int_equal(conn_echo(&c, EPOLLOUT, &io), EPOLLIN | EPOLLRDHUP);
    assert_int_equal(obuf_len(&c.out), 0);
    assert_null(c.out.data);
    assert_echoed(1000);
}

static void test_new_input_queues_behind_pending(void **state)
{
    (void)state;
    mock_read(500, 0);
    mock_send(100, 0);
    conn_echo(&c, EPOLLIN, &io);
    /* Still blocked on output; more input arrives: it must go after the pending bytes. */
    mock_send(-1, EAGAIN); /* flush attempt */
    mock_read(200, 0);
    assert_int_equal(conn_echo(&c, EPOLLIN | EPOLLOUT, &io), EPOLLIN | EPOLLRDHUP | EPOLLOUT);
    assert_int_equal(obuf_len(&c.out), 600);
    mock_read(-1, EAGAIN);
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
        mock_read(1024, 0);
    mock_send(-1, EAGAIN);
    assert_int_equal(conn_echo(&c, EPOLLIN, &io), EPOLLOUT);
    /* Exactly the cap, and the last read asked only for the room left. */
    assert_int_equal(obuf_len(&c.out), 2500);
    assert_int_equal(mock.ir, 3);
    assert_int_equal(mock.read_asks[2], 2500 - 2048);
    assert_int_equal(st.paused, 1);
    /* At the cap, an event that still cannot write reads nothing. */
    reads = mock.ir;
    mock_send(-1, EAGAIN);
    assert_int_equal(conn_echo(&c, EPOLLOUT, &io), EPOLLOUT);
    assert_int_equal(mock.ir, reads);
    /* Part drains: reading resumes only into the room made. */
    mock_send(1000, 0);
    mock_send(-1, EAGAIN);
    assert_int_equal(conn_echo(&c, EPOLLOUT, &io), EPOLLOUT);
    assert_int_equal(mock.read_asks[reads], 1000);
    assert_int_equal(obuf_len(&c.out), 2500);
    /* The peer drains all: everything comes back in order. */
    mock.nr = mock.ir; /* the peer stops sending */
    assert_int_equal(conn_echo(&c, EPOLLOUT, &io), EPOLLIN | EPOLLRDHUP);
    assert_echoed(3500);
}

static void test_read_budget(void **state)
{
    (void)state;
    for (int i = 0; i < 10; i++)
        mock_read(1024, 0); /* a fast sender: every read fills the buffer */
    assert_int_equal(conn_echo(&c, EPOLLIN, &io), EPOLLIN | EPOLLRDHUP);
    assert_int_equal(mock.ir, CONN_READS_PER_EVENT);
    assert_echoed(CONN_READS_PER_EVENT * 1024);
}

static void test_half_close_echoes_all_then_closes(void **state)
{
    (void)state;
    mock_read(500, 0);
    mock_send(100, 0);
    mock_read(0, 0); /* FIN */
    assert_int_equal(conn_echo(&c, EPOLLIN | EPOLLRDHUP, &io), EPOLLOUT);
    assert_true(c.flags & CONN_RDCLOSED);
    mock_send(150, 0);
    mock_send(-1, EAGAIN);
    assert_int_equal(conn_echo(&c, EPOLLOUT, &io), EPOLLOUT);
    assert_int_equal(obuf_len(&c.out), 250);
    assert_int_equal(conn_echo(&c, EPOLLOUT, &io), 0); /* all out: close */
    assert_echoed(500);
}

static void test_rdhup_reads_to_eof_at_once(void **state)
{
    (void)state;
    mock_read(30, 0);
    mock_read(0, 0);
    assert_int_equal(conn_echo(&c, EPOLLIN | EPOLLRDHUP, &io), 0);
    assert_echoed(30);
}

static void test_errors_close_and_count(void **state)
{
    (void)state;
    mock_read(-1, ECONNRESET);
    assert_int_equal(conn_echo(&c, EPOLLIN, &io), 0);
    assert_int_equal(st.err_reset, 1);

    setup(NULL);
    mock_read(10, 0);
    mock_send(-1, EPIPE);
    assert_int_equal(conn_echo(&c, EPOLLIN, &io), 0);
    assert_int_equal(st.err_reset, 1);

    setup(NULL);
    mock_read(-1, EIO);
    assert_int_equal(conn_echo(&c, EPOLLIN, &io), 0);
    assert_int_equal(st.err_io, 1);

    setup(NULL);
    mock.sockerr = ECONNREFUSED;
    assert_int_equal(conn_echo(&c, EPOLLIN | EPOLLERR, &io), 0);
    assert_int_equal(st.err_io, 1);
    assert_int_equal(mock.ir, 0); /* no read after EPOLLERR */

    setup(NULL);
    mock_read(10, 0);
    mock_send(2, 0);
    conn_echo(&c, EPOLLIN, &io);
    mock_send(-1, ETIMEDOUT); /* flushing pending output fails */
    assert_int_equal(conn_echo(&c, EPOLLOUT, &io), 0);
    assert_int_equal(st.err_reset, 1);
}

static void test_oom_closes(void **state)
{
    (void)state;
    mock_read(1000, 0);
    mock_send(10, 0);
    mock.fail_malloc = true;
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
