/* json: a small strict JSON reader (RFC 8259) into a tree, for lfbench's own --json files. */
#include "json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct parser {
    const unsigned char *p, *end, *line0; /* line0: where the current line starts */
    unsigned line;
    unsigned depth, max_depth;
    size_t nodes, max_nodes;
    char *err;
    size_t errlen;
    bool failed;
};

static void fail_at(struct parser *ps, const unsigned char *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The first error wins: it is where the document went wrong. */
static void fail_at(struct parser *ps, const unsigned char *at, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (ps->failed)
        return;
    ps->failed = true;
    if (!ps->errlen)
        return;
    n = snprintf(ps->err, ps->errlen, "%u:%u: ", ps->line, (unsigned)(at - ps->line0) + 1);
    if (n < 0 || (size_t)n >= ps->errlen)
        return;
    va_start(ap, fmt);
    vsnprintf(ps->err + n, ps->errlen - (size_t)n, fmt, ap);
    va_end(ap);
}

#define fail(ps, ...) fail_at(ps, (ps)->p, __VA_ARGS__)

/* What the byte at p is, for an error message: printable as itself, else its code. */
static const char *shown(const struct parser *ps, char *buf, size_t n)
{
    if (ps->p >= ps->end)
        return "the end of the input";
    if (*ps->p >= 0x20 && *ps->p < 0x7f)
        snprintf(buf, n, "'%c'", *ps->p);
    else
        snprintf(buf, n, "byte 0x%02x", *ps->p);
    return buf;
}

static void skip_ws(struct parser *ps)
{
    while (ps->p < ps->end) {
        if (*ps->p == '\n') {
            ps->line++;
            ps->line0 = ps->p + 1;
        } else if (*ps->p != ' ' && *ps->p != '\t' && *ps->p != '\r') {
            break;
        }
        ps->p++;
    }
}

static bool literal(struct parser *ps, const char *word)
{
    size_t n = strlen(word);

    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n)) {
        fail(ps, "invalid literal (expected '%s')", word);
        return false;
    }
    ps->p += n;
    return true;
}

static bool is_digit(const struct parser *ps)
{
    return ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9';
}

/* One digit or more, p past them; none fails with what. */
static int digits(struct parser *ps, const char *what)
{
    if (!is_digit(ps)) {
        fail(ps, "%s", what);
        return -1;
    }
    while (is_digit(ps))
        ps->p++;
    return 0;
}

static int parse_number(struct parser *ps, struct json *v)
{
    const unsigned char *start = ps->p;
    bool neg = false, integer = true, exact = true;
    uint64_t u = 0;
    char small[64], *buf = small, *endp;
    size_t n;

    if (*ps->p == '-') {
        neg = true;
        ps->p++;
    }
    if (!is_digit(ps)) {
        fail(ps, "a number needs a digit here");
        return -1;
    }
    if (*ps->p == '0') {
        ps->p++;
        if (is_digit(ps)) {
            fail(ps, "leading zero in a number");
            return -1;
        }
    } else {
        for (; is_digit(ps); ps->p++) {
            unsigned dgt = *ps->p - '0';
            if (u > (UINT64_MAX - dgt) / 10)
                exact = false;
            else
                u = u * 10 + dgt;
        }
    }
    if (ps->p < ps->end && *ps->p == '.') {
        integer = false;
        ps->p++;
        if (digits(ps, "a fraction needs a digit after '.'") < 0)
            return -1;
    }
    if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
        integer = false;
        ps->p++;
        if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-'))
            ps->p++;
        if (digits(ps, "an exponent needs a digit") < 0)
            return -1;
    }
    /* strtod wants a NUL-terminated copy (the input has none); the grammar above is its C
     * locale's, so it reads exactly these bytes */
    n = (size_t)(ps->p - start);
    if (n >= sizeof(small) && !(buf = malloc(n + 1))) {
        fail_at(ps, start, "out of memory");
        return -1;
    }
    memcpy(buf, start, n);
    buf[n] = '\0';
    errno = 0;
    v->d = strtod(buf, &endp);
    if (buf != small)
        free(buf);
    if (isinf(v->d)) {
        fail_at(ps, start, "number out of range");
        return -1;
    }
    v->type = JSON_NUMBER;
    v->is_u64 = integer && exact && !neg;
    v->u = v->is_u64 ? u : 0;
    if (integer && neg && u == 0 && exact)
        v->is_u64 = true; /* -0 is zero */
    return 0;
}

