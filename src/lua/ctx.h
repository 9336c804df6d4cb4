/* ctx: conn.ctx's serialized form, the bytes a connection keeps in C between callbacks. */
#ifndef LFE_CTX_H
#define LFE_CTX_H

#include <stdbool.h>
#include <stddef.h>

#include <lua.h>

#include "script.h"

#define CTX_DEPTH 32 /* nesting of conn.ctx tables */

/* Appends the value at idx (a string, number, boolean or a table of them, no cycles, nested at
 * most CTX_DEPTH deep, table keys not tables) to b. Raises a Lua error on anything else, when b
 * would pass limit bytes, or when memory runs out: call it under lua_pcall. Returns 0. */
int ctx_encode(lua_State *L, int idx, struct outbuf *b, size_t limit);

/* Decodes the blob p[0, n) (one value, all of it) and pushes it. Returns 0, or -1 with nothing
 * pushed when the blob is corrupt, truncated or has bytes after the value. May raise a memory
 * error: call it under lua_pcall. */
int ctx_decode(lua_State *L, const char *p, size_t n);

/* Whether the value at idx would encode to exactly p[0, n) (what the connection saved). Raises
 * nothing, allocates nothing: safe anywhere. */
bool ctx_same(lua_State *L, int idx, const char *p, size_t n);

/* What keeping the table of a len-byte blob costs a state, at most, in the bytes its allocator
 * counts: a worst case over shapes (tests/unit/test_ctx.c measures them), plus the entry that
 * refers to it in a cache table. */
size_t ctx_cost(size_t len);

#endif /* LFE_CTX_H */
