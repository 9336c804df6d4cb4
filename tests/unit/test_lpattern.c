/* Unit tests of lpattern: the same results and errors as Lua's own string.find, match, gmatch
 * and gsub (cases from the manual, thousands of random cases and long subjects, each run in a
 * stock state and in one with lpattern installed), and the stop flag ending long matches.
 * LPATTERN_SEED=N changes the random cases, LPATTERN_CASES=N their number; LPATTERN_TEST=GLOB
 * runs only the tests whose names match. */
/* cmocka.h needs these before it: not sorted */
/* clang-format off */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lpattern.h"

#define RANDOM_CASES 20000
#define STOP_BOUND_S 2.0 /* generous: unbounded, each timed case runs for minutes */
#define GUARD_S 60       /* alarm() past which a test that did not stop is killed */

/* The same chunk in both states: ser() writes results as one comparable string, run() does
 * one random case. Only the functions under test touch patterns. */
static const char driver[] =
    "function ser(...)\n"
    "  local t = {}\n"
    "  for i = 1, select('#', ...) do\n"
    "    local v = select(i, ...)\n"
    "    t[i] = type(v) == 'string' and string.format('%q', v) or tostring(v)\n"
    "  end\n"
    "  return '(' .. table.concat(t, ', ') .. ')'\n"
    "end\n"
    "local REPL = {a = '[A]', b = false, ab = '<ab>', [1] = 'one', [2] = 2, ['('] = 1.5,\n"
    "              x = {}, [''] = 'empty', [' '] = '_'}\n"
    "local function frepl(...)\n"
    "  local n, a = select('#', ...), tostring((...))\n"
    "  local k = (n * 7 + #a * 3) % 13\n"
    "  if k == 0 then return nil elseif k == 1 then return false elseif k == 2 then return n\n"
    "  elseif k == 3 then return 0.5 elseif k == 12 then return {} end\n"
    "  return '<' .. a .. '>'\n"
    "end\n"
    "return function(op, s, p, a3, a4, rk)\n"
    "  if op == 'find' then return ser(string.find(s, p, a3, a4))\n"
    "  elseif op == 'match' then return ser(string.match(s, p, a3))\n"
    "  elseif op == 'gmatch' then\n"
    "    local out, it = {}, string.gmatch(s, p, a3)\n"
    "    while true do\n"
    "      local r = table.pack(it())\n"
    "      if r.n == 0 then break end\n"
    "      out[#out + 1] = ser(table.unpack(r, 1, r.n))\n"
    "      if #out > 1e5 then error('gmatch does not end') end\n"
    "    end\n"
    "    return table.concat(out, ' ')\n"
    "  end\n"
    "  local repl = a3\n"
    "  if rk == 1 then repl = REPL elseif rk == 2 then repl = frepl end\n"
    "  return ser(string.gsub(s, p, repl, a4))\n"
    "end\n";

struct pair {
    lua_State *stock, *ours;
    int run_stock, run_ours; /* registry refs of run() */
};

static volatile sig_atomic_t stop_flag;

static lua_State *new_state(bool ours, const volatile sig_atomic_t *stop, int *run_ref)
{
    lua_State *L = luaL_newstate();

    assert_non_null(L);
    luaL_openlibs(L);
    if (ours) {
        lua_getglobal(L, "string");
        lpattern_install(L, -1, stop);
        lua_pop(L, 1);
    }
    if (luaL_loadstring(L, driver) != LUA_OK || lua_pcall(L, 0, 1, 0) != LUA_OK)
        fail_msg("driver: %s", lua_tostring(L, -1));
    *run_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    return L;
}

static void pair_open(struct pair *pr)
{
    pr->stock = new_state(false, NULL, &pr->run_stock);
    pr->ours = new_state(true, &stop_flag, &pr->run_ours);
}

static void pair_close(struct pair *pr)
{
    lua_close(pr->stock);
    lua_close(pr->ours);
}

/* Runs code in L: its results through ser(), or "error: " and the message. Leaves the string
 * on the stack. */
static const char *eval(lua_State *L, const char *code, size_t *len)
{
    char chunk[4096];

    snprintf(chunk, sizeof(chunk), "return ser(%s)", code);
    if (luaL_loadstring(L, chunk) != LUA_OK)
        fail_msg("%s: %s", code, lua_tostring(L, -1));
    if (lua_pcall(L, 0, 1, 0) != LUA_OK) {
        lua_pushfstring(L, "error: %s", lua_tostring(L, -1));
        lua_remove(L, -2);
    }
    return lua_tolstring(L, -1, len);
}

/* --- hand-picked cases ---------------------------------------------------------------------- */

