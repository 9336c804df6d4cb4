/* script: Lua 5.4 request handlers.
 *
 * DESIGN
 *
 * States. Each worker thread owns one lua_State (struct lstate) and is the only thread that
 * touches it: no lock on the request path. The script is compiled once per state; on_data,
 * on_connect and on_close are kept as registry refs, so a request costs one lua_pcall.
 *
 * conn.ctx under leader-follower. Any worker of a group may take a connection's next event, so
 * a Lua table cannot live in one state across events. conn.ctx is therefore a value kept in C
 * between callbacks: the first access in a callback rebuilds the table from the connection's
 * serialized copy, and when the callback returns a touched table is serialized back. It holds
 * strings, numbers, booleans and nested tables (no functions, no cycles), up to SCRIPT_CTX_MAX
 * bytes. A callback that never touches conn.ctx pays nothing; one that does pays for the save
 * (docs/lua.md). Whatever worker runs the next event, the table is the same. Each state also
 * keeps the tables it saved last (small ones, CTX_CACHE_* bounded): when the connection's next
 * event comes to the same worker and no other state saved since (conn->ctx_owner, ctx_ver),
 * the table is taken from there instead of being rebuilt. A failed callback clears ctx_owner,
 * so what it changed is dropped as before.
 *
 * The conn object is a fresh userdata per callback, dead once it returns: a conn stashed in a
 * global raises an error instead of writing to some other connection.
 *
 * Limits. Memory: a per-state cap in the lua_Alloc; past it an allocation fails, Lua raises
 * "not enough memory" (after an emergency GC), the call fails and its connection closes; a
 * state still near the cap after a full collection is rebuilt. Time: nothing on the fast path
 * but two stores and a coarse clock read. A watchdog thread sees a call running past
 * --lua-timeout-ms and sends its worker a signal; the handler (on that thread, as lua.c does
 * for Ctrl-C) arms a count hook that raises an error at every instruction, so a pcall inside
 * the script cannot swallow it. C clears the hook when the call returns. Code inside one C
 * function (a huge string.rep) is not interruptible; the memory cap bounds it.
 *
 * Reload. SIGHUP compiles the file in a scratch state on the main thread; if that fails the
 * old script stays. Otherwise the new source becomes generation N+1 and every worker, between
 * two batches of events, builds a state from it and drops its old one. Connections and their
 * conn.ctx survive; a connection keeps the framing it started with.
 */
#include "script.h"

#include "ctx.h"
#include "log.h"
#include "lpattern.h"
#include "shdict.h"

#include <errno.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#define ERR_LOGS_PER_SEC 5 /* runtime errors logged with a traceback, per second, in total */
#define CTX_CACHE_ITEM 256         /* serialized bytes: larger conn.ctx tables are not cached */
#define CTX_CACHE_BYTES (4u << 20) /* per state, then the cache starts over */
#define CONN_MT "lfepoll.conn"

/* A loaded source, shared by the states built from it. */
struct src {
    int refs; /* under env->mu */
    long gen;
    size_t len;
    char *code;
    bool has_connect;
};

struct script_env {
    struct script_opts o;
    char *path;
    pthread_mutex_t mu; /* cur, refs, scripts[] */
    struct src *cur;
    long gen; /* atomic: cur->gen */
    struct shdict *dict;
    struct script **scripts; /* registered for the watchdog */
    int nscripts, capscripts;
    pthread_t wd;
    bool wd_started;
    pthread_cond_t wd_cv;
    bool wd_stop;
    long log_sec;   /* atomic: second of the current error-log window */
    int log_n;      /* atomic: errors logged in it */
    long log_quiet; /* atomic: errors not logged */
    size_t ctx_used; /* atomic: bytes of saved conn.ctx, all connections (--lua-ctx-mb) */
};

/* One lua_State and what was loaded into it. */
struct lstate {
    lua_State *L;
    size_t used, cap; /* allocator accounting */
    int ref_data, ref_connect, ref_close, ref_mt;
    int ref_cache;      /* conn.ctx cache: [id] = the table, [-id] = its ctx_ver */
    size_t cache_bytes; /* ctx_cost() of each entry */
    struct framing fr;
    long gen;
    struct script_env *env;
    struct script *sc; /* NULL in a scratch state */
    char *sbuf;        /* lfe.shared get scratch */
    size_t sbufcap;
};

struct script {
    struct script_env *env;
    struct worker_stats *st;
    char name[24];
    struct lstate *ls;
    long gen, tried_gen;
    size_t mem; /* atomic: ls->used after the last call */
    /* The watchdog's view of the current call. */
    uint64_t seq;             /* atomic: calls started */
    uint64_t kill_seq;        /* atomic: the call the watchdog wants stopped */
    uint64_t fired;           /* watchdog only: last call signalled */
    long start_ms;            /* atomic: coarse start time of the current call */
    int in_call;              /* atomic */
    pthread_t tid;            /* atomic (an integer on Linux): the thread running sc */
    volatile sig_atomic_t hooked;    /* set by the signal handler: the hook is armed */
    volatile sig_atomic_t timed_out; /* set with it */
    struct outbuf ser; /* conn.ctx serialization scratch */
};

/* The conn userdata, one per callback. */
struct cud {
    struct script_conn *c; /* NULL once the callback returned */
    struct script *sc;
    struct outbuf *out;
    size_t mark;     /* out->len when the callback started */
    int idx;         /* where the userdata sits on the stack of the protected call */
    bool close;
    bool ctx_loaded; /* uservalue 1 holds the table */
};

static __thread struct script *tls_sc; /* the script this thread runs, for the signal handler */
static int timeout_signal;            /* SIGRTMIN, set at start */

int outbuf_put(struct outbuf *b, const void *p, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        char *d;

        while (cap < b->len + n)
            cap *= 2;
        d = realloc(b->data, cap);
        if (!d)
            return -ENOMEM;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

static long coarse_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
}

/* --- allocation with a cap --------------------------------------------------------------- */

static void *l_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    struct lstate *ls = ud;
    size_t old = ptr ? osize : 0; /* for a new block osize is a type tag */
    void *p;

    if (nsize == 0) {
        free(ptr);
        ls->used -= old;
        return NULL;
    }
    if (ls->cap && nsize > old && ls->used - old + nsize > ls->cap)
        return NULL; /* Lua collects and retries once, then raises a memory error */
    p = realloc(ptr, nsize);
    if (p)
        ls->used = ls->used - old + nsize;
    return p;
}

static int l_panic(lua_State *L)
{
    log_err("lua: unprotected error: %s; aborting", lua_tostring(L, -1));
    abort();
}

static void l_warn(void *ud, const char *msg, int tocont)
{
    (void)ud;
    (void)tocont;
    log_warn("lua: warning: %s", msg);
}

/* --- error reporting ---------------------------------------------------------------------- */

