/* Unit tests of lconn, a connection served by a Lua script, driven with a real script: over a
 * socketpair, or with read/send scripted (mock_sys.c: EINTR, EAGAIN, short writes, backpressure
 * at --max-pending, the script's close, oversized frames). memchr/memmem are counted through
 * -Wl,--wrap to see how often a partial line is scanned. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../src/pool.h" /* conn_close and the pool it updates */
#include "log.h"
#include "mock_sys.h"
#include "script.h" /* struct lconn */

static size_t scanned; /* bytes handed to memchr/memmem */

void *__real_memchr(const void *s, int c, size_t n);
void *__wrap_memchr(const void *s, int c, size_t n);
void *__wrap_memchr(const void *s, int c, size_t n)
{
    scanned += n;
    return __real_memchr(s, c, n);
}

void *__real_memmem(const void *h, size_t hl, const void *n, size_t nl);
void *__wrap_memmem(const void *h, size_t hl, const void *n, size_t nl);
void *__wrap_memmem(const void *h, size_t hl, const void *n, size_t nl)
{
    scanned += hl;
    return __real_memmem(h, hl, n, nl);
}

static char path[64];
static struct worker_stats st;

struct rig {
    struct script_env *e;
    struct script *sc;
    struct server srv; /* just what conn_close touches: the table, the counts, lua */
    struct worker w;   /* the owner: its script hears on_close */
    struct lconn *lc;
    int peer; /* the client's end */
    char *buf;
    struct conn_io io;
    struct outbuf out;
};

static void rig_open(struct rig *r, const char *text)
{
    struct script_opts o = {
        .path = path, .mem_cap = 64 << 20, .shared_bytes = 1 << 20, .max_output = 1 << 20};
    char err[512];
    int sv[2];
    FILE *f;

    memset(r, 0, sizeof(*r));
    if (!path[0]) {
        int fd;
        snprintf(path, sizeof(path), "/tmp/lfe-lconn-XXXXXX.lua");
        fd = mkstemps(path, 4);
        assert_true(fd >= 0);
        close(fd);
    }
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    r->e = script_env_new(&o, err, sizeof(err));
    if (!r->e)
        fail_msg("%s", err);
    r->sc = script_new(r->e, "0.0", &st, err, sizeof(err));
    assert_non_null(r->sc);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    r->peer = sv[1];
    r->srv.lua = r->e;
    r->srv.table_size = 4096;
    r->srv.table = calloc(r->srv.table_size, sizeof(*r->srv.table));
    r->srv.nacc = 0; /* no accept thread to kick */
    r->srv.live = 1;
    r->w.srv = &r->srv;
    r->w.script = r->sc;
    r->lc = lconn_of(conn_new(sv[0], CONN_LUA));
    assert_non_null(r->lc);
    r->lc->sc.id = 1;
    r->buf = malloc(64 * 1024);
    r->io =
        (struct conn_io){.buf = r->buf, .bufsize = 64 * 1024, .max_pending = 1 << 20, .st = &st};
}

static void rig_close(struct rig *r)
{
    if (r->lc)
        conn_close(&r->srv, NULL, &r->lc->c, CONN_WHY_EOF, &r->w);
    close(r->peer);
    free(r->srv.table);
    free(r->buf);
    free(r->out.data);
    script_free(r->sc);
    script_env_free(r->e);
}

/* One event; a connection that ends is closed as a worker would (conn_close: on_close). */
static uint32_t event(struct rig *r, uint32_t events)
{
    enum conn_why why = CONN_WHY_NONE;
    uint32_t want = lconn_event(r->lc, events, &r->io, r->sc, &r->out, &why);

    if (!want) {
        conn_close(&r->srv, NULL, &r->lc->c, why, &r->w);
        r->lc = NULL;
    }
    return want;
}

/* Defect 7: a partial line was rescanned from its start on every read, so a line without its
 * delimiter cost O(n^2): 1.85 s of worker CPU for 16 MiB. Now each byte is scanned about once. */
static void test_line_framing_not_quadratic(void **state)
{
    struct rig r;
    char chunk[64 * 1024], reply[64];
    size_t total = 8u << 20;
    ssize_t n;

    (void)state;
    rig_open(&r, "return {framing = 'line', max_frame = 16 * 1024 * 1024,\n"
                 "on_data = function(conn, f) return #f .. '\\n' end}\n");
    memset(chunk, 'x', sizeof(chunk));
    scanned = 0;
    for (size_t sent = 0; sent < total; sent += sizeof(chunk)) {
        assert_int_equal(write(r.peer, chunk, sizeof(chunk)), (ssize_t)sizeof(chunk));
        assert_int_not_equal(event(&r, EPOLLIN), 0);
    }
    assert_int_equal(write(r.peer, "\n", 1), 1);
    assert_int_not_equal(event(&r, EPOLLIN), 0);
    n = read(r.peer, reply, sizeof(reply) - 1);
    assert_true(n > 0);
    reply[n] = '\0';
    assert_string_equal(reply, "8388608\n");
    /* quadratic: ~total^2 / (2 * 64 KiB) = 512 MiB scanned; linear: about total */
    if (scanned > 2 * total)
        fail_msg("%zu bytes scanned to frame one %zu-byte line", scanned, total);
    rig_close(&r);
}

