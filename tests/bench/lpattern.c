/* lpattern: ordinary matches with stock Lua's string.find/match/gmatch/gsub against lpattern's,
 * the cost of the step budget. Each case is a Lua loop of calls, run in two states (stock, and
 * lpattern installed with a stop flag that stays clear); REPS rounds, the two states in turns
 * (which goes first alternates), per case the median of each; an empty loop's median is taken
 * off both before the ratio. src/lua/lpattern.c is compiled as lfepolld compiles it (-O2 -g):
 *   mkdir -p build/bench && cc -O2 -g -std=c11 -D_GNU_SOURCE -Iinclude -Isrc/lua \
 *     $(pkg-config --cflags lua5.4) -o build/bench/lpattern tests/bench/lpattern.c \
 *     src/lua/lpattern.c $(pkg-config --libs lua5.4)
 *   build/bench/lpattern [REPS [aa]]     (REPS default 21; aa: stock in both states, the
 *                                         harness's own bias and noise) */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lpattern.h"

#define MAXREPS 101

/* The subjects every case may use, defined once in each state. */
static const char setup[] =
    "LINE = 'GET /index.html?user=alice&id=42&lang=en HTTP/1.1'\n"
    "HDRS = 'Host: example.com\\r\\nUser-Agent: lfbench/1.0\\r\\nAccept: */*\\r\\n'\n"
    "QUERY = 'user=alice&id=42&lang=en&page=7&sort=asc'\n"
    "PADDED = '   some value with spaces   '\n"
    "local t = {} for i = 1, 40 do t[i] = 'line ' .. i .. ': the quick brown fox' end\n"
    "TEXT = table.concat(t, '\\n')\n"
    "BODY = string.rep('<p>lorem ipsum dolor sit amet</p>', 100) .. "
    "'<title>Hello</title>\\r\\n\\r\\nbody'\n";

static const struct {
    const char *name, *body; /* body: one iteration of the loop */
    int iters;
} cases[] = {
    {"(empty loop)", "local x = LINE", 400000},
    {"find plain", "local a, b = HDRS:find('Accept:', 1, true)", 400000},
    {"find pattern", "local a, b = LINE:find('%d+')", 400000},
    {"find anchored", "local a, b = LINE:find('^GET ')", 400000},
    {"match captures", "local m, p, a, b = LINE:match('^(%u+)%s+(%S+)%s+HTTP/(%d)%.(%d)$')",
     200000},
    {"match trim", "local v = PADDED:match('^%s*(.-)%s*$')", 200000},
    {"match lazy 3 KB", "local v = BODY:match('<title>(.-)</title>')", 20000},
    {"gmatch pairs", "for k, v in QUERY:gmatch('([^&=]+)=([^&=]*)') do end", 100000},
    {"gmatch lines 1.5 KB", "for l in TEXT:gmatch('[^\\n]+') do end", 5000},
    {"gsub spaces", "local s, n = PADDED:gsub('%s+', ' ')", 200000},
    {"gsub template", "local s, n = QUERY:gsub('(%w+)=(%w+)', '%2=%1')", 100000},
    {"gsub table", "local s, n = LINE:gsub('[<>&=]', {['<'] = '&lt;', ['='] = '&eq;'})", 200000},
    {"find plain 3 KB", "local a, b = BODY:find('\\r\\n\\r\\n', 1, true)", 100000},
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

static double now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, n, sizeof(*v), cmp_double);
    return v[n / 2];
}

/* A state with the setup done and each case compiled into a function (registry refs). */
static lua_State *new_state(const volatile sig_atomic_t *stop, int *refs)
{
    lua_State *L = luaL_newstate();

    luaL_openlibs(L);
    if (stop) {
        lua_getglobal(L, "string");
        lpattern_install(L, -1, stop);
        lua_pop(L, 1);
    }
    if (luaL_dostring(L, setup) != LUA_OK) {
        fprintf(stderr, "setup: %s\n", lua_tostring(L, -1));
        exit(1);
    }
    for (size_t i = 0; i < NCASES; i++) {
        char code[512];

        snprintf(code, sizeof(code), "return function(n) for i = 1, n do %s end end",
                 cases[i].body);
        if (luaL_dostring(L, code) != LUA_OK) {
            fprintf(stderr, "%s: %s\n", cases[i].name, lua_tostring(L, -1));
            exit(1);
        }
        refs[i] = luaL_ref(L, LUA_REGISTRYINDEX);
    }
    return L;
}

static double run(lua_State *L, int ref, int iters)
{
    double t0;

    lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
    lua_pushinteger(L, iters);
    t0 = now_ns();
    if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
        fprintf(stderr, "%s\n", lua_tostring(L, -1));
        exit(1);
    }
    return (now_ns() - t0) / iters;
}

int main(int argc, char **argv)
{
    static volatile sig_atomic_t never;
    static double t[2][NCASES][MAXREPS];
    int reps = argc > 1 ? atoi(argv[1]) : 21, refs[2][NCASES];
    bool aa = argc > 2 && strcmp(argv[2], "aa") == 0;
    lua_State *L[2];
    double base[2];

    if (reps < 1 || reps > MAXREPS) {
        fprintf(stderr, "usage: lpattern [REPS (1-%d)]\n", MAXREPS);
        return 2;
    }
    L[0] = new_state(NULL, refs[0]);
    L[1] = new_state(aa ? NULL : &never, refs[1]);
    for (int k = 0; k < 2; k++) /* warm up caches and the allocator */
        for (size_t i = 0; i < NCASES; i++)
            run(L[k], refs[k][i], cases[i].iters / 10);
    for (int r = 0; r < reps; r++) {
        for (size_t i = 0; i < NCASES; i++) {
            for (int j = 0; j < 2; j++) {
                int k = (r + j) % 2;
                t[k][i][r] = run(L[k], refs[k][i], cases[i].iters);
            }
        }
    }
    printf("%-22s %10s %10s %8s   (ns per call, median of %d, empty loop taken off)\n", "case",
           "stock", aa ? "stock" : "lpattern", "ratio", reps);
    for (int k = 0; k < 2; k++)
        base[k] = median(t[k][0], reps);
    printf("%-22s %10.1f %10.1f\n", cases[0].name, base[0], base[1]);
    for (size_t i = 1; i < NCASES; i++) {
        double s = median(t[0][i], reps) - base[0], o = median(t[1][i], reps) - base[1];
        printf("%-22s %10.1f %10.1f %8.3f\n", cases[i].name, s, o, o / s);
    }
    lua_close(L[0]);
    lua_close(L[1]);
    return 0;
}
