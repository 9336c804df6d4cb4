/* lpattern: string.find, match, gmatch and gsub of Lua 5.4, stoppable by a flag.
 *
 * DESIGN
 *
 * Why. The handler timeout arms a count hook, which runs between VM instructions: a C function
 * never sees it. Lua's own matcher backtracks, so one string.find of a crafted pattern over a
 * few hundred KB of client input runs for minutes inside one C call. These functions do what
 * lstrlib.c's do (same algorithm, same results, same errors) and count their work.
 *
 * Same algorithm. A recursive backtracking matcher: match() walks the pattern, looping on
 * tail positions and recursing where lstrlib.c recurses (a capture opening or closing, a
 * successful '?', each try of '*', '+' and '-'), and each recursion takes one of MAXDEPTH
 * levels, so "pattern too complex" comes at the same depth as in stock Lua and the C stack
 * stays bounded. What differs does not show in results or errors (the unit test compares them
 * with stock Lua's on random cases):
 *   - when every match must start with one byte or one single-character class (the first item,
 *     maybe inside captures), the searches skip the positions where it is not, with memchr or
 *     one loop, instead of calling match() there: it would fail at once and raise nothing;
 *   - %a and its kin are two table loads (built once from the ctype functions), and a run of
 *     one class is measured by one loop per kind of class;
 *   - a plain find of a long needle uses memmem: linear where memchr+memcmp is quadratic;
 *   - a gmatch iterator starts each search with its full depth, where lstrlib.c keeps what an
 *     error inside an earlier call left (visible only after catching that error).
 *
 * Steps. ms->budget counts down: one per pattern item tried at one position (the head of
 * match()'s loop), one per STEP_BYTES bytes scanned by an inner loop, and those loops run in
 * chunks of SCAN_CHUNK bytes so a 100 MB subject is charged as it goes. At zero, checkpoint()
 * refills it with LPATTERN_CHECK_STEPS and looks at the flag: a relaxed atomic load, an
 * ordinary load on x86, once per thousand steps. gsub's loop and a gmatch iterator keep one
 * budget for all their matches; every call also looks at the flag when it starts, so a Lua
 * loop of short calls stops too (there the VM's count hook would as well).
 *
 * Raising. "handler timed out" is a luaL_error from inside the C function, so it carries the
 * position of the Lua code that called it, like the count hook's. It unwinds to the callback's
 * lua_pcall like any error; a pcall in the script can catch it, but the count hook the
 * watchdog armed with the flag raises again at the next instruction.
 *
 * One file, over the house's ~600 lines: the matcher, its step accounting and the four
 * functions that drive it share one struct and its invariants (the budget, the depth, the
 * capture state), as lstrlib.c keeps them together; split, each half would need the other's
 * internals.
 */
#include "lpattern.h"

#include <ctype.h>
#include <lauxlib.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define ESC '%'
#define MAXCAPTURES 32 /* lstrlib.c's LUA_MAXCAPTURES */
#define MAXDEPTH 200   /* lstrlib.c's MAXCCALLS: nested match() calls */
#define CAP_UNFINISHED (-1)
#define CAP_POSITION (-2)
#define STEP_BYTES 16            /* bytes an inner loop scans per step */
#define SCAN_CHUNK 4096          /* bytes an inner loop scans between two charges */
#define MEMMEM_MIN 32            /* plain needles this long go to memmem */
#define MEMMEM_WINDOW (64 << 10) /* start positions one memmem call covers, at least */

#define uchar(c) ((unsigned char)(c))

/* One match in progress: on the C stack of a call, or in a gmatch iterator's userdata. */
struct mstate {
    const char *src, *src_end; /* the subject; *src_end is its '\0' (Lua strings have one) */
    const char *p_end;         /* end of the pattern, past a '^' anchor too */
    lua_State *L;
    const volatile sig_atomic_t *stop; /* NULL: never */
    long budget;                       /* steps until the next look at *stop */
    int depth;                         /* match() calls left */
    int level;                         /* captures opened, finished or not */
    struct {
        const char *init;
        ptrdiff_t len; /* or CAP_UNFINISHED, CAP_POSITION */
    } cap[MAXCAPTURES];
};

