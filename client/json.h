/* json: a small strict JSON reader (RFC 8259) into a tree, for lfbench's own --json files. */
#ifndef LFE_JSON_H
#define LFE_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum json_type {
    JSON_NULL,
    JSON_FALSE,
    JSON_TRUE,
    JSON_NUMBER,
    JSON_STRING,
    JSON_ARRAY,
    JSON_OBJECT
};

/* One value. A tree is owned by its root: json_free(root) frees every node and string. */
struct json {
    enum json_type type;
    bool is_u64;        /* number: written as a non-negative integer that fits in 64 bits */
    uint64_t u;         /* number: its exact value when is_u64 (counts pass 2^53) */
    double d;           /* number: the nearest double */
    char *s;            /* string: the decoded bytes, NUL-terminated (may hold a NUL: see len) */
    size_t len;         /* string: bytes; array, object: members */
    char *key;          /* the member's name when this value is an object member, else NULL */
    struct json *kid;   /* array items, object members, in document order */
    unsigned line, col; /* where the value starts (1-based; col counts bytes) */
};

/* What a document may cost; 0 in a field takes its default. */
struct json_limits {
    unsigned max_depth; /* nesting of arrays and objects (default 64) */
    size_t max_bytes;   /* input size (default 1 GiB) */
    size_t max_nodes;   /* values in all (default 2^26) */
};

/* Parses text[0, len) (UTF-8, no NUL needed at the end; a NUL inside is an error). Strict: one
 * value, whitespace around it, no comments, trailing commas, leading zeros, NaN or lone
 * surrogates; strings valid UTF-8 with no raw control characters; a number too large for a
 * double is refused. A key given twice is kept twice (json_get takes the last). lim may be
 * NULL. Returns the root, or NULL with "LINE:COL: what" in err (one line; OOM says so). */
struct json *json_parse(const char *text, size_t len, const struct json_limits *lim, char *err,
                        size_t errlen);

void json_free(struct json *root);

/* The member named key of an object (the last one of that name), or NULL when absent or obj
 * is not an object. */
const struct json *json_get(const struct json *obj, const char *key);

/* The value as an exact count: true when it is a number written as an integer in [0, 2^64). */
bool json_u64(const struct json *j, uint64_t *v);

/* The value as a double: true when it is a number. */
bool json_num(const struct json *j, double *v);

const char *json_type_name(enum json_type t);

/* Length of the UTF-8 character at p, p < end (RFC 3629: no overlong form, no surrogate,
 * nothing past U+10FFFF), or 0 when the bytes at p are not one. */
size_t json_utf8_len(const unsigned char *p, const unsigned char *end);

#endif /* LFE_JSON_H */
