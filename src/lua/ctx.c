/* ctx: conn.ctx, kept in C between callbacks: its serialized form and each state's cache.
 *
 * DESIGN
 *
 * Any worker of a group may take a connection's next event, so a Lua table cannot live in one
 * state across events. conn.ctx is therefore a value kept in C between callbacks: the first
 * access in a callback rebuilds the table from the connection's serialized copy, and when the
 * callback returns a touched table is serialized back. It holds strings, numbers, booleans and
 * nested tables (no functions, no cycles), up to SCRIPT_CTX_MAX bytes per connection and
 * --lua-ctx-mb for all of them. A callback that never touches conn.ctx pays nothing; one that
 * does pays for the save (docs/lua.md). Each state also keeps the tables it saved last (small
 * ones, CTX_CACHE_* bounded, each charged ctx_cost()): when the connection's next event comes to
 * the same worker, no other state saved since (conn->ctx_owner, ctx_ver), and the table still
 * holds what was saved (ctx_same: a script may have kept and changed it), the table is taken
 * from there instead of being rebuilt. A failed callback clears ctx_owner, so what it changed
 * is dropped.
 *
 * The form: one tagged value: 'T' / 'F' booleans, 'i' + 8-byte integer, 'd' + 8-byte double, 's' +
 * 4-byte length + bytes, 't' key value ... 'e' a table. Host byte order: the blob never leaves the
 * process. The decoder takes any bytes (a corrupt blob is refused, never trusted).
 */
#include "ctx.h"

#include "script_int.h"

#include <lauxlib.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CTX_CACHE_ITEM 256         /* serialized bytes: larger conn.ctx tables are not cached */
#define CTX_CACHE_BYTES (4u << 20) /* per state, then the cache starts over */

static void encode_value(lua_State *L, struct outbuf *b, size_t limit, int idx, int depth);

static void put(lua_State *L, struct outbuf *b, size_t limit, const void *p, size_t n)
{
    if (b->len + n > limit)
        luaL_error(L, "conn.ctx is over %I bytes serialized; keep less per connection",
                   (lua_Integer)limit);
    if (outbuf_put(b, p, n) < 0)
        luaL_error(L, "not enough memory");
}

static void encode_value(lua_State *L, struct outbuf *b, size_t limit, int idx, int depth)
{
    char tag;

    idx = lua_absindex(L, idx);
    switch (lua_type(L, idx)) {
    case LUA_TBOOLEAN:
        tag = lua_toboolean(L, idx) ? 'T' : 'F';
        put(L, b, limit, &tag, 1);
        return;
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx)) {
            lua_Integer i = lua_tointeger(L, idx);
            put(L, b, limit, "i", 1);
            put(L, b, limit, &i, sizeof(i));
        } else {
            lua_Number d = lua_tonumber(L, idx);
            put(L, b, limit, "d", 1);
            put(L, b, limit, &d, sizeof(d));
        }
        return;
    case LUA_TSTRING: {
        size_t len;
        const char *s = lua_tolstring(L, idx, &len);
        uint32_t l32 = (uint32_t)len;

        if (len > UINT32_MAX)
            luaL_error(L, "conn.ctx: a string over 4 GiB");
        put(L, b, limit, "s", 1);
        put(L, b, limit, &l32, sizeof(l32));
        put(L, b, limit, s, len);
        return;
    }
    case LUA_TTABLE:
        if (depth >= CTX_DEPTH)
            luaL_error(L, "conn.ctx: tables nested deeper than %d (a cycle?)", CTX_DEPTH);
        luaL_checkstack(L, 3, "conn.ctx");
        put(L, b, limit, "t", 1);
        lua_pushnil(L);
        while (lua_next(L, idx)) {
            if (lua_type(L, -2) == LUA_TTABLE)
                luaL_error(L, "conn.ctx: a table cannot be a key; use strings or numbers");
            encode_value(L, b, limit, -2, 0);
            encode_value(L, b, limit, -1, depth + 1);
            lua_pop(L, 1);
        }
        put(L, b, limit, "e", 1);
        return;
    default:
        luaL_error(L,
                   "conn.ctx cannot keep a %s between callbacks; store strings, numbers, "
                   "booleans and tables",
                   luaL_typename(L, idx));
    }
}

int ctx_encode(lua_State *L, int idx, struct outbuf *b, size_t limit)
{
    encode_value(L, b, limit, idx, 0);
    return 0;
}

/* Reads one value at *p (< end) and pushes it. Returns 0, or -1 on a corrupt blob (what it
 * pushed is left for the caller to drop). */