static const char *match(struct mstate *ms, const char *s, const char *p);

/* --- the step budget ------------------------------------------------------------------------ */

static void check_stop(lua_State *L, const volatile sig_atomic_t *stop)
{
    if (stop && __atomic_load_n(stop, __ATOMIC_RELAXED))
        luaL_error(L, "handler timed out");
}

__attribute__((noinline, cold)) static void checkpoint(struct mstate *ms)
{
    ms->budget = LPATTERN_CHECK_STEPS;
    check_stop(ms->L, ms->stop);
}

static inline void charge(struct mstate *ms, long steps)
{
    ms->budget -= steps;
    if (__builtin_expect(ms->budget <= 0, 0))
        checkpoint(ms);
}

static const volatile sig_atomic_t *stop_flag(lua_State *L)
{
    return lua_touserdata(L, lua_upvalueindex(1));
}

/* What a search needs of ms before anything else: the budget, and a first look at the flag. */
static void budget_init(struct mstate *ms, lua_State *L, const volatile sig_atomic_t *stop)
{
    ms->L = L;
    ms->stop = stop;
    ms->budget = LPATTERN_CHECK_STEPS;
    check_stop(L, stop);
}

static void mstate_init(struct mstate *ms, lua_State *L, const char *s, size_t ls, const char *p,
                        size_t lp, const volatile sig_atomic_t *stop)
{
    ms->src = s;
    ms->src_end = s + ls;
    ms->p_end = p + lp;
    ms->depth = MAXDEPTH;
    ms->level = 0;
    budget_init(ms, L, stop);
}

/* --- single characters ---------------------------------------------------------------------- */

/* Past the set at p ('['), or NULL when its ']' is missing. */
static const char *set_end(const char *p, const char *p_end)
{
    p++;
    if (*p == '^')
        p++;
    do { /* the first character is never the closing ']': "[]]" is a set of ']' */
        if (p == p_end)
            return NULL;
        if (*p++ == ESC && p < p_end)
            p++; /* "%]" */
    } while (*p != ']');
    return p + 1;
}

/* Past the single-character class at p: "x", "%x" or "[set]". */
static const char *class_end(struct mstate *ms, const char *p)
{
    if (*p == ESC) {
        if (p + 1 == ms->p_end)
            luaL_error(ms->L, "malformed pattern (ends with '%%')");
        return p + 2;
    }
    if (*p != '[')
        return p + 1;
    p = set_end(p, ms->p_end);
    if (!p)
        luaL_error(ms->L, "malformed pattern (missing ']')");
    return p;
}

/* %a, %d and their kin as bits: a table load per character instead of lstrlib.c's switch on
 * tolower(class) and a ctype call. Both tables come from the ctype functions, the way
 * lstrlib.c uses them, when the first state is set up (the locale then: lfepolld never
 * changes it); read-only after. */
#define CL_NEG 0x8000            /* in class_bits: an upper-case class, the complement */
static uint16_t ctype_bits[256]; /* character -> the classes it is in */
static uint16_t class_bits[256]; /* the letter after '%' -> its class bit | CL_NEG; 0: none */
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void tables_init(void)
{
    static const char letters[] = "acdglpsuwxz"; /* bit k: letters[k]; 'z' is c == 0 */
    int (*const is[])(int) = {isalpha, iscntrl, isdigit, isgraph, islower,
                              ispunct, isspace, isupper, isalnum, isxdigit};

    for (int c = 0; c < 256; c++) {
        const char *l;

        for (int k = 0; k < 10; k++)
            if (is[k](c))
                ctype_bits[c] |= 1u << k;
        if (c == 0)
            ctype_bits[c] |= 1u << 10; /* %z, deprecated, still accepted */
        l = strchr(letters, tolower(c));
        if (l && tolower(c) != 0)
            class_bits[c] = (uint16_t)(1u << (l - letters)) | (islower(c) ? 0 : CL_NEG);
    }
}

