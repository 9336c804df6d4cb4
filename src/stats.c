/* stats: per-thread counters, written by their owner only and summed when read. */
#include "stats.h"

#define SNAP(name, help) dst->name += __atomic_load_n(&src->name, __ATOMIC_RELAXED);
#define PRINT(name, help) fprintf(f, " " #name "=%llu", (unsigned long long)s->name);

void stats_add_worker(struct worker_stats *dst, const struct worker_stats *src)
{
    WORKER_STATS(SNAP)
}

void stats_snap_accept(struct accept_stats *dst, const struct accept_stats *src)
{
    ACCEPT_STATS(SNAP)
}

const uint64_t svc_bounds_ns[SVC_BUCKETS - 1] = {
    1000,      2500,      5000,       10000,      25000,      50000,       100000,   250000,
    500000,    1000000,   2500000,    5000000,    10000000,   25000000,    50000000, 100000000,
    250000000, 500000000, 1000000000, 2500000000, 5000000000, 10000000000,
};

void stats_add_svc(struct svc_hist *dst, const struct svc_hist *src)
{
    for (int i = 0; i < SVC_BUCKETS; i++)
        dst->count[i] += __atomic_load_n(&src->count[i], __ATOMIC_RELAXED);
    dst->sum_ns += __atomic_load_n(&src->sum_ns, __ATOMIC_RELAXED);
}

void stats_print_worker(FILE *f, const char *prefix, const struct worker_stats *s)
{
    fputs(prefix, f);
    WORKER_STATS(PRINT)
    fputc('\n', f);
}

void stats_print_accept(FILE *f, const char *prefix, const struct accept_stats *s)
{
    fputs(prefix, f);
    ACCEPT_STATS(PRINT)
    fputc('\n', f);
}
