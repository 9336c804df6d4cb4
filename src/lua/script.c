/* script: the workers' Lua states and the callbacks run in them.
 *
 * DESIGN
 *
 * States. Each worker thread owns one lua_State (struct lstate, built by lstate.c) and is the
 * only thread that touches it: no lock on the request path. The script is compiled once per
 * state; on_data, on_connect and on_close are kept as registry refs, so a request costs one
 * lua_pcall. Each callback runs whole under lua_pcall (the conn object, the frame's copy, the
 * call, the reply, the conn.ctx save), since an error outside one ends in lua_atpanic, which
 * aborts the process.
 *
 * Limits. Memory: a per-state cap in the lua_Alloc (lstate.c); past it the call fails and its
 * connection closes; a state still near the cap after a full collection is rebuilt. Output: one
 * callback queues at most --max-pending (lfelib_output). Time: script_env.c's watchdog.
 *
 * Where the rest lives: lstate.c (building a state), script_env.c (sources, reload, watchdog),
 * lfelib.c (what scripts see), ctx.c (conn.ctx between callbacks), lpattern.c (the pattern
 * functions).
 */
#include "script_int.h"

#include "log.h"
#include "net.h"

#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

#define ERR_LOGS_PER_SEC 5 /* runtime errors logged with a traceback, per second, in total */

/* --- error reporting ---------------------------------------------------------------------- */

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
    net_client_name(c ? c->fd : -1, c ? c->peer : NULL, peer, sizeof(peer));
    log_warn("lua: worker %s, connection %llu (%s): %s: %s", sc->name,
             c ? (unsigned long long)c->id : 0ull, peer, cb, what);
}

void script_note(struct script *sc, const struct script_conn *c, const char *where,
                 const char *what)
{
    report(sc, c, where, what);
}

/* --- per-worker scripts ------------------------------------------------------------------- */

/* A state built from the current generation: the one way a worker gets one (at start, at a
 * reload, after a memory error). */
static struct lstate *current_state(struct script *sc, char *err, size_t errlen)
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
    sc->ls = current_state(sc, err, errlen);
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
    ls = current_state(sc, err, sizeof(err));
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
    ls = current_state(sc, err, sizeof(err));
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

void script_set_wait_hook(struct script *sc, void (*fn)(void *), void *arg)
{
    sc->wait_hook = fn;
    sc->wait_arg = arg;
}

bool script_waiting(struct script *sc)
{
    return __atomic_load_n(&sc->blocked, __ATOMIC_ACQUIRE) != 0;
}

void script_conn_release(struct script_conn *c)
{
    ctx_release(c);
    free(c->peer);
    c->peer = NULL;
}
