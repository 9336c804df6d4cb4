/* fuzz_ctx: conn.ctx's serialized form (ctx_encode, ctx_decode, ctx_same, ctx_cost).
 *
 * Two modes, by the first byte. Decode: the rest is a blob, as corrupt as it comes. ctx_decode
 * either refuses it leaving the stack as it was, or pushes one value; that value then encodes
 * (what decodes is storable), to at most the blob's size, decodes again to an equal value, and
 * ctx_same says yes for its own encoding and for the blob exactly when they are the same bytes;
 * building it cost the state at most ctx_cost(blob size) (the per-state cache charges that).
 * Build: the rest is a small program that builds a value in a state (numbers of every kind,
 * NaN and -0.0 included, strings with any bytes, booleans, nested tables, a table as a key, a
 * function, a cycle). ctx_encode under a limit from the input succeeds exactly when a plain
 * walk of the value says it is storable and fits (then with exactly the bytes that walk counts),
 * and otherwise raises one line naming conn.ctx; what it wrote decodes to an equal value,
 * ctx_same says yes for it and no once one of its bytes changes. */
#include "fuzz.h"

#include "ctx.h"

#include <lauxlib.h>
#include <lualib.h>

static lua_State *L;
static size_t used; /* bytes the state's allocator hands out, as lfepolld counts them */

static void *counting_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    size_t old = ptr ? osize : 0;
    void *p;

    (void)ud;
    if (nsize == 0) {
        free(ptr);
        used -= old;
        return NULL;
    }
    p = realloc(ptr, nsize);
    if (p)
        used = used - old + nsize;
    return p;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    L = lua_newstate(counting_alloc, NULL);
    FZ_CHECK(L != NULL, "lua_newstate");
    luaL_openlibs(L);
    return 0;
}

/* lua_pcall'd: encode(value, outbuf, limit) */
static int l_encode(lua_State *Ls)
{
    ctx_encode(Ls, 1, lua_touserdata(Ls, 2), (size_t)lua_tointeger(Ls, 3));
    return 0;
}

/* lua_pcall'd: decode(blob pointer, length) -> [value,] rc */
static int l_decode(lua_State *Ls)
{
    int top = lua_gettop(Ls),
        rc = ctx_decode(Ls, lua_touserdata(Ls, 1), (size_t)lua_tointeger(Ls, 2));

    lua_pushinteger(Ls, rc);
    return lua_gettop(Ls) - top;
}

/* Encodes the value at idx into b (emptied first). Returns the pcall status; the error message
 * is left on the stack then. */
static int encode(int idx, struct outbuf *b, size_t limit)
{
    idx = lua_absindex(L, idx);
    b->len = 0;
    lua_pushcfunction(L, l_encode);
    lua_pushvalue(L, idx);
    lua_pushlightuserdata(L, b);
    lua_pushinteger(L, (lua_Integer)limit);
    return lua_pcall(L, 3, 0, 0);
}

/* Decodes p[0, n): returns true with the value pushed, or false with nothing pushed. */
static bool decode(const char *p, size_t n)
{
    int top = lua_gettop(L), st;

    lua_pushcfunction(L, l_decode);
    lua_pushlightuserdata(L, (void *)p);
    lua_pushinteger(L, (lua_Integer)n);
    st = lua_pcall(L, 2, LUA_MULTRET, 0);
    FZ_CHECK(st == LUA_OK, "ctx_decode raised: %s", lua_tostring(L, -1));
    if (lua_tointeger(L, -1) != 0) {
        FZ_CHECK(lua_tointeger(L, -1) == -1 && lua_gettop(L) == top + 1,
                 "a refused blob left %d values", lua_gettop(L) - top - 1);
        lua_settop(L, top);
        return false;
    }
    FZ_CHECK(lua_gettop(L) == top + 2, "a decoded blob pushed %d values", lua_gettop(L) - top - 1);
    lua_pop(L, 1);
    return true;
}

/* Same type, integer or float alike, same bits for floats (NaN and -0.0 kept), same strings,
 * tables with the same keys holding equal values. */
static bool equal(int a, int b, int depth)
{
    int t = lua_type(L, a);

    a = lua_absindex(L, a);
    b = lua_absindex(L, b);
    if (t != lua_type(L, b) || depth > 40)
        return false;
    switch (t) {
    case LUA_TBOOLEAN:
        return lua_toboolean(L, a) == lua_toboolean(L, b);
    case LUA_TNUMBER:
        if (lua_isinteger(L, a) != lua_isinteger(L, b))
            return false;
        if (lua_isinteger(L, a))
            return lua_tointeger(L, a) == lua_tointeger(L, b);
        else {
            lua_Number x = lua_tonumber(L, a), y = lua_tonumber(L, b);
            return !memcmp(&x, &y, sizeof(x));
        }
    case LUA_TSTRING: {
        size_t la, lb;
        const char *sa = lua_tolstring(L, a, &la), *sb = lua_tolstring(L, b, &lb);
        return la == lb && !memcmp(sa, sb, la);
    }
    case LUA_TTABLE: {
        size_t na = 0, nb = 0;

        lua_checkstack(L, 4);
        lua_pushnil(L);
        while (lua_next(L, b)) {
            nb++;
            lua_pop(L, 1);
        }
        lua_pushnil(L);
        while (lua_next(L, a)) {
            bool same;
            na++;
            lua_pushvalue(L, -2);
            lua_rawget(L, b);
            same = equal(-2, -1, depth + 1);
            lua_pop(L, 2);
            if (!same) {
                lua_pop(L, 1);
                return false;
            }
        }
        return na == nb;
    }
    default:
        return lua_rawequal(L, a, b);
    }
}

