/* ctx: conn.ctx's serialized form, the bytes a connection keeps in C between callbacks.
 *
 * One tagged value: 'T' / 'F' booleans, 'i' + 8-byte integer, 'd' + 8-byte double, 's' + 4-byte
 * length + bytes, 't' key value ... 'e' a table. Host byte order: the blob never leaves the
 * process. The decoder takes any bytes (a corrupt blob is refused, never trusted).
 */
#include "ctx.h"

#include <lauxlib.h>
#include <stdint.h>
#include <string.h>

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
        if (tag != 't' || !lua_checkstack(L, 3))
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