static int hex4(struct parser *ps, unsigned *cp)
{
    *cp = 0;
    for (int i = 0; i < 4; i++, ps->p++) {
        unsigned c = ps->p < ps->end ? *ps->p : 0;
        unsigned h = c >= '0' && c <= '9'   ? c - '0'
                     : c >= 'a' && c <= 'f' ? c - 'a' + 10
                     : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                            : 16;
        if (h == 16) {
            fail(ps, "\\u needs four hex digits");
            return -1;
        }
        *cp = *cp << 4 | h;
    }
    return 0;
}

size_t json_utf8_len(const unsigned char *p, const unsigned char *end)
{
    unsigned char lo = 0x80, hi = 0xbf;
    size_t n;

    if (p[0] < 0x80)
        return 1;
    if (p[0] >= 0xc2 && p[0] <= 0xdf)
        n = 2;
    else if (p[0] >= 0xe0 && p[0] <= 0xef)
        n = 3, lo = p[0] == 0xe0 ? 0xa0 : 0x80, hi = p[0] == 0xed ? 0x9f : 0xbf;
    else if (p[0] >= 0xf0 && p[0] <= 0xf4)
        n = 4, lo = p[0] == 0xf0 ? 0x90 : 0x80, hi = p[0] == 0xf4 ? 0x8f : 0xbf;
    else
        return 0;
    if ((size_t)(end - p) < n || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t k = 2; k < n; k++)
        if ((p[k] & 0xc0) != 0x80)
            return 0;
    return n;
}

static size_t put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xc0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | cp >> 12);
        o[1] = (char)(0x80 | (cp >> 6 & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | cp >> 18);
    o[1] = (char)(0x80 | (cp >> 12 & 0x3f));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3f));
    o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* A \u escape (p just past its 'u'), a surrogate pair as one character, into *o as UTF-8. */
static int unescape_u(struct parser *ps, char **o)
{
    unsigned cp, lo;

    if (hex4(ps, &cp) < 0)
        return -1;
    if (cp >= 0xdc00 && cp <= 0xdfff) {
        fail_at(ps, ps->p - 6, "lone low surrogate \\u%04x", cp);
        return -1;
    }
    if (cp >= 0xd800 && cp <= 0xdbff) {
        if (ps->end - ps->p < 2 || ps->p[0] != '\\' || ps->p[1] != 'u') {
            fail_at(ps, ps->p - 6, "high surrogate \\u%04x without its low half", cp);
            return -1;
        }
        ps->p += 2;
        if (hex4(ps, &lo) < 0)
            return -1;
        if (lo < 0xdc00 || lo > 0xdfff) {
            fail_at(ps, ps->p - 6, "\\u%04x is no low surrogate after \\u%04x", lo, cp);
            return -1;
        }
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
    }
    *o += put_utf8(*o, cp);
    return 0;
}

/* An escape (p just past its '\'), decoded into *o; p past it. */
static int unescape(struct parser *ps, char **o)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    unsigned c = ps->p < ps->end ? *ps->p : 0;
    const char *e = c ? strchr(from, (int)c) : NULL;

    if (e) {
        *(*o)++ = to[e - from];
        ps->p++;
        return 0;
    }
    if (c == 'u') {
        ps->p++;
        return unescape_u(ps, o);
    }
    if (ps->p < ps->end)
        fail(ps, "invalid escape '\\%c'", c >= 0x20 && c < 0x7f ? (char)c : '?');
    else
        fail(ps, "unterminated string");
    return -1;
}