/* Whether c is in %cl (%. and the like: the character itself). */
static inline bool class_has(int c, int cl)
{
    unsigned b = class_bits[cl];

    if (!b)
        return cl == c;
    return ((ctype_bits[c] & b) != 0) != ((b & CL_NEG) != 0);
}

/* Whether c is in the set from p ('[') to end (its ']'). */
static bool set_has(int c, const char *p, const char *end)
{
    bool in = true;

    if (p[1] == '^') {
        in = false;
        p++;
    }
    while (++p < end) {
        if (*p == ESC) {
            p++;
            if (class_has(c, uchar(*p)))
                return in;
        } else if (p[1] == '-' && p + 2 < end) {
            if (uchar(p[0]) <= c && c <= uchar(p[2]))
                return in;
            p += 2;
        } else if (uchar(*p) == c) {
            return in;
        }
    }
    return !in;
}

/* Whether the subject character at s is in the class p..ep. */
static bool single_match(struct mstate *ms, const char *s, const char *p, const char *ep)
{
    if (s >= ms->src_end)
        return false;
    switch (*p) {
    case '.':
        return true;
    case ESC:
        return class_has(uchar(*s), uchar(p[1]));
    case '[':
        return set_has(uchar(*s), p, ep - 1);
    default:
        return *p == *s;
    }
}

/* The first position from s whose character is in the class p..ep (in false) or is not (in
 * true), or the end of the subject: a run for max_expand, a skip to where a match may start.
 * One loop per kind of class, in chunks so a long scan is charged as it goes. */
static const char *scan(struct mstate *ms, const char *s, const char *p, const char *ep, bool in)
{
    const char *end = ms->src_end;
    unsigned b = *p == ESC ? class_bits[uchar(p[1])] : 0, bits = b & ~CL_NEG;
    bool want = in != ((b & CL_NEG) != 0); /* member: (bits there) != CL_NEG; go on while == in */

    if (*p == '.')
        return in ? end : s;
    for (;;) {
        const char *lim = end - s > SCAN_CHUNK ? s + SCAN_CHUNK : end;

        if (bits) {
            while (s < lim && ((ctype_bits[uchar(*s)] & bits) != 0) == want)
                s++;
        } else if (*p == '[') {
            while (s < lim && set_has(uchar(*s), p, ep - 1) == in)
                s++;
        } else {
            char c = *p == ESC ? p[1] : *p;
            while (s < lim && (*s == c) == in)
                s++;
        }
        if (s < lim || s == end)
            return s;
        charge(ms, SCAN_CHUNK / STEP_BYTES);
    }
}

/* The next position from s holding byte c, or NULL; charged by the bytes skipped. */
static const char *skip_to(struct mstate *ms, const char *s, int c)
{
    while (s < ms->src_end) {
        size_t n = (size_t)(ms->src_end - s) > SCAN_CHUNK ? SCAN_CHUNK : ms->src_end - s;
        const char *r = memchr(s, c, n);

        charge(ms, (r ? r - s : (ptrdiff_t)n) / STEP_BYTES + 1);
        if (r)
            return r;
        s += n;
    }
    return NULL;
}

/* What every match must start with, when the pattern says so: a byte or a single-character
 * class as its first item (maybe inside captures), without '*', '?' or '-' after it. match()
 * fails at once, raising nothing, wherever that item does not match, so the searches skip
 * those positions without calling it: memchr to the next byte, scan() to the next member. */
struct lead {
    int byte;           /* or -1 */
    const char *p, *ep; /* the class, or NULL */
};

#define LEAD_CAPTURES 8 /* '(' looked through, far from MAXCAPTURES and MAXDEPTH */

