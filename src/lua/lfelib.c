/* lfelib: the library a script sees, opened as luaopen_lfe: the sandbox over the standard
 * libraries, the conn object, lfe.shared, lfe.log, lfe.worker.
 *
 * DESIGN
 *
 * The conn object is a fresh userdata per callback, dead once it returns (script.c clears its
 * c): a conn stashed in a global raises an error instead of writing to some other connection.
 * Its methods are a luaL_Reg table; its fields (ctx, id, peer, tls) are read by __index after
 * them.
 *
 * The sandbox (without --lua-unsafe): base without dofile/loadfile, string, table, math, utf8,
 * os.time and os.clock; load takes text chunks only and string.dump is gone (bytecode is
 * trusted by the VM); setmetatable refuses __gc (finalizers run with hooks off, out of the
 * timeout's reach); print goes to the log. The pattern functions are lpattern.c's in every
 * mode, so the timeout stops them.
 */
#include "script_int.h"

#include "ctx.h"
#include "log.h"
#include "lpattern.h"
#include "lstop.h"
#include "net.h"
#include "shdict.h"
#include "tls.h"

#include <errno.h>
#include <lauxlib.h>
#include <lualib.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
void lfelib_output(lua_State *L, struct cud *u, const char *s, size_t len, const char *what)
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

    lfelib_output(L, u, s, len, "conn:send");
    return 0;
}

static int l_close(lua_State *L)
{
    check_conn(L)->close = true;
    return 0;
}