/* A string at p (on its '"'): decoded into a new buffer. The decoded form is never longer than
 * the source (an escape of 6 or 12 bytes gives at most 4), so one allocation of the source's
 * length does. */
static char *parse_string(struct parser *ps, size_t *lenp)
{
    const unsigned char *q = ps->p + 1;
    char *out, *o;

    while (q < ps->end && *q != '"')
        q += *q == '\\' && q + 1 < ps->end ? 2 : 1;
    if (!(out = malloc((size_t)(q - ps->p) + 1))) {
        fail(ps, "out of memory");
        return NULL;
    }
    o = out;
    ps->p++;
    for (;;) {
        unsigned c;
        size_t n;

        if (ps->p >= ps->end) {
            fail(ps, "unterminated string");
            goto bad;
        }
        c = *ps->p;
        if (c == '"')
            break;
        if (c < 0x20) {
            fail(ps, "control character 0x%02x in a string (escape it)", c);
            goto bad;
        }
        if (c == '\\') {
            ps->p++;
            if (unescape(ps, &o) < 0)
                goto bad;
            continue;
        }
        if (!(n = json_utf8_len(ps->p, ps->end))) {
            fail(ps, "invalid UTF-8 in a string");
            goto bad;
        }
        memcpy(o, ps->p, n);
        o += n;
        ps->p += n;
    }
    ps->p++;
    *o = '\0';
    *lenp = (size_t)(o - out);
    return out;
bad:
    free(out);
    return NULL;
}

static void free_value(struct json *v)
{
    for (size_t i = 0; v->kid && i < v->len; i++)
        free_value(&v->kid[i]);
    free(v->kid);
    free(v->s);
    free(v->key);
}

static int parse_value(struct parser *ps, struct json *v);

/* Appends *item to v's members (v->len of them, room for *cap). */
static int push(struct parser *ps, struct json *v, size_t *cap, struct json *item)
{
    if (v->len == *cap) {
        size_t ncap = *cap ? *cap * 2 : 4;
        struct json *k = realloc(v->kid, ncap * sizeof(*k));
        if (!k) {
            fail(ps, "out of memory");
            return -1;
        }
        v->kid = k;
        *cap = ncap;
    }
    v->kid[v->len++] = *item;
    return 0;
}

/* An array or an object at p (on its '[' or '{'). */
static int parse_container(struct parser *ps, struct json *v)
{
    bool obj = *ps->p == '{';
    char close = obj ? '}' : ']', sh[16];
    size_t cap = 0;

    v->type = obj ? JSON_OBJECT : JSON_ARRAY;
    if (++ps->depth > ps->max_depth) {
        fail(ps, "nested deeper than %u", ps->max_depth);
        return -1;
    }
    ps->p++;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        ps->depth--;
        return 0;
    }
    for (;;) {
        struct json item = {0};
        char *key = NULL;
        size_t klen;

        if (obj) {
            if (ps->p >= ps->end || *ps->p != '"') {
                fail(ps, "expected a member name (a string), found %s", shown(ps, sh, sizeof(sh)));
                return -1;
            }
            if (!(key = parse_string(ps, &klen)))
                return -1;
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') {
                fail(ps, "expected ':' after a member name, found %s", shown(ps, sh, sizeof(sh)));
                free(key);
                return -1;
            }
            ps->p++;
            skip_ws(ps);
        }
        if (parse_value(ps, &item) < 0) {
            free_value(&item);
            free(key);
            return -1;
        }
        item.key = key;
        if (push(ps, v, &cap, &item) < 0) {
            free_value(&item);
            return -1;
        }
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            skip_ws(ps);
            if (ps->p < ps->end && *ps->p == close) {
                fail(ps, "trailing comma before '%c'", close);
                return -1;
            }
            continue;
        }
        if (ps->p < ps->end && *ps->p == close) {
            ps->p++;
            ps->depth--;
            return 0;
        }
        fail(ps, "expected ',' or '%c', found %s", close, shown(ps, sh, sizeof(sh)));
        return -1;
    }
}

