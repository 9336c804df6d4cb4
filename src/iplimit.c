/* iplimit: live connections per client address, in a fixed-size open-addressing table.
 *
 * A slot holds an address (16 bytes, IPv4 as IPv4-mapped IPv6) and its live count. Only
 * iplimit_acquire writes addresses, one caller at a time (the server's lock: several accept
 * threads); closers only decrement counts (atomically) through the slot index the connection
 * kept. A slot whose count is 0 is referenced by no connection, so an acquire may give it to
 * another address. A lookup probes at most IPLIMIT_PROBES slots
 * from the address's hash, taking the address's own slot if met, else the first slot at 0: the
 * work per accept is bounded, and so is memory (the table never grows). With at least twice as
 * many slots as live connections, a chain of 64 slots all live and all other addresses is
 * unlikely; when it happens the connection is refused and counted (IPLIMIT_FULL). An address
 * whose slot lies beyond the 64 probes (its chain filled with others meanwhile) may get a
 * second slot: its count is then split and its limit looser, never tighter. */
#include "iplimit.h"

#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

struct slot {
    uint8_t addr[16];
    long live; /* atomic */
};

struct iplimit {
    uint32_t mask;
    struct slot *slots;
};

struct iplimit *iplimit_new(long max_live)
{
    struct iplimit *t = calloc(1, sizeof(*t));
    uint32_t n = 64;

    if (!t)
        return NULL;
    while (n < (1u << 20) && (long)n < 2 * max_live)
        n <<= 1;
    t->mask = n - 1;
    t->slots = calloc(n, sizeof(*t->slots));
    if (!t->slots) {
        free(t);
        return NULL;
    }
    return t;
}

/* addr as 16 bytes: IPv6 as it is, IPv4 (and IPv4-mapped IPv6) as ::ffff:a.b.c.d. */
static void key_of(const struct sockaddr *sa, uint8_t k[16])
{
    memset(k, 0, 16);
    if (sa->sa_family == AF_INET6) {
        memcpy(k, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
    } else if (sa->sa_family == AF_INET) {
        k[10] = k[11] = 0xff;
        memcpy(k + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    }
}

static uint32_t hash(const uint8_t k[16])
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */

    for (int i = 0; i < 16; i++)
        h = (h ^ k[i]) * 1099511628211ULL;
    return (uint32_t)(h ^ (h >> 32));
}

int32_t iplimit_acquire(struct iplimit *t, const struct sockaddr *addr, long limit)
{
    uint8_t k[16];
    uint32_t h;
    int32_t free_slot = -1;

    key_of(addr, k);
    h = hash(k);
    for (uint32_t i = 0; i < IPLIMIT_PROBES && i <= t->mask; i++) {
        struct slot *s = &t->slots[(h + i) & t->mask];
        long live = __atomic_load_n(&s->live, __ATOMIC_ACQUIRE);

        if (live > 0 && memcmp(s->addr, k, 16) == 0) {
            if (live >= limit)
                return IPLIMIT_OVER;
            __atomic_add_fetch(&s->live, 1, __ATOMIC_RELAXED);
            return (int32_t)((h + i) & t->mask);
        }
        if (live == 0 && free_slot < 0)
            free_slot = (int32_t)((h + i) & t->mask);
    }
    if (free_slot < 0)
        return IPLIMIT_FULL;
    if (limit < 1)
        return IPLIMIT_OVER;
    memcpy(t->slots[free_slot].addr, k, 16);
    __atomic_store_n(&t->slots[free_slot].live, 1, __ATOMIC_RELEASE);
    return free_slot;
}

void iplimit_release(struct iplimit *t, int32_t slot)
{
    if (slot >= 0 && (uint32_t)slot <= t->mask)
        __atomic_sub_fetch(&t->slots[slot].live, 1, __ATOMIC_RELEASE);
}

long iplimit_count(struct iplimit *t, const struct sockaddr *addr)
{
    uint8_t k[16];
    uint32_t h;
    long n = 0;

    key_of(addr, k);
    h = hash(k);
    for (uint32_t i = 0; i < IPLIMIT_PROBES && i <= t->mask; i++) {
        struct slot *s = &t->slots[(h + i) & t->mask];
        long live = __atomic_load_n(&s->live, __ATOMIC_ACQUIRE);

        if (live > 0 && memcmp(s->addr, k, 16) == 0)
            n += live;
    }
    return n;
}

void iplimit_free(struct iplimit *t)
{
    if (!t)
        return;
    free(t->slots);
    free(t);
}