/* want: the results as a Lua expression list, or "error: " and the exact message. */
static const struct {
    const char *code, *want;
} manual[] = {
    /* §6.4.1 and the examples of §6.4 */
    {"string.find('hello Lua user', 'Lua')", "7, 9"},
    {"string.find('hello Lua user', 'banana')", "nil"},
    {"string.find('hello Lua user', 'l')", "3, 3"},
    {"string.find('hello Lua user', 'l', 1, true)", "3, 3"},
    {"string.find('a.b', '.', 1, true)", "2, 2"},
    {"string.find('a+b', '+', 1, true)", "2, 2"},
    {"string.find('a+b', 'a+b')", "nil"},
    {"string.find('hello', 'l+')", "3, 4"},
    {"string.find('hello', '')", "1, 0"},
    {"string.find('', '')", "1, 0"},
    {"string.find('abc', '', 4)", "4, 3"},
    {"string.find('abc', '', 5)", "nil"},
    {"string.find('abc', 'c', -1)", "3, 3"},
    {"string.find('abc', 'a', -10)", "1, 1"},
    {"string.find('abc', 'b', 0)", "2, 2"},
    {"string.find('abc', 'b', math.maxinteger)", "nil"},
    {"string.find('abc', 'b', math.mininteger)", "2, 2"},
    {"string.find('key = value', '(%w+)%s*=%s*(%w+)')", "1, 11, 'key', 'value'"},
    {"string.match('key = value', '(%w+)%s*=%s*(%w+)')", "'key', 'value'"},
    {"string.match('hello', '()ll()')", "3, 5"},
    {"string.match('  trim me  ', '^%s*(.-)%s*$')", "'trim me'"},
    {"string.match('2024-01-31', '(%d+)-(%d+)-(%d+)')", "'2024', '01', '31'"},
    {"string.match('abc', '^(a)(b)(c)$')", "'a', 'b', 'c'"},
    {"string.match('xabc', '^abc')", "nil"},
    {"string.match('abc', 'a(b?)c')", "'b'"},
    {"string.match('THE (quick) fox', '%f[%a]%a+', 5)", "'quick'"},
    {"string.gsub('THE (quick) fox', '%f[%a]%a+', 'W')", "'W (W) W', 3"},
    {"string.gsub('hello world', '(%w+)', '%1 %1')", "'hello hello world world', 2"},
    {"string.gsub('hello world', '%w+', '%0 %0', 1)", "'hello hello world', 1"},
    {"string.gsub('hello world from Lua', '(%w+)%s*(%w+)', '%2 %1')", "'world hello Lua from', 2"},
    {"string.gsub('home = $HOME, user = $USER', '%$(%w+)', function(v) "
     "return ({HOME = '/home/roberto', USER = 'roberto'})[v] end)",
     "'home = /home/roberto, user = roberto', 2"},
    {"string.gsub('4+5 = $return 4+5$', '%$(.-)%$', function(s) return load(s)() end)",
     "'4+5 = 9', 1"},
    {"string.gsub('$name-$version.tar.gz', '%$(%w+)', {name = 'lua', version = '5.4'})",
     "'lua-5.4.tar.gz', 2"},
    {"string.gsub('abc', '', '-')", "'-a-b-c-', 4"},
    {"string.gsub('abc', 'x*', '-')", "'-a-b-c-', 4"},
    {"string.gsub('abc', '$', '!')", "'abc!', 1"},
    {"string.gsub('abc', '^', '>')", "'>abc', 1"},
    {"string.gsub('hello world', 'o', '0', 1)", "'hell0 world', 1"},
    {"string.gsub('a,b,,c', ',', ';', 0)", "'a,b,,c', 0"},
    {"string.gsub('a,b,,c', ',', ';', -1)", "'a,b,,c', 0"},
    {"string.gsub('abc', '%w', '%%%0')", "'%a%b%c', 3"},
    {"string.gsub('abc', '()', '%1')", "'1a2b3c4', 4"},
    {"string.gsub('hello', 'l', {l = false})", "'hello', 2"},
    {"string.gsub('abc', 'b', 7)", "'a7c', 1"},
    {"string.gsub('abc', '.', {a = 1, b = 2.5})", "'12.5c', 3"},
    {"string.gsub('abc', '%w', string.upper)", "'ABC', 3"},
    {"('x'):rep(3):gsub('x', '%0%0', 2)", "'xxxxx', 2"},
    {"('hello'):find('l')", "3, 3"},
    {"(function() local t = {} for w in string.gmatch('hello world from Lua', '%a+') do "
     "t[#t + 1] = w end return table.concat(t, '|') end)()",
     "'hello|world|from|Lua'"},
    {"(function() local t = {} for k, v in string.gmatch('from=world, to=Lua', '(%w+)=(%w+)') "
     "do t[#t + 1] = k .. ':' .. v end return table.concat(t, '|') end)()",
     "'from:world|to:Lua'"},
    {"(function() local t = {} for i in string.gmatch('abcabc', '()b', 3) do t[#t + 1] = i end "
     "return table.concat(t, '|') end)()",
     "'5'"},
    {"(function() local n = 0 for _ in string.gmatch('abc', 'x*') do n = n + 1 end "
     "return n end)()",
     "4"},
    {"string.gmatch('a^b', '^b')()", "'^b'"},
    {"string.gmatch('abc', 'b', 10)()", ""},
    {"(function() local it = string.gmatch('a b c', '%a') "
     "local x, y = coroutine.wrap(function() return it(), it() end)() return x .. y .. it() end)()",
     "'abc'"}, /* an iterator made in one coroutine, called in another */
    {"(function() local it = string.gmatch('a', '(') "
     "return coroutine.wrap(function() return pcall(it) end)() end)()",
     "false, 'unfinished capture'"},
    {"string.find('x(a(b)c)y', '%b()')", "2, 8"},
    {"string.find('x(a(b)c', '%b()')", "4, 6"},
    {"string.find('if a then b end', '%f[%w]%w+%f[%W]', 4)", "4, 4"},
    {"string.find('THE END', '%f[%z]')", "8, 7"},
    {"string.match('[[x]]', '%[(%b[])%]')", "'[x]'"},
    {"string.find('a\\0b', '\\0')", "2, 2"},
    {"string.find('a\\0b', '%z')", "2, 2"},
    {"string.match('a\\0b', '[%z]')", "'\\0'"},
    {"string.match('hello', '(h)(e)(l)(l)(o)')", "'h', 'e', 'l', 'l', 'o'"},
    {"string.find('abcabc', '(abc)%1')", "1, 6, 'abc'"},
    {"string.find('abab', '()a%1')", "nil"},
    {"string.match('a]b', '[]]')", "']'"},
    {"string.match('a]b', '[^]]+')", "'a'"},
    {"string.match('ba-', '[a-]+')", "'a-'"},
    {"string.match('x-9', '[%d-]+')", "'-9'"},
    {"string.match('A1_b', '[%u%d_]+')", "'A1_'"},
    {"string.match('a.b', '%.')", "'.'"},
    {"string.match('$x', '$x')", "'$x'"},
    {"string.match('a$', 'a$$')", "'a$'"},
    {"select('#', string.find('a', string.rep('()', 32)))", "34"},
    /* malformed patterns and bad arguments */
    {"string.find('a', '%')", "error: malformed pattern (ends with '%')"},
    {"string.find('a', '[a')", "error: malformed pattern (missing ']')"},
    {"string.find('a', '[')", "error: malformed pattern (missing ']')"},
    {"string.find('a', '[%')", "error: malformed pattern (missing ']')"},
    {"string.find('a', '(')", "error: unfinished capture"},
    {"string.match('a', ')')", "error: invalid pattern capture"},
    {"string.find('a', ')')", "nil"}, /* no special character: a plain search */
    {"string.find('a', '%1')", "error: invalid capture index %1"},
    {"string.find('a', '(a)%2')", "error: invalid capture index %2"},
    {"string.find('a', '%0')", "error: invalid capture index %0"},
    {"string.find('a', '%b')", "error: malformed pattern (missing arguments to '%b')"},
    {"string.find('a', '%ba')", "error: malformed pattern (missing arguments to '%b')"},
    {"string.find('a', '%fa')", "error: missing '[' after '%f' in pattern"},
    {"string.gsub('a', 'a', '%2')", "error: invalid capture index %2"},
    {"string.gsub('a', 'a', '%x')", "error: invalid use of '%' in replacement string"},
    {"string.gsub('a', 'a', 'x%')", "error: invalid use of '%' in replacement string"},
    {"string.gsub('a', 'a', {a = {}})", "error: invalid replacement value (a table)"},
    {"string.gsub('a', 'a', {a = true})", "error: invalid replacement value (a boolean)"},
    {"string.gsub('a', 'a', true)",
     "error: bad argument #3 to 'gsub' (string/function/table expected, got boolean)"},
    {"string.gsub('a', 'a', 'x', 1.5)",
     "error: bad argument #4 to 'gsub' (number has no integer representation)"},
    {"string.find('a', 'a', 'x')",
     "error: bad argument #3 to 'find' (number expected, got string)"},
    {"string.find(nil, 'a')", "error: bad argument #1 to 'find' (string expected, got nil)"},
    {"string.match('a', {})", "error: bad argument #2 to 'match' (string expected, got table)"},
    {"string.find('a', string.rep('()', 33))", "error: too many captures"},
    {"string.find(string.rep('a', 300), string.rep('a?', 300))", "error: pattern too complex"},
    {"string.gsub('xyz', 'a[', '')", "'xyz', 0"}, /* never reaches the malformed part */
};