static void find_lead(struct lead *ld, const char *p, const char *p_end)
{
    const char *ep;

    ld->byte = -1;
    ld->p = NULL;
    for (int i = 0; i < LEAD_CAPTURES && p < p_end && *p == '(' && p[1] != ')'; i++)
        p++;
    if (p == p_end)
        return;
    switch (*p) {
    case ESC:
        if (p + 1 == p_end || memchr("bf0123456789", p[1], 12))
            return;
        ep = p + 2;
        break;
    case '[':
        ep = set_end(p, p_end);
        if (!ep)
            return; /* malformed: let match() raise it, if it gets there */
        break;
    case '.':
    case '^':
    case '$':
    case '*':
    case '+':
    case '?':
    case '-':
    case '(':
    case ')':
        return;
    default:
        ep = p + 1;
        ld->byte = uchar(*p);
    }
    if (ep < p_end && (*ep == '*' || *ep == '?' || *ep == '-')) {
        ld->byte = -1;
        return;
    }
    ld->p = p;
    ld->ep = ep;
}

/* The first position from s where a match may start, or NULL when none is left. */
static const char *next_start(struct mstate *ms, const char *s, const struct lead *ld)
{
    if (ld->byte >= 0)
        return skip_to(ms, s, ld->byte);
    if (ld->p) {
        s = scan(ms, s, ld->p, ld->ep, false);
        return s < ms->src_end ? s : NULL;
    }
    return s;
}

/* --- the matcher ---------------------------------------------------------------------------- */

/* %bxy at s (p points at x). */
static const char *balance(struct mstate *ms, const char *s, const char *p)
{
    const char *end = ms->src_end, *mark;
    int depth = 1;

    if (p >= ms->p_end - 1)
        luaL_error(ms->L, "malformed pattern (missing arguments to '%%b')");
    if (s >= end || *s != p[0])
        return NULL;
    mark = s;
    while (++s < end) {
        if (*s == p[1]) { /* the closer first: "%baa" closes at the next 'a' */
            if (--depth == 0)
                return s + 1;
        } else if (*s == p[0]) {
            depth++;
        }
        if (s - mark >= SCAN_CHUNK) {
            charge(ms, SCAN_CHUNK / STEP_BYTES);
            mark = s;
        }
    }
    return NULL;
}

/* %1-%9 at s: the text of that capture again. A position capture never matches. */
static const char *backref(struct mstate *ms, const char *s, int digit)
{
    int l = digit - '1';
    size_t len;

    if (l < 0 || l >= ms->level || ms->cap[l].len == CAP_UNFINISHED)
        luaL_error(ms->L, "invalid capture index %%%d", l + 1);
    if (ms->cap[l].len == CAP_POSITION)
        return NULL;
    len = ms->cap[l].len;
    if ((size_t)(ms->src_end - s) < len)
        return NULL;
    charge(ms, len / STEP_BYTES);
    return memcmp(ms->cap[l].init, s, len) == 0 ? s + len : NULL;
}

/* The greedy repetition ('*', '+' from s + 1): the longest run first, then shorter ones. */
static const char *max_expand(struct mstate *ms, const char *s, const char *p, const char *ep)
{
    const char *e = scan(ms, s, p, ep, true);

    for (;; e--) {
        const char *r = match(ms, e, ep + 1);
        if (r)
            return r;
        if (e == s)
            return NULL;
    }
}

/* The lazy repetition ('-'): the shortest run first. */
static const char *min_expand(struct mstate *ms, const char *s, const char *p, const char *ep)
{
    for (;;) {
        const char *r = match(ms, s, ep + 1);
        if (r)
            return r;
        if (!single_match(ms, s, p, ep))
            return NULL;
        s++;
    }
}

static const char *open_capture(struct mstate *ms, const char *s, const char *p, ptrdiff_t what)
{
    int l = ms->level;
    const char *r;

    if (l >= MAXCAPTURES)
        luaL_error(ms->L, "too many captures");
    ms->cap[l].init = s;
    ms->cap[l].len = what;
    ms->level = l + 1;
    r = match(ms, s, p);
    if (!r)
        ms->level--;
    return r;
}

