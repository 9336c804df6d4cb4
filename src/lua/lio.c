/* lio: the calls that wait, for Lua handlers: lfe.now, lfe.sleep, lfe.connect and its socket
 * (send, receive, settimeout, close, setkeepalive), in the shape of OpenResty's cosockets but
 * blocking: the case leader-follower exists for. A handler that waits holds its worker thread
 * and nothing else; the group's other workers go on taking events.
 *
 * DESIGN
 *
 * Deadlines. Every wait is one poll(2), on the socket (nothing for a sleep) and on the
 * environment's stop eventfd, until the earliest of: the call's own deadline (its socket's
 * timeout, --lua-io-timeout-ms by default), the callback's --lua-wall-timeout-ms deadline, and,
 * once a stop began, the drain deadline. The call's deadline fails the call ("timeout"); the
 * drain deadline fails it too ("stopping"), so a drain never waits on a backend longer than its
 * timeout; the wall deadline ends the whole callback like the CPU timeout does (a count hook that
 * fires at every instruction, so a pcall in the script cannot keep it alive).
 *
 * The CPU watchdog. While a call waits, sc->blocked makes the watchdog look away, and the time
 * waited is added to the callback's start: --lua-timeout-ms counts the time the callback ran,
 * --lua-wall-timeout-ms the time it took.
 *
 * Ownership. A socket belongs to the callback that made it (sc->seq); using it from another one
 * is an error, since the connection it served may be gone. The callback's sockets still open when
 * it returns are closed then, not at some later collection. sock:setkeepalive() gives the
 * descriptor to the worker's pool instead (LIO_POOL_PER_KEY per address, LIO_POOL_MAX in all,
 * the oldest going first); a callback holds SCRIPT_SOCKS_MAX open at most, so a worker's Lua
 * descriptors are bounded, and main keeps that many out of --max-conns (SCRIPT_FDS); lfe.connect
 * takes the most recent one for its address, after a non-blocking MSG_PEEK says the peer has not
 * closed it (or sent something unasked).
 *
 * Where. In on_connect and on_data only. on_close runs as a connection ends, also on main's
 * thread during a stop and for connections the idle sweep ended: it must not wait.
 */
#include "script_int.h"

#include "log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <lauxlib.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#define LIO_MT "lfepoll.sock"
#define LIO_POOL_PER_KEY 32
#define LIO_POOL_MAX SCRIPT_POOL_MAX
#define LIO_POOL_IDLE_MS 60000   /* a pooled socket idle longer is closed, not reused */
#define LIO_LINE_MAX (1u << 20)  /* receive("*l"): longest line */
#define LIO_RECV_MAX (64u << 20) /* receive(n), receive("*a"): most bytes */
#define LIO_MAX_SECONDS 86400.0  /* the longest timeout or sleep */

struct lsock {
    int fd;                       /* -1 once closed or pooled */
    uint64_t seq;                 /* the callback that made it */
    struct script *sc;            /* the worker's script */
    long timeout_ms;              /* per call */
    struct sockaddr_storage addr; /* the peer (the pool's key) */
    socklen_t alen;
    bool dirty; /* a call timed out mid-exchange: an answer may still come, never pool it */
    char *buf;  /* received, not yet returned: [off, len) */
    size_t off, len, cap;
    struct lsock *next, **pprev; /* sc->socks while open */
};

struct lio_pooled {
    struct sockaddr_storage addr;
    socklen_t alen;
    int fd;
    long since_ms;
};

enum wait_rc { W_READY, W_TIMEOUT, W_STOPPING };

static long mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
}

static struct lstate *upls(lua_State *L)
{
    return lua_touserdata(L, lua_upvalueindex(1));
}

/* The script running the current callback, which may wait; raises anywhere else. */
static struct script *waiting_allowed(lua_State *L, const char *what)
{
    struct script *sc = upls(L)->sc;

    if (!sc || !__atomic_load_n(&sc->in_call, __ATOMIC_RELAXED))
        luaL_error(L, "%s: only inside on_connect or on_data, not while the script loads", what);
    if (sc->in_close)
        luaL_error(L,
                   "%s is not allowed in on_close: it runs as a connection ends (at a stop "
                   "too) and must not wait",
                   what);
    return sc;
}