static int decode_value(lua_State *L, const char **p, const char *end, int depth)
{
    char tag;

    if (*p >= end || depth > CTX_DEPTH)
        return -1;
    tag = *(*p)++;
    switch (tag) {
    case 'T':
    case 'F':
        lua_pushboolean(L, tag == 'T');
        return 0;
    case 'i': {
        lua_Integer i;
        if ((size_t)(end - *p) < sizeof(i))
            return -1;
        memcpy(&i, *p, sizeof(i));
        *p += sizeof(i);
        lua_pushinteger(L, i);
        return 0;
    }
    case 'd': {
        lua_Number d;
        if ((size_t)(end - *p) < sizeof(d))
            return -1;
        memcpy(&d, *p, sizeof(d));
        *p += sizeof(d);
        lua_pushnumber(L, d);
        return 0;
    }
    case 's': {
        uint32_t len;
        if ((size_t)(end - *p) < sizeof(len))
            return -1;
        memcpy(&len, *p, sizeof(len));
        *p += sizeof(len);
        if ((size_t)(end - *p) < len)
            return -1;
        lua_pushlstring(L, *p, len);
        *p += len;
        return 0;
    }
    case 't':
        if (depth >= CTX_DEPTH) /* what ctx_encode never writes: decode -> encode holds */
            return -1;
        luaL_checkstack(L, 3, "conn.ctx");
        lua_newtable(L);
        for (;;) {
            if (*p >= end)
                return -1;
            if (**p == 'e') {
                (*p)++;
                return 0;
            }
            /* A key: never a table, never nil or NaN (lua_rawset would raise). */
            if (**p == 't' || decode_value(L, p, end, depth + 1) < 0)
                return -1;
            if (lua_type(L, -1) == LUA_TNUMBER && !lua_isinteger(L, -1) &&
                lua_tonumber(L, -1) != lua_tonumber(L, -1))
                return -1;
            if (decode_value(L, p, end, depth + 1) < 0)
                return -1;
            lua_rawset(L, -3);
        }
    default:
        return -1;
    }
}

int ctx_decode(lua_State *L, const char *p, size_t n)
{
    const char *end = p + n;
    int top = lua_gettop(L);

    if (decode_value(L, &p, end, 0) < 0 || p != end) {
        lua_settop(L, top);
        return -1;
    }
    return 0;
}

/* Measured in a state (test_ctx.c): a chain of tables keyed by true costs 34 bytes per
 * serialized byte (a 56-byte Table and a 32-byte node for 3 bytes: key, 't', 'e'), a binary tree
 * of them 27-30, flat tables of scalars under 2; a cache entry ([id] and [-id]) about 130. */
size_t ctx_cost(size_t len)
{
    return 160 + len * 40;
}

/* Walks the value at idx and the blob at *p together. Raises nothing and allocates nothing:
 * lua_next on a table nobody changes, no number converted to a string. */
static bool same_value(lua_State *L, int idx, const char **p, const char *end, int depth)
{
    char tag;

    idx = lua_absindex(L, idx);
    if (*p >= end || depth > CTX_DEPTH)
        return false;
    tag = *(*p)++;
    switch (lua_type(L, idx)) {
    case LUA_TBOOLEAN:
        return tag == (lua_toboolean(L, idx) ? 'T' : 'F');
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx)) {
            lua_Integer i = lua_tointeger(L, idx);
            if (tag != 'i' || (size_t)(end - *p) < sizeof(i) || memcmp(*p, &i, sizeof(i)))
                return false;
            *p += sizeof(i);
        } else {
            lua_Number d = lua_tonumber(L, idx);
            if (tag != 'd' || (size_t)(end - *p) < sizeof(d) || memcmp(*p, &d, sizeof(d)))
                return false;
            *p += sizeof(d);
        }
        return true;
    case LUA_TSTRING: {
        size_t len;
        const char *s = lua_tolstring(L, idx, &len);
        uint32_t l32;

        if (tag != 's' || (size_t)(end - *p) < sizeof(l32))
            return false;
        memcpy(&l32, *p, sizeof(l32));
        if (l32 != len || (size_t)(end - *p) - sizeof(l32) < len ||
            memcmp(*p + sizeof(l32), s, len))
            return false;
        *p += sizeof(l32) + len;
        return true;
    }
    case LUA_TTABLE:
        if (tag != 't' || depth >= CTX_DEPTH || !lua_checkstack(L, 3))
            return false;
        lua_pushnil(L);
        while (lua_next(L, idx)) {
            if (!same_value(L, -2, p, end, depth + 1) || !same_value(L, -1, p, end, depth + 1)) {
                lua_pop(L, 2);
                return false;
            }
            lua_pop(L, 1);
        }
        if (*p >= end || **p != 'e')
            return false;
        (*p)++;
        return true;
    default:
        return false;
    }
}

bool ctx_same(lua_State *L, int idx, const char *p, size_t n)
{
    const char *end = p + n;
    int top = lua_gettop(L);
    bool same = same_value(L, idx, &p, end, 0) && p == end;

    lua_settop(L, top);
    return same;
}

/* --- the per-state cache, the save, the limits ------------------------------------------ */

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
bool ctx_cache_get(lua_State *L, struct script *sc, struct script_conn *c)
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
void ctx_save(lua_State *L, struct cud *u)
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

void ctx_release(struct script_conn *c)
{
    if (c->env)
        ctx_charge(c->env, c->ctxlen, 0);
    free(c->ctx);
    c->ctx = NULL;
    c->ctxlen = 0;
    c->env = NULL;
}