static const char *close_capture(struct mstate *ms, const char *s, const char *p)
{
    const char *r;
    int l;

    for (l = ms->level - 1; l >= 0; l--) /* the innermost one still open */
        if (ms->cap[l].len == CAP_UNFINISHED)
            break;
    if (l < 0)
        luaL_error(ms->L, "invalid pattern capture");
    ms->cap[l].len = s - ms->cap[l].init;
    r = match(ms, s, p);
    if (!r)
        ms->cap[l].len = CAP_UNFINISHED;
    return r;
}

/* The escapes that are items of their own at p (p[0] is '%'): %bxy, %f[set], %1-%9. Returns
 * false for a class such as %a; true when p[1] names one of them: then *s is where the subject
 * goes on after it (NULL: no match here) and *p where the pattern does. */
static bool match_escape(struct mstate *ms, const char **s, const char **p)
{
    const char *ep, *at = *s, *pat = *p;
    char prev;

    switch (pat[1]) {
    case 'b':
        *s = balance(ms, at, pat + 2);
        *p = pat + 4;
        return true;
    case 'f':
        pat += 2;
        if (*pat != '[')
            luaL_error(ms->L, "missing '[' after '%%f' in pattern");
        ep = class_end(ms, pat);
        prev = at == ms->src ? '\0' : at[-1];
        /* *at at the end is the subject's '\0': a frontier there sees a '\0' after */
        if (set_has(uchar(prev), pat, ep - 1) || !set_has(uchar(*at), pat, ep - 1))
            *s = NULL;
        *p = ep;
        return true;
    case '0':
    case '1':
    case '2':
    case '3':
    case '4':
    case '5':
    case '6':
    case '7':
    case '8':
    case '9':
        *s = backref(ms, at, uchar(pat[1]));
        *p = pat + 2;
        return true;
    }
    return false;
}

/* Where a match of p..p_end starting at s ends, or NULL. */
static const char *match(struct mstate *ms, const char *s, const char *p)
{
    if (ms->depth-- == 0)
        luaL_error(ms->L, "pattern too complex");
    for (;;) {
        const char *ep;

        charge(ms, 1);
        if (p == ms->p_end)
            break;
        switch (*p) {
        case '(':
            if (p[1] == ')')
                s = open_capture(ms, s, p + 2, CAP_POSITION);
            else
                s = open_capture(ms, s, p + 1, CAP_UNFINISHED);
            goto out;
        case ')':
            s = close_capture(ms, s, p + 1);
            goto out;
        case '$':
            if (p + 1 != ms->p_end)
                break; /* a '$' before the end is a plain character */
            if (s != ms->src_end)
                s = NULL;
            goto out;
        case ESC:
            if (!match_escape(ms, &s, &p))
                break; /* a class such as %a */
            if (!s)
                goto out;
            continue;
        }
        ep = class_end(ms, p); /* a single-character class, then maybe '*', '+', '-' or '?' */
        if (!single_match(ms, s, p, ep)) {
            if (*ep == '*' || *ep == '?' || *ep == '-') {
                p = ep + 1;
                continue;
            }
            s = NULL;
            goto out;
        }
        switch (*ep) {
        case '?': {
            const char *r = match(ms, s + 1, ep + 1);
            if (r) {
                s = r;
                goto out;
            }
            p = ep + 1;
            continue;
        }
        case '+':
            s = max_expand(ms, s + 1, p, ep);
            goto out;
        case '*':
            s = max_expand(ms, s, p, ep);
            goto out;
        case '-':
            s = min_expand(ms, s, p, ep);
            goto out;
        default:
            s++;
            p = ep;
            continue;
        }
    }
out:
    ms->depth++;
    return s;
}

/* --- captures to Lua ------------------------------------------------------------------------ */

/* Capture i, or the whole match s..e when i is 0 and the pattern has none: its length and text
 * in *cap, or CAP_POSITION after pushing the position. */
