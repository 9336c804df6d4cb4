/* lstop: string.rep and table.move/insert/remove, stoppable by a flag (beside lpattern). */
#ifndef LFE_LSTOP_H
#define LFE_LSTOP_H

#include <lua.h>
#include <signal.h>

/* Replaces rep in the string library table at index idx with a version of the same semantics
 * that does not loop where the original would copy nothing (an empty string and separator), and
 * otherwise calls the original. stop: the timeout flag (as lpattern_install takes it), which
 * must outlive the state; NULL means never stop. Allocates: call it at state setup. */
void lstop_install_string(lua_State *L, int idx, const volatile sig_atomic_t *stop);

/* Replaces move, insert and remove in the table library table at index idx with versions of
 * the same semantics that look at *stop every few thousand elements shifted and raise "handler
 * timed out" once it is non-zero. Same rules for stop and allocation as above. */
void lstop_install_table(lua_State *L, int idx, const volatile sig_atomic_t *stop);

#endif /* LFE_LSTOP_H */