/* Whether got is what want says. An error raised in a C function carries the position of the
 * Lua code that called it ("[string ...]:1: "), in stock Lua as here. */
static bool as_wanted(const char *got, size_t lg, const char *want, size_t lw)
{
    char tail[512];
    size_t lt;

    if (strncmp(want, "error: ", 7) != 0)
        return lg == lw && memcmp(got, want, lw) == 0;
    lt = (size_t)snprintf(tail, sizeof(tail), "]:1: %s", want + 7);
    return strncmp(got, "error: [string ", 15) == 0 && lg >= lt &&
           memcmp(got + lg - lt, tail, lt) == 0;
}

static void test_manual_cases(void **state)
{
    struct pair pr;
    int bad = 0;

    (void)state;
    pair_open(&pr);
    for (size_t i = 0; i < sizeof(manual) / sizeof(manual[0]); i++) {
        size_t lw, ls, lo;
        const char *want, *got_stock, *got_ours;

        if (strncmp(manual[i].want, "error: ", 7) == 0) {
            want = manual[i].want;
            lw = strlen(want);
        } else {
            want = eval(pr.stock, manual[i].want, &lw);
        }
        got_stock = eval(pr.stock, manual[i].code, &ls);
        got_ours = eval(pr.ours, manual[i].code, &lo);
        if (!as_wanted(got_stock, ls, want, lw)) {
            printf("stock Lua disagrees with the table: %s\n  want %s\n  got  %s\n", manual[i].code,
                   want, got_stock);
            bad++;
        }
        if (!as_wanted(got_ours, lo, want, lw) || lo != ls || memcmp(got_ours, got_stock, lo)) {
            printf("lpattern: %s\n  want %s\n  got  %s\n", manual[i].code, want, got_ours);
            bad++;
        }
        lua_settop(pr.stock, 0);
        lua_settop(pr.ours, 0);
    }
    pair_close(&pr);
    assert_int_equal(bad, 0);
}

