/* lpattern: Lua 5.4's pattern functions (string.find, match, gmatch, gsub) with a stop flag that
 * ends a long match, so the handler timeout holds inside them too. */
#ifndef LFE_LPATTERN_H
#define LFE_LPATTERN_H

#include <lua.h>
#include <signal.h>

/* How often matching looks at the stop flag, in steps. A step is one pattern item tried at one
 * subject position, or 16 bytes scanned by an inner loop (a repetition, %b, a back-reference, a
 * plain search, a replacement string): a few nanoseconds each, so a set flag is seen within
 * tens of microseconds. Each call also looks at the flag when it starts. */
#define LPATTERN_CHECK_STEPS 1024

/* Replaces find, match, gmatch and gsub in the string library table at index idx with versions
 * of the same semantics (Lua 5.4 manual §6.4.1, error messages included) whose matching checks
 * *stop every LPATTERN_CHECK_STEPS steps and raises the Lua error "handler timed out" once it is
 * non-zero; gsub and gmatch keep counting across their matches. stop must outlive the state;
 * NULL means never stop. The flag is read with a relaxed atomic load: a signal handler on the
 * state's thread may set it, or another thread with an atomic store.
 * Allocates: call it where a memory error can be raised (state setup). The table's other fields
 * and the string metatable are left alone (s:find() reaches the new functions through the
 * metatable's __index, which is that table). */
void lpattern_install(lua_State *L, int idx, const volatile sig_atomic_t *stop);

#endif /* LFE_LPATTERN_H */