/* The plain walk: the encoded size of the value at idx, or -1 when it cannot be stored (not a
 * string, number, boolean or table; a table as a key; tables nested CTX_DEPTH deep or more). */
static long long walk(int idx, int depth)
{
    long long size, k, v;

    idx = lua_absindex(L, idx);
    switch (lua_type(L, idx)) {
    case LUA_TBOOLEAN:
        return 1;
    case LUA_TNUMBER:
        return 9;
    case LUA_TSTRING: {
        size_t len;
        lua_tolstring(L, idx, &len);
        return 5 + (long long)len;
    }
    case LUA_TTABLE:
        if (depth >= CTX_DEPTH)
            return -1;
        lua_checkstack(L, 3);
        size = 2;
        lua_pushnil(L);
        while (lua_next(L, idx)) {
            k = lua_type(L, -2) == LUA_TTABLE ? -1 : walk(-2, 0);
            v = k < 0 ? -1 : walk(-1, depth + 1);
            if (v < 0) {
                lua_pop(L, 2);
                return -1;
            }
            size += k + v;
            lua_pop(L, 1);
        }
        return size;
    default:
        return -1;
    }
}

static void check_error(void)
{
    const char *msg = lua_tostring(L, -1);
    const char *why;

    FZ_CHECK(msg != NULL, "ctx_encode raised a %s", luaL_typename(L, -1));
    why = fz_one_line(msg, strlen(msg) + 1);
    FZ_CHECK(!why, "ctx_encode's error %s: %s", why, msg);
    FZ_CHECK(strstr(msg, "conn.ctx") || strstr(msg, "memory"), "ctx_encode's error: %s", msg);
}

static void decode_mode(const char *blob, size_t n)
{
    struct outbuf b = {0}, b2 = {0};
    size_t before, cost;
    int top = lua_gettop(L);

    lua_gc(L, LUA_GCCOLLECT);
    lua_gc(L, LUA_GCSTOP);
    lua_checkstack(L, 3 * CTX_DEPTH + 64); /* the stack's growth is not the table's cost */
    FZ_CHECK(decode("T", 1), "a boolean"); /* nor the call frames of the first pcall */
    lua_pop(L, 1);
    before = used;
    if (!decode(blob, n)) {
        lua_gc(L, LUA_GCRESTART);
        FZ_CHECK(lua_gettop(L) == top, "stack");
        return;
    }
    cost = used - before;
    lua_gc(L, LUA_GCRESTART);
    FZ_CHECK(cost <= ctx_cost(n), "a %zu-byte blob costs the state %zu bytes, ctx_cost says %zu", n,
             cost, ctx_cost(n));
    FZ_CHECK(encode(-1, &b, n + 64) == LUA_OK, "a decoded value does not encode: %s",
             lua_tostring(L, -1));
    FZ_CHECK(b.len <= n, "a %zu-byte blob encodes again to %zu bytes", n, b.len);
    FZ_CHECK(ctx_same(L, -1, b.data, b.len), "ctx_same: no for its own encoding");
    FZ_CHECK(ctx_same(L, -1, blob, n) == (b.len == n && !memcmp(b.data, blob, n)),
             "ctx_same for the blob it came from: %s, but the encoding %s",
             ctx_same(L, -1, blob, n) ? "yes" : "no",
             b.len == n && !memcmp(b.data, blob, n) ? "is the blob" : "differs");
    FZ_CHECK(decode(b.data, b.len), "its encoding does not decode");
    FZ_CHECK(equal(-2, -1, 0), "decoded, encoded and decoded again: another value");
    FZ_CHECK(encode(-1, &b2, n + 64) == LUA_OK && b2.len == b.len,
             "the second round: %zu bytes, the first %zu", b2.len, b.len);
    free(b.data);
    free(b2.data);
    lua_settop(L, top);
}

static int l_noop(lua_State *Ls)
{
    (void)Ls;
    return 0;
}

/* Builds a value from the program in f: a stack of values at base..top, each op pushing a
 * scalar or combining the top ones. Leaves the value at base + 1. */