/* --- random cases --------------------------------------------------------------------------- */

static uint64_t rng;

static uint64_t next_rand(void)
{
    rng ^= rng >> 12; /* xorshift64* */
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 2685821657736338717ull;
}

static unsigned rnd(unsigned n)
{
    return (unsigned)((next_rand() >> 33) % n);
}

struct str {
    char b[1024];
    size_t n;
};

static void put(struct str *s, char c)
{
    if (s->n < sizeof(s->b))
        s->b[s->n++] = c;
}

static void puts_(struct str *s, const char *t)
{
    while (*t)
        put(s, *t++);
}

/* Subject bytes: repeats make matches likely; specials, '\0' and high bytes keep them honest. */
static const char subj_chars[] = "aaaabbbcxyz   ()[]%-.^$*+?109\t\n,=AZ_\0\xe9\xff";
#define NSUBJ (sizeof(subj_chars) - 1)
static const char specials[] = "^$*+?.([%-])";

static void gen_literal(struct str *p)
{
    char c = subj_chars[rnd(NSUBJ)];

    if (c && strchr(specials, c) && rnd(10) < 7)
        put(p, '%');
    put(p, c);
}

static void gen_set(struct str *p)
{
    static const char *const ranges[] = {"a-c", "0-9", "x-z", "A-Z", "c-a", "--/", "a-"};
    static const char classes[] = "adswlpcuxgADSWLPCUXGz.%]-";

    put(p, '[');
    if (rnd(10) < 3)
        put(p, '^');
    if (rnd(20) == 0)
        put(p, ']');
    for (unsigned i = 0, n = 1 + rnd(4); i < n; i++) {
        unsigned k = rnd(10);
        if (k < 3) {
            gen_literal(p);
        } else if (k < 6) {
            puts_(p, ranges[rnd(sizeof(ranges) / sizeof(ranges[0]))]);
        } else if (k < 9) {
            put(p, '%');
            put(p, classes[rnd(sizeof(classes) - 1)]);
        } else {
            put(p, "-^[]"[rnd(4)]);
        }
    }
    if (rnd(25) != 0)
        put(p, ']');
}

/* One single-character class: "x", ".", "%x" or a set. */
static void gen_class(struct str *p)
{
    static const char classes[] = "adswlpcuxgADSWLPCUXGzq.%]-";
    unsigned k = rnd(100);

    if (k < 40) {
        gen_literal(p);
    } else if (k < 52) {
        put(p, '.');
    } else if (k < 75) {
        put(p, '%');
        put(p, classes[rnd(sizeof(classes) - 1)]);
    } else {
        gen_set(p);
    }
}

/* quant: repetitions still allowed; each one multiplies the worst case by the subject length. */
static void gen_item(struct str *p, int depth, int *quant)
{
    unsigned k = rnd(100);

    if (k < 60) {
        gen_class(p);
        if (*quant > 0 && rnd(10) < 4) {
            put(p, "*+-?"[rnd(4)]);
            --*quant;
        }
    } else if (k < 70 && depth < 3) {
        put(p, '(');
        for (unsigned i = 0, n = rnd(4); i < n; i++)
            gen_item(p, depth + 1, quant);
        if (rnd(20) != 0)
            put(p, ')');
    } else if (k < 74) {
        puts_(p, "()");
    } else if (k < 78) {
        puts_(p, "%b");
        put(p, "()[]ab"[rnd(6)]);
        put(p, "()[]ab"[rnd(6)]);
    } else if (k < 82) {
        puts_(p, "%f");
        gen_set(p);
    } else if (k < 86) {
        put(p, '%');
        put(p, (char)('0' + rnd(4)));
    } else if (k < 89) {
        put(p, '$');
    } else if (k < 92) {
        put(p, '^');
    } else {
        put(p, "%[]()*+?-"[rnd(9)]);
    }
}

enum { V_NIL, V_INT, V_NUM, V_STR, V_BOOL };

struct val {
    int kind;
    lua_Integer i;
    double d;
    struct str s;
};

struct tcase {
    const char *op;
    struct str s, p;
    struct val a3, a4;
    int rk; /* gsub: 0 argument 3 as is, 1 a table, 2 a function */
};

static void gen_init(struct val *v, size_t len)
{
    unsigned k = rnd(100);

    v->kind = V_INT;
    if (k < 50)
        v->kind = V_NIL;
    else if (k < 95)
        v->i = (lua_Integer)rnd(2 * len + 5) - (lua_Integer)len - 2;
    else
        v->i = (lua_Integer[]){LUA_MININTEGER, LUA_MAXINTEGER, 0, -1}[rnd(4)];
}

