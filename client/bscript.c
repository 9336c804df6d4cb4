/* bscript: lfbench --script, wrk's Lua scripting API over lfbench's engine (bscript.h has the
 * design). The wrk table and wrk.format() are written below in Lua, from wrk's SCRIPTING
 * document; addresses, threads and statistics are userdata shaped like a Lua library. */
#include "bscript.h"

#include "http.h"

#include <errno.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define STATE_MEM_CAP (512u << 20) /* bytes one Lua state may hold */
#define HOOK_EVERY 10000           /* instructions between two looks at the deadline */
#define MAX_COPY_DEPTH 32          /* thread:get/set: tables nested deeper are refused */
#define MAX_DELAY_MS 60000.0
#define MSG_MAX 1024     /* bytes of a script's message kept (one_line) */
#define MSG_CUT " [...]" /* marks one cut there */

struct state {
    lua_State *L;
    size_t mem;           /* bytes allocated */
    bool refused;         /* the cap refused an allocation (since state_pcall cleared it) */
    uint64_t deadline;    /* CLOCK_MONOTONIC ns: the call in progress must end by then */
    bool overran;         /* the hook stopped a call at its deadline */
    const char *call;     /* the hook being called, NULL between calls */
    uint64_t call_t0;     /* atomic: when it began, 0 between calls (main's watchdog) */
    uint64_t call_budget; /* its budget */
};

struct bscthread {
    struct state st;
    struct bscript *s;
    int idx;
    struct scwants w;
    struct sockaddr_storage addr; /* thread.addr */
    socklen_t addrlen;
    int ref_request; /* registry: request(), or wrk.request (the fixed one) */
    int ref_response, ref_delay;
    int ref_last;     /* registry: the string request() returned last, kept alive */
    const char *last; /* its bytes, and its split */
    size_t last_len;
    int last_n;
    struct scpiece last_pc[SCRIPT_MAX_BATCH];
    bool first_kept; /* the first string (last, last_pc) is the next to send: bscript_thread
                      * took it before the run, in a thread other than the first */
    int first_tag;   /* its tag */
    bool stop_asked;
    char *error;     /* the script error that stopped this thread (owned) */
    char *failure;   /* the first failed check's message (owned) */
    uint64_t fails;  /* failed checks */
    uint64_t *rates; /* done()'s per-second request samples */
    size_t nrates, caprates;
};

struct bscript {
    const struct bopt *o;
    struct state st; /* main's: setup() and done() */
    struct bscthread **threads;
    int nthreads;
};

/* The thread's script error: the first one is kept (main reads it once told of it). */
static void set_error(struct bscthread *t, char *msg)
{
    if (!t->error)
        t->error = msg;
    else
        free(msg);
}

static const char wrk_lua[] =
    "local wrk = {scheme = 'http', host = ..., port = select(2, ...), method = 'GET',\n"
    "             path = '/', headers = {}, body = nil, thread = nil}\n"
    "function wrk.format(method, path, headers, body)\n"
    "  method = method or wrk.method\n"
    "  path = path or wrk.path\n"
    "  headers = headers or wrk.headers\n"
    "  body = body or wrk.body\n"
    "  if not headers['Host'] then headers['Host'] = wrk.headers['Host'] end\n"
    "  headers['Content-Length'] = body and string.len(body)\n"
    "  local s = {string.format('%s %s HTTP/1.1', method, path)}\n"
    "  for name, value in pairs(headers) do s[#s + 1] = string.format('%s: %s', name, value) end\n"
    "  s[#s + 1] = ''\n"
    "  s[#s + 1] = body or ''\n"
    "  return table.concat(s, '\\r\\n')\n"
    "end\n"
    "return wrk\n";

/* Called at init's end in a thread's state, as wrk does: the Host header from the target unless
 * the script set one, then the fixed request that wrk.request() returns. */
static const char wrk_fix_lua[] = "local wrk = wrk\n"
                                  "if not wrk.headers['Host'] then\n"
                                  "  local host, port = wrk.host, wrk.port\n"
                                  "  host = host:find(':') and ('[' .. host .. ']') or host\n"
                                  "  wrk.headers['Host'] = port and (host .. ':' .. port) or host\n"
                                  "end\n";

static const char wrk_req_lua[] = "local req = wrk.format()\n"
                                  "wrk.request = function() return req end\n";

static uint64_t mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* --- a state: its memory cap, its deadline, its calls --------------------------------------- */

static void *state_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    struct state *st = ud;

    if (!ptr)
        osize = 0;
    if (nsize == 0) {
        free(ptr);
        st->mem -= osize;
        return NULL;
    }
    /* The cap holds whenever call is set: inside the script's calls, where Lua raises "not
     * enough memory" into the protected call, and inside the glue's protected steps (the
     * arguments it pushes, a copy from another state, closing). With call NULL run the making
     * of a fresh state (nothing of the script's has run in it) and the glue's registry
     * references, which run no collection step, and so no finalizer of the script's: they may
     * pass the cap, so that they never raise where nothing would catch it. */
    if (nsize > osize && st->call && st->mem + (nsize - osize) > STATE_MEM_CAP) {
        st->refused = true;
        return NULL;
    }
    ptr = realloc(ptr, nsize);
    if (ptr)
        st->mem += nsize - osize;
    return ptr;
}

static void hook(lua_State *L, lua_Debug *ar)
{
    struct state *st;

    (void)ar;
    lua_getallocf(L, (void **)&st);
    if (mono_ns() <= st->deadline)
        return;
    st->overran = true;
    /* lua_pushfstring knows no %.0f: a budget in whole seconds, as %d */
    luaL_error(L, "%s ran over its %d s budget: a loop that never ends?",
               st->call ? st->call : "the script", (int)(st->call_budget / 1000000000ull));
}

/* The error message with the script's file and line: Lua's runtime errors carry them, a C
 * function's ("bad argument #1 to 'rep'") gets those of the Lua line that called it. */
static int msgh(lua_State *L)
{
    const char *m = lua_tostring(L, 1);
    lua_Debug ar;

    if (!m)
        m = luaL_typename(L, 1);
    for (int level = 1; lua_getstack(L, level, &ar); level++) {
        lua_getinfo(L, "Sl", &ar);
        if (ar.currentline > 0) {
            char where[LUA_IDSIZE + 16];
            snprintf(where, sizeof(where), "%s:%d:", ar.short_src, ar.currentline);
            if (strncmp(m, where, strlen(where)))
                m = lua_pushfstring(L, "%s %s", where, m);
            break;
        }
    }
    lua_pushstring(L, m);
    return 1;
}

/* Calls the function below its nargs arguments on the stack, under a deadline. Returns
 * lua_pcall's status; the results (or the message) are on the stack. */
static int state_call(struct state *st, const char *name, uint64_t budget, int nargs, int nres)
{
    lua_State *L = st->L;
    int base = lua_gettop(L) - nargs, rc;

    lua_pushcfunction(L, msgh);
    lua_insert(L, base);
    st->call = name;
    st->call_budget = budget;
    st->overran = false;
    st->deadline = mono_ns() + budget;
    __atomic_store_n(&st->call_t0, st->deadline - budget, __ATOMIC_RELAXED);
    rc = lua_pcall(L, nargs, nres, base);
    __atomic_store_n(&st->call_t0, 0, __ATOMIC_RELAXED);
    st->call = NULL;
    lua_remove(L, base);
    return rc;
}