static int parse_value(struct parser *ps, struct json *v)
{
    char sh[16];

    v->line = ps->line;
    v->col = (unsigned)(ps->p - ps->line0) + 1;
    if (++ps->nodes > ps->max_nodes) {
        fail(ps, "more than %zu values", ps->max_nodes);
        return -1;
    }
    if (ps->p >= ps->end) {
        fail(ps, "expected a value, found the end of the input");
        return -1;
    }
    switch (*ps->p) {
    case '{':
    case '[':
        return parse_container(ps, v);
    case '"':
        v->type = JSON_STRING;
        return (v->s = parse_string(ps, &v->len)) ? 0 : -1;
    case 't':
        v->type = JSON_TRUE;
        return literal(ps, "true") ? 0 : -1;
    case 'f':
        v->type = JSON_FALSE;
        return literal(ps, "false") ? 0 : -1;
    case 'n':
        v->type = JSON_NULL;
        return literal(ps, "null") ? 0 : -1;
    default:
        if (*ps->p == '-' || (*ps->p >= '0' && *ps->p <= '9'))
            return parse_number(ps, v);
        fail(ps, "expected a value, found %s", shown(ps, sh, sizeof(sh)));
        return -1;
    }
}

struct json *json_parse(const char *text, size_t len, const struct json_limits *lim, char *err,
                        size_t errlen)
{
    struct parser ps = {.p = (const unsigned char *)text,
                        .end = (const unsigned char *)text + len,
                        .line0 = (const unsigned char *)text,
                        .line = 1,
                        .max_depth = lim && lim->max_depth ? lim->max_depth : 64,
                        .max_nodes = lim && lim->max_nodes ? lim->max_nodes : (size_t)1 << 26,
                        .err = err,
                        .errlen = errlen};
    size_t max_bytes = lim && lim->max_bytes ? lim->max_bytes : (size_t)1 << 30;
    struct json *root;
    char sh[16];

    if (errlen)
        err[0] = '\0';
    if (len > max_bytes) {
        snprintf(err, errlen, "1:1: document of %zu bytes, more than the %zu allowed", len,
                 max_bytes);
        return NULL;
    }
    if (!(root = calloc(1, sizeof(*root)))) {
        snprintf(err, errlen, "1:1: out of memory");
        return NULL;
    }
    skip_ws(&ps);
    if (parse_value(&ps, root) < 0)
        goto bad;
    skip_ws(&ps);
    if (ps.p < ps.end) {
        fail(&ps, "expected the end of the input after the value, found %s",
             shown(&ps, sh, sizeof(sh)));
        goto bad;
    }
    return root;
bad:
    json_free(root);
    return NULL;
}

void json_free(struct json *root)
{
    if (!root)
        return;
    free_value(root);
    free(root);
}

const struct json *json_get(const struct json *obj, const char *key)
{
    if (!obj || obj->type != JSON_OBJECT)
        return NULL;
    for (size_t i = obj->len; i-- > 0;)
        if (!strcmp(obj->kid[i].key, key))
            return &obj->kid[i];
    return NULL;
}

bool json_u64(const struct json *j, uint64_t *v)
{
    if (!j || j->type != JSON_NUMBER || !j->is_u64)
        return false;
    *v = j->u;
    return true;
}

bool json_num(const struct json *j, double *v)
{
    if (!j || j->type != JSON_NUMBER)
        return false;
    *v = j->d;
    return true;
}

const char *json_type_name(enum json_type t)
{
    static const char *const name[] = {"null",     "false",    "true",     "a number",
                                       "a string", "an array", "an object"};

    return (unsigned)t < sizeof(name) / sizeof(name[0]) ? name[t] : "?";
}
