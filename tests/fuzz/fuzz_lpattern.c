/* fuzz_lpattern: the pattern functions scripts run on client bytes (src/lua/lpattern.c: find,
 * match, gmatch, gsub with a stop flag), against Lua 5.4's own.
 *
 * The input is a call: the function, its subject and pattern (any bytes), init, find's plain or
 * gsub's count, gsub's replacement (a string from the input, a table, a function). It runs in a
 * state with lpattern installed, under a 200 ms stop flag, then, if that finished, in a stock
 * state. Invariant: the same results (every value, every gmatch step) or the same error
 * message. A call that ours stops is not compared: stock Lua has no bound to hold it to. */
#include "fuzz.h"

#include "lpattern.h"

#include <lauxlib.h>
#include <lualib.h>
#include <pthread.h>
#include <time.h>

#define STOP_MS 200

static const char driver[] =
    "local function ser(...)\n"
    "  local t = {}\n"
    "  for i = 1, select('#', ...) do\n"
    "    local v = select(i, ...)\n"
    "    t[i] = type(v) == 'string' and string.format('%q', v) or math.type(v) == 'float'\n"
    "      and string.format('%a', v) or tostring(v)\n"
    "  end\n"
    "  return '(' .. table.concat(t, ', ') .. ')'\n"
    "end\n"
    "local REPL = {a = '[A]', b = false, ab = '<ab>', [1] = 'one', [2] = 2, ['('] = 1.5,\n"
    "              x = {}, [''] = 'empty', [' '] = '_', ['\\0'] = 'nul'}\n"
    "local function frepl(...)\n"
    "  local n, a = select('#', ...), tostring((...))\n"
    "  local k = (n * 7 + #a * 3) % 13\n"
    "  if k == 0 then return nil elseif k == 1 then return false elseif k == 2 then return n\n"
    "  elseif k == 3 then return 0.5 elseif k == 12 then return {} end\n"
    "  return '<' .. a .. '>'\n"
    "end\n"
    "return function(op, s, p, a3, a4, repl, rk)\n"
    "  if op == 0 then return ser(string.find(s, p, a3, a4))\n"
    "  elseif op == 1 then return ser(string.match(s, p, a3))\n"
    "  elseif op == 2 then\n"
    "    local out, it = {}, string.gmatch(s, p, a3)\n"
    "    while #out < 2000 do\n"
    "      local r = table.pack(it())\n"
    "      if r.n == 0 or r[1] == nil then break end\n"
    "      out[#out + 1] = ser(table.unpack(r, 1, r.n))\n"
    "    end\n"
    "    return table.concat(out, ' ')\n"
    "  end\n"
    "  if rk == 1 then repl = REPL elseif rk == 2 then repl = frepl end\n"
    "  return ser(string.gsub(s, p, repl, a4))\n"
    "end\n";

static lua_State *stock, *ours;
static int run_stock, run_ours;
static volatile sig_atomic_t stop;