/* What the glue does inside a call, before the script's function runs: it pushes the function
 * and its arguments and returns how many arguments, or does all there is to do and returns -1
 * (nothing to call). Inside the call, what it allocates is under the state's cap, a collection
 * step it sets off (and the script's finalizers that step runs) is within the call's budget and
 * the watchdog's sight, and an error it raises is the call's. */
typedef int (*prelude_fn)(lua_State *L, void *ud);

struct prelude {
    prelude_fn fn;
    void *ud;
    int nres;
};

static int run_prelude(lua_State *L)
{
    struct prelude *p = lua_touserdata(L, 1);
    int nargs;

    lua_settop(L, 0);
    if ((nargs = p->fn(L, p->ud)) < 0)
        return 0; /* lua_pcall fills the nres results with nil */
    lua_call(L, nargs, p->nres);
    return p->nres;
}

/* state_call of what fn pushes (prelude_fn); returns lua_pcall's status, nres results (or the
 * message) on the stack. */
static int state_call_with(struct state *st, const char *name, uint64_t budget, prelude_fn fn,
                           void *ud, int nres)
{
    struct prelude p = {fn, ud, nres};

    lua_pushcfunction(st->L, run_prelude);
    lua_pushlightuserdata(st->L, &p);
    return state_call(st, name, budget, 1, nres);
}

/* Runs f(ud) (ud as its one argument, a light userdata) protected in L, a state that may be
 * between its own calls (thread:set() from setup() reaches a thread's state that is in none) or
 * closing, as a part of the call name: L's cap holds for what f allocates. Returns lua_pcall's
 * status (LUA_ERRMEM, with st->refused when the cap said no), nres results or the message on
 * L's stack. */
static int state_pcall(lua_State *L, const char *name, lua_CFunction f, void *ud, int nres)
{
    struct state *st;
    const char *outer;
    int rc;

    lua_getallocf(L, (void **)&st);
    outer = st->call;
    if (!outer)
        st->call = name;
    st->refused = false;
    lua_pushcfunction(L, f);
    lua_pushlightuserdata(L, ud);
    rc = lua_pcall(L, 1, nres, 0);
    st->call = outer;
    return rc;
}

/* A script's message as one line of at most MSG_MAX bytes: its control characters (a newline
 * would split the summary's line, an escape would reach the terminal) become spaces, and a
 * longer one (error(string.rep('x', 1e8)) is 100 MB) is cut at a character's start, marked. */
static void one_line(char *s)
{
    size_t n = strlen(s);

    if (n > MSG_MAX) {
        n = MSG_MAX - sizeof(MSG_CUT) + 1;
        while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
            n--; /* not inside a UTF-8 character */
        memcpy(s + n, MSG_CUT, sizeof(MSG_CUT));
    }
    for (unsigned char *p = (unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            *p = ' ';
}

/* The message of the error on top of the stack, popped, as one line (one_line). */
static char *pop_message(lua_State *L, const char *hookname)
{
    const char *m = lua_tostring(L, -1);
    size_t len = m ? strlen(m) : 0;
    size_t n = strlen(hookname) + (len > MSG_MAX ? MSG_MAX + 1 : len) + 48;
    char *s = malloc(n);

    if (s) {
        /* the message cut first, so that the hook's name at its end survives the cut */
        snprintf(s, n, "%.*s", MSG_MAX + 1, m ? m : "(an error that is not a string)");
        one_line(s);
        if (*hookname)
            snprintf(s + strlen(s), n - strlen(s), " (in %s)", hookname);
    }
    lua_pop(L, 1);
    return s;
}

/* The error on top of L's stack, popped, as the one line the caller prints ("--script: ..."). */
static void say_message(lua_State *L, const char *hookname, char *err, size_t errlen)
{
    char *m = pop_message(L, hookname);

    snprintf(err, errlen, "--script: %s", m ? m : "out of memory");
    free(m);
}

/* --- addresses ------------------------------------------------------------------------------ */

struct addr {
    struct sockaddr_storage ss;
    socklen_t len;
};

static struct addr *push_addr(lua_State *L, const struct sockaddr *sa, socklen_t len)
{
    struct addr *a = lua_newuserdatauv(L, sizeof(*a), 0);

    memset(a, 0, sizeof(*a));
    memcpy(&a->ss, sa, len < sizeof(a->ss) ? len : sizeof(a->ss));
    a->len = len;
    luaL_setmetatable(L, "wrk.addr");
    return a;
}

static int addr_tostring(lua_State *L)
{
    struct addr *a = luaL_checkudata(L, 1, "wrk.addr");
    char host[NI_MAXHOST], serv[NI_MAXSERV];
    int rc = getnameinfo((struct sockaddr *)&a->ss, a->len, host, sizeof(host), serv, sizeof(serv),
                         NI_NUMERICHOST | NI_NUMERICSERV);

    if (rc)
        return luaL_error(L, "address: %s", gai_strerror(rc));
    if (a->ss.ss_family == AF_INET6)
        lua_pushfstring(L, "[%s]:%s", host, serv);
    else
        lua_pushfstring(L, "%s:%s", host, serv);
    return 1;
}

/* wrk.lookup(host, service): every address of the pair (getaddrinfo), as a list. */
static int wrk_lookup(lua_State *L)
{
    const char *host = luaL_checkstring(L, 1), *serv = luaL_optstring(L, 2, "http");
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res, *ai;
    int rc = getaddrinfo(host, serv, &hints, &res), i = 1;

    if (rc)
        return luaL_error(L, "wrk.lookup: cannot resolve %s:%s: %s", host, serv, gai_strerror(rc));
    lua_newtable(L);
    for (ai = res; ai; ai = ai->ai_next) {
        push_addr(L, ai->ai_addr, ai->ai_addrlen);
        lua_rawseti(L, -2, i++);
    }
    freeaddrinfo(res);
    return 1;
}

/* wrk.connect(addr): whether a TCP connection to it opens within a second. */
static int wrk_connect(lua_State *L)
{
    struct addr *a = luaL_checkudata(L, 1, "wrk.addr");
    int fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), ok = 0;

    if (fd >= 0) {
        if (connect(fd, (struct sockaddr *)&a->ss, a->len) == 0) {
            ok = 1;
        } else if (errno == EINPROGRESS) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            int e = 0;
            socklen_t l = sizeof(e);
            ok = poll(&p, 1, 1000) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &l) == 0 &&
                 e == 0;
        }
        close(fd);
    }
    lua_pushboolean(L, ok);
    return 1;
}

/* --- copying values between states (thread:get, thread:set) ------------------------------------
 * A copy keeps the value's shape: a table reached twice ({v, v}) is copied once and reached
 * twice in the copy, so a copy is never larger than what it copies (30 tables that share their
 * children made 2^30 copies, 4.8 GB, before the copy kept them shared). A table reached again
 * while it is being copied holds itself: it is refused, as are tables nested deeper than
 * MAX_COPY_DEPTH (the copy recurses on the C stack). A copy runs protected in the receiving
 * state, under its cap (state_pcall): the receiving state may be in none of its calls. */

struct copy {
    lua_State *from;
    int seen; /* in the receiving state: from's tables (light userdata) -> their copy, or true
               * while it is being made */
};