/* The message handler: the error with a traceback. */
static int l_msgh(lua_State *L)
{
    const char *msg = lua_tostring(L, 1);

    if (!msg) {
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
            msg = lua_tostring(L, -1);
        else
            msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    luaL_traceback(L, L, msg, 1);
    return 1;
}

static void peer_name(int fd, char *buf, size_t len)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    char host[INET6_ADDRSTRLEN];

    snprintf(buf, len, "?");
    if (fd < 0 || getpeername(fd, (struct sockaddr *)&ss, &sl) < 0)
        return;
    if (ss.ss_family == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
        snprintf(buf, len, "%s:%u", host, ntohs(a->sin_port));
    } else if (ss.ss_family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
        snprintf(buf, len, "[%s]:%u", host, ntohs(a->sin6_port));
    }
}

/* Logs a failed callback, at most ERR_LOGS_PER_SEC per second over all workers; the rest are
 * counted and summed up in the next line that is logged. */
static void report(struct script *sc, const struct script_conn *c, const char *cb,
                   const char *what)
{
    struct script_env *e = sc->env;
    long sec = coarse_ms() / 1000, was = __atomic_load_n(&e->log_sec, __ATOMIC_RELAXED);
    long quiet = 0;
    char peer[64];

    if (sec != was && __atomic_compare_exchange_n(&e->log_sec, &was, sec, false,
                                                  __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
        __atomic_store_n(&e->log_n, 0, __ATOMIC_RELAXED);
        quiet = __atomic_exchange_n(&e->log_quiet, 0, __ATOMIC_RELAXED);
    }
    if (quiet)
        log_warn("lua: %ld more failed callbacks were not logged (at most %d a second)", quiet,
                 ERR_LOGS_PER_SEC);
    if (__atomic_add_fetch(&e->log_n, 1, __ATOMIC_RELAXED) > ERR_LOGS_PER_SEC) {
        __atomic_add_fetch(&e->log_quiet, 1, __ATOMIC_RELAXED);
        return;
    }
    peer_name(c ? c->fd : -1, peer, sizeof(peer));
    log_warn("lua: worker %s, connection %llu (%s): %s: %s", sc->name,
             c ? (unsigned long long)c->id : 0ull, peer, cb, what);
}

void script_note(struct script *sc, const struct script_conn *c, const char *where,
                 const char *what)
{
    report(sc, c, where, what);
}

/* --- conn.ctx: serialized between callbacks (ctx.c), cached per state ---------------- */

/* After a save of c's ctx (the table at idx): keep that table in this state, marked with the
 * new version, so that the next event on this worker need not rebuild it. The version entry
 * holds (version << 16) | cost, so an entry that changes size is charged again. */
static void cache_put(lua_State *L, struct script *sc, struct script_conn *c, int idx)
{
    struct lstate *ls = sc->ls;
    size_t cost = ctx_cost(c->ctxlen), old = 0;

    idx = lua_absindex(L, idx);
    c->ctx_ver++;
    c->ctx_owner = NULL;
    if (c->ctxlen > CTX_CACHE_ITEM)
        return;
    /* closed connections pile up too; and the cache takes at most 1/8 of a memory cap */
    if (ls->cache_bytes + cost >
        (ls->cap && ls->cap / 8 < CTX_CACHE_BYTES ? ls->cap / 8 : CTX_CACHE_BYTES)) {
        lua_newtable(L);
        lua_rawseti(L, LUA_REGISTRYINDEX, ls->ref_cache);
        ls->cache_bytes = 0;
    }
    lua_rawgeti(L, LUA_REGISTRYINDEX, ls->ref_cache);
    if (lua_rawgeti(L, -1, -(lua_Integer)c->id) == LUA_TNUMBER)
        old = (size_t)(lua_tointeger(L, -1) & 0xffff);
    lua_pop(L, 1);
    lua_pushvalue(L, idx);
    lua_rawseti(L, -2, (lua_Integer)c->id);
    lua_pushinteger(L, (lua_Integer)c->ctx_ver << 16 | (lua_Integer)cost);
    lua_rawseti(L, -2, -(lua_Integer)c->id);
    lua_pop(L, 1);
    ls->cache_bytes = ls->cache_bytes + cost - (old <= ls->cache_bytes ? old : ls->cache_bytes);
    c->ctx_owner = sc;
}

/* Pushes c's cached table if this state holds the one of its last save and that table still
 * holds what was saved; returns false (pushing nothing) otherwise. The check matters: a script
 * may keep a reference to the table (or a subtable) somewhere and change it between the
 * connection's callbacks; every other worker rebuilds conn.ctx from the saved bytes, so this
 * one must hand out the same content. Comparing a small table with the bytes is cheaper than
 * rebuilding it (no allocation). */
static bool cache_get(lua_State *L, struct script *sc, struct script_conn *c)
{
    int top = lua_gettop(L);

    if (c->ctx_owner != sc || !c->ctx)
        return false;
    lua_rawgeti(L, LUA_REGISTRYINDEX, sc->ls->ref_cache);
    if (lua_rawgeti(L, top + 1, -(lua_Integer)c->id) == LUA_TNUMBER &&
        (uint32_t)(lua_tointeger(L, top + 2) >> 16) == c->ctx_ver &&
        lua_rawgeti(L, top + 1, (lua_Integer)c->id) == LUA_TTABLE) {
        if (ctx_same(L, top + 3, c->ctx, c->ctxlen)) {
            lua_replace(L, top + 1);
            lua_settop(L, top + 1);
            return true;
        }
    }
    lua_settop(L, top);
    c->ctx_owner = NULL;
    return false;
}

/* conn.ctx's own bound: per connection, and all connections together (--lua-ctx-mb). */
static size_t ctx_limit(const struct script_env *e)
{
    size_t max = e->o.ctx_max ? e->o.ctx_max : SCRIPT_CTX_MAX;

    return e->o.ctx_total && e->o.ctx_total < max ? e->o.ctx_total : max;
}

/* Charges (or refunds) the C heap that a connection's saved conn.ctx takes against
 * --lua-ctx-mb. Returns false when the total would pass it. */
static bool ctx_charge(struct script_env *e, size_t from, size_t to)
{
    if (to <= from) {
        __atomic_sub_fetch(&e->ctx_used, from - to, __ATOMIC_RELAXED);
        return true;
    }
    if (__atomic_add_fetch(&e->ctx_used, to - from, __ATOMIC_RELAXED) > e->o.ctx_total &&
        e->o.ctx_total) {
        __atomic_sub_fetch(&e->ctx_used, to - from, __ATOMIC_RELAXED);
        return false;
    }
    return true;
}

/* After a callback that touched conn.ctx (u's uservalue 1, a table): serialize it into c. */
static void ctx_save(lua_State *L, struct cud *u)
{
    struct script_env *e = u->sc->env;
    struct outbuf *b = &u->sc->ser;
    struct script_conn *c = u->c;
    int top = lua_gettop(L);
    char *blob;

    b->len = 0;
    lua_getiuservalue(L, u->idx, 1);
    if (lua_type(L, -1) != LUA_TTABLE)
        luaL_error(L, "conn.ctx must be a table, not a %s", luaL_typename(L, -1));
    lua_pushnil(L);
    if (!lua_next(L, -2)) { /* empty: nothing to keep */
        ctx_charge(e, c->ctxlen, 0);
        free(c->ctx);
        c->ctx = NULL;
        c->ctxlen = 0;
        c->ctx_ver++;
        c->ctx_owner = NULL;
        lua_settop(L, top);
        return;
    }
    lua_settop(L, top + 1);
    ctx_encode(L, -1, b, ctx_limit(e));
    if (!ctx_charge(e, c->ctxlen, b->len))
        luaL_error(L,
                   "conn.ctx: all connections' conn.ctx together would pass --lua-ctx-mb "
                   "(%I MiB); keep less per connection or raise it",
                   (lua_Integer)(e->o.ctx_total >> 20));
    blob = b->len <= c->ctxlen ? c->ctx : realloc(c->ctx, b->len);
    if (!blob) {
        ctx_charge(e, b->len, c->ctxlen);
        luaL_error(L, "not enough memory");
    }
    memcpy(blob, b->data, b->len);
    c->ctx = blob;
    c->ctxlen = (uint32_t)b->len;
    c->env = e;
    cache_put(L, u->sc, c, -1);
    if (b->cap > 64 * 1024) { /* one big ctx does not pin a big buffer */
        free(b->data);
        b->data = NULL;
        b->cap = 0;
    }
    b->len = 0;
    lua_settop(L, top);
}

void script_conn_release(struct script_conn *c)
{
    if (c->env)
        ctx_charge(c->env, c->ctxlen, 0);
    free(c->ctx);
    c->ctx = NULL;
    c->ctxlen = 0;
    c->env = NULL;
}

/* --- the conn object ----------------------------------------------------------------------- */

static struct cud *check_conn(lua_State *L)
{
    struct cud *u = luaL_checkudata(L, 1, CONN_MT);

    if (!u->c)
        luaL_error(L, "conn used after its callback returned; keep per-connection data in "
                      "conn.ctx, not the conn object");
    return u;
}

/* Output of one callback (conn:send and the returned string) past --max-pending fails it: the
 * connection is closed, and no worker's buffer grows without bound. */
static void put_output(lua_State *L, struct cud *u, const char *s, size_t len, const char *what)
{
    size_t max = u->sc->env->o.max_output, have = u->out->len - u->mark;

    if (max && len > max - (have < max ? have : max))
        luaL_error(L,
                   "%s: this callback's output would pass --max-pending (%I bytes; %I queued, "
                   "%I more); the connection is closed",
                   what, (lua_Integer)max, (lua_Integer)have, (lua_Integer)len);
    if (outbuf_put(u->out, s, len) < 0)
        luaL_error(L, "not enough memory");
}

static int l_send(lua_State *L)
{
    struct cud *u = check_conn(L);
    size_t len;
    const char *s = luaL_checklstring(L, 2, &len);

    put_output(L, u, s, len, "conn:send");
    return 0;
}

static int l_close(lua_State *L)
{
    check_conn(L)->close = true;
    return 0;
}

static int l_conn_index(lua_State *L)
{
    struct cud *u = check_conn(L);
    const char *k = luaL_checkstring(L, 2);

    if (!strcmp(k, "ctx")) {
        if (lua_getiuservalue(L, 1, 1) == LUA_TTABLE)
            return 1;
        lua_pop(L, 1);
        if (cache_get(L, u->sc, u->c)) {
            /* the table of the last save, kept in this state, unchanged since */
        } else if (u->c->ctx) {
            if (ctx_decode(L, u->c->ctx, u->c->ctxlen) < 0)
                return luaL_error(L, "conn.ctx: corrupt saved state");
        } else {
            lua_newtable(L);
        }
        lua_pushvalue(L, -1);
        lua_setiuservalue(L, 1, 1);
        u->ctx_loaded = true;
        return 1;
    }
    if (!strcmp(k, "send")) {
        lua_pushcfunction(L, l_send);
    } else if (!strcmp(k, "close")) {
        lua_pushcfunction(L, l_close);
    } else if (!strcmp(k, "id")) {
        lua_pushinteger(L, (lua_Integer)u->c->id);
    } else if (!strcmp(k, "peer")) {
        char peer[64];
        peer_name(u->c->fd, peer, sizeof(peer));
        lua_pushstring(L, peer);
    } else {
        lua_pushnil(L);
    }
    return 1;
}

static int l_conn_newindex(lua_State *L)
{
    struct cud *u = check_conn(L);
    const char *k = luaL_checkstring(L, 2);

    if (strcmp(k, "ctx") != 0)
        return luaL_error(L, "conn.%s cannot be set; keep per-connection data in conn.ctx", k);
    if (!lua_istable(L, 3))
        return luaL_error(L, "conn.ctx must be a table, not a %s", luaL_typename(L, 3));
    lua_settop(L, 3);
    lua_setiuservalue(L, 1, 1);
    u->ctx_loaded = true;
    return 0;
}

static int l_conn_tostring(lua_State *L)
{
    struct cud *u = luaL_checkudata(L, 1, CONN_MT);

    if (u->c)
        lua_pushfstring(L, "conn %I", (lua_Integer)u->c->id);
    else
        lua_pushliteral(L, "conn (closed callback)");
    return 1;
}

/* --- lfe.shared ------------------------------------------------------------------------------ */

static struct lstate *upstate(lua_State *L)
{
    return lua_touserdata(L, lua_upvalueindex(1));
}

/* First argument after an optional self (lfe.shared:get(k) and lfe.shared.get(k) both work). */
static int argbase(lua_State *L)
{
    return lua_istable(L, 1) ? 2 : 1;
}

static int push_shval(lua_State *L, const struct shval *v)
{
    switch (v->type) {
    case SHV_INT:
        lua_pushinteger(L, v->i);
        break;
    case SHV_NUM:
        lua_pushnumber(L, v->d);
        break;
    case SHV_STR:
        lua_pushlstring(L, v->s, v->len);
        break;
    default:
        lua_pushnil(L);
    }
    return 1;
}

static int to_shval(lua_State *L, int idx, struct shval *v, const char *what)
{
    switch (lua_type(L, idx)) {
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx)) {
            v->type = SHV_INT;
            v->i = lua_tointeger(L, idx);
        } else {
            v->type = SHV_NUM;
            v->d = lua_tonumber(L, idx);
        }
        return 0;
    case LUA_TSTRING:
        v->type = SHV_STR;
        v->s = lua_tolstring(L, idx, &v->len);
        return 0;
    case LUA_TNIL:
    case LUA_TNONE:
        v->type = SHV_NONE;
        return 0;
    default:
        return luaL_error(L, "lfe.shared: %s must be a string or a number, not a %s", what,
                          luaL_typename(L, idx));
    }
}

