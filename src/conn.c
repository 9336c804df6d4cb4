/* conn: a client connection's socket I/O, which every mode shares, and the byte-exact echo
 * state machine. Where a connection is created and destroyed is the pool's (pool.c). */
#include "conn.h"

#include "log.h"
#include "sysc.h"
#include "tls.h"

#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Counts a failed read/write by kind. A peer that resets or vanishes is ordinary churn, counted
 * only; anything else is worth a look: logged too, at most a line a second per thread (a flood
 * shows in the counter). */
void conn_count_error(int err, const struct conn_io *io)
{
    static __thread time_t logged;
    time_t now;

    if (err == ECONNRESET || err == EPIPE || err == ETIMEDOUT) {
        STAT_ADD(io->st, err_reset, 1);
        return;
    }
    STAT_ADD(io->st, err_io, 1);
    now = time(NULL);
    if (now != logged) {
        logged = now;
        log_warn("connection closed on an I/O error: %s",
                 err ? strerror(err) : "error event without an error code");
    }
}

/* Writes as much of p as the socket takes now. Returns bytes written (maybe 0), or -errno. */
ssize_t conn_send_some(int fd, const char *p, size_t n)
{
    for (;;) {
        /* MSG_NOSIGNAL: a peer that is gone is an EPIPE to handle, not a process-wide signal. */
        ssize_t w = sysc_send(fd, p, n, MSG_NOSIGNAL);

        if (w >= 0)
            return w;
        if (errno == EINTR)
            continue;
        return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
    }
}

ssize_t conn_write_some(struct conn *c, const char *p, size_t n)
{
    return c->ssl ? tls_write(c, p, n) : conn_send_some(c->fd, p, n);
}

/* Flushes pending output. Returns 0 (maybe still pending) or -errno. */
int conn_flush(struct conn *c, const struct conn_io *io)
{
    while (obuf_len(&c->out)) {
        ssize_t w = conn_write_some(c, c->out.data + c->out.off, obuf_len(&c->out));

        if (w < 0)
            return (int)w;
        if (w == 0)
            return 0;
        STAT_ADD(io->st, bytes_out, (uint64_t)w);
        obuf_consume(&c->out, (size_t)w);
    }
    return 0;
}

const char *conn_why_name(enum conn_why why)
{
    static const char *const names[] = {
        [CONN_WHY_NONE] = "",
        [CONN_WHY_EOF] = "eof",
        [CONN_WHY_CLOSED] = "closed",
        [CONN_WHY_ERROR] = "error",
        [CONN_WHY_TIMEOUT] = "timeout",
        [CONN_WHY_MEMORY] = "memory",
        [CONN_WHY_FRAME_TOO_BIG] = "frame_too_big",
        [CONN_WHY_RESET] = "reset",
        [CONN_WHY_IO_ERROR] = "io_error",
        [CONN_WHY_SHUTDOWN] = "shutdown",
        [CONN_WHY_IDLE] = "idle",
    };

    return (unsigned)why < sizeof(names) / sizeof(names[0]) ? names[why] : "";
}

enum conn_why conn_why_io(int err)
{
    return err == ECONNRESET || err == EPIPE || err == ETIMEDOUT ? CONN_WHY_RESET
                                                                 : CONN_WHY_IO_ERROR;
}

ssize_t conn_read_some(struct conn *c, char *buf, size_t n)
{
    return c->ssl ? tls_read(c, buf, n) : conn_read_raw(c, buf, n);
}

bool conn_drained(const struct conn *c, size_t n, size_t want)
{
    /* TLS returns a record a read; when it holds nothing more, the socket may (a read ahead
     * that filled its buffer), but the re-arm that follows reports it: EPOLL_CTL_MOD, and a
     * level-triggered solo group, look at the socket as it is */
    return c->ssl ? !tls_has_pending(c) : n < want;
}

ssize_t conn_read_raw(struct conn *c, char *buf, size_t n)
{
    for (;;) {
        ssize_t r = sysc_read(c->fd, buf, n);

        if (r > 0)
            return r;
        if (r == 0) {
            c->flags |= CONN_RDCLOSED;
            return 0;
        }
        if (errno == EINTR)
            continue;
        return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
    }
}

uint32_t conn_rearm_events(const struct conn *c, const struct conn_io *io)
{
    if (obuf_len(&c->out) >= io->max_pending) {
        STAT_ADD(io->st, paused, 1);
        return EPOLLOUT;
    }
    /* TLS: plaintext it holds already raises no event of the socket's, and a read that waits
     * to write its answer waits for room: either way EPOLLOUT brings the next event (at once
     * for the first, while the socket has room) */
    if (obuf_len(&c->out) || (c->ssl && ((c->flags & CONN_TLS_WOUT) || tls_has_pending(c))))
        return EPOLLIN | EPOLLRDHUP | EPOLLOUT;
    return EPOLLIN | EPOLLRDHUP;
}

int conn_sock_error(struct conn *c, const struct conn_io *io)
{
    int err = 0;
    socklen_t len = sizeof(err);

    getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
    conn_count_error(err, io);
    return err;
}

uint32_t conn_echo(struct conn *c, uint32_t events, const struct conn_io *io)
{
    int rc;

    if (events & EPOLLERR) {
        conn_sock_error(c, io);
        return 0;
    }
    if (obuf_len(&c->out)) {
        rc = conn_flush(c, io);
        if (rc < 0) {
            conn_count_error(-rc, io);
            return 0;
        }
    }
    for (int i = 0; i < CONN_READS_PER_EVENT && !(c->flags & CONN_RDCLOSED); i++) {
        size_t room = io->max_pending - obuf_len(&c->out);
        size_t want = room < io->bufsize ? room : io->bufsize;
        ssize_t n;

        if (want == 0)
            break; /* at the cap: stop reading until the peer drains its side */
        n = conn_read_some(c, io->buf, want);
        if (n < 0) {
            conn_count_error((int)-n, io);
            return 0;
        }
        if (n == 0)
            break; /* nothing now, or the end of input (CONN_RDCLOSED) */
        STAT_ADD(io->st, reads, 1);
        STAT_ADD(io->st, bytes_in, (uint64_t)n);
        if (obuf_len(&c->out) == 0) {
            /* The common case: straight from the read buffer to the socket, no copy kept. */
            ssize_t w = conn_write_some(c, io->buf, (size_t)n);

            if (w < 0) {
                conn_count_error((int)-w, io);
                return 0;
            }
            STAT_ADD(io->st, bytes_out, (uint64_t)w);
            if (w < n) {
                STAT_ADD(io->st, short_writes, 1);
                if (obuf_append(&c->out, io->buf + w, (size_t)(n - w)) < 0) {
                    STAT_ADD(io->st, err_nomem, 1);
                    return 0;
                }
            }
        } else if (obuf_append(&c->out, io->buf, (size_t)n) < 0) {
            STAT_ADD(io->st, err_nomem, 1);
            return 0;
        }
        /* Drained, unless the peer already sent FIN (EPOLLRDHUP): then one more read returns 0
         * now instead of after another epoll round trip. */
        if (!(events & EPOLLRDHUP) && conn_drained(c, (size_t)n, want))
            break;
    }
    if (c->flags & CONN_RDCLOSED) {
        /* Half-close: the peer gets every byte back, then the server closes. */
        return obuf_len(&c->out) ? EPOLLOUT : 0;
    }
    return conn_rearm_events(c, io);
}