/* A multi-byte delimiter split across reads is still found where the last scan stopped. */
static void test_line_delimiter_across_reads(void **state)
{
    struct rig r;
    char reply[64];
    ssize_t n;

    (void)state;
    rig_open(&r, "return {framing = 'line', delimiter = '\\r\\n\\r\\n',\n"
                 "on_data = function(conn, f) return '[' .. f .. ']' end}\n");
    assert_int_equal(write(r.peer, "head\r\n", 6), 6);
    assert_int_not_equal(event(&r, EPOLLIN), 0);
    assert_int_equal(write(r.peer, "\r", 1), 1);
    assert_int_not_equal(event(&r, EPOLLIN), 0);
    assert_int_equal(write(r.peer, "\nnext\r\n\r\n", 9), 9);
    assert_int_not_equal(event(&r, EPOLLIN), 0);
    n = read(r.peer, reply, sizeof(reply) - 1);
    assert_true(n > 0);
    reply[n] = '\0';
    assert_string_equal(reply, "[head][next]");
    rig_close(&r);
}

static const char pairing[] =
    "return {framing = 'line',\n"
    "on_connect = function(conn) lfe.shared:incr('connect', 1, 0) end,\n"
    "on_data = function(conn, f)\n"
    "  return (lfe.shared:get('connect') or 0) .. ' ' .. (lfe.shared:get('close') or 0) .. '\\n'\n"
    "end,\n"
    "on_close = function(conn, why) lfe.shared:incr('close', 1, 0) end}\n";

/* A second connection in the same environment as r, for the probes below. */
static void rig_sibling(struct rig *r, struct rig *sib, uint64_t id)
{
    int sv[2];

    *sib = *r;
    sib->out = (struct outbuf){0};
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    sib->lc = lconn_of(conn_new(sv[0], CONN_LUA));
    sib->lc->sc.id = id;
    sib->peer = sv[1];
}

static void sibling_close(struct rig *sib)
{
    if (sib->lc)
        conn_close(&sib->srv, NULL, &sib->lc->c, CONN_WHY_EOF, &sib->w);
    close(sib->peer);
    free(sib->out.data);
}

/* Asks a fresh connection for the counters: "connects closes". */
static void probe(struct rig *r, uint64_t id, const char *want)
{
    struct rig p;
    char reply[64];
    ssize_t n;

    rig_sibling(r, &p, id);
    assert_int_equal(write(p.peer, "q\n", 2), 2);
    assert_int_not_equal(event(&p, EPOLLIN), 0);
    n = read(p.peer, reply, sizeof(reply) - 1);
    assert_true(n > 0);
    reply[n] = '\0';
    assert_string_equal(reply, want);
    sibling_close(&p);
}

/* Defect 9: the EPOLLERR path ran on_close for a connection whose on_connect never ran. */
static void test_on_close_without_on_connect_epollerr(void **state)
{
    struct rig r, started;

    (void)state;
    rig_open(&r, pairing);
    /* the first event the worker sees is an error: on_connect never ran, so no on_close */
    assert_int_equal(event(&r, EPOLLERR | EPOLLHUP), 0);
    probe(&r, 2, "1 0\n"); /* the probe's own on_connect; its close comes after */
    /* a connection that did start gets its on_close on an error */
    rig_sibling(&r, &started, 3);
    assert_int_equal(write(started.peer, "q\n", 2), 2);
    assert_int_not_equal(event(&started, EPOLLIN), 0);
    assert_int_equal(event(&started, EPOLLERR), 0);
    sibling_close(&started);
    probe(&r, 4, "3 2\n");
    rig_close(&r);
}

/* --- with read/send scripted (mock_sys) ------------------------------------------------------ */

static const char echo_lines[] = "return {framing = 'line', max_frame = 8,\n"
                                 "on_data = function(conn, f)\n"
                                 "  if f == 'bye' then conn:send('ciao\\n'); return false end\n"
                                 "  return '<' .. f .. '>\\n'\n"
                                 "end}\n";

/* A rig whose socket is fake: the peer's bytes are text, the fd a number nobody opened. */
static void mock_rig(struct rig *r, const char *script, const char *peer_says, size_t max_pending)
{
    rig_open(r, script);
    close(r->lc->c.fd);
    r->lc->c.fd = r->lc->sc.fd = 99;
    mock_reset();
    memcpy(mock.in, peer_says, strlen(peer_says));
    r->io.max_pending = max_pending;
}

static void mock_done(struct rig *r)
{
    if (r->lc) { /* fd 99 was never opened: free without the real close() mattering */
        r->lc->c.fd = dup(0);
    }
    rig_close(r);
    mock.on = false;
}

static void sent_is(const char *want)
{
    if (mock.out_len != strlen(want) || memcmp(mock.out, want, mock.out_len) != 0)
        fail_msg("want '%s', sent '%.*s'", want, (int)mock.out_len, (const char *)mock.out);
}