static int shared_err(lua_State *L, int rc, size_t klen, size_t vlen)
{
    lua_pushnil(L);
    if (rc == -E2BIG)
        lua_pushfstring(L, "no memory: the entry (%I bytes) is larger than a shard of lfe.shared "
                           "holds; raise --lua-shared-mb",
                        (lua_Integer)(klen + vlen));
    else if (rc == -EINVAL)
        lua_pushliteral(L, "not a number");
    else if (rc == -ENOENT)
        lua_pushliteral(L, "not found");
    else
        lua_pushliteral(L, "no memory");
    return 2;
}

static int l_shared_get(lua_State *L)
{
    struct lstate *ls = upstate(L);
    int b = argbase(L);
    size_t klen;
    const char *k = luaL_checklstring(L, b, &klen);
    struct shval v;

    if (shdict_get(ls->env->dict, k, klen, &v, &ls->sbuf, &ls->sbufcap) < 0)
        return luaL_error(L, "not enough memory");
    return push_shval(L, &v);
}

static int l_shared_set(lua_State *L)
{
    struct lstate *ls = upstate(L);
    int b = argbase(L), rc;
    size_t klen;
    const char *k = luaL_checklstring(L, b, &klen);
    struct shval v;

    to_shval(L, b + 1, &v, "a value");
    rc = shdict_set(ls->env->dict, k, klen, &v);
    if (rc < 0)
        return shared_err(L, rc, klen, v.type == SHV_STR ? v.len : 8);
    lua_pushboolean(L, 1);
    lua_pushnil(L);
    lua_pushboolean(L, rc > 0); /* forcible: other keys were evicted */
    return 3;
}