static ptrdiff_t get_capture(struct mstate *ms, int i, const char *s, const char *e,
                             const char **cap)
{
    ptrdiff_t len;

    if (i >= ms->level) {
        if (i != 0)
            luaL_error(ms->L, "invalid capture index %%%d", i + 1);
        *cap = s;
        return e - s;
    }
    len = ms->cap[i].len;
    *cap = ms->cap[i].init;
    if (len == CAP_UNFINISHED)
        luaL_error(ms->L, "unfinished capture");
    if (len == CAP_POSITION)
        lua_pushinteger(ms->L, ms->cap[i].init - ms->src + 1);
    return len;
}

static void push_capture(struct mstate *ms, int i, const char *s, const char *e)
{
    const char *cap;
    ptrdiff_t len = get_capture(ms, i, s, e, &cap);

    if (len != CAP_POSITION)
        lua_pushlstring(ms->L, cap, len);
}

/* Pushes every capture (the whole match s..e if none; nothing if s is NULL). Returns how many. */
static int push_captures(struct mstate *ms, const char *s, const char *e)
{
    int n = ms->level == 0 && s ? 1 : ms->level;

    luaL_checkstack(ms->L, n, "too many captures");
    for (int i = 0; i < n; i++)
        push_capture(ms, i, s, e);
    return n;
}

/* --- find and match ------------------------------------------------------------------------- */

/* A 1-based, maybe negative, start position as an offset + 1 into a string of len bytes. */
static size_t start_pos(lua_Integer pos, size_t len)
{
    if (pos > 0)
        return (size_t)pos;
    if (pos == 0 || pos < -(lua_Integer)len)
        return 1;
    return len + (size_t)pos + 1;
}

/* Whether p has none of the characters that make a pattern. */
static bool is_plain(const char *p, size_t lp)
{
    static const bool special[256] = {['^'] = 1, ['$'] = 1, ['*'] = 1, ['+'] = 1, ['?'] = 1,
                                      ['.'] = 1, ['('] = 1, ['['] = 1, ['%'] = 1, ['-'] = 1};

    for (size_t i = 0; i < lp; i++)
        if (special[uchar(p[i])])
            return false;
    return true;
}

/* The first occurrence of n in h, or NULL. memchr then memcmp for a short needle (lstrlib.c's
 * way), memmem for a long one (linear where that is quadratic); both window by window. */
static const char *find_plain(struct mstate *ms, const char *h, size_t hl, const char *n, size_t nl)
{
    const char *last;

    if (nl == 0)
        return h;
    if (nl > hl)
        return NULL;
    last = h + (hl - nl); /* the last place a match can start */
    if (nl < MEMMEM_MIN) {
        while (h <= last) { /* by windows of SCAN_CHUNK start positions */
            const char *wend = last - h >= SCAN_CHUNK ? h + SCAN_CHUNK : last + 1, *r;

            while (h < wend && (r = memchr(h, n[0], wend - h)) != NULL) {
                if (memcmp(r + 1, n + 1, nl - 1) == 0)
                    return r;
                h = r + 1;
            }
            h = wend;
            charge(ms, SCAN_CHUNK); /* a step per candidate, at most */
        }
        return NULL;
    }
    while (h <= last) {
        size_t w = nl > MEMMEM_WINDOW ? nl : MEMMEM_WINDOW; /* at most half the work overlaps */
        const char *r;

        if ((size_t)(last - h) + 1 < w)
            w = (size_t)(last - h) + 1;
        r = memmem(h, w + nl - 1, n, nl);
        charge(ms, (long)((w + nl) / STEP_BYTES));
        if (r)
            return r;
        h += w;
    }
    return NULL;
}