static void test_lconn_eintr_eagain(void **state)
{
    struct rig r;
    uint64_t errs = st.err_io + st.err_reset;

    (void)state;
    mock_rig(&r, echo_lines, "ab\ncd\n", 1 << 20);
    mock_read(-1, EINTR); /* retried */
    mock_read(3, 0);      /* a short read: drained, re-arm for input */
    assert_int_equal(event(&r, EPOLLIN), EPOLLIN | EPOLLRDHUP);
    sent_is("<ab>\n");
    mock_read(-1, EAGAIN); /* a spurious wake-up: nothing to read */
    assert_int_equal(event(&r, EPOLLIN), EPOLLIN | EPOLLRDHUP);
    mock_send(-1, EINTR); /* retried */
    mock_read(3, 0);
    assert_int_equal(event(&r, EPOLLIN), EPOLLIN | EPOLLRDHUP);
    sent_is("<ab>\n<cd>\n");
    assert_int_equal(st.err_io + st.err_reset, errs);
    mock_done(&r);
}

static void test_lconn_short_write_keeps_the_rest(void **state)
{
    struct rig r;

    (void)state;
    mock_rig(&r, echo_lines, "ab\ncd\n", 1 << 20);
    mock_read(6, 0);
    mock_send(3, 0); /* the socket takes 3 of 10 bytes */
    assert_int_equal(event(&r, EPOLLIN), EPOLLIN | EPOLLRDHUP | EPOLLOUT);
    assert_int_equal(obuf_len(&r.lc->c.out), 7);
    sent_is("<ab");
    assert_int_equal(event(&r, EPOLLOUT), EPOLLIN | EPOLLRDHUP);
    sent_is("<ab>\n<cd>\n");
    mock_done(&r);
}

/* At --max-pending the remaining frames wait (in lc->in) until the peer reads. */
static void test_lconn_backpressure_at_max_pending(void **state)
{
    struct rig r;
    uint64_t paused = st.paused;

    (void)state;
    mock_rig(&r, echo_lines, "a\nb\nc\nd\ne\n", 8);
    mock_read(10, 0);
    mock_send(0, EAGAIN); /* the peer reads nothing */
    mock_send(-1, EAGAIN);
    mock_send(-1, EAGAIN);
    assert_int_equal(event(&r, EPOLLIN), EPOLLOUT);
    assert_true(obuf_len(&r.lc->c.out) >= 8);
    assert_true(obuf_len(&r.lc->c.out) < 8 + 8); /* never more than the cap and one reply */
    assert_true(obuf_len(&r.lc->in) > 0);        /* frames held back */
    assert_int_equal(st.paused, paused + 1);
    /* the peer reads: every frame runs, in order */
    mock.nw = mock.iw;
    assert_int_equal(event(&r, EPOLLOUT), EPOLLIN | EPOLLRDHUP);
    sent_is("<a>\n<b>\n<c>\n<d>\n<e>\n");
    mock_done(&r);
}

/* The script's close: replies first (conn:send and what came before), then the end. */
static void test_lconn_script_close(void **state)
{
    struct rig r;
    enum conn_why why = CONN_WHY_NONE;

    (void)state;
    mock_rig(&r, echo_lines, "ab\nbye\nxx\n", 1 << 20);
    mock_read(10, 0);
    assert_int_equal(lconn_event(r.lc, EPOLLIN, &r.io, r.sc, &r.out, &why), 0);
    assert_int_equal(why, CONN_WHY_CLOSED);
    sent_is("<ab>\nciao\n"); /* nothing for the frame after "bye" */
    conn_close(&r.srv, NULL, &r.lc->c, why, &r.w);
    r.lc = NULL;
    mock_done(&r);
}

static void test_lconn_oversized_frame(void **state)
{
    struct rig r;
    enum conn_why why = CONN_WHY_NONE;
    uint64_t big = st.frames_big;

    (void)state;
    mock_rig(&r, echo_lines, "ok\n0123456789abcdef\n", 1 << 20);
    mock_read(20, 0);
    assert_int_equal(lconn_event(r.lc, EPOLLIN, &r.io, r.sc, &r.out, &why), 0);
    assert_int_equal(why, CONN_WHY_FRAME_TOO_BIG);
    assert_int_equal(st.frames_big, big + 1);
    sent_is("<ok>\n"); /* the frame before it was answered */
    conn_close(&r.srv, NULL, &r.lc->c, why, &r.w);
    r.lc = NULL;
    mock_done(&r);
}

static int cleanup(void **state)
{
    (void)state;
    if (path[0])
        unlink(path);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_line_framing_not_quadratic),
        cmocka_unit_test(test_line_delimiter_across_reads),
        cmocka_unit_test(test_on_close_without_on_connect_epollerr),
        cmocka_unit_test(test_lconn_eintr_eagain),
        cmocka_unit_test(test_lconn_short_write_keeps_the_rest),
        cmocka_unit_test(test_lconn_backpressure_at_max_pending),
        cmocka_unit_test(test_lconn_script_close),
        cmocka_unit_test(test_lconn_oversized_frame),
    };

    log_threshold = LOG_ERR;
    return cmocka_run_group_tests(tests, NULL, cleanup);
}