/* A number argument of incr. A numeric string ("5") is converted as Lua's arithmetic would
 * ("5" an integer, "5.0" a float): stored as the string it would be read back as a number
 * without the conversion, and incr(k, 1, "5") made 1. */
static void num_arg(lua_State *L, int idx, struct shval *v)
{
    if (lua_type(L, idx) == LUA_TSTRING) {
        size_t len;
        const char *s = lua_tolstring(L, idx, &len);

        if (lua_stringtonumber(L, s) != len + 1)
            luaL_argerror(L, idx, "number expected, got a string that is not one");
        lua_replace(L, idx);
    }
    luaL_checknumber(L, idx);
    if (lua_isinteger(L, idx)) {
        v->type = SHV_INT;
        v->i = lua_tointeger(L, idx);
    } else {
        v->type = SHV_NUM;
        v->d = lua_tonumber(L, idx);
    }
}

static int l_shared_incr(lua_State *L)
{
    struct lstate *ls = upstate(L);
    int b = argbase(L), rc;
    size_t klen;
    const char *k = luaL_checklstring(L, b, &klen);
    struct shval delta = {.type = SHV_INT, .i = 1}, init, out;
    bool has_init = !lua_isnoneornil(L, b + 2);

    if (!lua_isnoneornil(L, b + 1))
        num_arg(L, b + 1, &delta);
    if (has_init)
        num_arg(L, b + 2, &init);
    rc = shdict_incr(ls->env->dict, k, klen, &delta, has_init ? &init : NULL, &out);
    if (rc < 0)
        return shared_err(L, rc, klen, 8);
    return push_shval(L, &out);
}

static int l_shared_delete(lua_State *L)
{
    struct lstate *ls = upstate(L);
    size_t klen;
    const char *k = luaL_checklstring(L, argbase(L), &klen);

    lua_pushboolean(L, shdict_delete(ls->env->dict, k, klen));
    return 1;
}

static int l_log(lua_State *L)
{
    struct lstate *ls = upstate(L);
    luaL_Buffer buf;
    int n = lua_gettop(L);

    luaL_buffinit(L, &buf);
    for (int i = 1; i <= n; i++) {
        luaL_tolstring(L, i, NULL);
        luaL_addvalue(&buf);
        if (i < n)
            luaL_addchar(&buf, ' ');
    }
    luaL_pushresult(&buf);
    log_info("lua: worker %s: %s", ls->sc ? ls->sc->name : "check", lua_tostring(L, -1));
    return 0;
}

/* --- loading ------------------------------------------------------------------------------- */

/* print: to the log, one escaped line (stdout may be a pipe nobody reads: a worker blocked on
 * it would stop serving). */
static int l_print(lua_State *L)
{
    struct lstate *ls = upstate(L);
    luaL_Buffer buf;
    int n = lua_gettop(L);

    luaL_buffinit(L, &buf);
    for (int i = 1; i <= n; i++) {
        luaL_tolstring(L, i, NULL);
        luaL_addvalue(&buf);
        if (i < n)
            luaL_addchar(&buf, '\t');
    }
    luaL_pushresult(&buf);
    log_info("lua: worker %s: print: %s", ls->sc ? ls->sc->name : "check", lua_tostring(L, -1));
    return 0;
}

/* load, text chunks only: a binary chunk is bytecode that the VM trusts (a crafted one reads
 * and writes memory at will), and a script that loads client input would run it. */
static int l_load_text(lua_State *L)
{
    int n = lua_gettop(L);

    if (n >= 3 && !lua_isnil(L, 3)) {
        const char *mode = luaL_checkstring(L, 3);
        if (strcmp(mode, "t") != 0)
            return luaL_error(L, "load: mode '%s' refused: only text chunks (\"t\") load in the "
                                 "default sandbox; --lua-unsafe allows binary ones",
                              mode);
    }
    if (n < 3)
        lua_settop(L, 3); /* no env argument: load keeps the global one */
    lua_pushliteral(L, "t");
    lua_replace(L, 3);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
}

/* setmetatable without __gc: Lua runs finalizers with hooks off, so the timeout cannot stop a
 * finalizer that loops, and it runs at any allocation of any later callback. */
static int l_setmetatable_nogc(lua_State *L)
{
    if (lua_type(L, 2) == LUA_TTABLE) {
        lua_pushliteral(L, "__gc");
        if (lua_rawget(L, 2) != LUA_TNIL)
            return luaL_error(L, "setmetatable: __gc metamethods are refused in the default "
                                 "sandbox (a finalizer runs where --lua-timeout-ms cannot stop "
                                 "it); --lua-unsafe allows them");
        lua_pop(L, 1);
    }
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, 1);
    return 1;
}

/* Replaces global name with f, which gets the original as upvalue 1. */
static void wrap_global(lua_State *L, const char *name, lua_CFunction f)
{
    lua_getglobal(L, name);
    lua_pushcclosure(L, f, 1);
    lua_setglobal(L, name);
}

static void open_libs(lua_State *L, struct lstate *ls, bool unsafe)
{
    static const luaL_Reg safe[] = {{LUA_GNAME, luaopen_base},     {LUA_STRLIBNAME, luaopen_string},
                                    {LUA_TABLIBNAME, luaopen_table}, {LUA_MATHLIBNAME, luaopen_math},
                                    {LUA_UTF8LIBNAME, luaopen_utf8}, {NULL, NULL}};

    if (unsafe) {
        luaL_openlibs(L);
    } else {
        for (const luaL_Reg *r = safe; r->func; r++) {
            luaL_requiref(L, r->name, r->func, 1);
            lua_pop(L, 1);
        }
        /* Reading files at run time blocks a worker: not by default. */
        lua_pushnil(L);
        lua_setglobal(L, "dofile");
        lua_pushnil(L);
        lua_setglobal(L, "loadfile");
        wrap_global(L, "load", l_load_text);
        wrap_global(L, "setmetatable", l_setmetatable_nogc);
        /* os.time and os.clock only. */
        luaopen_os(L);
        lua_createtable(L, 0, 2);
        lua_getfield(L, -2, "time");
        lua_setfield(L, -2, "time");
        lua_getfield(L, -2, "clock");
        lua_setfield(L, -2, "clock");
        lua_setglobal(L, "os");
        lua_pop(L, 1);
    }
    lua_getglobal(L, LUA_STRLIBNAME);
    if (!unsafe) {
        lua_pushnil(L); /* bytecode out is the other half of bytecode in */
        lua_setfield(L, -2, "dump");
    }
    /* Pattern matching that the timeout can stop (lua's own never returns to the VM). */
    lpattern_install(L, lua_gettop(L), ls->sc ? &ls->sc->timed_out : NULL);
    lua_pop(L, 1);
    lua_pushlightuserdata(L, ls);
    lua_pushcclosure(L, l_print, 1);
    lua_setglobal(L, "print");
}

