/* lconn: a connection served by a Lua script: framing, callbacks, replies. */
#include "script.h"
#include "tls.h"

#include <errno.h>
#include <linux/sockios.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define OUT_KEEP (1u << 20) /* a worker's reply buffer shrinks back after a reply this big */

static enum conn_why rc_reason(enum script_rc rc)
{
    switch (rc) {
    case SCRIPT_CLOSE:
        return CONN_WHY_CLOSED;
    case SCRIPT_TIMEOUT:
        return CONN_WHY_TIMEOUT;
    case SCRIPT_NOMEM:
        return CONN_WHY_MEMORY;
    default:
        return CONN_WHY_ERROR;
    }
}

/* Writes the replies gathered in out: straight to the socket when nothing is pending, the rest
 * kept in c->out. Returns 0 or -errno (-ENOMEM: could not keep the rest). */
static int emit(struct lconn *lc, struct outbuf *out, const struct conn_io *io)
{
    struct conn *c = &lc->c;
    size_t off = 0;
    int rc = 0;

    if (!out->len)
        return 0;
    if (obuf_len(&c->out) == 0) {
        ssize_t w = conn_write_some(c, out->data, out->len);

        if (w < 0) {
            rc = (int)w;
            goto done;
        }
        STAT_ADD(io->st, bytes_out, (uint64_t)w);
        off = (size_t)w;
        if (off < out->len)
            STAT_ADD(io->st, short_writes, 1);
    }
    if (off < out->len) {
        if (obuf_len(&c->out) + out->len - off > UINT32_MAX ||
            obuf_append(&c->out, out->data + off, out->len - off) < 0) {
            STAT_ADD(io->st, err_nomem, 1);
            rc = -ENOMEM;
        }
    }
done:
    out->len = 0;
    if (out->cap > OUT_KEEP) {
        free(out->data);
        out->data = NULL;
        out->cap = 0;
    }
    return rc;
}

/* emit(), and on failure the reason the connection ends. */
static bool emit_ok(struct lconn *lc, struct outbuf *out, const struct conn_io *io,
                    enum conn_why *why)
{
    int rc = emit(lc, out, io);

    if (rc == 0)
        return true;
    if (rc == -ENOMEM) {
        *why = CONN_WHY_MEMORY;
    } else {
        conn_count_error(-rc, io);
        *why = conn_why_io(-rc);
    }
    return false;
}

/* Runs on_data for each whole frame of p[0, n). Replies gathered past --max-pending are written
 * first; while the socket leaves that much pending, the remaining frames wait. Returns the
 * bytes used; *why is set when the connection must end (CONN_WHY_CLOSED included). */
static size_t run_frames(struct lconn *lc, const char *p, size_t n, size_t *scanned,
                         const struct conn_io *io, struct script *sc, struct outbuf *out,
                         enum conn_why *why)
{
    size_t used = 0;

    while (used < n) {
        const char *frame;
        size_t flen;
        long r;
        enum script_rc rc;

        if (obuf_len(&lc->c.out) + out->len >= io->max_pending &&
            (!emit_ok(lc, out, io, why) || obuf_len(&lc->c.out) >= io->max_pending))
            break;
        r = frame_next(&lc->fr, p + used, n - used, scanned, &frame, &flen);
        if (r == 0)
            break;
        if (r < 0) {
            STAT_ADD(io->st, frames_big, 1);
            script_note(sc, &lc->sc, "framing", "a frame is over max_frame; connection closed");
            *why = CONN_WHY_FRAME_TOO_BIG;
            break;
        }
        used += (size_t)r;
        rc = script_on_data(sc, &lc->sc, frame, flen, out);
        if (rc != SCRIPT_OK) {
            *why = rc_reason(rc);
            break;
        }
    }
    return used;
}

/* Frames in lc->in (held back earlier, or the rest of a read). */
static void run_buffered(struct lconn *lc, const struct conn_io *io, struct script *sc,
                         struct outbuf *out, enum conn_why *why)
{
    size_t used;

    if (!obuf_len(&lc->in))
        return;
    used =
        run_frames(lc, lc->in.data + lc->in.off, obuf_len(&lc->in), &lc->scanned, io, sc, out, why);
    obuf_consume(&lc->in, used);
}