static void build(struct fz *f, int base)
{
    lua_newtable(L);
    while (f->n && lua_gettop(L) < base + 60) {
        uint8_t op = fz_u8(f);
        int top = lua_gettop(L);

        switch (op % 14) {
        case 0:
            lua_pushinteger(L, (lua_Integer)fz_u64(f));
            break;
        case 1:
            lua_pushinteger(L, (lua_Integer)(int8_t)fz_u8(f));
            break;
        case 2: { /* any bits: NaN, infinities, -0.0, subnormals */
            uint64_t bits = fz_u64(f);
            double d;
            memcpy(&d, &bits, sizeof(d));
            lua_pushnumber(L, d);
            break;
        }
        case 3:
            lua_pushnumber(L, (double)(int8_t)fz_u8(f) / 4);
            break;
        case 4: {
            const uint8_t *p;
            size_t len = fz_bytes(f, &p, 64);
            lua_pushlstring(L, (const char *)p, len);
            break;
        }
        case 5:
            lua_pushboolean(L, op & 0x80);
            break;
        case 6:
            lua_newtable(L);
            break;
        case 7:
        case 8:
        case 9: /* t[k] = v: the three on top (t, k, v); a key that Lua refuses is dropped */
            if (top >= base + 3 && lua_istable(L, -3) && !lua_isnil(L, -2) &&
                !(lua_type(L, -2) == LUA_TNUMBER && lua_tonumber(L, -2) != lua_tonumber(L, -2)))
                lua_rawset(L, -3);
            else if (top > base + 1)
                lua_pop(L, 1);
            break;
        case 10: /* t[#t + 1] = v: a list */
            if (top >= base + 2 && lua_istable(L, -2))
                lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
            break;
        case 11: /* something conn.ctx cannot keep */
            if (op & 0x80)
                lua_pushcfunction(L, l_noop);
            else
                lua_pushlightuserdata(L, L);
            break;
        case 12: /* a cycle: the top table holds itself, or the one under it */
            if (lua_istable(L, -1)) {
                lua_pushinteger(L, 7);
                lua_pushvalue(L, op & 0x80 && top > base + 1 ? -3 : -2);
                lua_rawset(L, -3);
            }
            break;
        default: /* deep: n tables, each in the next */
            lua_newtable(L);
            for (int i = 0, n = fz_u8(f) % 40; i < n; i++) {
                lua_newtable(L);
                lua_insert(L, -2);
                lua_rawseti(L, -2, 1);
            }
            break;
        }
    }
    /* fold the stack into the bottom table: t[1..] = what is above it */
    while (lua_gettop(L) > base + 1)
        lua_rawseti(L, base + 1, lua_gettop(L) - base - 1);
}

static void build_mode(struct fz *f)
{
    struct outbuf b = {0};
    int top = lua_gettop(L), st;
    size_t limit;
    long long want;

    limit = fz_u8(f) % 2 ? fz_range(f, 0, 4096) : SCRIPT_CTX_MAX;
    build(f, top);
    want = walk(-1, 0);
    st = encode(-1, &b, limit);
    if (want < 0 || (unsigned long long)want > limit) {
        FZ_CHECK(st != LUA_OK, "a value the walk says %s encoded (%zu bytes, limit %zu)",
                 want < 0 ? "cannot be stored" : "is over the limit", b.len, limit);
        check_error();
    } else {
        FZ_CHECK(st == LUA_OK, "a storable value of %lld bytes (limit %zu) did not encode: %s",
                 want, limit, lua_tostring(L, -1));
        FZ_CHECK(b.len == (size_t)want, "encoded to %zu bytes, the walk counts %lld", b.len, want);
        FZ_CHECK(ctx_same(L, -1, b.data, b.len), "ctx_same: no for its own encoding");
        FZ_CHECK(decode(b.data, b.len), "an encoded value does not decode");
        FZ_CHECK(equal(-2, -1, 0), "encoded and decoded: another value");
        lua_pop(L, 1);
        if (b.len) {
            size_t at = fz_u32(f) % b.len;
            b.data[at] ^= (char)(1 + fz_u8(f) % 255);
            FZ_CHECK(!ctx_same(L, -1, b.data, b.len), "ctx_same: yes with byte %zu changed", at);
            FZ_CHECK(!ctx_same(L, -1, b.data, b.len - 1), "ctx_same: yes for a cut blob");
        }
    }
    free(b.data);
    lua_settop(L, top);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fz f = {data, size};
    uint8_t mode = fz_u8(&f);

    if (mode % 2 == 0)
        decode_mode((const char *)f.p, f.n);
    else
        build_mode(&f);
    FZ_CHECK(lua_gettop(L) == 0, "the stack holds %d values", lua_gettop(L));
    /* what the input built goes now: libFuzzer runs a whole leak check after any input that
     * allocated more than it freed, which is most of the time */
    lua_gc(L, LUA_GCCOLLECT);
    return 0;
}