static void gen_case(struct tcase *c)
{
    static const char *const ops[] = {"find", "match", "gmatch", "gsub"};
    static const char *const pieces[] = {"x", "%0", "%1", "%2", "%%", "-", "%", "%a", "%9", "<>"};
    size_t len = rnd(10) == 0 ? rnd(120) : rnd(25);
    int quant = len <= 30 ? 3 : 1;

    memset(c, 0, sizeof(*c));
    c->op = ops[rnd(4)];
    for (size_t i = 0; i < len; i++)
        put(&c->s, subj_chars[rnd(NSUBJ)]);
    if (rnd(5) == 0)
        put(&c->p, '^');
    for (unsigned i = 0, n = rnd(7); i < n; i++)
        gen_item(&c->p, 0, &quant);
    if (rnd(7) == 0)
        put(&c->p, '$');
    if (strcmp(c->op, "gsub") != 0) {
        gen_init(&c->a3, len);
        if (c->op[0] == 'f' && rnd(10) < 4) {
            c->a4.kind = V_BOOL;
            c->a4.i = rnd(2);
        }
        return;
    }
    c->rk = rnd(10) < 6 ? 0 : 1 + rnd(2);
    if (c->rk == 0 && rnd(8) == 0) {
        c->a3.kind = V_NUM;
        c->a3.d = rnd(2) ? 0.5 : 42;
    } else if (c->rk == 0) {
        c->a3.kind = V_STR;
        for (unsigned i = 0, n = rnd(5); i < n; i++)
            puts_(&c->a3.s, pieces[rnd(sizeof(pieces) / sizeof(pieces[0]))]);
    }
    if (rnd(10) < 4) {
        c->a4.kind = V_INT;
        c->a4.i = (lua_Integer)rnd(6) - 1;
    } else if (rnd(30) == 0) {
        c->a4.kind = V_NUM;
        c->a4.d = rnd(2) ? 2.0 : 2.5;
    }
}

static void push_val(lua_State *L, const struct val *v)
{
    switch (v->kind) {
    case V_NIL:
        lua_pushnil(L);
        break;
    case V_INT:
        lua_pushinteger(L, v->i);
        break;
    case V_NUM:
        lua_pushnumber(L, v->d);
        break;
    case V_STR:
        lua_pushlstring(L, v->s.b, v->s.n);
        break;
    default:
        lua_pushboolean(L, (int)v->i);
        break;
    }
}

/* Runs c in L through run(); leaves its result string on the stack. */
static const char *run_case(lua_State *L, int ref, const struct tcase *c, size_t *len)
{
    lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
    lua_pushstring(L, c->op);
    lua_pushlstring(L, c->s.b, c->s.n);
    lua_pushlstring(L, c->p.b, c->p.n);
    push_val(L, &c->a3);
    push_val(L, &c->a4);
    lua_pushinteger(L, c->rk);
    if (lua_pcall(L, 6, 1, 0) != LUA_OK) {
        lua_pushfstring(L, "error: %s", lua_tostring(L, -1));
        lua_remove(L, -2);
    }
    return lua_tolstring(L, -1, len);
}

static void print_bytes(const char *what, const char *b, size_t n)
{
    printf("  %s \"", what);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)b[i];
        if (ch == '"' || ch == '\\')
            printf("\\%c", ch);
        else if (ch >= 32 && ch < 127)
            putchar(ch);
        else
            printf("\\%d", ch);
    }
    printf("\"\n");
}

static void print_case(const struct tcase *c)
{
    printf("case: %s rk=%d\n", c->op, c->rk);
    print_bytes("subject", c->s.b, c->s.n);
    print_bytes("pattern", c->p.b, c->p.n);
    if (c->a3.kind == V_STR)
        print_bytes("arg3", c->a3.s.b, c->a3.s.n);
    else
        printf("  arg3 kind %d %lld %g\n", c->a3.kind, (long long)c->a3.i, c->a3.d);
    printf("  arg4 kind %d %lld %g\n", c->a4.kind, (long long)c->a4.i, c->a4.d);
}

/* Runs c in both states; returns whether they agree (and prints the case when not). */
static bool same(struct pair *pr, const struct tcase *c, unsigned *errors)
{
    size_t ls, lo;
    const char *a = run_case(pr->stock, pr->run_stock, c, &ls);
    const char *b = run_case(pr->ours, pr->run_ours, c, &lo);
    bool eq = ls == lo && memcmp(a, b, ls) == 0;

    if (!eq) {
        print_case(c);
        print_bytes("stock", a, ls);
        print_bytes("ours ", b, lo);
    }
    if (errors && strncmp(a, "error: ", 7) == 0)
        ++*errors;
    lua_settop(pr->stock, 0);
    lua_settop(pr->ours, 0);
    return eq;
}

static uint64_t env_u64(const char *name, uint64_t def)
{
    const char *v = getenv(name);

    return v && *v ? strtoull(v, NULL, 0) : def;
}

static void test_random_vs_stock(void **state)
{
    uint64_t seed = env_u64("LPATTERN_SEED", 0x5eed1a7e5eedull);
    unsigned n = (unsigned)env_u64("LPATTERN_CASES", RANDOM_CASES), bad = 0, errors = 0;
    struct pair pr;
    struct tcase c;

    (void)state;
    rng = seed | 1;
    pair_open(&pr);
    for (unsigned i = 0; i < n && bad < 10; i++) {
        gen_case(&c);
        if (!same(&pr, &c, &errors))
            bad++;
    }
    pair_close(&pr);
    printf("%u random cases (seed %#llx), %u of them errors in both, %u differ\n", n,
           (unsigned long long)seed, errors, bad);
    assert_int_equal(bad, 0);
    assert_true(errors > n / 50 && errors < n / 2); /* the generator reaches both kinds */
}