static void open_lfe(lua_State *L, struct lstate *ls)
{
    static const luaL_Reg shared[] = {{"get", l_shared_get},
                                      {"set", l_shared_set},
                                      {"incr", l_shared_incr},
                                      {"delete", l_shared_delete},
                                      {NULL, NULL}};

    lua_createtable(L, 0, 4);
    lua_createtable(L, 0, 4);
    lua_pushlightuserdata(L, ls);
    luaL_setfuncs(L, shared, 1);
    lua_setfield(L, -2, "shared");
    lua_pushlightuserdata(L, ls);
    lua_pushcclosure(L, l_log, 1);
    lua_setfield(L, -2, "log");
    lua_pushstring(L, ls->sc ? ls->sc->name : "check");
    lua_setfield(L, -2, "worker");
    lua_setglobal(L, "lfe");
}

/* What load_protected() needs and fills. */
struct load {
    struct lstate *ls;
    const struct src *s;
    const char *path;
    char *err; /* a check that failed writes here and sets failed */
    size_t errlen;
    bool failed;
    int ret_line;    /* the line of the main chunk's return statement, for "FILE:LINE:" */
    long deadline;   /* coarse ms past which the main chunk is stopped; 0 = none */
};

static __thread struct load *cur_load; /* for the hook below */

static void load_hook(lua_State *L, lua_Debug *ar)
{
    struct load *ld = cur_load;

    if (ar->event == LUA_HOOKCOUNT) {
        if (ld->deadline && coarse_ms() > ld->deadline)
            luaL_error(L, "the main chunk ran longer than --lua-timeout-ms");
        return;
    }
    if (lua_getinfo(L, "Sl", ar) && !strcmp(ar->what, "main"))
        ld->ret_line = ar->currentline;
}

/* t[name] without metamethods (a "strict" __index that raises must not decide). */
static int rawfield(lua_State *L, int t, const char *name)
{
    lua_pushstring(L, name);
    return lua_rawget(L, t);
}

static bool opt_func(lua_State *L, struct load *ld, const char *name, int *ref)
{
    int t = rawfield(L, 2, name);

    *ref = LUA_NOREF;
    if (t == LUA_TNIL) {
        lua_pop(L, 1);
        return true;
    }
    if (t != LUA_TFUNCTION) {
        snprintf(ld->err, ld->errlen, "%s:%d: %s must be a function, not a %s", ld->path,
                 ld->ret_line, name, lua_typename(L, t));
        return false;
    }
    *ref = luaL_ref(L, LUA_REGISTRYINDEX);
    return true;
}

static bool read_framing(lua_State *L, struct load *ld, struct framing *f)
{
    const char *kind;
    int t;

    memset(f, 0, sizeof(*f));
    f->max_frame = 1u << 20;
    t = rawfield(L, 2, "max_frame");
    if (t != LUA_TNIL) {
        lua_Integer v = lua_tointeger(L, -1);
        if (!lua_isinteger(L, -1) || v < 1 || v > (64 << 20)) {
            snprintf(ld->err, ld->errlen, "%s:%d: max_frame must be an integer from 1 to %d bytes",
                     ld->path, ld->ret_line, 64 << 20);
            return false;
        }
        f->max_frame = (uint32_t)v;
    }
    lua_pop(L, 1);
    t = rawfield(L, 2, "framing");
    kind = t == LUA_TNIL ? "raw" : t == LUA_TSTRING ? lua_tostring(L, -1) : "?";
    if (!strcmp(kind, "raw")) {
        f->kind = FRAME_RAW;
    } else if (!strcmp(kind, "line")) {
        f->kind = FRAME_LINE;
    } else if (!strcmp(kind, "len32")) {
        f->kind = FRAME_LEN32;
    } else if (!strcmp(kind, "fixed")) {
        f->kind = FRAME_FIXED;
    } else {
        snprintf(ld->err, ld->errlen,
                 "%s:%d: framing must be \"raw\", \"line\", \"len32\" or \"fixed\"", ld->path,
                 ld->ret_line);
        return false;
    }
    lua_pop(L, 1);
    if (f->kind == FRAME_LINE) {
        size_t dlen = 1;
        const char *d = "\n";

        if (rawfield(L, 2, "delimiter") != LUA_TNIL) {
            d = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &dlen) : NULL;
            if (!d || dlen < 1 || dlen > FRAME_DELIM_MAX) {
                snprintf(ld->err, ld->errlen,
                         "%s:%d: delimiter must be a string of 1 to %d bytes", ld->path,
                         ld->ret_line, FRAME_DELIM_MAX);
                return false;
            }
        } else {
            f->strip_cr = true;
        }
        memcpy(f->delim, d, dlen);
        f->dlen = (uint8_t)dlen;
        lua_pop(L, 1);
    }
    if (f->kind == FRAME_FIXED) {
        lua_Integer v = 0;

        if (rawfield(L, 2, "frame_size") == LUA_TNUMBER && lua_isinteger(L, -1))
            v = lua_tointeger(L, -1);
        if (v < 1 || v > f->max_frame) {
            snprintf(ld->err, ld->errlen,
                     "%s:%d: framing \"fixed\" needs frame_size, an integer from 1 to max_frame",
                     ld->path, ld->ret_line);
            return false;
        }
        f->size = (uint32_t)v;
        lua_pop(L, 1);
    }
    return true;
}

/* Everything that builds a state, under lua_pcall: the libraries, lfe, the chunk run once, the
 * returned table read. Any of it can run out of memory, and the returned table is the
 * script's: its fields are read raw. A failed check fills ld->err and returns normally. */
