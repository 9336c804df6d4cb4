/* stats: per-thread counters, written by their owner only and summed when read. */
#include "stats.h"

#define SNAP(name) dst->name += __atomic_load_n(&src->name, __ATOMIC_RELAXED);
#define PRINT(name) fprintf(f, " " #name "=%llu", (unsigned long long)s->name);

void stats_add_worker(struct worker_stats *dst, const struct worker_stats *src)
{
    WORKER_STATS(SNAP)
}

void stats_snap_accept(struct accept_stats *dst, const struct accept_stats *src)
{
    ACCEPT_STATS(SNAP)
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