static void wall_hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    luaL_error(L, "callback waited past --lua-wall-timeout-ms");
}

/* Waits for ev on fd (fd < 0: for time only) until deadline (mono ms). */
static enum wait_rc wait_fd(lua_State *L, struct script *sc, int fd, short ev, long deadline)
{
    struct script_env *e = sc->env;
    long t0 = mono_ms(), now = t0;
    enum wait_rc rc;
    bool wall = false;

    if (sc->wait_hook)
        sc->wait_hook(sc->wait_arg); /* the rest of the worker's batch goes to the others */
    __atomic_store_n(&sc->blocked, 1, __ATOMIC_RELEASE);
    for (;;) {
        long stop = __atomic_load_n(&e->stop_deadline_ms, __ATOMIC_ACQUIRE), until = deadline;
        struct pollfd p[2] = {{.fd = fd, .events = ev},
                              {.fd = stop ? -1 : e->stopfd, .events = POLLIN}};
        int n;

        rc = W_TIMEOUT;
        wall = false;
        if (sc->wall_deadline_ms && sc->wall_deadline_ms <= until) {
            until = sc->wall_deadline_ms;
            wall = true;
        }
        if (stop && stop < until) {
            until = stop;
            rc = W_STOPPING;
            wall = false;
        }
        if (now >= until)
            break;
        /* Once a stop began its eventfd stays readable: look at the deadline every 10 ms
         * instead (a second signal brings it forward). */
        n = poll(p, 2, (int)(stop && until - now > 10 ? 10 : until - now));
        now = mono_ms();
        if (n > 0 && p[0].revents) {
            rc = W_READY;
            wall = false;
            break;
        }
        if (n < 0 && errno != EINTR) {
            rc = W_READY; /* let the socket call see its error */
            wall = false;
            break;
        }
    }
    __atomic_store_n(&sc->start_ms, __atomic_load_n(&sc->start_ms, __ATOMIC_RELAXED) + (now - t0),
                     __ATOMIC_RELAXED);
    __atomic_store_n(&sc->blocked, 0, __ATOMIC_RELEASE);
    if (wall) {
        /* The whole callback is over: a pcall in the script must not keep it going. */
        sc->wall_out = 1;
        sc->hooked = 1;
        script_hook_running(sc, wall_hook);
        luaL_error(L, "callback waited past --lua-wall-timeout-ms %d", e->o.wall_ms);
    }
    return rc;
}

/* seconds (a number >= 0, at most a day) as ms. */
static long seconds_ms(lua_State *L, int idx, const char *what)
{
    lua_Number s = luaL_checknumber(L, idx);

    if (!(s >= 0 && s <= LIO_MAX_SECONDS))
        luaL_error(L, "%s: %f is not a number of seconds from 0 to 86400", what, s);
    return (long)ceil(s * 1000);
}

static int l_now(lua_State *L)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    lua_pushnumber(L, (lua_Number)ts.tv_sec + (lua_Number)ts.tv_nsec / 1e9);
    return 1;
}

/* lfe.draining(): true once a stop began (SIGTERM, or --takeover handing the listeners on), so
 * that a handler can say so in its protocol (HTTP: Connection: close) and end the connection
 * between requests. */
static int l_draining(lua_State *L)
{
    const struct lstate *ls = upls(L);

    lua_pushboolean(L, ls->env && __atomic_load_n(&ls->env->stop_deadline_ms, __ATOMIC_ACQUIRE));
    return 1;
}

static int l_sleep(lua_State *L)
{
    struct script *sc = waiting_allowed(L, "lfe.sleep");
    long ms = seconds_ms(L, 1, "lfe.sleep");

    /* a millisecond more: mono_ms truncates, and the sleep must not end before S has passed
     * from now (woken near its end, by a signal or a stop's 10 ms slices, it ended up to 1 ms
     * early: "slept 0.499" for 0.5) */
    if (wait_fd(L, sc, -1, 0, mono_ms() + ms + (ms > 0)) == W_STOPPING) {
        lua_pushnil(L);
        lua_pushliteral(L, "stopping");
        return 2;
    }
    lua_pushboolean(L, 1);
    return 1;
}