static int load_protected(lua_State *L)
{
    static const luaL_Reg conn_mt[] = {{"__index", l_conn_index},
                                       {"__newindex", l_conn_newindex},
                                       {"__tostring", l_conn_tostring},
                                       {NULL, NULL}};
    struct load *ld = lua_touserdata(L, 1);
    struct lstate *ls = ld->ls;
    char chunk[512];
    size_t frame_max;

    lua_settop(L, 0);
    open_libs(L, ls, ls->env->o.unsafe);
    open_lfe(L, ls);
    luaL_newmetatable(L, CONN_MT);
    luaL_setfuncs(L, conn_mt, 0);
    ls->ref_mt = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_newtable(L);
    ls->ref_cache = luaL_ref(L, LUA_REGISTRYINDEX);

    snprintf(chunk, sizeof(chunk), "@%s", ld->path);
    if (luaL_loadbufferx(L, ld->s->code, ld->s->len, chunk, "t") != LUA_OK)
        return lua_error(L);
    cur_load = ld;
    lua_sethook(L, load_hook, LUA_MASKRET | LUA_MASKCOUNT, 1000);
    lua_call(L, 0, 1); /* index 1 */
    lua_sethook(L, NULL, 0, 0);
    lua_pushnil(L); /* index 2: the table, or nothing to read */
    if (lua_istable(L, 1))
        lua_copy(L, 1, 2);
    ld->failed = true;
    if (!lua_istable(L, 1)) {
        snprintf(ld->err, ld->errlen,
                 "%s:%d: the script returns %s; it must return a table with on_data = "
                 "function(conn, frame) ... end",
                 ld->path, ld->ret_line, luaL_typename(L, 1));
        return 0;
    }
    if (rawfield(L, 2, "on_data") != LUA_TFUNCTION) {
        snprintf(ld->err, ld->errlen,
                 "%s:%d: the returned table has no on_data function; add on_data = "
                 "function(conn, frame) ... end",
                 ld->path, ld->ret_line);
        return 0;
    }
    ls->ref_data = luaL_ref(L, LUA_REGISTRYINDEX);
    if (!opt_func(L, ld, "on_connect", &ls->ref_connect) ||
        !opt_func(L, ld, "on_close", &ls->ref_close) || !read_framing(L, ld, &ls->fr))
        return 0;
    /* A frame is copied into the state as a string: one that cannot fit beside what the script
     * holds after loading could never be served. */
    frame_max = ls->fr.kind == FRAME_RAW && ls->fr.max_frame > 65536 ? 65536 : ls->fr.max_frame;
    lua_gc(L, LUA_GCCOLLECT);
    if (ls->cap && frame_max + ls->used > ls->cap && rawfield(L, 2, "max_frame") == LUA_TNIL &&
        ls->fr.kind != FRAME_FIXED) {
        /* The default (1 MiB) yields to a small cap: half of what is left. */
        ls->fr.max_frame = (uint32_t)(ls->used < ls->cap ? (ls->cap - ls->used) / 2 : 1);
        frame_max = ls->fr.max_frame;
    }
    if (ls->cap && frame_max + ls->used > ls->cap) {
        snprintf(ld->err, ld->errlen,
                 "%s:%d: max_frame %zu bytes cannot fit in --lua-mem-mb %zu (%zu bytes, of "
                 "which the loaded script holds %zu): lower max_frame or raise --lua-mem-mb",
                 ld->path, ld->ret_line, frame_max, ls->cap >> 20, ls->cap, ls->used);
        return 0;
    }
    lua_settop(L, 0);
    /* Handlers make short-lived garbage around a small live heap: generational GC. */
    lua_gc(L, LUA_GCGEN, 0, 0);
    ld->failed = false;
    return 0;
}

static void lstate_free(struct lstate *ls)
{
    if (!ls)
        return;
    if (ls->L)
        lua_close(ls->L);
    free(ls->sbuf);
    free(ls);
}

/* Builds a state from src: libraries, lfe, the chunk run once, the returned table checked and
 * its callbacks kept as refs. Stack afterwards: the message handler at index 1. */
static struct lstate *lstate_new(struct script_env *e, struct script *sc, const struct src *s,
                                 char *err, size_t errlen)
{
    struct lstate *ls = calloc(1, sizeof(*ls));
    struct load ld = {.s = s, .path = e->path, .err = err, .errlen = errlen};
    lua_State *L;
    int rc;

    if (!ls) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    ls->cap = e->o.mem_cap;
    ls->gen = s->gen;
    ls->env = e;
    ls->sc = sc;
    ls->ref_data = ls->ref_connect = ls->ref_close = LUA_NOREF;
    ls->L = L = lua_newstate(l_alloc, ls);
    if (!L) {
        snprintf(err, errlen, "cannot create a Lua state (--lua-mem-mb too small?)");
        free(ls);
        return NULL;
    }
    lua_atpanic(L, l_panic);
    lua_setwarnf(L, l_warn, ls);
    ld.ls = ls;
    if (e->o.timeout_ms > 0)
        ld.deadline = coarse_ms() + e->o.timeout_ms;
    /* Neither push allocates: the new state's stack has room. */
    lua_pushcfunction(L, l_msgh); /* index 1, for every call */
    lua_pushcfunction(L, load_protected);
    lua_pushlightuserdata(L, &ld);
    rc = lua_pcall(L, 1, 0, 0);
    lua_sethook(L, NULL, 0, 0);
    cur_load = NULL;
    if (rc != LUA_OK) {
        const char *m = lua_tostring(L, -1);
        snprintf(err, errlen, "%s", rc == LUA_ERRMEM ? "not enough memory while loading the "
                                                       "script (raise --lua-mem-mb)"
                                                     : m ? m : "error while loading");
        goto fail;
    }
    if (ld.failed)
        goto fail;
    lua_settop(L, 1);
    return ls;

fail:
    lstate_free(ls);
    return NULL;
}

static struct src *src_read(const char *path, long gen, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    struct src *s;
    long len;

    if (!f) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    s = calloc(1, sizeof(*s));
    if (!s || fseek(f, 0, SEEK_END) < 0 || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) < 0 ||
        !(s->code = malloc((size_t)len + 1)) ||
        fread(s->code, 1, (size_t)len, f) != (size_t)len) {
        snprintf(err, errlen, "cannot read %s: %s", path, errno ? strerror(errno) : "short read");
        fclose(f);
        if (s)
            free(s->code);
        free(s);
        return NULL;
    }
    fclose(f);
    s->len = (size_t)len;
    s->gen = gen;
    s->refs = 1;
    return s;
}

static void src_unref(struct script_env *e, struct src *s)
{
    bool last;

    if (!s)
        return;
    pthread_mutex_lock(&e->mu);
    last = --s->refs == 0;
    pthread_mutex_unlock(&e->mu);
    if (last) {
        free(s->code);
        free(s);
    }
}

/* Loads s in a scratch state: the check before a source is used. */
static int src_check(struct script_env *e, struct src *s, char *err, size_t errlen)
{
    struct lstate *ls = lstate_new(e, NULL, s, err, errlen);

    if (!ls)
        return -1;
    s->has_connect = ls->ref_connect != LUA_NOREF;
    lstate_free(ls);
    return 0;
}

struct script_env *script_env_new(const struct script_opts *o, char *err, size_t errlen)
{
    struct script_env *e = calloc(1, sizeof(*e));

    if (!e) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    e->o = *o;
    e->path = strdup(o->path);
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->wd_cv, NULL);
    e->dict = shdict_new(o->shared_bytes);
    if (!e->path || !e->dict) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    e->cur = src_read(e->path, 1, err, errlen);
    if (!e->cur || src_check(e, e->cur, err, errlen) < 0)
        goto fail;
    e->gen = 1;
    return e;

fail:
    script_env_free(e);
    return NULL;
}

long script_env_reload(struct script_env *e, char *err, size_t errlen)
{
    long gen = __atomic_load_n(&e->gen, __ATOMIC_RELAXED) + 1;
    struct src *s = src_read(e->path, gen, err, errlen), *old;

    if (!s)
        return -1;
    if (src_check(e, s, err, errlen) < 0) {
        src_unref(e, s);
        return -1;
    }
    pthread_mutex_lock(&e->mu);
    old = e->cur;
    e->cur = s;
    pthread_mutex_unlock(&e->mu);
    __atomic_store_n(&e->gen, gen, __ATOMIC_RELEASE);
    src_unref(e, old);
    return gen;
}

