/* topo: CPU topology from sysfs and the plan that maps epoll groups and workers onto CPUs. */
#ifndef LFE_TOPO_H
#define LFE_TOPO_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>

/* What /sys/devices/system/cpu says about the online CPUs. */
struct topo {
    cpu_set_t online;      /* CPUs listed in <root>/online */
    int core[CPU_SETSIZE]; /* topology/core_id, or the CPU number when unknown */
    int pkg[CPU_SETSIZE];  /* topology/physical_package_id, or 0 when unknown */
};

/* Which CPUs each group's workers run on. */
struct plan {
    int ngroups;     /* epoll groups */
    int *nworkers;   /* ngroups counts: worker threads per group */
    bool pin;        /* false: --no-pin, no affinity call is made */
    cpu_set_t *cpus; /* ngroups sets */
    /* nworkers and cpus are owned by the plan, freed by plan_free(). */
};

/* Parses a kernel CPU list ("0-3,8,10-11") into *set. Returns 0, or -EINVAL for anything else
 * (empty, garbage, reversed range, a CPU >= CPU_SETSIZE). */
int cpulist_parse(const char *s, cpu_set_t *set);

/* Writes set as a kernel CPU list ("0-3,8") into buf (always NUL-terminated). */
void cpulist_format(const cpu_set_t *set, char *buf, size_t len);

/* Reads <root>/online and each online CPU's topology/{core_id,physical_package_id}; root is
 * normally "/sys/devices/system/cpu". A CPU without topology files counts as its own core.
 * Returns 0, or -errno when <root>/online cannot be read or parsed. */
int topo_read(const char *root, struct topo *t);

/* Builds the plan. usable = online & allowed (& want when want is not NULL: --cpus).
 * Default (groups == workers == 0): one worker per usable CPU, in groups of up to
 * PLAN_GROUP_CPUS CPUs that share physical cores (each group gets as many workers as CPUs).
 * Given groups only, the same with that many groups; given workers (per group), groups default
 * to usable CPUs / workers. The first groups*workers CPUs
 * in "one hyperthread per physical core first, then the siblings" order are used; each group
 * takes a contiguous run of them, siblings together. Returns 0, or -EINVAL with a one-line
 * reason in err (a CPU in want that is offline or outside the affinity mask, no usable CPU).
 * On success the caller owns p and frees it with plan_free(). */
int plan_make(const struct topo *t, const cpu_set_t *allowed, const cpu_set_t *want, int groups,
              int workers, bool pin, struct plan *p, char *err, size_t errlen);

/* Largest group the default plan builds, in CPUs (see README: "Choosing G and W"). */
#define PLAN_GROUP_CPUS 4

void plan_free(struct plan *p);

#endif /* LFE_TOPO_H */
