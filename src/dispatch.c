/* dispatch: which epoll group gets the next connection. Used by the accept thread only. */
#include "dispatch.h"

void dispatch_init(struct dispatch *d, enum dispatch_policy policy, unsigned ngroups, uint64_t seed)
{
    d->policy = policy;
    d->n = ngroups ? ngroups : 1;
    d->next = 0;
    d->rng = seed ? seed : 0x9e3779b97f4a7c15ull;
}

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;

    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

unsigned dispatch_pick(struct dispatch *d, long (*load)(void *ctx, unsigned g), void *ctx)
{
    unsigned a, b;

    if (d->n == 1)
        return 0;
    if (d->policy == DISPATCH_RR) {
        a = d->next;
        d->next = a + 1 == d->n ? 0 : a + 1;
        return a;
    }
    a = (unsigned)(xorshift(&d->rng) % d->n);
    b = (unsigned)(xorshift(&d->rng) % (d->n - 1));
    if (b >= a)
        b++; /* distinct from a, uniform over the rest */
    return load(ctx, b) < load(ctx, a) ? b : a;
}