bool script_env_connect_first(struct script_env *e)
{
    bool has;

    pthread_mutex_lock(&e->mu);
    has = e->cur->has_connect;
    pthread_mutex_unlock(&e->mu);
    return has;
}

void script_env_print(struct script_env *e, FILE *f)
{
    size_t keys, bytes, cap;
    uint64_t ev;

    shdict_usage(e->dict, &keys, &bytes, &cap, &ev);
    fprintf(f, "stats: lua: generation=%ld shared_keys=%zu shared_bytes=%zu shared_capacity=%zu "
               "shared_evictions=%llu\n",
            __atomic_load_n(&e->gen, __ATOMIC_RELAXED), keys, bytes, cap,
            (unsigned long long)ev);
}

/* --- the timeout watchdog ----------------------------------------------------------------- */

static void timeout_hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    luaL_error(L, "handler timed out");
}

/* On the worker's own thread, like lua.c's SIGINT handler: lua_sethook is safe here. */
static void on_timeout_signal(int sig)
{
    struct script *sc = tls_sc;

    (void)sig;
    if (!sc || !__atomic_load_n(&sc->in_call, __ATOMIC_ACQUIRE) ||
        __atomic_load_n(&sc->kill_seq, __ATOMIC_RELAXED) !=
            __atomic_load_n(&sc->seq, __ATOMIC_RELAXED))
        return;
    sc->timed_out = 1;
    sc->hooked = 1;
    /* Count only: a call hook would also fire for the C message handler. */
    lua_sethook(sc->ls->L, timeout_hook, LUA_MASKCOUNT, 1);
}

static void *watchdog_main(void *arg)
{
    struct script_env *e = arg;
    long tick = e->o.timeout_ms / 4;
    struct timespec ts;

    tick = tick < 1 ? 1 : tick > 100 ? 100 : tick;
    pthread_mutex_lock(&e->mu);
    while (!e->wd_stop) {
        long now = coarse_ms();

        for (int i = 0; i < e->nscripts; i++) {
            struct script *sc = e->scripts[i];
            uint64_t seq = __atomic_load_n(&sc->seq, __ATOMIC_RELAXED);

            if (__atomic_load_n(&sc->in_call, __ATOMIC_ACQUIRE) && seq != sc->fired &&
                now - __atomic_load_n(&sc->start_ms, __ATOMIC_RELAXED) >= e->o.timeout_ms) {
                sc->fired = seq;
                __atomic_store_n(&sc->kill_seq, seq, __ATOMIC_RELEASE);
                pthread_kill(__atomic_load_n(&sc->tid, __ATOMIC_RELAXED), timeout_signal);
            }
        }
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += tick * 1000000L;
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&e->wd_cv, &e->mu, &ts);
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

int script_env_start(struct script_env *e)
{
    struct sigaction sa;
    int rc;

    if (e->o.timeout_ms <= 0 || e->wd_started)
        return 0;
    timeout_signal = SIGRTMIN;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_timeout_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(timeout_signal, &sa, NULL) < 0)
        return -errno;
    rc = pthread_create(&e->wd, NULL, watchdog_main, e);
    if (rc)
        return -rc;
    pthread_setname_np(e->wd, "lfe-lua-watch");
    e->wd_started = true;
    return 0;
}

void script_env_free(struct script_env *e)
{
    if (!e)
        return;
    if (e->wd_started) {
        pthread_mutex_lock(&e->mu);
        e->wd_stop = true;
        pthread_cond_signal(&e->wd_cv);
        pthread_mutex_unlock(&e->mu);
        pthread_join(e->wd, NULL);
    }
    if (e->cur)
        src_unref(e, e->cur);
    shdict_free(e->dict);
    free(e->scripts);
    free(e->path);
    pthread_cond_destroy(&e->wd_cv);
    pthread_mutex_destroy(&e->mu);
    free(e);
}

/* --- per-worker scripts ------------------------------------------------------------------- */

struct script *script_new(struct script_env *e, const char *name, struct worker_stats *st,
                          char *err, size_t errlen)
{
    struct script *sc = calloc(1, sizeof(*sc));
    struct src *s;

    if (!sc) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    sc->env = e;
    sc->st = st;
    snprintf(sc->name, sizeof(sc->name), "%s", name);
    sc->tid = pthread_self();
    pthread_mutex_lock(&e->mu);
    s = e->cur;
    s->refs++;
    pthread_mutex_unlock(&e->mu);
    sc->ls = lstate_new(e, sc, s, err, errlen);
    sc->gen = sc->tried_gen = s->gen;
    src_unref(e, s);
    if (!sc->ls)
        goto fail;
    pthread_mutex_lock(&e->mu);
    if (e->nscripts == e->capscripts) {
        int cap = e->capscripts ? e->capscripts * 2 : 8;
        struct script **a = realloc(e->scripts, (size_t)cap * sizeof(*a));

        if (!a) {
            pthread_mutex_unlock(&e->mu);
            snprintf(err, errlen, "out of memory");
            goto fail;
        }
        e->scripts = a;
        e->capscripts = cap;
    }
    e->scripts[e->nscripts++] = sc;
    pthread_mutex_unlock(&e->mu);
    return sc;

fail:
    lstate_free(sc->ls);
    free(sc);
    return NULL;
}

void script_bind(struct script *sc)
{
    __atomic_store_n(&sc->tid, pthread_self(), __ATOMIC_RELAXED);
    tls_sc = sc;
}

int script_refresh(struct script *sc)
{
    struct script_env *e = sc->env;
    long gen = __atomic_load_n(&e->gen, __ATOMIC_ACQUIRE);
    struct lstate *ls, *old;
    struct src *s;
    char err[512];

    if (gen == sc->gen || gen == sc->tried_gen)
        return 0;
    sc->tried_gen = gen;
    pthread_mutex_lock(&e->mu);
    s = e->cur;
    s->refs++;
    pthread_mutex_unlock(&e->mu);
    ls = lstate_new(e, sc, s, err, sizeof(err));
    src_unref(e, s);
    if (!ls) {
        log_err("lua: worker %s cannot load generation %ld: %s; it keeps generation %ld",
                sc->name, gen, err, sc->gen);
        return -1;
    }
    old = sc->ls;
    sc->ls = ls;
    sc->gen = ls->gen;
    lstate_free(old);
    STAT_ADD(sc->st, lua_reloads, 1);
    log_debug("lua: worker %s now runs generation %ld", sc->name, sc->gen);
    return 1;
}

const struct framing *script_framing(const struct script *sc)
{
    return &sc->ls->fr;
}

size_t script_mem(const struct script *sc)
{
    return __atomic_load_n(&sc->mem, __ATOMIC_RELAXED);
}

/* After a memory error: collect, and rebuild a state that a full collection cannot bring back
 * under 3/4 of its cap (live data grew, not one request). */