/* Long subjects, for what only they reach: the 4 KiB chunks of the inner loops and the windows
 * of the plain search (4 KiB with memchr, 64 KiB with memmem). */
static const char *run_long(lua_State *L, int kind, const char *s, size_t len, const char *arg,
                            size_t larg, lua_Integer init, size_t *rl)
{
    lua_settop(L, 0);
    lua_getglobal(L, "ser");
    if (kind < 2) {
        lua_getglobal(L, "string");
        lua_getfield(L, -1, "find");
        lua_remove(L, -2);
    } else if (kind == 2) {
        lua_getglobal(L, "string");
        lua_getfield(L, -1, "gsub");
        lua_remove(L, -2);
    } else { /* gmatch in a Lua loop: count the matches and sum their positions and captures */
        luaL_loadstring(L, "local s, p = ... local n, sum = 0, 0\n"
                           "for a, b in string.gmatch(s, '()' .. p) do\n"
                           "  n = n + 1 sum = sum + a + (type(b) == 'string' and #b or b or 0)\n"
                           "end return n, sum");
    }
    lua_pushlstring(L, s, len);
    lua_pushlstring(L, arg, larg);
    if (kind == 2)
        lua_pushstring(L, "<%0>");
    else
        lua_pushinteger(L, init);
    if (kind == 0)
        lua_pushboolean(L, 1); /* plain */
    else
        lua_pushnil(L);
    if (lua_pcall(L, 4, LUA_MULTRET, 0) != LUA_OK) {
        lua_pushfstring(L, "error: %s", lua_tostring(L, -1));
        return lua_tolstring(L, -1, rl);
    }
    lua_call(L, lua_gettop(L) - 1, 1); /* ser(results) */
    return lua_tolstring(L, -1, rl);
}

/* Blocks of a^n b^n (n up to 9000) and a newline: runs, %b and skips across the 4 KiB chunks;
 * every pattern here matches or fails within one block, so stock Lua takes linear time too. */
static size_t gen_blocks(char *s, size_t cap)
{
    size_t len = 0;

    while (len < cap) {
        size_t n = 1 + rnd(rnd(4) == 0 ? 9000 : 40);
        if (len + 2 * n + 2 > cap)
            break;
        memset(s + len, 'a', n);
        memset(s + len + n, 'b', n);
        len += 2 * n;
        s[len++] = '\n';
    }
    return len;
}

static void test_long_subjects_vs_stock(void **state)
{
    static const char *const random_pats[] = {"a+b", "b%s", "[ab]*\n", "%bba",   "ab-c", "()b",
                                              "\n",  "b+$", "%f[a]a",  "(a+)%1", "aab?", "a*"};
    static const char *const block_pats[] = {"a*b",   "b+\n",    "[ab]*\n", "%bab", "a-b",
                                             "(a+)b", "%f[b]b+", ".-\n",    "ab",   "%a+%s"};
    struct pair pr;
    unsigned bad = 0;

    (void)state;
    rng = 0x10a9 | 1;
    pair_open(&pr);
    for (int i = 0; i < 480 && bad < 5; i++) {
        int kind = i % 4;
        bool blocks = i / 8 % 2;
        size_t cap = 3000 + rnd(250000), len = 0, larg;
        char *s = malloc(cap), *arg;
        lua_Integer init;
        const char *res[2];
        size_t rl[2];

        assert_non_null(s);
        if (blocks)
            len = gen_blocks(s, cap);
        for (; len < cap; len++)
            s[len] = "aaab \n"[rnd(len % 3 == 0 ? 6 : 4)];
        if (kind == 0 || i % 8 >= 4) {
            /* Something with the only 'z' of the subject around the k-th window edge (windows
             * start at init - 1): a needle across the edge, ending or starting there, for the
             * plain search; for patterns starting with 'z', the z itself, for the memchr skips.
             * A short needle starts with its 'z', so memchr's windows stay on the edges. */
            size_t w = kind == 0 && i % 8 >= 4 ? 65536 : 4096, edge;
            ptrdiff_t d;

            larg = kind != 0 ? 1 : w == 4096 ? 1 + rnd(31) : 32 + rnd(100);
            init = 1 + rnd(3);
            if (len < 3 * w + 200) {
                s = realloc(s, 3 * w + 200);
                assert_non_null(s);
                for (; len < 3 * w + 200; len++)
                    s[len] = "ab"[rnd(2)];
            }
            edge = (size_t)init - 1 + (1 + rnd(2)) * w;
            d = (ptrdiff_t[]){-(ptrdiff_t)larg + 1, -1, 0, 1,
                              -(ptrdiff_t)rnd((unsigned)larg)}[rnd(5)];
            arg = malloc(larg + 8);
            assert_non_null(arg);
            memcpy(arg, s + edge + d, larg);
            arg[w == 4096 ? 0 : rnd((unsigned)larg)] = 'z';
            memcpy(s + edge + d, arg, larg);
            if (kind != 0) {
                static const char *const zpats[] = {"z[ab]*", "z", "z+", "za?"};
                strcpy(arg, zpats[rnd(4)]);
                larg = strlen(arg);
            } else if (i % 16 == 0) { /* absent: no 'y' in the subject */
                *(char *)memchr(arg, 'z', larg) = 'y';
            }
        } else {
            init = (lua_Integer)rnd((unsigned)len);
            arg = strdup(blocks ? block_pats[i / 16 % 10] : random_pats[i / 16 % 12]);
            assert_non_null(arg);
            larg = strlen(arg);
        }
        res[0] = run_long(pr.stock, kind, s, len, arg, larg, init, &rl[0]);

        res[1] = run_long(pr.ours, kind, s, len, arg, larg, init, &rl[1]);
        if (rl[0] != rl[1] || memcmp(res[0], res[1], rl[0]) != 0) {
            printf("long subject case %d (kind %d, len %zu) differs\n", i, kind, len);
            print_bytes("arg  ", arg, larg);
            print_bytes("stock", res[0], rl[0] > 200 ? 200 : rl[0]);
            print_bytes("ours ", res[1], rl[1] > 200 ? 200 : rl[1]);
            bad++;
        }
        lua_settop(pr.stock, 0);
        lua_settop(pr.ours, 0);
        free(arg);
        free(s);
    }
    pair_close(&pr);
    assert_int_equal(bad, 0);
}

