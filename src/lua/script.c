/* script: the workers' Lua states and the callbacks run in them.
 *
 * DESIGN
 *
 * States. Each worker thread owns one lua_State (struct lstate) and is the only thread that
 * touches it: no lock on the request path. The script is compiled once per state; on_data,
 * on_connect and on_close are kept as registry refs, so a request costs one lua_pcall.
 * Everything that can raise runs under lua_pcall: building a state (libraries, the chunk, the
 * returned table, read raw) and each callback whole (the conn object, the frame's copy, the
 * call, the reply, the conn.ctx save), since an error outside one ends in lua_atpanic, which
 * aborts the process.
 *
 * Limits. Memory: a per-state cap in the lua_Alloc; past it an allocation fails, Lua raises
 * "not enough memory" (after an emergency GC), the call fails and its connection closes; a
 * state still near the cap after a full collection is rebuilt. Output: one callback queues at
 * most --max-pending (lfelib_output). Time: script_env.c's watchdog.
 *
 * Where the rest lives: script_env.c (sources, reload, watchdog), lfelib.c (what scripts see),
 * ctx.c (conn.ctx between callbacks), lpattern.c (the pattern functions).
 */
#include "script_int.h"

#include "ctx.h"
#include "log.h"
#include "net.h"

#include <errno.h>
#include <lauxlib.h>
#include <lualib.h>
#include <stdlib.h>
#include <string.h>

#define ERR_LOGS_PER_SEC 5 /* runtime errors logged with a traceback, per second, in total */

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

/* Logs a failed callback, at most ERR_LOGS_PER_SEC per second over all workers; the rest are
 * counted and summed up in the next line that is logged. */