static void after_nomem(struct script *sc)
{
    struct script_env *e = sc->env;
    size_t used;
    struct lstate *ls;
    struct src *s;
    char err[512];

    lua_gc(sc->ls->L, LUA_GCCOLLECT);
    used = sc->ls->used;
    if (!sc->ls->cap || used < sc->ls->cap / 4 * 3)
        return;
    pthread_mutex_lock(&e->mu);
    s = e->cur;
    s->refs++;
    pthread_mutex_unlock(&e->mu);
    ls = lstate_new(e, sc, s, err, sizeof(err));
    src_unref(e, s);
    if (!ls) {
        log_err("lua: worker %s: cannot rebuild its full state: %s", sc->name, err);
        return;
    }
    lstate_free(sc->ls);
    sc->ls = ls;
    sc->gen = sc->tried_gen = ls->gen;
    log_warn("lua: worker %s: its state still held %zu of %zu KiB after a full collection; "
             "rebuilt it from generation %ld (its globals start over)",
             sc->name, used >> 10, ls->cap >> 10, ls->gen);
}

/* One callback, as invoke() hands it to call_protected(). */
struct call {
    struct script *sc;
    int ref;                /* the function */
    const char *cb;         /* its name, for messages */
    struct script_conn *c;
    const char *arg;        /* the frame or the close reason, or NULL */
    size_t arglen;
    bool want_reply;        /* on_data/on_connect: the result is the reply; conn.ctx is saved */
    struct outbuf *out;
    struct cud *u;          /* the conn object, once made (invoke kills it afterwards) */
};

/* The whole callback under lua_pcall: making the conn object and the frame string, the call,
 * the reply and the conn.ctx save all allocate, and an allocation that fails outside a
 * protected call would end in lua_atpanic, which aborts the process. */
static int call_protected(lua_State *L)
{
    struct call *k = lua_touserdata(L, 1);
    struct cud *u = lua_newuserdatauv(L, sizeof(*u), 1); /* index 2 */

    *u = (struct cud){.c = k->c, .sc = k->sc, .out = k->out, .mark = k->out->len, .idx = 2};
    k->u = u;
    lua_rawgeti(L, LUA_REGISTRYINDEX, k->sc->ls->ref_mt);
    lua_setmetatable(L, 2);
    lua_rawgeti(L, LUA_REGISTRYINDEX, k->ref);
    lua_pushvalue(L, 2);
    if (k->arg)
        lua_pushlstring(L, k->arg, k->arglen);
    lua_call(L, k->arg ? 2 : 1, 1);
    if (!k->want_reply)
        return 0;
    if (lua_type(L, -1) == LUA_TSTRING) {
        size_t len;
        const char *s = lua_tolstring(L, -1, &len);
        put_output(L, u, s, len, k->cb);
    } else if (lua_type(L, -1) == LUA_TBOOLEAN && !lua_toboolean(L, -1)) {
        u->close = true;
    } else if (!lua_isnil(L, -1)) {
        return luaL_error(L, "%s returned a %s; return a string, nil or false (close)", k->cb,
                          luaL_typename(L, -1));
    }
    if (u->ctx_loaded)
        ctx_save(L, u);
    return 0;
}

/* Runs one callback with (conn) or (conn, arg). want_reply: on_data/on_connect, whose result is
 * the reply and after which a touched conn.ctx is saved. */
static enum script_rc invoke(struct script *sc, int ref, const char *cb, struct script_conn *c,
                             const char *arg, size_t arglen, bool want_reply, struct outbuf *out)
{
    lua_State *L = sc->ls->L;
    size_t mark = out->len;
    enum script_rc res = SCRIPT_OK;
    struct call k = {.sc = sc, .ref = ref, .cb = cb, .c = c, .arg = arg, .arglen = arglen,
                     .want_reply = want_reply, .out = out};
    int rc;

    /* Neither push allocates (a light C function, a light userdata; the stack has room). */
    lua_pushcfunction(L, call_protected);
    lua_pushlightuserdata(L, &k);
    __atomic_store_n(&sc->start_ms, coarse_ms(), __ATOMIC_RELAXED);
    __atomic_store_n(&sc->seq, sc->seq + 1, __ATOMIC_RELAXED);
    __atomic_store_n(&sc->in_call, 1, __ATOMIC_RELEASE);
    rc = lua_pcall(L, 1, 0, 1);
    __atomic_store_n(&sc->in_call, 0, __ATOMIC_RELEASE);
    if (sc->hooked) {
        lua_sethook(L, NULL, 0, 0);
        sc->hooked = 0;
    }
    STAT_ADD(sc->st, lua_calls, 1);

    if (k.u) {
        if (k.u->ctx_loaded && rc != LUA_OK)
            c->ctx_owner = NULL; /* the table may hold what a failed call changed: rebuild it */
        if (rc == LUA_OK && k.u->close)
            res = SCRIPT_CLOSE;
        k.u->c = NULL; /* the conn object is dead from here on */
    }
    if (rc != LUA_OK) {
        const char *msg = lua_tostring(L, -1);

        out->len = mark; /* a failed call sends nothing */
        if (rc == LUA_ERRMEM) {
            char what[160];
            STAT_ADD(sc->st, lua_nomem, 1);
            snprintf(what, sizeof(what), "out of memory (the state uses %zu KiB of its %zu KiB)",
                     sc->ls->used >> 10, sc->ls->cap >> 10);
            report(sc, c, cb, what);
            res = SCRIPT_NOMEM;
        } else if (sc->timed_out) {
            char what[1024];
            STAT_ADD(sc->st, lua_timeouts, 1);
            snprintf(what, sizeof(what), "aborted after --lua-timeout-ms %d: %s",
                     sc->env->o.timeout_ms, msg ? msg : "");
            report(sc, c, cb, what);
            res = SCRIPT_TIMEOUT;
        } else {
            STAT_ADD(sc->st, lua_errors, 1);
            report(sc, c, cb, msg ? msg : "error");
            res = SCRIPT_ERROR;
        }
    }
    sc->timed_out = 0;
    lua_settop(L, 1);
    if (res == SCRIPT_NOMEM)
        after_nomem(sc);
    __atomic_store_n(&sc->mem, sc->ls->used, __ATOMIC_RELAXED);
    return res;
}

enum script_rc script_on_connect(struct script *sc, struct script_conn *c, struct outbuf *out)
{
    if (sc->ls->ref_connect == LUA_NOREF)
        return SCRIPT_OK;
    return invoke(sc, sc->ls->ref_connect, "on_connect", c, NULL, 0, true, out);
}

enum script_rc script_on_data(struct script *sc, struct script_conn *c, const char *frame,
                              size_t len, struct outbuf *out)
{
    return invoke(sc, sc->ls->ref_data, "on_data", c, frame, len, true, out);
}

void script_on_close(struct script *sc, struct script_conn *c, const char *reason)
{
    struct outbuf none = {0};

    if (sc->ls->ref_close == LUA_NOREF)
        return;
    invoke(sc, sc->ls->ref_close, "on_close", c, reason, strlen(reason), false, &none);
    free(none.data);
}

void script_free(struct script *sc)
{
    struct script_env *e;

    if (!sc)
        return;
    e = sc->env;
    pthread_mutex_lock(&e->mu);
    for (int i = 0; i < e->nscripts; i++)
        if (e->scripts[i] == sc) {
            e->scripts[i] = e->scripts[--e->nscripts];
            break;
        }
    pthread_mutex_unlock(&e->mu);
    lstate_free(sc->ls);
    free(sc->ser.data);
    free(sc);
}
