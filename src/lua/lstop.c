/* lstop: the standard functions whose C loops allocate nothing (string.rep, table.move,
 * table.insert, table.remove), wrapped so that the handler timeout stops them.
 *
 * The memory cap bounds a C loop that allocates as it goes; these do not: string.rep("", 2^62)
 * copies nothing 2^62 times, table.move over absent keys and table.insert/remove under a __len
 * that lies shift nothing for as long. Each is wrapped (upvalue 1: the original, upvalue 2: the
 * timeout flag, as lpattern.c has it) so that the timeout stops it. Moved out of lfelib.c to
 * sit beside lpattern.c, the other half of "a C loop the timeout can stop".
 */
#include "lstop.h"

#include <lauxlib.h>
#include <stdbool.h>
#include <stdint.h>

#define SHIFT_CHECK 4096 /* elements moved between two looks at the flag */

static void check_stop(lua_State *L)
{
    const volatile sig_atomic_t *stop = lua_touserdata(L, lua_upvalueindex(2));

    if (stop && __atomic_load_n(stop, __ATOMIC_RELAXED))
        luaL_error(L, "handler timed out");
}

/* Calls the original (upvalue 1) with the arguments at 1..n; leaves its results. */
static void call_original(lua_State *L, int n, int nres)
{
    lua_pushvalue(L, lua_upvalueindex(1));
    for (int i = 1; i <= n; i++)
        lua_pushvalue(L, i);
    lua_call(L, n, nres);
}

static int l_rep(lua_State *L)
{
    size_t l, lsep;

    luaL_checklstring(L, 1, &l);
    luaL_checkinteger(L, 2);
    luaL_optlstring(L, 3, "", &lsep);
    if (l + lsep == 0) { /* what the original returns, after looping n times */
        lua_pushliteral(L, "");
        return 1;
    }
    call_original(L, lua_gettop(L), 1);
    return 1;
}

/* table.move in slices of SHIFT_CHECK, in the original's direction, the flag between two. */
static int l_move(lua_State *L)
{
    lua_Integer f = luaL_checkinteger(L, 2), e = luaL_checkinteger(L, 3);
    lua_Integer t = luaL_checkinteger(L, 4), n, done;
    int nargs = lua_gettop(L), tt = !lua_isnoneornil(L, 5) ? 5 : 1;
    bool backward;

    if (e < f || (f > 0 && e - f < SHIFT_CHECK) || (f <= 0 && e < f + SHIFT_CHECK)) {
        call_original(L, nargs, 1);
        return 1;
    }
    luaL_argcheck(L, f > 0 || e < LUA_MAXINTEGER + f, 3, "too many elements to move");
    n = e - f + 1;
    luaL_argcheck(L, t <= LUA_MAXINTEGER - n + 1, 4, "destination wrap around");
    backward = !(t > e || t <= f || (tt != 1 && !lua_compare(L, 1, tt, LUA_OPEQ)));
    for (done = 0; done < n;) {
        lua_Integer len = n - done < SHIFT_CHECK ? n - done : SHIFT_CHECK;
        lua_Integer lo = backward ? e - done - len + 1 : f + done;

        check_stop(L);
        lua_pushvalue(L, lua_upvalueindex(1));
        lua_pushvalue(L, 1);
        lua_pushinteger(L, lo);
        lua_pushinteger(L, lo + len - 1);
        lua_pushinteger(L, t + (lo - f));
        lua_pushvalue(L, tt);
        lua_call(L, 5, 0);
        done += len;
    }
    lua_pushvalue(L, tt);
    return 1;
}

/* table.insert(t, pos, v) on a table: the original's shift, with the flag. */
static int l_insert(lua_State *L)
{
    lua_Integer e, pos;

    if (lua_gettop(L) != 3 || lua_type(L, 1) != LUA_TTABLE) {
        call_original(L, lua_gettop(L), 0);
        return 0;
    }
    e = luaL_len(L, 1) + 1;
    pos = luaL_checkinteger(L, 2);
    luaL_argcheck(L, (lua_Unsigned)pos - 1u < (lua_Unsigned)e, 2, "position out of bounds");
    for (lua_Integer i = e; i > pos; i--) {
        if (((e - i) & (SHIFT_CHECK - 1)) == 0)
            check_stop(L);
        lua_geti(L, 1, i - 1);
        lua_seti(L, 1, i);
    }
    lua_seti(L, 1, pos);
    return 0;
}

/* table.remove(t [, pos]) on a table: the original's shift, with the flag. */
static int l_remove(lua_State *L)
{
    lua_Integer size, pos;

    if (lua_type(L, 1) != LUA_TTABLE) {
        call_original(L, lua_gettop(L), 1);
        return 1;
    }
    size = luaL_len(L, 1);
    pos = luaL_optinteger(L, 2, size);
    if (pos != size)
        luaL_argcheck(L, (lua_Unsigned)pos - 1u <= (lua_Unsigned)size, 2, "position out of bounds");
    lua_geti(L, 1, pos);
    for (lua_Integer start = pos; pos < size; pos++) {
        if (((pos - start) & (SHIFT_CHECK - 1)) == 0)
            check_stop(L);
        lua_geti(L, 1, pos + 1);
        lua_seti(L, 1, pos);
    }
    lua_pushnil(L);
    lua_seti(L, 1, pos);
    return 1;
}

/* Replaces t[name] (t at the top) with f closing over the original and the flag. */
static void wrap_field(lua_State *L, const char *name, lua_CFunction f,
                       const volatile sig_atomic_t *stop)
{
    lua_getfield(L, -1, name);
    lua_pushlightuserdata(L, (void *)(uintptr_t)stop);
    lua_pushcclosure(L, f, 2);
    lua_setfield(L, -2, name);
}

void lstop_install_string(lua_State *L, int idx, const volatile sig_atomic_t *stop)
{
    lua_pushvalue(L, idx);
    wrap_field(L, "rep", l_rep, stop);
    lua_pop(L, 1);
}

void lstop_install_table(lua_State *L, int idx, const volatile sig_atomic_t *stop)
{
    lua_pushvalue(L, idx);
    wrap_field(L, "move", l_move, stop);
    wrap_field(L, "insert", l_insert, stop);
    wrap_field(L, "remove", l_remove, stop);
    lua_pop(L, 1);
}