/* --- the socket ------------------------------------------------------------------------------ */

static void sock_unlink(struct lsock *s)
{
    if (s->pprev) {
        s->sc->nsocks--;
        *s->pprev = s->next;
        if (s->next)
            s->next->pprev = s->pprev;
        s->next = NULL;
        s->pprev = NULL;
    }
}

/* s holds fd, open, on sc's list of the callback's sockets. */
static void sock_link(struct script *sc, struct lsock *s, int fd)
{
    s->fd = fd;
    sc->nsocks++;
    s->next = sc->socks;
    if (s->next)
        s->next->pprev = &s->next;
    s->pprev = &sc->socks;
    sc->socks = s;
}

static void sock_close(struct lsock *s)
{
    sock_unlink(s);
    if (s->fd >= 0)
        close(s->fd);
    s->fd = -1;
    if (s->cap)
        s->sc->ls->used -= s->cap; /* fill() counted it */
    free(s->buf);
    s->buf = NULL;
    s->off = s->len = s->cap = 0;
}

static int l_sock_gc(lua_State *L)
{
    sock_close(luaL_checkudata(L, 1, LIO_MT));
    return 0;
}

/* The socket at 1, checked to belong to this callback; NULL when it is closed. */
static struct lsock *check_sock(lua_State *L, const char *what)
{
    struct lsock *s = luaL_checkudata(L, 1, LIO_MT);
    struct script *sc = waiting_allowed(L, what);

    if (s->sc != sc || s->seq != __atomic_load_n(&sc->seq, __ATOMIC_RELAXED))
        luaL_error(L,
                   "%s: this socket belongs to another callback (it was closed when that one "
                   "returned); keep connections with sock:setkeepalive() and lfe.connect "
                   "again",
                   what);
    return s->fd >= 0 ? s : NULL;
}

/* A socket error as a script sees it: short, lower case for the usual ones. */
static const char *errstr(int err)
{
    switch (err) {
    case ECONNREFUSED:
        return "connection refused";
    case ECONNRESET:
    case EPIPE:
        return "closed";
    case ETIMEDOUT:
        return "timeout";
    case ENETUNREACH:
    case EHOSTUNREACH:
        return "unreachable";
    default:
        return strerror(err);
    }
}

static int fail(lua_State *L, const char *err)
{
    lua_pushnil(L);
    lua_pushstring(L, err);
    return 2;
}

/* An error other than a timeout: the socket is closed (its stream is in an unknown state). */
static int fail_errno(lua_State *L, struct lsock *s, int err)
{
    sock_close(s);
    return fail(L, errstr(err));
}

static const char *wait_err(enum wait_rc rc)
{
    return rc == W_STOPPING ? "stopping" : "timeout";
}

static bool same_addr(const struct sockaddr_storage *a, socklen_t al,
                      const struct sockaddr_storage *b, socklen_t bl)
{
    return al == bl && !memcmp(a, b, al);
}

/* A pooled descriptor for addr, alive, or -1. */
static int pool_take(struct script *sc, const struct sockaddr_storage *addr, socklen_t alen)
{
    long now = mono_ms();

    for (int i = sc->npool - 1; i >= 0; i--) {
        struct lio_pooled *p = &sc->pool[i];
        char c;
        ssize_t r;
        int fd;
        bool fresh;

        if (!same_addr(&p->addr, p->alen, addr, alen))
            continue;
        fd = p->fd;
        fresh = now - p->since_ms < LIO_POOL_IDLE_MS;
        memmove(p, p + 1, (size_t)(sc->npool - i - 1) * sizeof(*p));
        sc->npool--;
        r = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && fresh)
            return fd; /* idle, and open at the other end */
        close(fd);     /* closed by the peer, reset, sent something unasked, or idle too long */
    }
    return -1;
}