/* Lingering close (Apache's and nginx's). A script that closes a connection whose peer is still
 * sending (pipelined requests, a request body it did not want) must not close() the socket at
 * once: with unread input there the kernel answers with a reset and drops whatever of the
 * replies it has not sent yet, so the peer would lose them, against conn:close()'s promise of
 * every byte. So:
 *   - while replies are still pending here, input is read and dropped (a peer that writes its
 *     whole request before reading would otherwise wait for us while we wait for it);
 *   - then the replies are followed by a FIN (shutdown SHUT_WR), and input is read and dropped
 *     until the peer's FIN, or an error, or LINGER_MAX bytes once every reply byte has been
 *     acknowledged (a peer that keeps sending loses nothing of ours then), or LINGER_MS after
 *     the FIN (--idle-timeout if shorter: main's sweeper, idle.c), however the peer behaves;
 *     a window the sweeper starts again each time it finds the peer has taken more of the
 *     reply, up to LINGER_TOTAL_MS after the FIN.
 * Only when a reset could cost something: a peer that sent nothing more and has every reply
 * acknowledged gets its close at once. */
#define LINGER_MAX (1u << 20)

static int unacked(int fd)
{
    int n = 0;

    return ioctl(fd, SIOCOUTQ, &n) == 0 ? n : 0;
}

/* Whether a close now could cost the peer replies: it is still sending (bytes buffered here or
 * waiting in the socket), or some of the replies are not yet acknowledged (a byte arriving after
 * close() is answered with a reset too). */
static bool close_would_reset(const struct lconn *lc)
{
    char b;

    return obuf_len(&lc->in) || tls_has_input(&lc->c) ||
           recv(lc->c.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) > 0 || unacked(lc->c.fd) > 0;
}

/* Reads and drops what the peer sent, at most CONN_READS_PER_EVENT reads. Returns 0 (the
 * socket is empty for now, or its end was read: CONN_RDCLOSED) or -errno. */
static int drop_input(struct lconn *lc, const struct conn_io *io)
{
    struct conn *c = &lc->c;

    for (int i = 0; i < CONN_READS_PER_EVENT && !(c->flags & CONN_RDCLOSED); i++) {
        /* TLS, lingering: after its close_notify what comes is dropped unread */
        ssize_t n = c->phase == CONN_PH_LINGER ? conn_read_raw(c, io->buf, io->bufsize)
                                               : conn_read_some(c, io->buf, io->bufsize);

        if (n <= 0)
            return (int)n;
        STAT_ADD(io->st, bytes_in, (uint64_t)n);
        lc->lingered += (size_t)n;
    }
    return 0;
}

/* An event of a lingering connection. Returns the events to re-arm with, or 0 (*end set). */
static uint32_t linger(struct lconn *lc, uint32_t events, const struct conn_io *io,
                       enum conn_why *end)
{
    struct conn *c = &lc->c;
    int rc;

    *end = CONN_WHY_CLOSED; /* the script's close, however the lingering ends */
    if (events & EPOLLERR) {
        conn_sock_error(c, io);
        return 0;
    }
    if ((rc = drop_input(lc, io)) < 0) {
        conn_count_error(-rc, io);
        return 0;
    }
    if (c->flags & CONN_RDCLOSED)
        return 0; /* the peer's FIN: everything it sent was read, the close sends no reset */
    if (lc->lingered > LINGER_MAX && unacked(c->fd) == 0)
        return 0; /* it keeps sending, and has every byte of ours */
    return EPOLLIN | EPOLLRDHUP;
}

static uint32_t linger_start(struct lconn *lc, uint32_t events, const struct conn_io *io,
                             enum conn_why *end)
{
    struct conn *c = &lc->c;
    struct timespec ts;

    tls_notify(c); /* TLS: its close_notify goes before the FIN */
    if (shutdown(c->fd, SHUT_WR) < 0) {
        *end = CONN_WHY_CLOSED;
        return 0;
    }
    c->phase = CONN_PH_LINGER;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    lc->linger_since = lc->linger_ms = ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
    lc->linger_outq = unacked(c->fd);
    STAT_ADD(io->st, lingered, 1);
    obuf_free(&lc->in); /* frames after the close: never run */
    lc->scanned = 0;
    return linger(lc, events | EPOLLIN, io, end);
}

void lconn_release(struct lconn *lc)
{
    obuf_free(&lc->in);
    script_conn_release(&lc->sc);
}

/* Ends the event: replies to earlier requests go out if the socket takes them now (not after a
 * reset or an I/O error); conn_close then tells the script why the connection ends. */
static uint32_t finish(struct lconn *lc, struct outbuf *out, const struct conn_io *io,
                       enum conn_why why, enum conn_why *end)
{
    out->len = 0;
    if (obuf_len(&lc->c.out) && why != CONN_WHY_RESET && why != CONN_WHY_IO_ERROR)
        conn_flush(&lc->c, io);
    *end = why;
    return 0;
}