static void report(struct script *sc, const struct script_conn *c, const char *cb, const char *what)
{
    struct script_env *e = sc->env;
    long sec = coarse_ms() / 1000, was = __atomic_load_n(&e->log_sec, __ATOMIC_RELAXED);
    long quiet = 0;
    char peer[64];

    if (sec != was && __atomic_compare_exchange_n(&e->log_sec, &was, sec, false, __ATOMIC_RELAXED,
                                                  __ATOMIC_RELAXED)) {
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
    script_conn_peer(c, peer, sizeof(peer));
    log_warn("lua: worker %s, connection %llu (%s): %s: %s", sc->name,
             c ? (unsigned long long)c->id : 0ull, peer, cb, what);
}

void script_note(struct script *sc, const struct script_conn *c, const char *where,
                 const char *what)
{
    report(sc, c, where, what);
}

/* --- building a state ------------------------------------------------------------------- */

/* What load_protected() needs and fills. */
struct load {
    struct lstate *ls;
    const struct src *s;
    const char *path;
    char *err; /* a check that failed writes here and sets failed */
    size_t errlen;
    bool failed;
    int ret_line;  /* the line of the main chunk's return statement, for "FILE:LINE:" */
    long deadline; /* coarse ms past which the main chunk is stopped; 0 = none */
};

static __thread struct load *cur_load; /* for the hook below */

static void load_hook(lua_State *L, lua_Debug *ar)
{
    struct load *ld = cur_load;

    if (!ld) {
        /* A coroutine the main chunk made inherited this hook (lua_newthread copies it) and now
         * runs after the load: it has nothing to watch. */
        lua_sethook(L, NULL, 0, 0);
        return;
    }
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
                snprintf(ld->err, ld->errlen, "%s:%d: delimiter must be a string of 1 to %d bytes",
                         ld->path, ld->ret_line, FRAME_DELIM_MAX);
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
    struct load *ld = lua_touserdata(L, 1);
    struct lstate *ls = ld->ls;
    char chunk[512];
    size_t frame_max;

    lua_settop(L, 0);
    luaL_requiref(L, "lfe", luaopen_lfe, 1);
    lua_pop(L, 1);
    lua_getfield(L, LUA_REGISTRYINDEX, CONN_MT);
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

void lstate_free(struct lstate *ls)
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
struct lstate *lstate_new(struct script_env *e, struct script *sc, const struct src *s, char *err,
                          size_t errlen)
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
        snprintf(err, errlen, "%s",
                 rc == LUA_ERRMEM ? "not enough memory while loading the "
                                    "script (raise --lua-mem-mb)"
                 : m              ? m
                                  : "error while loading");
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

/* --- per-worker scripts ------------------------------------------------------------------- */

/* A state built from the current generation: the one way a worker gets one (at start, at a
 * reload, after a memory error). */
static struct lstate *lstate_current(struct script *sc, char *err, size_t errlen)
{
    struct src *s = script_env_src_get(sc->env);
    struct lstate *ls = lstate_new(sc->env, sc, s, err, errlen);

    script_env_src_put(sc->env, s);
    return ls;
}

struct script *script_new(struct script_env *e, const char *name, struct worker_stats *st,
                          char *err, size_t errlen)
{
    struct script *sc = calloc(1, sizeof(*sc));

    if (!sc) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    sc->env = e;
    sc->st = st;
    snprintf(sc->name, sizeof(sc->name), "%s", name);
    sc->tid = pthread_self();
    sc->ls = lstate_current(sc, err, errlen);
    if (!sc->ls)
        goto fail;
    sc->gen = sc->tried_gen = sc->ls->gen;
    if (script_env_register(e, sc) < 0) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    return sc;

fail:
    lstate_free(sc->ls);
    free(sc);
    return NULL;
}

int script_refresh(struct script *sc)
{
    struct script_env *e = sc->env;
    long gen = __atomic_load_n(&e->gen, __ATOMIC_ACQUIRE);
    struct lstate *ls, *old;
    char err[512];

    if (gen == sc->gen || gen == sc->tried_gen)
        return 0;
    sc->tried_gen = gen;
    ls = lstate_current(sc, err, sizeof(err));
    if (!ls) {
        log_err("lua: worker %s cannot load generation %ld: %s; it keeps generation %ld", sc->name,
                gen, err, sc->gen);
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
    size_t used;
    struct lstate *ls;
    char err[512];

    lua_gc(sc->ls->L, LUA_GCCOLLECT);
    used = sc->ls->used;
    if (!sc->ls->cap || used < sc->ls->cap / 4 * 3)
        return;
    ls = lstate_current(sc, err, sizeof(err));
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
    int ref;        /* the function */
    const char *cb; /* its name, for messages */
    struct script_conn *c;
    const char *arg; /* the frame or the close reason, or NULL */
    size_t arglen;
    bool want_reply; /* on_data/on_connect: the result is the reply; conn.ctx is saved */
    struct outbuf *out;
    struct cud *u; /* the conn object, once made (invoke kills it afterwards) */
};

/* The whole callback under lua_pcall: making the conn object and the frame string, the call,
 * the reply and the conn.ctx save all allocate, and an allocation that fails outside a
 * protected call would end in lua_atpanic, which aborts the process. */
static int call_protected(lua_State *L)
{
    struct call *k = lua_touserdata(L, 1);
    struct cud *u = lfelib_push_conn(L, k->sc, k->c, k->out); /* index 2 */

    /* Anchored in the registry until invoke() has read it: after lua_pcall nothing else keeps
     * it alive, and a failed call's collection (LUA_ERRMEM) could free it first. */
    lua_pushvalue(L, 2);
    lua_rawsetp(L, LUA_REGISTRYINDEX, k);
    k->u = u;
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
        lfelib_output(L, u, s, len, k->cb);
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
    struct call k = {.sc = sc,
                     .ref = ref,
                     .cb = cb,
                     .c = c,
                     .arg = arg,
                     .arglen = arglen,
                     .want_reply = want_reply,
                     .out = out};
    int rc;

    /* Neither push allocates (a light C function, a light userdata; the stack has room). */
    lua_pushcfunction(L, call_protected);
    lua_pushlightuserdata(L, &k);
    lio_call_begin(sc, ref == sc->ls->ref_close);
    __atomic_store_n(&sc->start_ms, coarse_ms(), __ATOMIC_RELAXED);
    __atomic_store_n(&sc->seq, sc->seq + 1, __ATOMIC_RELAXED);
    __atomic_store_n(&sc->in_call, 1, __ATOMIC_RELEASE);
    rc = lua_pcall(L, 1, 0, 1);
    __atomic_store_n(&sc->in_call, 0, __ATOMIC_RELEASE);
    lio_call_end(sc);
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
        k.u->c = NULL;  /* the conn object is dead from here on */
        lua_pushnil(L); /* unanchored: removing a key allocates nothing */
        lua_rawsetp(L, LUA_REGISTRYINDEX, &k);
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
        } else if (sc->wall_out || sc->timed_out) {
            bool wall = sc->wall_out;
            char what[1024];

            if (wall)
                STAT_ADD(sc->st, lua_wall_timeouts, 1);
            else
                STAT_ADD(sc->st, lua_timeouts, 1);
            snprintf(what, sizeof(what), "%s %d: %s",
                     wall ? "ended after --lua-wall-timeout-ms" : "aborted after --lua-timeout-ms",
                     wall ? sc->env->o.wall_ms : sc->env->o.timeout_ms, msg ? msg : "");
            report(sc, c, cb, what);
            res = SCRIPT_TIMEOUT;
        } else {
            STAT_ADD(sc->st, lua_errors, 1);
            report(sc, c, cb, msg ? msg : "error");
            res = SCRIPT_ERROR;
        }
    }
    sc->timed_out = 0;
    sc->wall_out = 0;
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

void script_on_close(struct script *sc, struct script_conn *c, enum conn_why why)
{
    struct outbuf none = {0};
    const char *reason = conn_why_name(why);

    if (sc->ls->ref_close == LUA_NOREF)
        return;
    invoke(sc, sc->ls->ref_close, "on_close", c, reason, strlen(reason), false, &none);
    free(none.data);
}

void script_free(struct script *sc)
{
    if (!sc)
        return;
    script_env_unregister(sc->env, sc);
    lstate_free(sc->ls);
    lio_free(sc);
    free(sc->ser.data);
    free(sc);
}

void script_conn_release(struct script_conn *c)
{
    ctx_release(c);
    free(c->peer);
    c->peer = NULL;
}

void script_conn_peer(const struct script_conn *c, char *buf, size_t len)
{
    if (c && c->peer)
        snprintf(buf, len, "%s", c->peer);
    else
        net_peer_name(c ? c->fd : -1, buf, len);
}

void script_set_wait_hook(struct script *sc, void (*fn)(void *), void *arg)
{
    sc->wait_hook = fn;
    sc->wait_arg = arg;
}

bool script_waiting(struct script *sc)
{
    return __atomic_load_n(&sc->blocked, __ATOMIC_ACQUIRE) != 0;
}