static void pool_put(struct script *sc, struct lsock *s)
{
    int same = 0, oldest_same = -1;

    if (!sc->pool && !(sc->pool = calloc(LIO_POOL_MAX, sizeof(*sc->pool)))) {
        sock_close(s);
        return;
    }
    for (int i = 0; i < sc->npool; i++)
        if (same_addr(&sc->pool[i].addr, sc->pool[i].alen, &s->addr, s->alen) && !same++)
            oldest_same = i;
    if (same >= LIO_POOL_PER_KEY || sc->npool == LIO_POOL_MAX) {
        int i = same >= LIO_POOL_PER_KEY ? oldest_same : 0; /* the oldest goes */

        close(sc->pool[i].fd);
        memmove(&sc->pool[i], &sc->pool[i + 1], (size_t)(sc->npool - i - 1) * sizeof(*sc->pool));
        sc->npool--;
    }
    sc->pool[sc->npool++] =
        (struct lio_pooled){.addr = s->addr, .alen = s->alen, .fd = s->fd, .since_ms = mono_ms()};
    sock_unlink(s);
    s->fd = -1;
}

/* host: a numeric IPv4 or IPv6 address (brackets allowed) or "localhost". */
static bool parse_host(const char *host, int port, struct sockaddr_storage *ss, socklen_t *len)
{
    struct sockaddr_in *in = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
    char h[INET6_ADDRSTRLEN];
    size_t n = strlen(host);

    memset(ss, 0, sizeof(*ss));
    if (!strcmp(host, "localhost"))
        host = "127.0.0.1";
    if (inet_pton(AF_INET, host, &in->sin_addr) == 1) {
        in->sin_family = AF_INET;
        in->sin_port = htons((uint16_t)port);
        *len = sizeof(*in);
        return true;
    }
    if (n >= 2 && host[0] == '[' && host[n - 1] == ']' && n - 2 < sizeof(h)) {
        memcpy(h, host + 1, n - 2);
        h[n - 2] = '\0';
        host = h;
    }
    if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        *len = sizeof(*in6);
        return true;
    }
    return false;
}

/* lfe.connect's options (argument 3: a table, or nothing): its connect timeout in ms, timeout
 * when none is given. Raises on an unknown option or a bad value. */
static long connect_timeout(lua_State *L, long timeout)
{
    if (lua_isnoneornil(L, 3))
        return timeout;
    luaL_checktype(L, 3, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, 3)) {
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";

        if (strcmp(k, "timeout"))
            return luaL_error(L, "lfe.connect: unknown option '%s' (the options: timeout)", k);
        if (lua_type(L, -1) != LUA_TNUMBER)
            return luaL_error(L, "lfe.connect: timeout must be a number of seconds, not a %s",
                              luaL_typename(L, -1));
        timeout = seconds_ms(L, lua_gettop(L), "lfe.connect: timeout");
        lua_pop(L, 1);
    }
    return timeout;
}

/* Pushes a socket object for addr, with no descriptor yet. Raises on memory: make it before
 * any descriptor. */
static struct lsock *push_sock(lua_State *L, struct script *sc, const struct sockaddr_storage *addr,
                               socklen_t alen)
{
    struct lsock *s = lua_newuserdatauv(L, sizeof(*s), 0);

    memset(s, 0, sizeof(*s));
    s->fd = -1;
    luaL_setmetatable(L, LIO_MT);
    s->sc = sc;
    s->seq = __atomic_load_n(&sc->seq, __ATOMIC_RELAXED);
    s->timeout_ms = sc->env->o.io_timeout_ms;
    s->addr = *addr;
    s->alen = alen;
    return s;
}

/* Connects s, at the top of the stack, to its address on a new descriptor, waiting at most
 * timeout ms. Returns 1 (s is the result), or 2 with nil and the error pushed and s closed. */
static int dial(lua_State *L, struct script *sc, struct lsock *s, long timeout)
{
    int fd, one = 1, err = 0;
    socklen_t el = sizeof(err);
    enum wait_rc rc;

    fd = socket(s->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return fail(L, errstr(errno));
    sock_link(sc, s, fd); /* from here the callback's end closes it, should the wait raise */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, (struct sockaddr *)&s->addr, s->alen) < 0 && errno != EINPROGRESS) {
        err = errno;
        sock_close(s);
        return fail(L, errstr(err));
    }
    rc = wait_fd(L, sc, fd, POLLOUT, mono_ms() + timeout);
    if (rc != W_READY) {
        sock_close(s);
        return fail(L, wait_err(rc));
    }
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
        err = errno;
    if (err) {
        sock_close(s);
        return fail(L, errstr(err));
    }
    return 1;
}