static int find_aux(lua_State *L, bool find)
{
    size_t ls, lp;
    const char *s = luaL_checklstring(L, 1, &ls);
    const char *p = luaL_checklstring(L, 2, &lp);
    size_t init = start_pos(luaL_optinteger(L, 3, 1), ls) - 1;
    const char *s1;
    struct mstate ms;
    struct lead ld = {-1, NULL, NULL};
    bool anchor;

    if (init > ls) {
        luaL_pushfail(L);
        return 1;
    }
    if (find && (lua_toboolean(L, 4) || is_plain(p, lp))) {
        const char *r;

        budget_init(&ms, L, stop_flag(L));
        r = find_plain(&ms, s + init, ls - init, p, lp);
        if (!r) {
            luaL_pushfail(L);
            return 1;
        }
        lua_pushinteger(L, r - s + 1);
        lua_pushinteger(L, r - s + lp);
        return 2;
    }
    mstate_init(&ms, L, s, ls, p, lp, stop_flag(L));
    anchor = *p == '^';
    if (anchor)
        p++;
    else
        find_lead(&ld, p, ms.p_end);
    s1 = s + init;
    do {
        const char *e;

        if (!(s1 = next_start(&ms, s1, &ld)))
            break;
        ms.level = 0;
        e = match(&ms, s1, p);
        if (e) {
            if (!find)
                return push_captures(&ms, s1, e);
            lua_pushinteger(L, s1 - s + 1);
            lua_pushinteger(L, e - s);
            return push_captures(&ms, NULL, NULL) + 2;
        }
    } while (s1++ < ms.src_end && !anchor);
    luaL_pushfail(L);
    return 1;
}

static int l_find(lua_State *L)
{
    return find_aux(L, true);
}

static int l_match(lua_State *L)
{
    return find_aux(L, false);
}

/* --- gmatch --------------------------------------------------------------------------------- */

/* A gmatch iterator's state (its third upvalue; the first two keep subject and pattern alive). */
struct gmatch {
    const char *src;  /* where the next search starts */
    const char *p;    /* the pattern: a '^' is a plain character here, as in Lua 5.4 */
    const char *last; /* end of the last match: an empty match there does not count */
    struct lead ld;
    struct mstate ms; /* its budget carries over from one call to the next */
};

static int l_gmatch_next(lua_State *L)
{
    struct gmatch *gm = lua_touserdata(L, lua_upvalueindex(3));

    gm->ms.L = L; /* the iterator may run in another coroutine than the one that made it */
    check_stop(L, gm->ms.stop);
    for (const char *src = gm->src; src <= gm->ms.src_end; src++) {
        const char *e;

        if (!(src = next_start(&gm->ms, src, &gm->ld)))
            break;
        gm->ms.level = 0;
        gm->ms.depth = MAXDEPTH; /* lstrlib.c keeps what an error left, which only hurts */
        e = match(&gm->ms, src, gm->p);
        if (e && e != gm->last) {
            gm->src = gm->last = e;
            return push_captures(&gm->ms, src, e);
        }
    }
    return 0;
}

static int l_gmatch(lua_State *L)
{
    size_t ls, lp;
    const char *s = luaL_checklstring(L, 1, &ls);
    const char *p = luaL_checklstring(L, 2, &lp);
    size_t init = start_pos(luaL_optinteger(L, 3, 1), ls) - 1;
    const volatile sig_atomic_t *stop = stop_flag(L);
    struct gmatch *gm;

    lua_settop(L, 2);
    gm = lua_newuserdatauv(L, sizeof(*gm), 0);
    if (init > ls)
        init = ls + 1; /* finds nothing; s + init stays inside the string and its '\0' */
    mstate_init(&gm->ms, L, s, ls, p, lp, stop);
    gm->src = s + init;
    gm->p = p;
    gm->last = NULL;
    find_lead(&gm->ld, p, p + lp);
    lua_pushcclosure(L, l_gmatch_next, 3);
    return 1;
}

/* --- gsub ----------------------------------------------------------------------------------- */

/* Appends the replacement string (argument 3) for the match s..e, with %0-%9 and %%. */
static void add_template(struct mstate *ms, luaL_Buffer *b, const char *s, const char *e)
{
    lua_State *L = ms->L;
    size_t l;
    const char *t = lua_tolstring(L, 3, &l), *q;

    charge(ms, l / STEP_BYTES);
    while ((q = memchr(t, ESC, l)) != NULL) {
        luaL_addlstring(b, t, q - t);
        q++; /* past the '%'; at the end of t this is its '\0' */
        if (*q == ESC) {
            luaL_addchar(b, ESC);
        } else if (*q == '0') {
            luaL_addlstring(b, s, e - s);
        } else if (isdigit(uchar(*q))) {
            const char *cap;
            ptrdiff_t len = get_capture(ms, *q - '1', s, e, &cap);
            if (len == CAP_POSITION)
                luaL_addvalue(b); /* the position get_capture pushed */
            else
                luaL_addlstring(b, cap, len);
        } else {
            luaL_error(L, "invalid use of '%c' in replacement string", ESC);
        }
        l -= q + 1 - t;
        t = q + 1;
    }
    luaL_addlstring(b, t, l);
}

