/* Unit tests of ctx, conn.ctx's serialized form: round trips, every corrupt blob refused, and
 * the cost a cached table may have in a state (the bound the per-state cache charges). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <lauxlib.h>
#include <lualib.h>
#include <stdlib.h>
#include <string.h>

#include "ctx.h"

static size_t used; /* bytes the test states' allocator hands out, as lfepolld counts them */

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

static lua_State *state(void)
{
    lua_State *L = lua_newstate(counting_alloc, NULL);

    assert_non_null(L);
    luaL_openlibs(L);
    return L;
}

static int encode(lua_State *L)
{
    ctx_encode(L, 1, lua_touserdata(L, 2), (size_t)lua_tointeger(L, 3));
    return 0;
}

/* Runs chunk (which returns a value) and encodes its result into b. Returns the pcall code. */
static int encode_chunk(lua_State *L, const char *chunk, struct outbuf *b, size_t limit)
{
    b->len = 0;
    lua_pushcfunction(L, encode);
    if (luaL_dostring(L, chunk) != LUA_OK)
        fail_msg("%s: %s", chunk, lua_tostring(L, -1));
    lua_pushlightuserdata(L, b);
    lua_pushinteger(L, (lua_Integer)limit);
    return lua_pcall(L, 3, 0, 0);
}

static void test_round_trip(void **state_)
{
    static const char *const values[] = {
        "return {}",
        "return {1, 2.5, 'three', true, false, -0.0, math.maxinteger, math.mininteger}",
        "return {a = {b = {c = {d = 'deep'}}}, [1.5] = 'f', [true] = 1, [false] = 'no', ['\\0'] = "
        "'\\0\\255'}",
        "return {list = {'x', 'y'}, n = 1e300, s = string.rep('z', 70000)}", NULL};
    lua_State *L = state();
    struct outbuf a = {0}, b = {0};

    (void)state_;
    for (int i = 0; values[i]; i++) {
        assert_int_equal(encode_chunk(L, values[i], &a, SIZE_MAX), LUA_OK);
        assert_int_equal(ctx_decode(L, a.data, a.len), 0);
        /* decoded, it encodes to the same bytes in size (order may differ), and decodes again
         * to an equal value: compare through a second encode of the decoded table */
        lua_pushcfunction(L, encode);
        lua_insert(L, -2);
        lua_pushlightuserdata(L, &b);
        lua_pushinteger(L, (lua_Integer)SIZE_MAX);
        b.len = 0;
        assert_int_equal(lua_pcall(L, 3, 0, 0), LUA_OK);
        assert_int_equal(a.len, b.len);
    }
    free(a.data);
    free(b.data);
    lua_close(L);
}

static void test_encode_refuses(void **state_)
{
    static const char *const bad[] = {"return {f = print}", "local t = {} t.me = t return t",
                                      "return {[{}] = 1}", "return {co = coroutine.create(print)}",
                                      NULL};
    lua_State *L = state();
    struct outbuf b = {0};

    (void)state_;
    for (int i = 0; bad[i]; i++)
        assert_int_equal(encode_chunk(L, bad[i], &b, SIZE_MAX), LUA_ERRRUN);
    assert_int_equal(encode_chunk(L, "return {s = string.rep('x', 100)}", &b, 50), LUA_ERRRUN);
    assert_non_null(strstr(lua_tostring(L, -1), "over 50 bytes"));
    free(b.data);
    lua_close(L);
}

/* Every truncation and every single-byte change of a valid blob decodes to a value or is
 * refused; none crashes or reads past the end (ASan runs this too). */
static void test_decode_corrupt(void **state_)
{
    lua_State *L = state();
    struct outbuf b = {0};
    char *blob;

    (void)state_;
    assert_int_equal(
        encode_chunk(L, "return {a = {1, 2, {x = 'y'}}, [2.5] = true, s = 'str'}", &b, SIZE_MAX),
        LUA_OK);
    blob = malloc(b.len);
    for (size_t n = 0; n < b.len; n++)
        assert_int_equal(ctx_decode(L, b.data, n), -1); /* every proper prefix is refused */
    for (size_t i = 0; i < b.len; i++)
        for (int v = 0; v < 256; v++) {
            int top = lua_gettop(L);
            memcpy(blob, b.data, b.len);
            blob[i] = (char)v;
            if (ctx_decode(L, blob, b.len) == 0)
                lua_pop(L, 1);
            assert_int_equal(lua_gettop(L), top);
        }
    /* a NaN key, a table as a key, nesting past CTX_DEPTH */
    {
        double nan = 0.0 / 0.0;
        char k[32] = "td";
        memcpy(k + 2, &nan, 8);
        memcpy(k + 10, "Te", 2);
        assert_int_equal(ctx_decode(L, k, 12), -1);
        assert_int_equal(ctx_decode(L, "ttTeTe", 6), -1);
    }
    {
        /* t T (t T (... F) e) e: tables nested CTX_DEPTH + 2 deep */
        char deep[200];
        size_t n = 0;
        for (int d = 0; d < CTX_DEPTH + 2; d++) {
            deep[n++] = 't';
            deep[n++] = 'T';
        }
        deep[n++] = 'F';
        for (int d = 0; d < CTX_DEPTH + 2; d++)
            deep[n++] = 'e';
        assert_int_equal(ctx_decode(L, deep, n), -1);
        /* regression (found by fuzz_ctx): 33 nested tables, the last empty, decoded though
         * ctx_encode can never write them */
        n = 0;
        for (int d = 0; d < CTX_DEPTH + 1; d++) {
            deep[n++] = 't';
            if (d < CTX_DEPTH)
                deep[n++] = 'T';
        }
        for (int d = 0; d < CTX_DEPTH + 1; d++)
            deep[n++] = 'e';
        assert_int_equal(ctx_decode(L, deep, n), -1);
        assert_int_equal(ctx_decode(L, deep + 2, n - 3), 0); /* 32 nested: encodable */
        lua_pop(L, 1);
        assert_int_equal(ctx_decode(L, deep + 2 * 4, n - 2 * 4 - 4), 0); /* shallower: fine */
        lua_pop(L, 1);
    }
    free(blob);
    free(b.data);
    lua_close(L);
}