static int l_connect(lua_State *L)
{
    struct script *sc = waiting_allowed(L, "lfe.connect");
    size_t hlen;
    const char *host = luaL_checklstring(L, 1, &hlen);
    lua_Integer port = luaL_checkinteger(L, 2);
    struct sockaddr_storage ss;
    socklen_t alen;
    struct lsock *s;
    long timeout;
    int fd;

    if (port < 1 || port > 65535)
        return luaL_error(L, "lfe.connect: port %I is out of range (1 to 65535)", port);
    timeout = connect_timeout(L, sc->env->o.io_timeout_ms);
    if (strlen(host) != hlen || !parse_host(host, (int)port, &ss, &alen))
        return luaL_error(L,
                          "lfe.connect: '%s' is not a numeric IPv4 or IPv6 address or localhost "
                          "(a name lookup would block the worker)",
                          host);
    s = push_sock(L, sc, &ss, alen);
    if (sc->nsocks >= SCRIPT_SOCKS_MAX) {
        lua_pushnil(L);
        lua_pushfstring(L,
                        "too many sockets: a callback holds at most %d open; close one or give "
                        "it back with setkeepalive()",
                        SCRIPT_SOCKS_MAX);
        return 2;
    }
    fd = pool_take(sc, &ss, alen);
    if (fd >= 0) {
        sock_link(sc, s, fd);
        return 1;
    }
    return dial(L, sc, s, timeout);
}

