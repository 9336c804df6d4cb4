/* dispatch: which epoll group gets the next connection. Used by the accept thread only. */
#ifndef LFE_DISPATCH_H
#define LFE_DISPATCH_H

#include <stdint.h>

#include "opt.h"

/* Owned and touched by the accept thread alone. */
struct dispatch {
    enum dispatch_policy policy; /* rr or least */
    unsigned n;                  /* groups */
    unsigned next;               /* rr: the next group */
    uint64_t rng;                /* least: xorshift state, never 0 */
};

void dispatch_init(struct dispatch *d, enum dispatch_policy policy, unsigned ngroups,
                   uint64_t seed);

/* Returns a group in [0, n). rr cycles; least draws two distinct groups at random and returns
 * the one with the smaller load(ctx, g) (power of two choices: near-best balance at two loads
 * per pick, and no herd onto one group when loads are read slightly stale). */
unsigned dispatch_pick(struct dispatch *d, long (*load)(void *ctx, unsigned g), void *ctx);

#endif /* LFE_DISPATCH_H */