static int copy_value(struct copy *cp, int idx, lua_State *to, int depth)
{
    lua_State *from = cp->from;
    const void *p;
    int rc;

    idx = lua_absindex(from, idx);
    switch (lua_type(from, idx)) {
    case LUA_TNIL:
        lua_pushnil(to);
        return 0;
    case LUA_TBOOLEAN:
        lua_pushboolean(to, lua_toboolean(from, idx));
        return 0;
    case LUA_TNUMBER:
        if (lua_isinteger(from, idx))
            lua_pushinteger(to, lua_tointeger(from, idx));
        else
            lua_pushnumber(to, lua_tonumber(from, idx));
        return 0;
    case LUA_TSTRING: {
        size_t n;
        const char *s = lua_tolstring(from, idx, &n);
        lua_pushlstring(to, s, n);
        return 0;
    }
    case LUA_TTABLE:
        if (depth >= MAX_COPY_DEPTH)
            return -ELOOP;
        if (!lua_checkstack(to, 6) || !lua_checkstack(from, 3))
            return -ELOOP;
        p = lua_topointer(from, idx); /* the table's own: it is alive while it is copied */
        lua_pushlightuserdata(to, (void *)p);
        switch (lua_rawget(to, cp->seen)) {
        case LUA_TTABLE:
            return 0; /* copied already: the same copy */
        case LUA_TBOOLEAN:
            lua_pop(to, 1);
            return -ELOOP; /* it is being copied: it holds itself */
        }
        lua_pop(to, 1);
        lua_pushlightuserdata(to, (void *)p);
        lua_pushboolean(to, 1);
        lua_rawset(to, cp->seen);
        lua_newtable(to);
        lua_pushnil(from);
        while (lua_next(from, idx)) {
            if ((rc = copy_value(cp, -2, to, depth + 1)) < 0 ||
                (rc = copy_value(cp, -1, to, depth + 1)) < 0) {
                lua_pop(from, 2);
                return rc;
            }
            lua_rawset(to, -3);
            lua_pop(from, 1);
        }
        lua_pushlightuserdata(to, (void *)p);
        lua_pushvalue(to, -2);
        lua_rawset(to, cp->seen);
        return 0;
    default:
        return -EINVAL;
    }
}

struct copyjob {
    lua_State *from;
    int idx;          /* absolute, in from: the value */
    const char *name; /* set: the global to set in the receiving state; get: NULL */
    int rc;           /* copy_value's */
};

/* In the receiving state (to), protected: set: copies the value and sets the global, raw (no
 * metamethod of the script's runs); get: leaves the copy on the stack. */