/* ctx_same: true for the table that was encoded, false once it changes in any way, and never
 * raising (a function or a cycle put in after the save is just "not the same"). */
static void test_same(void **state_)
{
    static const char *const changes[] = {"t.n = 2",        "t.sub.x = 'z'", "t.sub.y = 1",
                                          "t.n = nil",      "t.f = print",   "t.sub.me = t.sub",
                                          "t[1.5] = false", "t.s = 'strin'", NULL};
    lua_State *L = state();
    struct outbuf b = {0};

    (void)state_;
    for (int i = 0; changes[i]; i++) {
        assert_int_equal(luaL_dostring(L, "t = {n = 1, sub = {x = 'y'}, [1.5] = true, "
                                          "s = 'string'} return t"),
                         LUA_OK);
        lua_pushcfunction(L, encode);
        lua_pushvalue(L, -2);
        lua_pushlightuserdata(L, &b);
        lua_pushinteger(L, (lua_Integer)SIZE_MAX);
        b.len = 0;
        assert_int_equal(lua_pcall(L, 3, 0, 0), LUA_OK);
        assert_true(ctx_same(L, -1, b.data, b.len));
        assert_false(ctx_same(L, -1, b.data, b.len - 1));
        assert_int_equal(luaL_dostring(L, changes[i]), LUA_OK);
        if (ctx_same(L, -1, b.data, b.len))
            fail_msg("still the same after %s", changes[i]);
        lua_settop(L, 0);
    }
    free(b.data);
    lua_close(L);
}

/* The regression test of the cache's charge: a 250-byte blob of 31 empty subtables took ~2.5 KB
 * of a state against an assumed 1 KB. Every shape here must cost at most ctx_cost(). */
static void test_ctx_cache_cost_is_worst_case(void **state_)
{
    static const char *const shapes[] = {
        "local t = {} for i = 1, 31 do t['k' .. i] = {} end return t",
        "local t = {} for i = 1, 31 do t[i] = {} end return t",
        "local t = {} for i = 1, 22 do t[string.char(64 + i)] = {} end return t",
        "local function mk(d) if d == 0 then return {} end\n"
        "  return {[true] = mk(d - 1), [false] = mk(d - 1)} end return mk(5)",
        "local t = {} local c = t for i = 1, 31 do c[true] = {} c = c[true] end return t",
        "local function mk(d) if d == 0 then return {} end\n"
        "  return {[true] = mk(d - 1), [false] = {}} end return mk(31)",
        "local t = {} for i = 1, 20 do t[i + 0.5] = {} end return t",
        "local t = {} for i = 1, 25 do t[i] = '' end return t",
        "local t = {} for i = 1, 17 do t[string.char(64 + i)] = string.char(64 + i) end return t",
        "return {{}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}}",
        NULL};
    lua_State *L = state();
    struct outbuf b = {0};

    (void)state_;
    for (int i = 0; shapes[i]; i++) {
        size_t before, cost;

        assert_int_equal(encode_chunk(L, shapes[i], &b, SIZE_MAX), LUA_OK);
        lua_settop(L, 0);
        lua_gc(L, LUA_GCCOLLECT);
        lua_newtable(L); /* a cache table, with one entry in it */
        before = used;
        assert_int_equal(ctx_decode(L, b.data, b.len), 0);
        lua_rawseti(L, 1, 7);
        lua_pushinteger(L, 1);
        lua_rawseti(L, 1, -7);
        cost = used - before;
        if (cost > ctx_cost(b.len))
            fail_msg("%zu-byte blob costs %zu in the state, over ctx_cost %zu: %s", b.len, cost,
                     ctx_cost(b.len), shapes[i]);
        lua_settop(L, 0);
    }
    free(b.data);
    lua_close(L);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_encode_refuses),
        cmocka_unit_test(test_decode_corrupt),
        cmocka_unit_test(test_same),
        cmocka_unit_test(test_ctx_cache_cost_is_worst_case),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
