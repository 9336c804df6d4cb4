/* rate: the open-loop schedule (-R): send k is due at start + k / rate, whatever the server
 * does, so latency is measured from when a request should have gone out. */
#ifndef LFE_RATE_H
#define LFE_RATE_H

#include <stdint.h>

struct rate {
    uint64_t start_ns;  /* time of send 0 */
    double interval_ns; /* 1e9 / rate */
    uint64_t next;      /* index of the next send to take */
};

void rate_init(struct rate *s, double rate_per_s, uint64_t start_ns);

/* Intended time of send k. */
uint64_t rate_time(const struct rate *s, uint64_t k);

/* Sends due by now that have not been taken. */
uint64_t rate_due(const struct rate *s, uint64_t now_ns);

/* Takes the next send; returns its intended time. */
uint64_t rate_take(struct rate *s);

/* When the next untaken send is due. */
uint64_t rate_next_time(const struct rate *s);

#endif /* LFE_RATE_H */