/* The limits that come from lstrlib.c's constants: nesting depth and capture count. */
static void test_limits_vs_stock(void **state)
{
    struct pair pr;
    struct tcase c;
    unsigned bad = 0;

    (void)state;
    pair_open(&pr);
    for (int k = 185; k <= 215; k++) {
        for (int form = 0; form < 4; form++) {
            memset(&c, 0, sizeof(c));
            c.op = form < 2 ? "find" : "gsub";
            c.rk = 0;
            c.a3.kind = form < 2 ? V_NIL : V_STR;
            /* each item recurses once ('?' that matched, each try of '-' and '*'): around 200
             * items the depth runs out, "pattern too complex", at the same item in both */
            for (int j = 0; j < k; j++) {
                put(&c.s, 'a');
                puts_(&c.p, form == 0 ? "a?" : form == 1 ? "%a?" : form == 2 ? "a-" : "a*");
            }
            if (!same(&pr, &c, NULL))
                bad++;
        }
    }
    for (int k = 30; k <= 34; k++) { /* captures: 32 at most */
        memset(&c, 0, sizeof(c));
        c.op = "match";
        puts_(&c.s, "abc");
        for (int j = 0; j < k; j++)
            puts_(&c.p, j % 2 ? "()" : "(a?)");
        if (!same(&pr, &c, NULL))
            bad++;
    }
    pair_close(&pr);
    assert_int_equal(bad, 0);
}

/* --- the stop flag -------------------------------------------------------------------------- */

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *set_later(void *arg)
{
    struct timespec d = {0, (long)(intptr_t)arg * 1000000L};

    nanosleep(&d, NULL);
    __atomic_store_n(&stop_flag, 1, __ATOMIC_RELAXED);
    return NULL;
}

/* Runs code in ours with the flag set after delay_ms (0: before the call); asserts that it
 * raised "handler timed out" within STOP_BOUND_S. */
static void assert_stops(lua_State *L, const char *code, long delay_ms)
{
    pthread_t t;
    double t0, took;
    const char *msg;
    size_t len;
    int rc;

    stop_flag = 0;
    if (luaL_loadstring(L, code) != LUA_OK)
        fail_msg("%s: %s", code, lua_tostring(L, -1));
    alarm(GUARD_S); /* a flag that is not looked at would hang here: fail instead */
    if (delay_ms == 0)
        stop_flag = 1;
    else
        assert_int_equal(pthread_create(&t, NULL, set_later, (void *)(intptr_t)delay_ms), 0);
    t0 = now_s();
    rc = lua_pcall(L, 0, 0, 0);
    took = now_s() - t0;
    if (delay_ms)
        pthread_join(t, NULL);
    alarm(0);
    if (rc != LUA_OK)
        printf("%-70.70s stopped after %.3f s: %s\n", code, took, lua_tostring(L, -1));
    assert_int_equal(rc, LUA_ERRRUN);
    msg = lua_tolstring(L, -1, &len); /* after the position of the Lua code that called */
    assert_true(len >= 19 && strcmp(msg + len - 19, ": handler timed out") == 0);
    assert_true(took < STOP_BOUND_S);
    lua_settop(L, 0);
    stop_flag = 0;
}

/* Backtracking over 300 KB: O(n^2) or worse per call, minutes unbounded. */
static void test_backtracking_stops(void **state)
{
    static const char *const code[] = {
        "S = string.rep('a', 300000)",
        "string.find(S, '.-.-b')",
        "string.match(S, '(a*)a*b')",
        "S:find('a-b')", /* through the string metatable */
        "for w in string.gmatch(S, '%w*x') do end",
        "string.gsub(S, '(.-)%1b', '')",
        "string.find(S .. 'b', string.rep('a*', 10) .. 'c')",
    };
    lua_State *L;
    int ref;

    (void)state;
    L = new_state(true, &stop_flag, &ref);
    assert_int_equal(luaL_dostring(L, code[0]), LUA_OK);
    for (size_t i = 1; i < sizeof(code) / sizeof(code[0]); i++) {
        assert_stops(L, code[i], 50);
        assert_stops(L, code[i], 0);
    }
    lua_close(L);
}

