/* rate: the open-loop schedule (-R): send k is due at start + k / rate, whatever the server
 * does, so latency is measured from when a request should have gone out. */
#include "rate.h"

void rate_init(struct rate *s, double rate_per_s, uint64_t start_ns)
{
    s->start_ns = start_ns;
    s->interval_ns = 1e9 / rate_per_s;
    s->next = 0;
}

uint64_t rate_time(const struct rate *s, uint64_t k)
{
    return s->start_ns + (uint64_t)((double)k * s->interval_ns);
}

uint64_t rate_due(const struct rate *s, uint64_t now_ns)
{
    uint64_t upto;

    if (now_ns < s->start_ns)
        return 0;
    upto = (uint64_t)((double)(now_ns - s->start_ns) / s->interval_ns) + 1; /* sends 0..upto-1 */
    while (upto > 0 && rate_time(s, upto - 1) > now_ns) /* float rounding at the edge */
        upto--;
    return upto > s->next ? upto - s->next : 0;
}

uint64_t rate_take(struct rate *s)
{
    return rate_time(s, s->next++);
}

uint64_t rate_next_time(const struct rate *s)
{
    return rate_time(s, s->next);
}
