/* lstate: a Lua state built from a loaded source, and freed.
 *
 * DESIGN
 *
 * A state is built for a worker at its start, at a reload and after a memory error (script.c),
 * and in scratch to check a source (script_env.c): the libraries and lfe opened, the chunk run
 * once, the table it returns read raw (a "strict" __index that raises must not decide) and its
 * callbacks kept as registry refs, so that a request costs one lua_pcall. All of it runs under
 * lua_pcall: any of it can run out of memory, and an error outside a protected call ends in
 * lua_atpanic, which aborts the process. The main chunk runs under a count hook that stops it
 * past --lua-timeout-ms.
 *
 * Memory: a per-state cap in the lua_Alloc; past it an allocation fails, Lua raises "not enough
 * memory" (after an emergency GC) and the call fails. A frame is copied into the state as a
 * string, so a max_frame that cannot fit beside what the loaded script holds is refused here,
 * and the default max_frame yields to a small cap.
 */
#include "script_int.h"

#include "log.h"

#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* The message handler of every call (index 1 of the state's stack): the error with a
 * traceback. */
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