/* EPOLLERR: the socket's error ends the connection. */
static uint32_t failed(struct lconn *lc, struct outbuf *out, const struct conn_io *io,
                       enum conn_why *end)
{
    return finish(lc, out, io, conn_why_io(conn_sock_error(&lc->c, io)), end);
}

/* Writes what is pending. Returns CONN_WHY_NONE, or why the connection ends (the write failed). */
static enum conn_why flush(struct conn *c, const struct conn_io *io)
{
    int rc = obuf_len(&c->out) ? conn_flush(c, io) : 0;

    if (rc == 0)
        return CONN_WHY_NONE;
    conn_count_error(-rc, io);
    return conn_why_io(-rc);
}

/* The first event (CONN_PH_NEW): the framing is fixed and on_connect runs. Returns
 * CONN_WHY_NONE, or why on_connect ends the connection. */
static enum conn_why start(struct lconn *lc, struct script *sc, struct outbuf *out)
{
    enum script_rc r;

    lc->c.phase = CONN_PH_SERVING;
    lc->sc.ssl = lc->c.ssl; /* the handshake, if any, finished before this first event */
    lc->fr = *script_framing(sc);
    r = script_on_connect(sc, &lc->sc, out);
    return r == SCRIPT_OK ? CONN_WHY_NONE : rc_reason(r);
}

/* The frames of the n bytes just read into io->buf: after those held in lc->in, or straight
 * from the buffer, what is left of them kept in lc->in. */
static void take(struct lconn *lc, size_t n, const struct conn_io *io, struct script *sc,
                 struct outbuf *out, enum conn_why *why)
{
    size_t scanned = 0, used;

    if (obuf_len(&lc->in)) {
        if (obuf_append(&lc->in, io->buf, n) < 0) {
            STAT_ADD(io->st, err_nomem, 1);
            *why = CONN_WHY_MEMORY;
        } else {
            run_buffered(lc, io, sc, out, why);
        }
        return;
    }
    used = run_frames(lc, io->buf, n, &scanned, io, sc, out, why);
    if (!*why && used < n) {
        if (obuf_append(&lc->in, io->buf + used, n - used) < 0) {
            STAT_ADD(io->st, err_nomem, 1);
            *why = CONN_WHY_MEMORY;
        }
        lc->scanned = scanned; /* of the bytes now at the start of lc->in */
    }
}

/* Reads requests and runs their frames: at most CONN_READS_PER_EVENT reads, while nothing ends
 * the connection (*why), its input lasts and its replies stay under --max-pending. Returns false
 * when a read or a write failed (*why set): the event ends there. */
static bool read_requests(struct lconn *lc, uint32_t events, const struct conn_io *io,
                          struct script *sc, struct outbuf *out, enum conn_why *why)
{
    struct conn *c = &lc->c;

    /* Only EPOLLOUT (on_connect first, or a flush): the re-arm reports input when it comes. */
    /* TLS: plaintext it holds already, or a read that waited for room, is input too */
    if (tls_has_pending(c) || (c->flags & CONN_TLS_WOUT))
        events |= EPOLLIN;
    for (int i = 0; i < CONN_READS_PER_EVENT && !*why &&
                    (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP)) && !(c->flags & CONN_RDCLOSED);
         i++) {
        size_t want = io->bufsize;
        ssize_t n;

        if (obuf_len(&c->out) + out->len >= io->max_pending)
            break; /* at the cap: no more requests until the peer reads its replies */
        if (lc->fr.kind == FRAME_RAW && want > lc->fr.max_frame)
            want = lc->fr.max_frame;
        n = conn_read_some(c, io->buf, want);
        if (n < 0) {
            conn_count_error((int)-n, io);
            *why = conn_why_io((int)-n);
            return false;
        }
        if (n == 0)
            break; /* nothing now, or the end of input (CONN_RDCLOSED) */
        STAT_ADD(io->st, reads, 1);
        STAT_ADD(io->st, bytes_in, (uint64_t)n);
        take(lc, (size_t)n, io, sc, out, why);
        if (!emit_ok(lc, out, io, why))
            return false;
        if (!(events & EPOLLRDHUP) && conn_drained(c, (size_t)n, want))
            break;
    }
    return true;
}

/* The peer's end of input: the whole frames left run now; a last line without its delimiter is
 * a line too. Anything else left is an incomplete frame the peer never finished. */
static void end_of_input(struct lconn *lc, const struct conn_io *io, struct script *sc,
                         struct outbuf *out, enum conn_why *why)
{
    size_t len;
    enum script_rc r;