static int l_sock_send(lua_State *L)
{
    struct lsock *s = check_sock(L, "sock:send");
    size_t len, done = 0;
    const char *p = luaL_checklstring(L, 2, &len);
    long deadline;

    if (!s)
        return fail(L, "closed");
    deadline = mono_ms() + s->timeout_ms;
    while (done < len) {
        ssize_t w = send(s->fd, p + done, len - done, MSG_NOSIGNAL | MSG_DONTWAIT);
        enum wait_rc rc;

        if (w > 0) {
            done += (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return fail_errno(L, s, errno);
        if ((rc = wait_fd(L, s->sc, s->fd, POLLOUT, deadline)) != W_READY) {
            s->dirty = true;
            return fail(L, wait_err(rc));
        }
    }
    lua_pushinteger(L, (lua_Integer)len);
    return 1;
}

/* Reads what the socket has into s->buf (at most room more). 1 read, 0 EOF, -errno; -ENOMEM
 * also where the buffer would take the state past --lua-mem-mb: a receive buffer is the
 * script's memory as much as the string it becomes, and is counted in ls->used (until
 * sock_close), so a backend cannot push a worker past its cap 64 MiB at a time. */
static int fill(lua_State *L, struct lsock *s, size_t room)
{
    ssize_t r;

    if (s->off) { /* what was returned goes: the buffer holds only what is unread */
        memmove(s->buf, s->buf + s->off, s->len - s->off);
        s->len -= s->off;
        s->off = 0;
    }
    if (s->cap - s->len < room) {
        size_t cap = s->cap ? s->cap : 4096;
        char *b;

        struct lstate *ls = s->sc->ls;

        while (cap - s->len < room)
            cap *= 2;
        if (ls->cap && ls->used - s->cap + cap > ls->cap) {
            lua_gc(L, LUA_GCCOLLECT); /* garbage first, as the allocator's own failure does */
            if (ls->used - s->cap + cap > ls->cap)
                return -ENOMEM;
        }
        if (!(b = realloc(s->buf, cap)))
            return -ENOMEM;
        ls->used = ls->used - s->cap + cap;
        s->buf = b;
        s->cap = cap;
    }
    do
        r = recv(s->fd, s->buf + s->len, room, MSG_DONTWAIT);
    while (r < 0 && errno == EINTR);
    if (r > 0) {
        s->len += (size_t)r;
        return 1;
    }
    return r == 0 ? 0 : -errno;
}

/* Pushes n bytes from the buffer, consumed. */
static void take(lua_State *L, struct lsock *s, size_t n, size_t skip)
{
    if (n)
        lua_pushlstring(L, s->buf + s->off, n);
    else
        lua_pushliteral(L, "");
    s->off += n + skip;
}

/* The partial result of a failed receive: what the buffer held, taken out of it (as
 * OpenResty does: a retry gets what comes after). */
static void partial(lua_State *L, struct lsock *s, size_t have)
{
    take(L, s, have, 0);
}

enum recv_mode { RECV_BYTES, RECV_LINE, RECV_ALL };

/* sock:receive's pattern (argument 2): a byte count (into *want), '*l' (the default) or '*a'.
 * Raises on anything else. */
static enum recv_mode receive_pattern(lua_State *L, size_t *want)
{
    if (lua_type(L, 2) == LUA_TNUMBER) {
        lua_Integer n = luaL_checkinteger(L, 2);

        if (n < 0 || n > (lua_Integer)LIO_RECV_MAX)
            return luaL_error(L, "sock:receive: %I bytes is out of range (0 to %d)", n,
                              (int)LIO_RECV_MAX);
        *want = (size_t)n;
        return RECV_BYTES;
    }
    if (!lua_isnoneornil(L, 2)) {
        const char *pat = luaL_checkstring(L, 2);

        if (!strcmp(pat, "*a") || !strcmp(pat, "a"))
            return RECV_ALL;
        if (strcmp(pat, "*l") && strcmp(pat, "l"))
            return luaL_error(L,
                              "sock:receive: '%s' is not a pattern; use a byte count, '*l' "
                              "(a line) or '*a' (everything until the peer closes)",
                              pat);
    }
    return RECV_LINE;
}

/* Answers the receive from what is buffered, if it can: pushes the result (or, past a bound,
 * closes the socket and pushes nil, the error) and returns its count; 0 when more bytes are
 * needed. */
static int receive_buffered(lua_State *L, struct lsock *s, enum recv_mode mode, size_t want)
{
    size_t have = s->len - s->off;

    if (mode == RECV_BYTES && have >= want) {
        take(L, s, want, 0);
        return 1;
    }
    if (mode == RECV_LINE) {
        char *nl = have ? memchr(s->buf + s->off, '\n', have) : NULL;

        if (nl) {
            size_t n = (size_t)(nl - (s->buf + s->off));

            take(L, s, n && nl[-1] == '\r' ? n - 1 : n, n && nl[-1] == '\r' ? 2 : 1);
            return 1;
        }
        if (have > LIO_LINE_MAX) {
            sock_close(s);
            return fail(L, "line too long");
        }
    }
    if (mode == RECV_ALL && have > LIO_RECV_MAX) {
        sock_close(s);
        return fail(L, "too much data");
    }
    return 0;
}

/* The receive's read returned r, the end of the stream (0) or an error (-errno) other than
 * EAGAIN: '*a' returns what came before the end; otherwise nil, the error and the partial
 * result. The socket is closed either way. */
static int receive_ended(lua_State *L, struct lsock *s, enum recv_mode mode, size_t have, int r)
{
    if (r == -ENOMEM) {
        /* no room for the partial result either: it goes with the socket */
        sock_close(s);
        return fail(L, "not enough memory (the receive buffer counts in --lua-mem-mb)");
    }
    if (r == 0 && mode == RECV_ALL) {
        take(L, s, have, 0);
        return 1;
    }
    lua_pushnil(L);
    lua_pushstring(L, r == 0 ? "closed" : errstr(-r));
    partial(L, s, have);
    sock_close(s);
    return 3;
}

static int l_sock_receive(lua_State *L)
{
    struct lsock *s = check_sock(L, "sock:receive");
    size_t want = 0;
    enum recv_mode mode = receive_pattern(L, &want);
    long deadline;

    if (!s)
        return fail(L, "closed");
    deadline = mono_ms() + s->timeout_ms;
    for (;;) {
        size_t have = s->len - s->off;
        enum wait_rc rc;
        int r;

        if ((r = receive_buffered(L, s, mode, want)) > 0)
            return r;
        r = fill(L, s, 16384);
        if (r > 0)
            continue;
        if (r != -EAGAIN && r != -EWOULDBLOCK)
            return receive_ended(L, s, mode, have, r);
        if ((rc = wait_fd(L, s->sc, s->fd, POLLIN, deadline)) != W_READY) {
            s->dirty = true;
            lua_pushnil(L);
            lua_pushstring(L, wait_err(rc));
            partial(L, s, have);
            return 3;
        }
    }
}

static int l_sock_settimeout(lua_State *L)
{
    struct lsock *s = luaL_checkudata(L, 1, LIO_MT);
    long ms = seconds_ms(L, 2, "sock:settimeout");

    check_sock(L, "sock:settimeout");
    s->timeout_ms = ms;
    return 0;
}

static int l_sock_close(lua_State *L)
{
    struct lsock *s = check_sock(L, "sock:close");

    if (!s)
        return fail(L, "closed");
    sock_close(s);
    lua_pushboolean(L, 1);
    return 1;
}

static int l_sock_setkeepalive(lua_State *L)
{
    struct lsock *s = check_sock(L, "sock:setkeepalive");

    if (!s)
        return fail(L, "closed");
    if (s->len != s->off) {
        sock_close(s);
        return fail(L, "unread data in the buffer: closed instead");
    }
    if (s->dirty) { /* the answer to what timed out may still come: it must reach no one */
        sock_close(s);
        return fail(L, "a call on it timed out: closed instead");
    }
    pool_put(s->sc, s);
    s->sc->ls->used -= s->cap; /* fill() counted it */
    free(s->buf);
    s->buf = NULL;
    s->off = s->len = s->cap = 0;
    lua_pushboolean(L, 1);
    return 1;
}

static int l_sock_tostring(lua_State *L)
{
    struct lsock *s = luaL_checkudata(L, 1, LIO_MT);

    lua_pushfstring(L, "lfe.socket (%s)", s->fd >= 0 ? "open" : "closed");
    return 1;
}

void lio_open(lua_State *L, struct lstate *ls)
{
    static const luaL_Reg methods[] = {{"send", l_sock_send},
                                       {"receive", l_sock_receive},
                                       {"settimeout", l_sock_settimeout},
                                       {"close", l_sock_close},
                                       {"setkeepalive", l_sock_setkeepalive},
                                       {NULL, NULL}};
    static const luaL_Reg fns[] = {{"now", l_now},
                                   {"sleep", l_sleep},
                                   {"connect", l_connect},
                                   {"draining", l_draining},
                                   {NULL, NULL}};

    /* lfe is at the top */
    lua_pushlightuserdata(L, ls);
    luaL_setfuncs(L, fns, 1);
    if (luaL_newmetatable(L, LIO_MT)) {
        lua_pushliteral(L, "lfe.socket");
        lua_setfield(L, -2, "__metatable");
        lua_newtable(L);
        lua_pushlightuserdata(L, ls);
        luaL_setfuncs(L, methods, 1);
        lua_setfield(L, -2, "__index");
        lua_pushcfunction(L, l_sock_gc);
        lua_setfield(L, -2, "__gc");
        lua_pushcfunction(L, l_sock_tostring);
        lua_setfield(L, -2, "__tostring");
    }
    lua_pop(L, 1);
}

void lio_call_begin(struct script *sc, bool in_close)
{
    sc->in_close = in_close;
    sc->wall_deadline_ms = sc->env->o.wall_ms > 0 ? mono_ms() + sc->env->o.wall_ms : 0;
}

void lio_call_end(struct script *sc)
{
    while (sc->socks)
        sock_close(sc->socks);
}

void lio_free(struct script *sc)
{
    lio_call_end(sc);
    for (int i = 0; i < sc->npool; i++)
        close(sc->pool[i].fd);
    free(sc->pool);
    sc->pool = NULL;
    sc->npool = 0;
}

int lio_env_init(struct script_env *e)
{
    e->stopfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    return e->stopfd < 0 ? -errno : 0;
}

void lio_env_free(struct script_env *e)
{
    if (e->stopfd >= 0)
        close(e->stopfd);
    e->stopfd = -1;
}