static int get_ctx(lua_State *L, struct cud *u)
{
    if (lua_getiuservalue(L, 1, 1) == LUA_TTABLE)
        return 1;
    lua_pop(L, 1);
    if (ctx_cache_get(L, u->sc, u->c)) {
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

static int get_id(lua_State *L, struct cud *u)
{
    lua_pushinteger(L, (lua_Integer)u->c->id);
    return 1;
}

static int get_peer(lua_State *L, struct cud *u)
{
    char peer[64];

    net_client_name(u->c->fd, u->c->peer, peer, sizeof(peer));
    lua_pushstring(L, peer);
    return 1;
}

/* conn.tls: nil over plain TCP; else a new table each read (changing it changes nothing). */
static int get_tls(lua_State *L, struct cud *u)
{
    struct tls_facts f;

    if (!u->c->ssl) {
        lua_pushnil(L);
        return 1;
    }
    tls_facts(u->c->ssl, &f);
    lua_createtable(L, 0, 5);
    lua_pushstring(L, f.version);
    lua_setfield(L, -2, "version");
    lua_pushstring(L, f.cipher);
    lua_setfield(L, -2, "cipher");
    lua_pushstring(L, f.sni); /* nil when the client named no server */
    lua_setfield(L, -2, "sni");
    if (f.alpn) {
        lua_pushlstring(L, (const char *)f.alpn, f.alpn_len);
        lua_setfield(L, -2, "alpn");
    }
    if (f.subject[0]) {
        lua_pushstring(L, f.subject);
        lua_setfield(L, -2, "client_subject");
    }
    return 1;
}

/* The conn object's fields: read by __index after its methods. */
static const struct {
    const char *name;
    int (*get)(lua_State *L, struct cud *u);
} conn_fields[] = {{"ctx", get_ctx}, {"id", get_id}, {"peer", get_peer}, {"tls", get_tls}};

static const luaL_Reg conn_methods[] = {{"send", l_send}, {"close", l_close}, {NULL, NULL}};

/* __index: upvalue 1 is the methods table (send, close); upvalue 2 maps a field's name to its
 * index in conn_fields. */
static int l_conn_index(lua_State *L)
{
    struct cud *u = check_conn(L);

    luaL_checkstring(L, 2);
    lua_settop(L, 2);
    lua_pushvalue(L, 2); /* fields first: conn.ctx is what a callback reads most */
    if (lua_rawget(L, lua_upvalueindex(2)) == LUA_TNUMBER)
        return conn_fields[lua_tointeger(L, -1)].get(L, u);
    lua_pushvalue(L, 2);
    lua_rawget(L, lua_upvalueindex(1)); /* a method, or nil */
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

/* Sets the conn metatable up in the registry. */
static void open_conn(lua_State *L)
{
    static const luaL_Reg meta[] = {
        {"__newindex", l_conn_newindex}, {"__tostring", l_conn_tostring}, {NULL, NULL}};

    luaL_newmetatable(L, CONN_MT);
    luaL_setfuncs(L, meta, 0);
    /* getmetatable(conn) gives this string, not the table: a script that could reach it could
     * give it a __gc, and every conn object made after would carry a finalizer (hooks off,
     * out of the timeout's reach), or replace __index and read another connection's data. */
    lua_pushliteral(L, "lfepoll.conn: protected");
    lua_setfield(L, -2, "__metatable");
    luaL_newlib(L, conn_methods);
    lua_createtable(L, 0, (int)(sizeof(conn_fields) / sizeof(conn_fields[0])));
    for (size_t i = 0; i < sizeof(conn_fields) / sizeof(conn_fields[0]); i++) {
        lua_pushinteger(L, (lua_Integer)i);
        lua_setfield(L, -2, conn_fields[i].name);
    }
    lua_pushcclosure(L, l_conn_index, 2);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
}

struct cud *lfelib_push_conn(lua_State *L, struct script *sc, struct script_conn *c,
                             struct outbuf *out)
{
    struct cud *u = lua_newuserdatauv(L, sizeof(*u), 1);

    *u = (struct cud){.c = c, .sc = sc, .out = out, .mark = out->len, .idx = lua_gettop(L)};
    lua_rawgeti(L, LUA_REGISTRYINDEX, sc->ls->ref_mt); /* by ref: no lookup by name */
    lua_setmetatable(L, -2);
    return u;
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

/* The number at idx (an integer stays one). */
static void number_shval(lua_State *L, int idx, struct shval *v)
{
    if (lua_isinteger(L, idx)) {
        v->type = SHV_INT;
        v->i = lua_tointeger(L, idx);
    } else {
        v->type = SHV_NUM;
        v->d = lua_tonumber(L, idx);
    }
}

static int to_shval(lua_State *L, int idx, struct shval *v, const char *what)
{
    switch (lua_type(L, idx)) {
    case LUA_TNUMBER:
        number_shval(L, idx, v);
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
        lua_pushfstring(L,
                        "no memory: the entry (%I bytes) is larger than a shard of lfe.shared "
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
    number_shval(L, idx, v);
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

/* Logs the arguments, each through tostring, sep between them, after "worker X: what". */
static int log_args(lua_State *L, char sep, const char *what)
{
    struct lstate *ls = upstate(L);
    luaL_Buffer buf;
    int n = lua_gettop(L);

    luaL_buffinit(L, &buf);
    for (int i = 1; i <= n; i++) {
        luaL_tolstring(L, i, NULL);
        luaL_addvalue(&buf);
        if (i < n)
            luaL_addchar(&buf, sep);
    }
    luaL_pushresult(&buf);
    log_info("lua: worker %s: %s%s", ls->sc ? ls->sc->name : "check", what, lua_tostring(L, -1));
    return 0;
}

static int l_log(lua_State *L)
{
    return log_args(L, ' ', "");
}

/* --- the sandbox and lfe -------------------------------------------------------------------- */

/* print: to the log, one escaped line (stdout may be a pipe nobody reads: a worker blocked on
 * it would stop serving). */
static int l_print(lua_State *L)
{
    return log_args(L, '\t', "print: ");
}

/* load, text chunks only: a binary chunk is bytecode that the VM trusts (a crafted one reads
 * and writes memory at will), and a script that loads client input would run it. */
static int l_load_text(lua_State *L)
{
    int n = lua_gettop(L);

    if (n >= 3 && !lua_isnil(L, 3)) {
        const char *mode = luaL_checkstring(L, 3);
        if (strcmp(mode, "t") != 0)
            return luaL_error(L,
                              "load: mode '%s' refused: only text chunks (\"t\") load in the "
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

/* xpcall(f, msgh, ...) as f under pcall, then msgh(error) once the error has unwound. Lua runs a
 * message handler where the error is raised, and the timeout's is raised inside its count hook,
 * with hooks off: a handler that looped was never stopped. The sandbox has no debug library, so
 * a handler cannot look at the stack it would have run on; after the unwind it sees the same
 * error value, and the timeout reaches it as it reaches anything. A memory error skips the
 * handler, as Lua's own xpcall does. */
static int l_xpcall_unwound(lua_State *L)
{
    int n = lua_gettop(L), rc;

    luaL_checktype(L, 2, LUA_TFUNCTION);
    lua_pushvalue(L, 2);
    lua_insert(L, 1); /* msgh, f, msgh, args... */
    lua_remove(L, 3); /* msgh, f, args... */
    rc = lua_pcall(L, n - 2, LUA_MULTRET, 0);
    if (rc == LUA_OK) {
        lua_pushboolean(L, 1);
        lua_replace(L, 1);
        return lua_gettop(L);
    }
    if (rc != LUA_ERRMEM)
        lua_pcall(L, 1, 1, 0); /* msgh(error): its value, or its own error's */
    lua_pushboolean(L, 0);
    lua_insert(L, -2);
    return 2;
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

/* --- coroutines under --lua-unsafe ------------------------------------------------------ */

/* Calls the library's function (upvalue 1) with the arguments, co noted in sc->co while it runs,
 * so that a timeout hooks the coroutine as well (script_hook_running). Errors pass through. */
static int co_run(lua_State *L, lua_State *co)
{
    struct script *sc = lua_touserdata(L, lua_upvalueindex(2));
    int n = lua_gettop(L), depth = sc->nco, rc;

    if (depth >= SCRIPT_CO_MAX)
        return luaL_error(L, "coroutines resume one another more than %d deep", SCRIPT_CO_MAX);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    sc->co[depth] = co;
    __atomic_signal_fence(__ATOMIC_SEQ_CST); /* the entry, then the count the handler reads */
    sc->nco = depth + 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (sc->hooked) /* a timeout came before co was noted (a C function of this thread got it) */
        lua_sethook(co, lua_gethook(L), lua_gethookmask(L), lua_gethookcount(L));
    rc = lua_pcall(L, n, LUA_MULTRET, 0);
    sc->nco = depth;
    if (rc != LUA_OK)
        return lua_error(L);
    return lua_gettop(L);
}

static int l_co_resume(lua_State *L)
{
    lua_State *co = lua_tothread(L, 1);

    luaL_argexpected(L, co, 1, "coroutine");
    return co_run(L, co);
}

/* What coroutine.wrap returned: the library's function, and its coroutine (upvalue 3). */
static int l_co_wrapped(lua_State *L)
{
    return co_run(L, lua_tothread(L, lua_upvalueindex(3)));
}

static int l_co_wrap(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TFUNCTION);
    lua_settop(L, 1);
    lua_pushvalue(L, lua_upvalueindex(1)); /* the library's wrap */
    lua_insert(L, 1);
    lua_call(L, 1, 1);
    if (!lua_getupvalue(L, 1, 1) || !lua_isthread(L, -1))
        return luaL_error(L, "coroutine.wrap: this Lua's wrap keeps no coroutine to watch");
    lua_pushvalue(L, lua_upvalueindex(2));
    lua_insert(L, -2);
    lua_pushcclosure(L, l_co_wrapped, 3); /* the library's function, sc, the coroutine */
    return 1;
}

/* coroutine.resume and coroutine.wrap (t at the top) replaced by the ones above. */
static void watch_coroutines(lua_State *L, struct script *sc)
{
    lua_getfield(L, -1, "resume");
    lua_pushlightuserdata(L, sc);
    lua_pushcclosure(L, l_co_resume, 2);
    lua_setfield(L, -2, "resume");
    lua_getfield(L, -1, "wrap");
    lua_pushlightuserdata(L, sc);
    lua_pushcclosure(L, l_co_wrap, 2);
    lua_setfield(L, -2, "wrap");
}

static void open_libs(lua_State *L, struct lstate *ls, bool unsafe)
{
    static const luaL_Reg safe[] = {
        {LUA_GNAME, luaopen_base},       {LUA_STRLIBNAME, luaopen_string},
        {LUA_TABLIBNAME, luaopen_table}, {LUA_MATHLIBNAME, luaopen_math},
        {LUA_UTF8LIBNAME, luaopen_utf8}, {NULL, NULL}};

    if (unsafe) {
        luaL_openlibs(L);
        if (ls->sc) {
            lua_getglobal(L, LUA_COLIBNAME);
            watch_coroutines(L, ls->sc);
            lua_pop(L, 1);
        }
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
        lua_pushcfunction(L, l_xpcall_unwound);
        lua_setglobal(L, "xpcall");
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
    lstop_install_string(L, lua_gettop(L), ls->sc ? &ls->sc->timed_out : NULL);
    lua_pop(L, 1);
    lua_getglobal(L, LUA_TABLIBNAME);
    lstop_install_table(L, lua_gettop(L), ls->sc ? &ls->sc->timed_out : NULL);
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
    lio_open(L, ls);
}

int luaopen_lfe(lua_State *L)
{
    void *ud;
    struct lstate *ls;

    lua_getallocf(L, &ud);
    ls = ud;
    open_libs(L, ls, ls->env->o.unsafe);
    open_conn(L);
    open_lfe(L, ls);
    return 1;
}