/* Appends what replaces the match s..e (tr: the type of argument 3). Returns whether that
 * changed the text: a function or table giving nil or false keeps the match. */
static bool add_value(struct mstate *ms, luaL_Buffer *b, const char *s, const char *e, int tr)
{
    lua_State *L = ms->L;

    if (tr == LUA_TFUNCTION) {
        int n;

        lua_pushvalue(L, 3);
        n = push_captures(ms, s, e);
        lua_call(L, n, 1);
    } else if (tr == LUA_TTABLE) {
        push_capture(ms, 0, s, e);
        lua_gettable(L, 3);
    } else {
        add_template(ms, b, s, e);
        return true;
    }
    if (!lua_toboolean(L, -1)) {
        lua_pop(L, 1);
        luaL_addlstring(b, s, e - s);
        return false;
    }
    if (!lua_isstring(L, -1))
        luaL_error(L, "invalid replacement value (a %s)", luaL_typename(L, -1));
    luaL_addvalue(b);
    return true;
}

static int l_gsub(lua_State *L)
{
    size_t ls, lp;
    const char *src = luaL_checklstring(L, 1, &ls);
    const char *p = luaL_checklstring(L, 2, &lp);
    int tr = lua_type(L, 3);
    lua_Integer max_n = luaL_optinteger(L, 4, (lua_Integer)ls + 1);
    const char *last = NULL; /* end of the last match: an empty match there does not count */
    lua_Integer n = 0;
    bool changed = false, anchor;
    struct mstate ms;
    luaL_Buffer b;
    struct lead ld = {-1, NULL, NULL};

    luaL_argexpected(
        L, tr == LUA_TNUMBER || tr == LUA_TSTRING || tr == LUA_TFUNCTION || tr == LUA_TTABLE, 3,
        "string/function/table");
    luaL_buffinit(L, &b);
    mstate_init(&ms, L, src, ls, p, lp, stop_flag(L));
    anchor = *p == '^';
    if (anchor)
        p++;
    else
        find_lead(&ld, p, ms.p_end);
    while (n < max_n) {
        const char *e, *next = next_start(&ms, src, &ld);

        if (!next)
            break; /* the rest goes in unchanged below */
        if (next != src) {
            luaL_addlstring(&b, src, next - src);
            src = next;
        }
        ms.level = 0;
        e = match(&ms, src, p);
        if (e && e != last) {
            n++;
            changed = add_value(&ms, &b, src, e, tr) || changed;
            src = last = e;
        } else if (src < ms.src_end) {
            luaL_addchar(&b, *src++);
        } else {
            break;
        }
        if (anchor)
            break;
    }
    if (!changed) {
        lua_pushvalue(L, 1);
    } else {
        luaL_addlstring(&b, src, ms.src_end - src);
        luaL_pushresult(&b);
    }
    lua_pushinteger(L, n);
    return 2;
}

/* --- installing ----------------------------------------------------------------------------- */

void lpattern_install(lua_State *L, int idx, const volatile sig_atomic_t *stop)
{
    static const luaL_Reg fns[] = {
        {"find", l_find}, {"match", l_match}, {"gmatch", l_gmatch}, {"gsub", l_gsub}, {NULL, NULL}};

    pthread_once(&tables_once, tables_init);
    lua_pushvalue(L, idx);
    lua_pushlightuserdata(L, (void *)(uintptr_t)stop); /* read only, through stop_flag() */
    luaL_setfuncs(L, fns, 1);
    lua_pop(L, 1);
}
