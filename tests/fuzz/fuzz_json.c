/* fuzz_json: lfbench's JSON reader (json_parse), on any bytes, under small limits.
 *
 * The first byte picks the limits (depth 1-16, values up to 64-4096). A refused input gets one
 * line, "LINE:COL: what", at a place inside the input (the line exists, the column is within it
 * or one past its end). An accepted one is written back as canonical JSON by a writer here,
 * which must parse again to an equal tree (types, exact counts, doubles bit for bit, string
 * bytes including NULs, keys in order) and to the same text; a count's double is the count
 * rounded (strtod and the conversion both round to nearest); nothing is nested deeper or holds
 * more values than the limits allow. */
#include "fuzz.h"

#include "json.h"

#include <inttypes.h>
#include <math.h>

struct text {
    char *s;
    size_t len, cap;
};

static void put(struct text *t, const char *s, size_t n)
{
    if (t->len + n + 1 > t->cap) {
        t->cap = (t->len + n + 1) * 2;
        t->s = realloc(t->s, t->cap);
        FZ_CHECK(t->s != NULL, "realloc");
    }
    memcpy(t->s + t->len, s, n);
    t->len += n;
    t->s[t->len] = '\0';
}

static void put_str(struct text *t, const char *s, size_t n)
{
    char buf[8];

    put(t, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            buf[0] = '\\';
            buf[1] = (char)c;
            put(t, buf, 2);
        } else if (c < 0x20) {
            snprintf(buf, sizeof(buf), "\\u%04x", c);
            put(t, buf, 6);
        } else {
            put(t, (const char *)&c, 1);
        }
    }
    put(t, "\"", 1);
}

static void write_value(struct text *t, const struct json *v)
{
    char buf[64];

    switch (v->type) {
    case JSON_NULL:
        put(t, "null", 4);
        break;
    case JSON_TRUE:
        put(t, "true", 4);
        break;
    case JSON_FALSE:
        put(t, "false", 5);
        break;
    case JSON_NUMBER:
        if (v->is_u64)
            snprintf(buf, sizeof(buf), "%" PRIu64, v->u);
        else
            snprintf(buf, sizeof(buf), "%.17g", v->d);
        /* a double that prints as an integer ("1e+20" does not) would come back as a count */
        if (!v->is_u64 && !strpbrk(buf, ".eEn"))
            strcat(buf, ".0");
        put(t, buf, strlen(buf));
        break;
    case JSON_STRING:
        put_str(t, v->s, v->len);
        break;
    case JSON_ARRAY:
    case JSON_OBJECT:
        put(t, v->type == JSON_ARRAY ? "[" : "{", 1);
        for (size_t i = 0; i < v->len; i++) {
            if (i)
                put(t, ",", 1);
            if (v->type == JSON_OBJECT) {
                put_str(t, v->kid[i].key, strlen(v->kid[i].key));
                put(t, ":", 1);
            }
            write_value(t, &v->kid[i]);
        }
        put(t, v->type == JSON_ARRAY ? "]" : "}", 1);
        break;
    }
}

static void same(const struct json *a, const struct json *b)
{
    FZ_CHECK(a->type == b->type, "type %d, then %d", a->type, b->type);
    FZ_CHECK((a->key == NULL) == (b->key == NULL) && (!a->key || !strcmp(a->key, b->key)),
             "keys differ");
    switch (a->type) {
    case JSON_NUMBER:
        FZ_CHECK(a->is_u64 == b->is_u64 && a->u == b->u, "count %" PRIu64 " then %" PRIu64, a->u,
                 b->u);
        FZ_CHECK(!memcmp(&a->d, &b->d, sizeof(a->d)) || (a->d == 0 && b->d == 0),
                 "double %.17g then %.17g", a->d, b->d);
        break;
    case JSON_STRING:
        FZ_CHECK(a->len == b->len && !memcmp(a->s, b->s, a->len), "strings differ");
        break;
    case JSON_ARRAY:
    case JSON_OBJECT:
        FZ_CHECK(a->len == b->len, "%zu members, then %zu", a->len, b->len);
        for (size_t i = 0; i < a->len; i++)
            same(&a->kid[i], &b->kid[i]);
        break;
    default:
        break;
    }
}

/* Depth and value count of the tree; each value checked on the way. */
static void walk(const struct json *v, unsigned depth, unsigned *max_depth, size_t *nodes)
{
    (*nodes)++;
    if (depth > *max_depth)
        *max_depth = depth;
    if (v->type == JSON_NUMBER) {
        FZ_CHECK(isfinite(v->d), "a number that is not finite");
        FZ_CHECK(!v->is_u64 || v->d == (double)v->u, "count %" PRIu64 " but double %.17g", v->u,
                 v->d);
    }
    if (v->type == JSON_STRING)
        FZ_CHECK(v->s[v->len] == '\0', "string not terminated");
    for (size_t i = 0; (v->type == JSON_ARRAY || v->type == JSON_OBJECT) && i < v->len; i++) {
        FZ_CHECK((v->type == JSON_OBJECT) == (v->kid[i].key != NULL), "member key");
        walk(&v->kid[i], depth + 1, max_depth, nodes);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fz f = {data, size};
    uint8_t pick = fz_u8(&f);
    struct json_limits lim = {.max_depth = 1u + pick % 16, .max_nodes = 64u << (pick / 16 % 7)};
    char err[256], err2[256];
    struct json *j, *j2;

    j = json_parse((const char *)f.p, f.n, &lim, err, sizeof(err));
    if (!j) {
        unsigned line, col, lines = 1;
        size_t at = 0, linelen;
        int n = 0;

        FZ_CHECK(sscanf(err, "%u:%u: %n", &line, &col, &n) == 2 && n > 0, "error '%s'", err);
        FZ_CHECK(!strchr(err, '\n') && strlen(err) > (size_t)n, "error '%s'", err);
        for (size_t i = 0; i < f.n; i++)
            lines += f.p[i] == '\n';
        FZ_CHECK(line >= 1 && line <= lines, "error on line %u of %u", line, lines);
        for (unsigned l = 1; l < line; l++)
            at += (size_t)((const uint8_t *)memchr(f.p + at, '\n', f.n - at) - (f.p + at)) + 1;
        linelen = f.n - at;
        if (memchr(f.p + at, '\n', linelen))
            linelen = (size_t)((const uint8_t *)memchr(f.p + at, '\n', linelen) - (f.p + at));
        FZ_CHECK(col >= 1 && col <= linelen + 1, "error at column %u of a %zu-byte line", col,
                 linelen);
        /* the same input, the same error */
        FZ_CHECK(!json_parse((const char *)f.p, f.n, &lim, err2, sizeof(err2)) &&
                     !strcmp(err, err2),
                 "second parse");
        return 0;
    }
    {
        unsigned depth = 0;
        size_t nodes = 0;
        struct text t = {0}, t2 = {0};
        /* the written form nests as deep and has as many values: the same limits hold */
        walk(j, 0, &depth, &nodes);
        FZ_CHECK(depth < lim.max_depth + 1 && nodes <= lim.max_nodes, "depth %u, %zu values", depth,
                 nodes);
        write_value(&t, j);
        j2 = json_parse(t.s, t.len, &lim, err, sizeof(err));
        FZ_CHECK(j2 != NULL, "written back, refused: %s: %s", err, t.s);
        same(j, j2);
        write_value(&t2, j2);
        FZ_CHECK(t.len == t2.len && !memcmp(t.s, t2.s, t.len), "written twice, differs");
        json_free(j2);
        free(t.s);
        free(t2.s);
    }
    json_free(j);
    return 0;
}