/* The stop flag's clock: a thread that sets it once the deadline passes. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct timespec deadline;
static bool armed;

static void *watchdog(void *arg)
{
    (void)arg;
    for (;;) {
        struct timespec now, nap = {0, 5 * 1000000};

        nanosleep(&nap, NULL);
        clock_gettime(CLOCK_MONOTONIC, &now);
        pthread_mutex_lock(&mu);
        if (armed && (now.tv_sec > deadline.tv_sec ||
                      (now.tv_sec == deadline.tv_sec && now.tv_nsec >= deadline.tv_nsec)))
            __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
        pthread_mutex_unlock(&mu);
    }
    return NULL;
}

static void arm(bool on)
{
    pthread_mutex_lock(&mu);
    armed = on;
    __atomic_store_n(&stop, 0, __ATOMIC_RELAXED);
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_nsec += STOP_MS * 1000000L;
    deadline.tv_sec += deadline.tv_nsec / 1000000000L;
    deadline.tv_nsec %= 1000000000L;
    pthread_mutex_unlock(&mu);
}

static lua_State *new_state(bool with_ours, int *ref)
{
    lua_State *L = luaL_newstate();

    FZ_CHECK(L != NULL, "luaL_newstate");
    luaL_openlibs(L);
    if (with_ours) {
        lua_getglobal(L, "string");
        lpattern_install(L, -1, &stop);
        lua_pop(L, 1);
    }
    FZ_CHECK(luaL_loadstring(L, driver) == LUA_OK && lua_pcall(L, 0, 1, 0) == LUA_OK, "driver: %s",
             lua_tostring(L, -1));
    *ref = luaL_ref(L, LUA_REGISTRYINDEX);
    return L;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    pthread_t t;

    (void)argc;
    (void)argv;
    stock = new_state(false, &run_stock);
    ours = new_state(true, &run_ours);
    FZ_CHECK(pthread_create(&t, NULL, watchdog, NULL) == 0, "pthread_create");
    pthread_detach(t);
    return 0;
}

struct call {
    int op, rk;
    const uint8_t *s, *p, *r;
    size_t sl, pl, rl;
    bool have3, have4;
    lua_Integer a3, a4;
};

/* Runs the call in L; leaves "ok: results" or "error: message" on the stack. */
static const char *run(lua_State *L, int ref, const struct call *c, size_t *len)
{
    lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
    lua_pushinteger(L, c->op);
    lua_pushlstring(L, (const char *)c->s, c->sl);
    lua_pushlstring(L, (const char *)c->p, c->pl);
    if (c->have3)
        lua_pushinteger(L, c->a3);
    else
        lua_pushnil(L);
    if (!c->have4)
        lua_pushnil(L);
    else if (c->op == 0)
        lua_pushboolean(L, c->a4 & 1);
    else
        lua_pushinteger(L, c->a4);
    lua_pushlstring(L, (const char *)c->r, c->rl);
    lua_pushinteger(L, c->rk);
    if (lua_pcall(L, 7, 1, 0) == LUA_OK)
        lua_pushfstring(L, "ok: %s", lua_tostring(L, -1));
    else
        lua_pushfstring(L, "error: %s", lua_tostring(L, -1));
    lua_remove(L, -2);
    return lua_tolstring(L, -1, len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fz f = {data, size};
    struct call c = {0};
    uint8_t k = fz_u8(&f);
    const char *a, *b;
    size_t al, bl;

    c.op = k % 4;
    c.rk = k / 4 % 3;
    c.have3 = k & 0x20;
    c.have4 = k & 0x40;
    c.a3 = (int8_t)fz_u8(&f);
    c.a4 = (int8_t)fz_u8(&f);
    c.rl = fz_bytes(&f, &c.r, 16);
    c.sl = fz_bytes(&f, &c.s, 255);
    c.p = f.p; /* the rest */
    c.pl = f.n < 64 ? f.n : 64;

    arm(true);
    a = run(ours, run_ours, &c, &al);
    arm(false);
    if (strstr(a, "handler timed out")) {
        lua_settop(ours, 0);
        return 0; /* stock Lua would not be held to a bound */
    }
    b = run(stock, run_stock, &c, &bl);
    if (getenv("FUZZ_VERBOSE")) /* to follow a reproducer */
        fprintf(stderr, "op %d, pattern %.*s: %s\n", c.op, (int)c.pl, (const char *)c.p, a);
    FZ_CHECK(al == bl && !memcmp(a, b, al), "op %d, pattern %.*s: lpattern says %s; Lua says %s",
             c.op, (int)c.pl, (const char *)c.p, a, b);
    lua_settop(ours, 0);
    lua_settop(stock, 0);
    if (k & 0x80) { /* what the call built goes (libFuzzer checks leaks after a growing run) */
        lua_gc(ours, LUA_GCCOLLECT);
        lua_gc(stock, LUA_GCCOLLECT);
    }
    return 0;
}
