/* iplimit: --max-conns-per-ip, live connections counted per client address in a table of fixed
 * size: a flood of addresses cannot grow it. The accept thread is its only writer of keys;
 * closing workers only decrement. */
#ifndef LFE_IPLIMIT_H
#define LFE_IPLIMIT_H

#include <stdint.h>
#include <sys/socket.h>

#define IPLIMIT_PROBES 64 /* slots looked at per new connection, at most */

struct iplimit;

/* A table for about max_live live connections: 2 x max_live slots rounded up to a power of two,
 * at most 1 << 20 (24 bytes a slot). NULL when memory runs out. */
struct iplimit *iplimit_new(long max_live);

/* Counts one more connection from addr (IPv4, IPv6; an IPv4-mapped IPv6 address is its IPv4
 * address) if it has fewer than limit. Returns the slot to release at close (>= 0),
 * IPLIMIT_OVER when addr already has limit, IPLIMIT_FULL when no slot for a new address was
 * free within IPLIMIT_PROBES (the table holds that many other live addresses on that chain).
 * One caller at a time (the server's iplock): acquires are not safe against each other; a
 * concurrent iplimit_release is. */
#define IPLIMIT_OVER (-1)
#define IPLIMIT_FULL (-2)
int32_t iplimit_acquire(struct iplimit *t, const struct sockaddr *addr, long limit);

/* One connection of slot's address closed. Any thread (an atomic decrement). */
void iplimit_release(struct iplimit *t, int32_t slot);

/* Live connections counted for addr (tests, metrics). */
long iplimit_count(struct iplimit *t, const struct sockaddr *addr);

void iplimit_free(struct iplimit *t);

#endif /* LFE_IPLIMIT_H */