    run_buffered(lc, io, sc, out, why);
    if (*why || lc->fr.kind != FRAME_LINE || !obuf_len(&lc->in) ||
        obuf_len(&lc->c.out) + out->len >= io->max_pending)
        return;
    len = obuf_len(&lc->in);
    if (len > lc->fr.max_frame) {
        STAT_ADD(io->st, frames_big, 1);
        *why = CONN_WHY_FRAME_TOO_BIG;
        return;
    }
    if (lc->fr.strip_cr && lc->in.data[lc->in.off + len - 1] == '\r')
        len--;
    r = script_on_data(sc, &lc->sc, lc->in.data + lc->in.off, len, out);
    obuf_consume(&lc->in, obuf_len(&lc->in));
    lc->scanned = 0;
    if (r != SCRIPT_OK)
        *why = rc_reason(r);
}

/* CONN_PH_CLOSING, after its writes: the replies go first, its input dropped meanwhile (the
 * script wants no more); then the close, or the lingering one when a close now could cost the
 * peer replies. */
static uint32_t wind_down(struct lconn *lc, uint32_t events, const struct conn_io *io,
                          struct outbuf *out, enum conn_why *end)
{
    struct conn *c = &lc->c;
    int rc;

    if (obuf_len(&c->out)) {
        if (c->flags & CONN_RDCLOSED)
            return EPOLLOUT; /* the peer's end came: nothing more to read */
        if ((rc = drop_input(lc, io)) < 0) {
            conn_count_error(-rc, io);
            return finish(lc, out, io, conn_why_io(-rc), end);
        }
        return c->flags & CONN_RDCLOSED ? EPOLLOUT : EPOLLOUT | EPOLLIN | EPOLLRDHUP;
    }
    if (!(c->flags & CONN_RDCLOSED) && close_would_reset(lc))
        return linger_start(lc, events, io, end);
    return finish(lc, out, io, CONN_WHY_CLOSED, end);
}

/* An event of a connection the script closed (CONN_PH_CLOSING). */
static uint32_t closing(struct lconn *lc, uint32_t events, const struct conn_io *io,
                        struct outbuf *out, enum conn_why *end)
{
    enum conn_why why;

    if (events & EPOLLERR)
        return failed(lc, out, io, end);
    if ((why = flush(&lc->c, io)))
        return finish(lc, out, io, why, end);
    return wind_down(lc, events, io, out, end);
}

/* An event of a connection being served (CONN_PH_SERVING): its pending replies go first, then
 * the frames held back, then what the socket has; then its re-arm or its end. why: set when
 * on_connect, just run, ended it. */
static uint32_t serve(struct lconn *lc, uint32_t events, const struct conn_io *io,
                      struct script *sc, struct outbuf *out, enum conn_why why, enum conn_why *end)
{
    struct conn *c = &lc->c;
    enum conn_why failed_write;

    if (events & EPOLLERR)
        return failed(lc, out, io, end);
    if ((failed_write = flush(c, io)))
        return finish(lc, out, io, failed_write, end);
    if (!why)
        run_buffered(lc, io, sc, out, &why);
    if (!emit_ok(lc, out, io, &why) || !read_requests(lc, events, io, sc, out, &why))
        return finish(lc, out, io, why, end);
    if ((c->flags & CONN_RDCLOSED) && !why && obuf_len(&c->out) + out->len < io->max_pending)
        end_of_input(lc, io, sc, out, &why);
    if (!emit_ok(lc, out, io, &why))
        return finish(lc, out, io, why, end);
    if (why == CONN_WHY_CLOSED) {
        c->phase = CONN_PH_CLOSING;
        return wind_down(lc, events, io, out, end);
    }
    if (why)
        return finish(lc, out, io, why, end);
    /* The peer's end of input: replies first. With nothing pending, every whole frame has run
     * (nothing held it back). */
    if (c->flags & CONN_RDCLOSED)
        return obuf_len(&c->out) ? EPOLLOUT : finish(lc, out, io, CONN_WHY_EOF, end);
    return conn_rearm_events(c, io);
}

uint32_t lconn_event(struct lconn *lc, uint32_t events, const struct conn_io *io, struct script *sc,
                     struct outbuf *out, enum conn_why *end)
{
    enum conn_why why = CONN_WHY_NONE;

    out->len = 0;
    switch (lc->c.phase) {
    case CONN_PH_NEW:
        if (events & EPOLLERR) /* the script has not seen it start: conn_close tells it nothing */
            return failed(lc, out, io, end);
        why = start(lc, sc, out);
        /* fall through */
    case CONN_PH_SERVING:
        return serve(lc, events, io, sc, out, why, end);
    case CONN_PH_CLOSING:
        return closing(lc, events, io, out, end);
    default: /* CONN_PH_LINGER (PROXY and WRCLOSED are the worker's) */
        return linger(lc, events, io, end);
    }
}