static int copy_in(lua_State *to)
{
    struct copyjob *j = lua_touserdata(to, 1);
    struct copy cp = {j->from, 0};

    lua_newtable(to);
    cp.seen = lua_gettop(to);
    if (j->name) {
        lua_rawgeti(to, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
        lua_pushstring(to, j->name);
    }
    if ((j->rc = copy_value(&cp, j->idx, to, 0)) < 0)
        return 0;
    if (j->name) {
        lua_rawset(to, -3);
        return 0;
    }
    return 1;
}

/* In a thread's state, protected: pushes its global name, read raw. */
static int global_in(lua_State *T)
{
    struct copyjob *j = lua_touserdata(T, 1);

    lua_rawgeti(T, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
    lua_pushstring(T, j->name);
    lua_rawget(T, -2);
    return 1;
}

/* Raises in `in` the error of a copy into the state `to` (named where, for the message) that
 * failed: rc, copy_value's, or status, state_pcall's (its message popped from to). */
static int copy_raise(lua_State *in, const char *call, const char *name, int rc, int status,
                      lua_State *to, const char *where)
{
    char m[512];
    struct state *st;

    lua_getallocf(to, (void **)&st);
    if (status != LUA_OK) {
        const char *e = lua_tostring(to, -1);
        if (status == LUA_ERRMEM && st->refused)
            snprintf(m, sizeof(m),
                     "%s('%.64s'): the copy exceeds the %u MiB cap of %s: pass less (a copy "
                     "is whole, every string and table of it)",
                     call, name, STATE_MEM_CAP >> 20, where);
        else
            snprintf(m, sizeof(m), "%s('%.64s'): copying into %s: %.200s", call, name, where,
                     e ? e : "an error");
        lua_pop(to, 1);
    } else if (rc == -ELOOP) {
        snprintf(m, sizeof(m),
                 "%s('%.64s'): a table nested over %d deep (or one that holds itself) cannot "
                 "pass between threads",
                 call, name, MAX_COPY_DEPTH);
    } else {
        snprintf(m, sizeof(m),
                 "%s('%.64s'): only nil, booleans, numbers, strings and tables of them pass "
                 "between threads",
                 call, name);
    }
    return luaL_error(in, "%s", m);
}

/* --- threads ---------------------------------------------------------------------------------- */

static struct bscthread *check_thread(lua_State *L)
{
    return *(struct bscthread **)luaL_checkudata(L, 1, "wrk.thread");
}

/* thread:get(name) and thread:set(name, value) touch the thread's state: from main's state
 * only in setup() and done(), when no thread runs; from the thread's own, its own globals. */
static int thread_get(lua_State *L)
{
    struct bscthread *t = check_thread(L);
    const char *name = luaL_checkstring(L, 2);
    lua_State *T = t->st.L;
    struct copyjob j = {NULL, 0, name, 0};
    int status, top = lua_gettop(T);
    char where[32];

    if (T == L) {
        lua_getglobal(L, name);
        return 1;
    }
    snprintf(where, sizeof(where), "thread %d's state", t->idx + 1);
    if ((status = state_pcall(T, "thread:get()", global_in, &j, 1)) != LUA_OK)
        return copy_raise(L, "thread:get", name, 0, status, T, where);
    j.from = T;
    j.idx = lua_gettop(T);
    j.name = NULL;
    status = state_pcall(L, "thread:get()", copy_in, &j, 1);
    lua_settop(T, top);
    if (status != LUA_OK || j.rc < 0)
        return copy_raise(L, "thread:get", name, j.rc, status, L, "main's state");
    return 1;
}

static int thread_set(lua_State *L)
{
    struct bscthread *t = check_thread(L);
    const char *name = luaL_checkstring(L, 2);
    lua_State *T = t->st.L;
    struct copyjob j = {L, 3, name, 0};
    int status;
    char where[32];

    luaL_checkany(L, 3);
    if (T == L) {
        lua_pushvalue(L, 3);
        lua_setglobal(L, name);
        return 0;
    }
    snprintf(where, sizeof(where), "thread %d's state", t->idx + 1);
    lua_settop(L, 3);
    status = state_pcall(T, "thread:set()", copy_in, &j, 0);
    lua_settop(L, 3); /* a failed copy left its walk on L's stack */
    if (status != LUA_OK || j.rc < 0)
        return copy_raise(L, "thread:set", name, j.rc, status, T, where);
    return 0;
}

static int thread_stop(lua_State *L)
{
    struct bscthread *t = check_thread(L);

    if (t->st.L != L)
        return luaL_error(L, "thread:stop() stops a running thread: call wrk.thread:stop() in "
                             "its own request(), response() or delay()");
    t->stop_asked = true;
    return 0;
}

static int thread_index(lua_State *L)
{
    struct bscthread *t = check_thread(L);
    const char *k = luaL_checkstring(L, 2);

    if (!strcmp(k, "get"))
        lua_pushcfunction(L, thread_get);
    else if (!strcmp(k, "set"))
        lua_pushcfunction(L, thread_set);
    else if (!strcmp(k, "stop"))
        lua_pushcfunction(L, thread_stop);
    else if (!strcmp(k, "addr"))
        push_addr(L, (struct sockaddr *)&t->addr, t->addrlen);
    else if (!strcmp(k, "id"))
        lua_pushinteger(L, t->idx + 1);
    else
        lua_pushnil(L);
    return 1;
}

/* thread.addr = an address from wrk.lookup() (or "HOST:PORT"): where the thread connects; in
 * setup() only, before it opens a connection. */
static int thread_newindex(lua_State *L)
{
    struct bscthread *t = check_thread(L);
    const char *k = luaL_checkstring(L, 2);

    if (strcmp(k, "addr"))
        return luaL_error(L, "cannot set '%s' on a thread (only addr)", k);
    if (t->st.L == L)
        return luaL_error(L, "thread.addr is set in setup(), before the thread connects");
    if (lua_type(L, 3) == LUA_TSTRING) {
        if (bopt_parse_target(lua_tostring(L, 3), &t->addr, &t->addrlen) < 0)
            return luaL_error(L, "thread.addr: '%s' is not ADDR:PORT", lua_tostring(L, 3));
        return 0;
    }
    struct addr *a = luaL_checkudata(L, 3, "wrk.addr");
    t->addr = a->ss;
    t->addrlen = a->len;
    return 0;
}

static void push_thread(lua_State *L, struct bscthread *t)
{
    *(struct bscthread **)lua_newuserdatauv(L, sizeof(t), 0) = t;
    luaL_setmetatable(L, "wrk.thread");
}

/* --- statistics (done's latency and requests) ------------------------------------------------- *
 * As wrk's: latency in whole microseconds and rates in requests per second, as integers (a wrk
 * script formats them with %d, which Lua 5.4 refuses for a number with a fraction); the mean and
 * the standard deviation as floats. The summary and --json keep lfbench's finer figures. */

/* One block, the userdata's own: the arrays live as long as the object, which Lua frees only
 * once no finalizer can reach it. (They were malloc'd and freed by a __gc, which runs at exit
 * before the finalizer of an object made earlier: a script's __gc reading done()'s latency
 * then read the freed arrays, a segfault.) */
struct stats {
    size_t n;       /* distinct values */
    double *val;    /* ascending (in the block) */
    uint64_t *cnt;  /* how often each (in the block) */
    uint64_t total; /* values in all */
    double min, max, mean, stdev;
    struct hist *h; /* latency: percentiles as the summary computes them (ns), in the block;
                     * NULL for rates */
};

static double stats_pct(const struct stats *s, double p)
{
    uint64_t rank, seen = 0;

    if (s->h)
        return hist_us(hist_percentile(s->h, p));
    rank = hist_rank(s->total, p);
    for (size_t i = 0; i < s->n; i++)
        if ((seen += s->cnt[i]) >= rank)
            return s->val[i];
    return 0;
}

static int stats_percentile(lua_State *L)
{
    struct stats *s = luaL_checkudata(L, 1, "wrk.stats");
    double p = luaL_checknumber(L, 2);

    luaL_argcheck(L, p > 0 && p <= 100, 2, "a percentile is above 0 and at most 100");
    lua_pushinteger(L, (lua_Integer)llround(stats_pct(s, p)));
    return 1;
}

static int stats_index(lua_State *L)
{
    struct stats *s = luaL_checkudata(L, 1, "wrk.stats");
    const char *k = luaL_checkstring(L, 2);

    if (!strcmp(k, "min"))
        lua_pushinteger(L, (lua_Integer)llround(s->min));
    else if (!strcmp(k, "max"))
        lua_pushinteger(L, (lua_Integer)llround(s->max));
    else if (!strcmp(k, "mean"))
        lua_pushnumber(L, s->mean);
    else if (!strcmp(k, "stdev"))
        lua_pushnumber(L, s->stdev);
    else if (!strcmp(k, "count"))
        lua_pushinteger(L, (lua_Integer)s->total);
    else if (!strcmp(k, "percentile"))
        lua_pushcfunction(L, stats_percentile);
    else
        lua_pushnil(L);
    return 1;
}

/* stats(i): the i-th smallest distinct value and how often it was seen. */
static int stats_call(lua_State *L)
{
    struct stats *s = luaL_checkudata(L, 1, "wrk.stats");
    lua_Integer i = luaL_checkinteger(L, 2);

    if (i < 1 || (size_t)i > s->n) {
        lua_pushnil(L);
        lua_pushinteger(L, 0);
    } else {
        lua_pushinteger(L, (lua_Integer)llround(s->val[i - 1]));
        lua_pushinteger(L, (lua_Integer)s->cnt[i - 1]);
    }
    return 2;
}

static int stats_len(lua_State *L)
{
    struct stats *s = luaL_checkudata(L, 1, "wrk.stats");

    lua_pushinteger(L, (lua_Integer)s->n);
    return 1;
}

/* A statistics object of n distinct values (and a copy of h, for latency), its arrays in the
 * userdata's block; raises "not enough memory" (the state's cap) like any allocation. */
static struct stats *push_stats(lua_State *L, size_t n, const struct hist *h)
{
    size_t hsz = h ? sizeof(*h) : 0, each = sizeof(double) + sizeof(uint64_t);
    struct stats *s;
    unsigned char *p;

    if (n > (SIZE_MAX - sizeof(*s) - hsz) / each)
        luaL_error(L, "not enough memory");
    s = lua_newuserdatauv(L, sizeof(*s) + hsz + n * each, 0);
    memset(s, 0, sizeof(*s));
    p = (unsigned char *)(s + 1); /* every part is of 8-byte types: each stays aligned */
    if (h) {
        s->h = (struct hist *)p;
        memcpy(s->h, h, sizeof(*h));
        p += hsz;
    }
    s->val = (double *)p;
    s->cnt = (uint64_t *)(p + n * sizeof(double));
    luaL_setmetatable(L, "wrk.stats");
    return s;
}

static void stats_moments(struct stats *s)
{
    double sum = 0, sq = 0;

    for (size_t i = 0; i < s->n; i++) {
        s->total += s->cnt[i];
        sum += s->val[i] * (double)s->cnt[i];
    }
    if (!s->total)
        return;
    s->mean = sum / (double)s->total;
    for (size_t i = 0; i < s->n; i++)
        sq += (s->val[i] - s->mean) * (s->val[i] - s->mean) * (double)s->cnt[i];
    s->stdev = s->total > 1 ? sqrt(sq / (double)(s->total - 1)) : 0;
    s->min = s->val[0];
    s->max = s->val[s->n - 1];
}

/* The latency histogram as statistics in microseconds: a distinct value per non-empty bucket
 * (the value the summary would print for it), the exact min, max and mean. */
static void push_latency(lua_State *L, const struct hist *h)
{
    size_t n = 0;
    struct stats *s;

    for (unsigned i = 0; i < HIST_BUCKETS; i++)
        n += h->b[i] != 0;
    s = push_stats(L, n, h);
    n = 0;
    for (unsigned i = 0; i < HIST_BUCKETS; i++) {
        uint64_t lo, hi;
        if (!h->b[i])
            continue;
        hist_range(i, &lo, &hi);
        lo = lo < h->min ? h->min : lo;
        hi = hi > h->max ? h->max : hi;
        s->val[n] = hist_us(lo + (hi - lo) / 2);
        s->cnt[n++] = h->b[i];
    }
    s->n = n;
    stats_moments(s);
    if (h->count) { /* exact where the histogram has them */
        s->min = hist_us(h->min);
        s->max = hist_us(h->max);
        s->mean = h->sum / (double)h->count / 1000.0;
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

/* Every thread's per-second request counts as statistics of requests/s: the samples sorted in
 * val, then runs of one value folded into one entry and its count. */
static void push_rates(lua_State *L, struct bscript *sc)
{
    size_t n = 0, k = 0;
    struct stats *s;

    for (int i = 0; i < sc->nthreads; i++)
        n += sc->threads[i]->nrates;
    s = push_stats(L, n, NULL);
    for (int i = 0; i < sc->nthreads; i++)
        for (size_t j = 0; j < sc->threads[i]->nrates; j++)
            s->val[k++] = (double)sc->threads[i]->rates[j];
    qsort(s->val, n, sizeof(*s->val), cmp_double);
    for (size_t i = 0; i < n; i++) {
        if (s->n && s->val[s->n - 1] == s->val[i]) {
            s->cnt[s->n - 1]++;
            continue;
        }
        s->val[s->n] = s->val[i];
        s->cnt[s->n++] = 1;
    }
    stats_moments(s);
}

/* --- states -------------------------------------------------------------------------------------
 */

static void target_parts(const struct bopt *o, char *host, size_t hl, char *port, size_t pl)
{
    const char *t = o->target, *colon = strrchr(t, ':');
    size_t n = colon ? (size_t)(colon - t) : strlen(t);

    if (n >= 2 && t[0] == '[' && t[n - 1] == ']') {
        t++;
        n -= 2;
    }
    snprintf(host, hl, "%.*s", (int)n, t);
    snprintf(port, pl, "%s", colon ? colon + 1 : "");
}

/* A new state with the standard libraries and the global wrk table, the file not run yet. */
static int state_open(struct state *st, const struct bopt *o, char *err, size_t errlen)
{
    char host[256], port[16];
    lua_State *L;

    memset(st, 0, sizeof(*st));
    st->deadline = UINT64_MAX;
    if (!(L = st->L = lua_newstate(state_alloc, st))) {
        snprintf(err, errlen, "--script: cannot create a Lua state (out of memory)");
        return -ENOMEM;
    }
    luaL_openlibs(L);
    lua_sethook(L, hook, LUA_MASKCOUNT, HOOK_EVERY);
    luaL_newmetatable(L, "wrk.addr");
    lua_pushcfunction(L, addr_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pop(L, 1);
    luaL_newmetatable(L, "wrk.thread");
    lua_pushcfunction(L, thread_index);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, thread_newindex);
    lua_setfield(L, -2, "__newindex");
    lua_pop(L, 1);
    luaL_newmetatable(L, "wrk.stats");
    lua_pushcfunction(L, stats_index);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, stats_call);
    lua_setfield(L, -2, "__call");
    lua_pushcfunction(L, stats_len);
    lua_setfield(L, -2, "__len");
    lua_pop(L, 1);
    target_parts(o, host, sizeof(host), port, sizeof(port));
    if (luaL_loadbuffer(L, wrk_lua, sizeof(wrk_lua) - 1, "=wrk") != LUA_OK) {
        snprintf(err, errlen, "--script: the wrk table: %s", lua_tostring(L, -1));
        return -EINVAL;
    }
    lua_pushstring(L, host);
    if (*port)
        lua_pushstring(L, port);
    else
        lua_pushnil(L);
    if (state_call(st, "wrk", SCRIPT_PHASE_BUDGET_NS, 2, 1) != LUA_OK) {
        snprintf(err, errlen, "--script: the wrk table: %s", lua_tostring(L, -1));
        return -EINVAL;
    }
    lua_pushcfunction(L, wrk_lookup);
    lua_setfield(L, -2, "lookup");
    lua_pushcfunction(L, wrk_connect);
    lua_setfield(L, -2, "connect");
    lua_setglobal(L, "wrk");
    return 0;
}

/* Runs the file's top level in st, with the script's arguments as `...` (wrk: none). */
static int state_run_file(struct state *st, const struct bopt *o, char *err, size_t errlen)
{
    lua_State *L = st->L;
    int rc = luaL_loadfilex(L, o->script, "t");

    if (rc != LUA_OK) {
        const char *m = lua_tostring(L, -1);
        snprintf(err, errlen, "--script: %s", m ? m : "cannot load the file");
        return -EINVAL;
    }
    if (state_call(st, "the file's top level", SCRIPT_PHASE_BUDGET_NS, 0, 0) != LUA_OK) {
        say_message(L, "", err, errlen);
        return -EINVAL;
    }
    return 0;
}

/* Pushes the global name, read raw: a script's metatable on _G (a "strict" mode that raises
 * on a missing global) runs only inside its own calls, never in the glue, where an error
 * would have nothing to catch it. Returns its type. */
static int raw_global(lua_State *L, const char *name)
{
    int type;

    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
    lua_pushstring(L, name);
    type = lua_rawget(L, -2);
    lua_remove(L, -2);
    return type;
}

static bool global_is_function(lua_State *L, const char *name)
{
    bool f = raw_global(L, name) == LUA_TFUNCTION;

    lua_pop(L, 1);
    return f;
}

/* lua_close runs the script's finalizers (__gc): under the cap as well (an error there, out of
 * memory included, is dropped by Lua, and the next finalizer runs). */
static void state_close(struct state *st)
{
    if (st->L) {
        st->call = "a finalizer at exit";
        lua_close(st->L);
    }
    st->L = NULL;
}

/* Whether the file defined delay() (prelude_fn: in a call, as the file ran already). */
static int read_delay(lua_State *L, void *ud)
{
    *(bool *)ud = global_is_function(L, "delay");
    return -1;
}

struct bscript *bscript_load(const struct bopt *o, char *err, size_t errlen)
{
    struct bscript *s = calloc(1, sizeof(*s));
    bool delay = false;

    if (!s) {
        snprintf(err, errlen, "--script: out of memory");
        return NULL;
    }
    s->o = o;
    s->threads = calloc((size_t)o->threads, sizeof(*s->threads));
    if (!s->threads) {
        snprintf(err, errlen, "--script: out of memory");
        goto fail;
    }
    if (state_open(&s->st, o, err, errlen) < 0 || state_run_file(&s->st, o, err, errlen) < 0)
        goto fail;
    if (state_call_with(&s->st, "wrk", SCRIPT_PHASE_BUDGET_NS, read_delay, &delay, 0) != LUA_OK) {
        say_message(s->st.L, "", err, errlen);
        goto fail;
    }
    if (delay && (o->rate > 0 || o->sweep_step > 0 || o->find_pct > 0)) {
        snprintf(err, errlen,
                 "--script %s defines delay(), which sets when a connection sends; with -R, "
                 "--rate-sweep or --find-rate the schedule does: drop one of them",
                 o->script);
        goto fail;
    }
    return s;
fail:
    bscript_free(s);
    return NULL;
}

/* How many requests data[0, len) holds, split into pieces (at most max). --expect http: whole
 * HTTP/1.x requests; line: lines, each ending in '\n'; other framings: one. -EINVAL with *why,
 * or -E2BIG past max. */
static int split(enum expect kind, const uint8_t *data, size_t len, struct scpiece *pc, int max,
                 const char **why)
{
    int n = 0;

    if (len == 0) {
        *why = "an empty string: there is nothing to send";
        return -EINVAL;
    }
    if (kind != EXPECT_HTTP && kind != EXPECT_LINE) {
        pc[0] = (struct scpiece){0, len, false, false};
        return 1;
    }
    for (size_t off = 0; off < len; n++) {
        size_t one;
        bool head = false, close = false;

        if (n == max)
            return -E2BIG;
        if (kind == EXPECT_LINE) {
            const uint8_t *nl = memchr(data + off, '\n', len - off);
            if (!nl) {
                *why = "a line without its '\\n' at the end (--expect line answers each line)";
                return -EINVAL;
            }
            one = (size_t)(nl - (data + off)) + 1;
        } else {
            struct http_req_info info;
            if (http_request_first(data + off, len - off, &info, why) < 0)
                return -EINVAL;
            one = info.len;
            head = info.head;
            close = info.close;
        }
        pc[n] = (struct scpiece){off, one, head, close};
        off += one;
    }
    return n;
}

/* The string on top of t's stack (request()'s answer), split; popped, and kept referenced. */
static int take_request(struct bscthread *t, const uint8_t **data, struct scpiece *pc, int max)
{
    lua_State *L = t->st.L;
    size_t len;
    const char *s, *why = NULL;
    int n;

    if (lua_type(L, -1) != LUA_TSTRING) {
        char m[160];
        snprintf(m, sizeof(m), "request() must return a string (the bytes to send), not %s",
                 luaL_typename(L, -1));
        lua_pop(L, 1);
        set_error(t, strdup(m));
        return -1;
    }
    s = lua_tolstring(L, -1, &len);
    /* The string last returned is kept referenced, so the same pointer is the same string:
     * its split holds (a script that returns one prepared string is parsed once). */
    if (s == t->last && len == t->last_len && t->last_n <= max) {
        lua_pop(L, 1);
        memcpy(pc, t->last_pc, (size_t)t->last_n * sizeof(*pc));
        *data = (const uint8_t *)s;
        return t->last_n;
    }
    n = split(t->s->o->expect, (const uint8_t *)s, len, pc, max, &why);
    if (n < 0) {
        char m[320];
        lua_pop(L, 1);
        if (n == -E2BIG)
            snprintf(m, sizeof(m),
                     "request() returned a string of more than %d requests: the first one it "
                     "returned held %d, which sets how many a connection has in flight",
                     max, t->w.batch ? t->w.batch : max);
        else
            snprintf(m, sizeof(m), "request() returned what is not a request of --expect %s: %s",
                     t->s->o->expect == EXPECT_HTTP ? "http" : "line", why);
        set_error(t, strdup(m));
        return n == -E2BIG ? -2 : -1;
    }
    luaL_unref(L, LUA_REGISTRYINDEX, t->ref_last);
    t->ref_last = luaL_ref(L, LUA_REGISTRYINDEX); /* pops it, alive until the next one */
    t->last = s;
    t->last_len = len;
    t->last_n = n;
    memcpy(t->last_pc, pc, (size_t)n * sizeof(*pc));
    *data = (const uint8_t *)s;
    return n;
}

int bscript_request(struct bscthread *t, const uint8_t **data, struct scpiece *pieces, int max,
                    int *tag)
{
    lua_State *L = t->st.L;
    int n;

    *tag = LUA_NOREF;
    if (t->first_kept) { /* bscript_thread's, kept to be sent first */
        t->first_kept = false;
        if (t->last_n <= max) {
            memcpy(pieces, t->last_pc, (size_t)t->last_n * sizeof(*pieces));
            *data = (const uint8_t *)t->last;
            *tag = t->first_tag;
            return t->last_n;
        }
        bscript_untag(t, t->first_tag);
    }
    lua_rawgeti(L, LUA_REGISTRYINDEX, t->ref_request);
    if (state_call(&t->st, "request()", SCRIPT_CALL_BUDGET_NS, 0, 2) != LUA_OK) {
        set_error(t, pop_message(L, "request()"));
        return -1;
    }
    /* request() may return a second value, the tag: response() gets it with the answer */
    if (lua_isnil(L, -1) || !t->w.response) {
        lua_pop(L, 1);
    } else {
        lua_insert(L, -2);
        n = take_request(t, data, pieces, max);
        if (n > 1) {
            lua_pop(L, 1);
            set_error(t, strdup("request() returned a tag with a string of several requests: a "
                                "tag goes with one request"));
            return -1;
        }
        if (n < 0) {
            lua_pop(L, 1);
            return n;
        }
        *tag = luaL_ref(L, LUA_REGISTRYINDEX);
        return n;
    }
    return take_request(t, data, pieces, max);
}

void bscript_fail(struct bscthread *t, const char *msg)
{
    set_error(t, strdup(msg));
}

void bscript_untag(struct bscthread *t, int tag)
{
    luaL_unref(t->st.L, LUA_REGISTRYINDEX, tag);
}

/* The preludes (prelude_fn) of a thread's start: what each call of it pushes. */

/* setup(thread), in main's state. */
static int push_setup(lua_State *M, void *ud)
{
    if (raw_global(M, "setup") != LUA_TFUNCTION)
        return -1;
    push_thread(M, ud);
    return 1;
}

/* A chunk of the glue's Lua (wrk_fix_lua, wrk_req_lua), compiled in the call. */
static int push_chunk(lua_State *L, void *ud)
{
    const char *chunk = ud;

    if (luaL_loadbuffer(L, chunk, strlen(chunk), "=wrk") != LUA_OK)
        lua_error(L);
    return 0;
}

/* init(args), args[0] the target, args[1] on the words after "--". */
static int push_init(lua_State *L, void *ud)
{
    const struct bopt *o = ud;

    if (raw_global(L, "init") != LUA_TFUNCTION)
        return -1;
    lua_createtable(L, o->nscript_args, 1);
    lua_pushstring(L, o->target);
    lua_rawseti(L, -2, 0);
    for (int i = 0; i < o->nscript_args; i++) {
        lua_pushstring(L, o->script_args[i]);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

/* What the script wants, read once init() ran, and the functions the engine calls kept in the
 * registry (request(), or wrk.request: the fixed one). */
static int read_wants(lua_State *L, void *ud)
{
    struct bscthread *t = ud;
    const struct bopt *o = t->s->o;

    t->w.response = global_is_function(L, "response");
    t->w.delay = global_is_function(L, "delay");
    t->w.request = global_is_function(L, "request") || o->expect == EXPECT_HTTP;
    t->w.fixed = !global_is_function(L, "request");
    if (raw_global(L, "request") != LUA_TFUNCTION) {
        lua_pop(L, 1);
        if (raw_global(L, "wrk") == LUA_TTABLE) {
            lua_pushliteral(L, "request");
            lua_rawget(L, -2);
        } else {
            lua_pushnil(L);
        }
        lua_remove(L, -2);
    }
    t->ref_request = luaL_ref(L, LUA_REGISTRYINDEX);
    raw_global(L, "response");
    t->ref_response = luaL_ref(L, LUA_REGISTRYINDEX);
    raw_global(L, "delay");
    t->ref_delay = luaL_ref(L, LUA_REGISTRYINDEX);
    return -1;
}

struct bscthread *bscript_thread(struct bscript *s, int idx, char *err, size_t errlen)
{
    const struct bopt *o = s->o;
    struct bscthread *t = calloc(1, sizeof(*t));
    lua_State *L;
    struct scpiece pc[SCRIPT_MAX_BATCH];
    const uint8_t *data;
    int n, tag;

    if (!t) {
        snprintf(err, errlen, "--script: out of memory");
        return NULL;
    }
    t->s = s;
    t->idx = idx;
    t->addr = o->addr;
    t->addrlen = o->addrlen;
    t->ref_request = t->ref_response = t->ref_delay = t->ref_last = LUA_NOREF;
    s->threads[idx] = t;
    s->nthreads = idx + 1;
    if (state_open(&t->st, o, err, errlen) < 0)
        return NULL;
    L = t->st.L;
    lua_getglobal(L, "wrk"); /* a fresh state: nothing of the script's can run yet */
    push_thread(L, t);
    lua_setfield(L, -2, "thread");
    lua_pop(L, 1);
    if (state_run_file(&t->st, o, err, errlen) < 0)
        return NULL;
    /* From here on every step that allocates runs in a call (state_call_with): the script's
     * finalizers may run at any allocation. setup(thread) is in main's state. */
    if (state_call_with(&s->st, "setup()", SCRIPT_PHASE_BUDGET_NS, push_setup, t, 0) != LUA_OK) {
        say_message(s->st.L, "setup()", err, errlen);
        return NULL;
    }
    /* the Host header, init(args), then wrk.request */
    if (state_call_with(&t->st, "wrk", SCRIPT_PHASE_BUDGET_NS, push_chunk, (void *)wrk_fix_lua,
                        0) != LUA_OK)
        goto lua_fail;
    if (state_call_with(&t->st, "init()", SCRIPT_PHASE_BUDGET_NS, push_init, (void *)o, 0) !=
        LUA_OK) {
        say_message(L, "init()", err, errlen);
        return NULL;
    }
    if (state_call_with(&t->st, "wrk.format()", SCRIPT_PHASE_BUDGET_NS, push_chunk,
                        (void *)wrk_req_lua, 0) != LUA_OK ||
        state_call_with(&t->st, "wrk", SCRIPT_PHASE_BUDGET_NS, read_wants, t, 0) != LUA_OK)
        goto lua_fail;
    if (t->w.delay && (o->rate > 0 || o->sweep_step > 0 || o->find_pct > 0)) {
        snprintf(err, errlen,
                 "--script %s: init() defined delay(), which sets when a connection sends; with "
                 "-R, --rate-sweep or --find-rate the schedule does",
                 o->script);
        return NULL;
    }
    if (t->w.delay && o->mode == MODE_SHORT) {
        snprintf(err, errlen,
                 "--script %s defines delay(), which spaces a connection's requests: it needs "
                 "--mode long",
                 o->script);
        return NULL;
    }
    if (t->w.request && o->nclasses) {
        snprintf(err, errlen,
                 "--script %s makes the requests (%s), so --payload or --mix would not be sent: "
                 "drop one",
                 o->script, t->w.fixed ? "wrk.format() for --expect http" : "request()");
        return NULL;
    }
    if (!t->w.request)
        return t;
    /* The first string, as wrk checks it: what it holds sets the thread's batch (pipeline.lua's
     * 3). As in wrk, the first thread's is the check's only, not sent: every other thread sends
     * its first string first (wrk's counter.lua sends /0 from each thread but the first). */
    n = bscript_request(t, &data, pc, SCRIPT_MAX_BATCH, &tag);
    if (idx == 0 || n < 0) {
        bscript_untag(t, tag);
    } else {
        t->first_kept = true;
        t->first_tag = tag;
    }
    if (n < 0) {
        snprintf(err, errlen, "--script: %s", t->error ? t->error : "request() failed");
        return NULL;
    }
    if (n > 1 && o->mode == MODE_SHORT) {
        snprintf(err, errlen,
                 "--script %s: request() returned %d requests in one string; a short connection "
                 "carries one: use --mode long (they are pipelined)",
                 o->script, n);
        return NULL;
    }
    t->w.batch = n;
    return t;
lua_fail:
    say_message(L, "", err, errlen);
    return NULL;
}

const struct scwants *bscript_wants(const struct bscthread *t)
{
    return &t->w;
}

const struct sockaddr *bscript_addr(const struct bscthread *t, socklen_t *len)
{
    *len = t->addrlen;
    return (const struct sockaddr *)&t->addr;
}

static void fail_check(struct bscthread *t, char *msg)
{
    t->fails++;
    if (!t->failure)
        t->failure = msg;
    else
        free(msg);
}

/* The HTTP response's final head (1xx interim heads skipped) as a table of its fields. */
static void push_headers(lua_State *L, const uint8_t *r, size_t head_len)
{
    size_t off = 0, start = 0;

    /* the final head starts after the last empty line before head_len's end */
    for (size_t i = 0; i + 1 < head_len; i++) {
        if (r[i] != '\n')
            continue;
        if (r[i + 1] == '\n' || (r[i + 1] == '\r' && i + 2 < head_len && r[i + 2] == '\n')) {
            size_t next = i + (r[i + 1] == '\n' ? 2 : 3);
            if (next < head_len)
                start = next;
        }
    }
    lua_newtable(L);
    off = start;
    /* skip the status line */
    while (off < head_len && r[off] != '\n')
        off++;
    off++;
    while (off < head_len) {
        size_t eol = off, name_end, v, ve;
        while (eol < head_len && r[eol] != '\n')
            eol++;
        ve = eol;
        if (ve > off && r[ve - 1] == '\r')
            ve--;
        if (ve == off)
            break; /* the empty line */
        for (name_end = off; name_end < ve && r[name_end] != ':'; name_end++)
            ;
        if (name_end < ve) {
            for (v = name_end + 1; v < ve && (r[v] == ' ' || r[v] == '\t'); v++)
                ;
            while (ve > v && (r[ve - 1] == ' ' || r[ve - 1] == '\t'))
                ve--;
            lua_pushlstring(L, (const char *)r + off, name_end - off);
            lua_pushlstring(L, (const char *)r + v, ve - v);
            lua_rawset(L, -3);
        }
        off = eol + 1;
    }
}

/* A chunked body without its framing (the framer checked it already). */
static void push_dechunked(lua_State *L, const uint8_t *b, size_t n)
{
    luaL_Buffer buf;
    size_t off = 0;

    luaL_buffinit(L, &buf);
    while (off < n) {
        uint64_t size = 0;
        while (off < n && ((b[off] >= '0' && b[off] <= '9') ||
                           ((b[off] | 0x20) >= 'a' && (b[off] | 0x20) <= 'f'))) {
            int d = b[off] <= '9' ? b[off] - '0' : (b[off] | 0x20) - 'a' + 10;
            size = size * 16 + (uint64_t)d;
            off++;
        }
        while (off < n && b[off] != '\n')
            off++; /* extensions, CRLF */
        off++;
        if (size == 0 || off >= n)
            break; /* the last chunk; the trailers are not the body */
        if (size > n - off)
            size = n - off;
        luaL_addlstring(&buf, (const char *)b + off, (size_t)size);
        off += (size_t)size;
        while (off < n && b[off] != '\n')
            off++;
        off++;
    }
    luaL_pushresult(&buf);
}

struct respargs {
    const struct bscthread *t;
    int status, tag;
    const uint8_t *resp;
    size_t len, head_len;
    bool chunked;
};

/* response(status, headers, body[, tag]) (HTTP) or response(bytes[, tag]), pushed inside the
 * call (prelude_fn): a response of 64 MiB is a string of 64 MiB in the state. */
static int push_response(lua_State *L, void *ud)
{
    const struct respargs *a = ud;
    size_t head_len = a->head_len > a->len ? a->len : a->head_len;
    int nargs = 1;

    lua_rawgeti(L, LUA_REGISTRYINDEX, a->t->ref_response);
    if (a->t->s->o->expect == EXPECT_HTTP) {
        lua_pushinteger(L, a->status);
        push_headers(L, a->resp, head_len);
        if (a->chunked)
            push_dechunked(L, a->resp + head_len, a->len - head_len);
        else
            lua_pushlstring(L, (const char *)a->resp + head_len, a->len - head_len);
        nargs = 3;
    } else {
        lua_pushlstring(L, (const char *)a->resp, a->len);
    }
    if (a->tag != LUA_NOREF) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, a->tag);
        nargs++;
    }
    return nargs;
}

int bscript_response(struct bscthread *t, int status, const uint8_t *resp, size_t len,
                     size_t head_len, bool chunked, const char *refused, int tag)
{
    lua_State *L = t->st.L;
    struct respargs a = {t, status, tag, resp, len, head_len, chunked};
    int rc;

    if (refused) {
        luaL_unref(L, LUA_REGISTRYINDEX, tag);
        fail_check(t, strdup(refused));
        return 1;
    }
    rc = state_call_with(&t->st, "response()", SCRIPT_CALL_BUDGET_NS, push_response, &a, 2);
    luaL_unref(L, LUA_REGISTRYINDEX, tag); /* the call has its value, if it got that far */
    if (rc != LUA_OK) {
        char *m = pop_message(L, "response()");
        if (t->st.overran) { /* a loop, not a check: the run cannot go on */
            set_error(t, m);
            return -1;
        }
        fail_check(t, m);
        return 1;
    }
    if (lua_type(L, -2) == LUA_TBOOLEAN && !lua_toboolean(L, -2)) {
        char m[512], num[32];
        const char *why = NULL;
        lua_Debug ar;
        /* not lua_tostring: turning a number into a string allocates, and may run a collection
         * step, and the script's finalizers, outside the call */
        if (lua_type(L, -1) == LUA_TSTRING)
            why = lua_tostring(L, -1);
        else if (lua_type(L, -1) == LUA_TNUMBER)
            why = num;
        if (why == num && lua_isinteger(L, -1))
            snprintf(num, sizeof(num), "%lld", (long long)lua_tointeger(L, -1));
        else if (why == num)
            snprintf(num, sizeof(num), "%.14g", lua_tonumber(L, -1));
        /* where the function is: the message says which script's check failed */
        lua_rawgeti(L, LUA_REGISTRYINDEX, t->ref_response);
        lua_getinfo(L, ">S", &ar);
        snprintf(m, sizeof(m), "%s:%d: response() returned false%s%s", ar.short_src, ar.linedefined,
                 why ? ": " : "", why ? why : "");
        lua_pop(L, 2);
        one_line(m);
        fail_check(t, strdup(m));
        return 1;
    }
    lua_pop(L, 2);
    return 0;
}

int64_t bscript_delay(struct bscthread *t)
{
    lua_State *L = t->st.L;
    double ms;
    int isnum;

    lua_rawgeti(L, LUA_REGISTRYINDEX, t->ref_delay);
    if (state_call(&t->st, "delay()", SCRIPT_CALL_BUDGET_NS, 0, 1) != LUA_OK) {
        set_error(t, pop_message(L, "delay()"));
        return -1;
    }
    ms = lua_tonumberx(L, -1, &isnum);
    if (!isnum || ms != ms) {
        char m[160];
        snprintf(m, sizeof(m), "delay() must return a number of milliseconds, not %s",
                 luaL_typename(L, -1));
        lua_pop(L, 1);
        set_error(t, strdup(m));
        return -1;
    }
    lua_pop(L, 1);
    if (ms < 0)
        ms = 0;
    if (ms > MAX_DELAY_MS)
        ms = MAX_DELAY_MS;
    return (int64_t)(ms * 1e6);
}

bool bscript_stop_asked(const struct bscthread *t)
{
    return t->stop_asked;
}

const char *bscript_error(const struct bscthread *t)
{
    return t->error ? t->error : "a script error whose message could not be kept (out of memory)";
}

const char *bscript_thread_failure(const struct bscthread *t)
{
    return t->failure;
}

void bscript_rate_sample(struct bscthread *t, uint64_t n)
{
    if (t->nrates == t->caprates) {
        size_t cap = t->caprates ? t->caprates * 2 : 64;
        uint64_t *r = realloc(t->rates, cap * sizeof(*r));
        if (!r)
            return; /* a sample fewer */
        t->rates = r;
        t->caprates = cap;
    }
    t->rates[t->nrates++] = n;
}

const char *bscript_stuck(const struct bscthread *t, uint64_t now, uint64_t grace)
{
    uint64_t t0 = __atomic_load_n(&t->st.call_t0, __ATOMIC_RELAXED);

    if (t0 && now > t0 + SCRIPT_CALL_BUDGET_NS + grace)
        return "a call into the script";
    return NULL;
}

struct doneargs {
    struct bscript *s;
    const struct scsummary *sum;
};

/* done(summary, latency, requests), pushed inside the call (prelude_fn). */
static int push_done(lua_State *L, void *ud)
{
    const struct doneargs *a = ud;
    const struct bcount *c = &a->sum->c;

    if (raw_global(L, "done") != LUA_TFUNCTION)
        return -1;
    lua_createtable(L, 0, 8);
    lua_pushinteger(L, (lua_Integer)(a->sum->duration_s * 1e6));
    lua_setfield(L, -2, "duration");
    lua_pushinteger(L, (lua_Integer)c->requests);
    lua_setfield(L, -2, "requests");
    lua_pushinteger(L, (lua_Integer)c->bytes_in);
    lua_setfield(L, -2, "bytes");
    lua_pushinteger(L, (lua_Integer)c->checks);
    lua_setfield(L, -2, "checks");
    lua_pushinteger(L, (lua_Integer)c->check_failed);
    lua_setfield(L, -2, "check_failed");
    lua_createtable(L, 0, 8);
    lua_pushinteger(L, (lua_Integer)(c->errors[ERR_REFUSED] + c->errors[ERR_ADDRNOTAVAIL] +
                                     c->errors[ERR_EMFILE]));
    lua_setfield(L, -2, "connect");
    lua_pushinteger(
        L, (lua_Integer)(c->errors[ERR_RESET] + c->errors[ERR_CLOSED] + c->errors[ERR_OTHER]));
    lua_setfield(L, -2, "read");
    lua_pushinteger(L, 0);
    lua_setfield(L, -2, "write");
    lua_pushinteger(L, (lua_Integer)c->http_non2xx);
    lua_setfield(L, -2, "status");
    lua_pushinteger(L, (lua_Integer)c->errors[ERR_TIMEOUT]);
    lua_setfield(L, -2, "timeout");
    lua_pushinteger(L, (lua_Integer)c->errors[ERR_MISMATCH]);
    lua_setfield(L, -2, "mismatch");
    lua_setfield(L, -2, "errors");
    push_latency(L, a->sum->lat);
    push_rates(L, a->s);
    return 3;
}

int bscript_done(struct bscript *s, const struct scsummary *sum, char *err, size_t errlen)
{
    struct doneargs a = {s, sum};

    if (state_call_with(&s->st, "done()", SCRIPT_PHASE_BUDGET_NS, push_done, &a, 0) != LUA_OK) {
        say_message(s->st.L, "done()", err, errlen);
        return -1;
    }
    return 0;
}

const char *bscript_failure(const struct bscript *s)
{
    for (int i = 0; i < s->nthreads; i++)
        if (s->threads[i] && s->threads[i]->failure)
            return s->threads[i]->failure;
    return NULL;
}

void bscript_free(struct bscript *s)
{
    if (!s)
        return;
    /* main's state first: a finalizer of its (__gc, run by lua_close) may still reach the
     * threads it was handed in setup() (thread:get), which must be there, states and all */
    state_close(&s->st);
    for (int i = 0; i < s->nthreads; i++) {
        struct bscthread *t = s->threads[i];
        if (!t)
            continue;
        state_close(&t->st);
        free(t->error);
        free(t->failure);
        free(t->rates);
        free(t);
    }
    free(s->threads);
    free(s);
}