/* Long loops of cheap steps over 32 MB: gsub and gmatch loops, gsub with a C function as the
 * replacement (no VM instruction for the count hook between two matches), short calls in a Lua
 * loop, quadratic scans (%b, a repetition). The memchr/memmem searches get through 32 MB in a
 * few milliseconds, before a delayed flag: for them only a flag set before the call is tried. */
static void test_long_loops_stop(void **state)
{
    static const struct {
        const char *code;
        bool slow; /* runs for seconds unbounded, even at -O2 */
    } cases[] = {
        {"string.gsub(S, 'b', 'c')", true},
        {"string.gsub(S, '%s', '')", true},
        {"string.gsub(S, '.', string.upper)", true},
        {"local n = 0 for w in S:gmatch('%a+') do n = n + 1 end", true},
        {"for i = 1, 1e9 do string.find(S, 'ab', i, true) end", true},
        {"string.find(S, '(%bax)x')", true},
        {"string.find(S, '[%a ]*x')", true},
        {"local n = 0 for w in S:gmatch('x') do n = n + 1 end", false},
        {"string.find(S, string.rep('ab ', 100) .. 'x', 1, true)", false},
        {"string.find(S, 'x', 1, true)", false},
    };
    lua_State *L;
    int ref;

    (void)state;
    L = new_state(true, &stop_flag, &ref);
    assert_int_equal(luaL_dostring(L, "S = string.rep('ab ', 11 << 20)"), LUA_OK);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_stops(L, cases[i].code, 0);
        if (cases[i].slow)
            assert_stops(L, cases[i].code, 20);
    }
    lua_close(L);
}

static int l_set_flag(lua_State *L)
{
    (void)L;
    stop_flag = 1;
    return 0;
}

/* The flag set in the middle of one gsub call, between two matches (a replacement function
 * sets it): the same call raises within LPATTERN_CHECK_STEPS steps, with no thread and no
 * timing involved. Without a check inside the loop it would run through and return. */
static void test_flag_set_mid_call(void **state)
{
    static const char *const code[] = {
        "return string.gsub(S, 'b', function() set_flag() end)",
        "return string.gsub(S, '()b', function() set_flag() end)",
        "return string.gsub(S, '%s+', function() set_flag() end)",
        "return string.gsub(S, 'ab', setmetatable({}, {__index = set_flag}))",
    };
    lua_State *L;
    int ref;

    (void)state;
    L = new_state(true, &stop_flag, &ref);
    lua_register(L, "set_flag", l_set_flag);
    assert_int_equal(luaL_dostring(L, "S = string.rep('ab ', 1e5)"), LUA_OK);
    for (size_t i = 0; i < sizeof(code) / sizeof(code[0]); i++) {
        size_t len;
        const char *msg;

        stop_flag = 0;
        assert_int_equal(luaL_loadstring(L, code[i]), LUA_OK);
        assert_int_equal(lua_pcall(L, 0, 2, 0), LUA_ERRRUN);
        msg = lua_tolstring(L, -1, &len);
        if (strstr(msg, "handler timed out") == NULL)
            fail_msg("%s: %s", code[i], msg);
        lua_settop(L, 0);
    }
    stop_flag = 0;
    lua_close(L);
}

/* A clear flag and a NULL one change nothing; the other string functions stay. */
static void test_install(void **state)
{
    volatile sig_atomic_t never = 0;
    lua_State *L = luaL_newstate();
    lua_CFunction rep;

    (void)state;
    luaL_openlibs(L);
    lua_getglobal(L, "string");
    lua_getfield(L, -1, "rep");
    rep = lua_tocfunction(L, -1);
    lua_pop(L, 1);
    lua_pushinteger(L, 1); /* the table is not on top: a relative index */
    lpattern_install(L, -2, NULL);
    lua_pop(L, 1);
    assert_int_equal(lua_gettop(L), 1);
    lua_getfield(L, -1, "rep");
    assert_ptr_equal(lua_tocfunction(L, -1), rep);
    lua_settop(L, 0);
    assert_int_equal(luaL_dostring(L, "return select(2, string.rep('ab', 1e5):gsub('b', 'c'))"),
                     LUA_OK);
    assert_int_equal(lua_tointeger(L, -1), 100000);
    lua_settop(L, 0);
    lua_getglobal(L, "string");
    lpattern_install(L, -1, &never); /* again, with a flag that stays clear */
    lua_settop(L, 0);
    assert_int_equal(luaL_dostring(L, "return ('x'):rep(1e5):find('x+$')"), LUA_OK);
    assert_int_equal(lua_tointeger(L, -1), 100000);
    lua_close(L);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_manual_cases),           cmocka_unit_test(test_random_vs_stock),
        cmocka_unit_test(test_long_subjects_vs_stock), cmocka_unit_test(test_limits_vs_stock),
        cmocka_unit_test(test_backtracking_stops),     cmocka_unit_test(test_long_loops_stop),
        cmocka_unit_test(test_flag_set_mid_call),      cmocka_unit_test(test_install),
    };

    if (getenv("LPATTERN_TEST")) /* one test (a glob), when working on it */
        cmocka_set_test_filter(getenv("LPATTERN_TEST"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
