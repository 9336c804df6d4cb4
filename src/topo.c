/* topo: CPU topology from sysfs and the plan that maps epoll groups and workers onto CPUs. */
#include "topo.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cpulist_parse(const char *s, cpu_set_t *set)
{
    CPU_ZERO(set);
    if (!s || !*s)
        return -EINVAL;
    while (*s) {
        char *end;
        long lo, hi;

        if (*s < '0' || *s > '9')
            return -EINVAL;
        lo = strtol(s, &end, 10);
        hi = lo;
        if (*end == '-') {
            s = end + 1;
            if (*s < '0' || *s > '9')
                return -EINVAL;
            hi = strtol(s, &end, 10);
        }
        if (lo < 0 || hi < lo || hi >= CPU_SETSIZE)
            return -EINVAL;
        for (long c = lo; c <= hi; c++)
            CPU_SET((int)c, set);
        s = end;
        if (*s == ',')
            s++;
        else if (*s == '\n' && s[1] == '\0') /* sysfs files end in a newline */
            break;
        else if (*s)
            return -EINVAL;
    }
    return CPU_COUNT(set) ? 0 : -EINVAL;
}

void cpulist_format(const cpu_set_t *set, char *buf, size_t len)
{
    size_t n = 0;

    buf[0] = '\0';
    for (int c = 0; c < CPU_SETSIZE && n < len; c++) {
        int e = c;
        int w;

        if (!CPU_ISSET(c, set))
            continue;
        while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, set))
            e++;
        if (e == c)
            w = snprintf(buf + n, len - n, "%s%d", n ? "," : "", c);
        else
            w = snprintf(buf + n, len - n, "%s%d-%d", n ? "," : "", c, e);
        if (w < 0)
            break;
        n += (size_t)w;
        c = e;
    }
}

/* Reads one small sysfs file into buf; returns 0 or -errno. */
static int read_small(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "re");
    size_t n;

    if (!f)
        return -errno;
    n = fread(buf, 1, len - 1, f);
    fclose(f);
    buf[n] = '\0';
    return n ? 0 : -EINVAL;
}

static int read_int(const char *path, int *out)
{
    char buf[32], *end;
    long v;

    if (read_small(path, buf, sizeof(buf)) < 0)
        return -ENOENT;
    v = strtol(buf, &end, 10);
    if (end == buf || v < INT_MIN || v > INT_MAX)
        return -EINVAL;
    *out = (int)v;
    return 0;
}

int topo_read(const char *root, struct topo *t)
{
    char path[PATH_MAX], buf[4096];
    int rc;

    snprintf(path, sizeof(path), "%s/online", root);
    rc = read_small(path, buf, sizeof(buf));
    if (rc < 0)
        return rc;
    if (cpulist_parse(buf, &t->online) < 0)
        return -EINVAL;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        t->core[c] = c;
        t->pkg[c] = 0;
        if (!CPU_ISSET(c, &t->online))
            continue;
        snprintf(path, sizeof(path), "%s/cpu%d/topology/core_id", root, c);
        if (read_int(path, &t->core[c]) < 0)
            t->core[c] = c; /* no topology (some containers): its own core */
        snprintf(path, sizeof(path), "%s/cpu%d/topology/physical_package_id", root, c);
        if (read_int(path, &t->pkg[c]) < 0)
            t->pkg[c] = 0;
    }
    return 0;
}

/* A usable CPU with its place in the machine, for sorting. */
struct slot {
    int cpu, pkg, core, thread; /* thread: rank among the online siblings of its core */
};

static int by_spread(const void *a, const void *b)
{
    const struct slot *x = a, *y = b;

    if (x->thread != y->thread)
        return x->thread - y->thread; /* one hyperthread per core before any sibling */
    if (x->pkg != y->pkg)
        return x->pkg - y->pkg;
    if (x->core != y->core)
        return x->core - y->core;
    return x->cpu - y->cpu;
}

static int by_core(const void *a, const void *b)
{
    const struct slot *x = a, *y = b;

    if (x->pkg != y->pkg)
        return x->pkg - y->pkg; /* siblings adjacent: a group shares cores and caches */
    if (x->core != y->core)
        return x->core - y->core;
    return x->cpu - y->cpu;
}

int plan_make(const struct topo *t, const cpu_set_t *allowed, const cpu_set_t *want, int groups,
              int workers, bool pin, struct plan *p, char *err, size_t errlen)
{
    struct slot *s;
    cpu_set_t usable;
    int n = 0, used;
    char list[256];

    memset(p, 0, sizeof(*p));
    CPU_AND(&usable, &t->online, allowed);
    if (want) {
        for (int c = 0; c < CPU_SETSIZE; c++) {
            if (!CPU_ISSET(c, want))
                continue;
            if (!CPU_ISSET(c, &t->online)) {
                cpulist_format(&t->online, list, sizeof(list));
                snprintf(err, errlen, "--cpus: CPU %d is not online (online CPUs: %s)", c, list);
                return -EINVAL;
            }
            if (!CPU_ISSET(c, allowed)) {
                cpulist_format(allowed, list, sizeof(list));
                snprintf(err, errlen,
                         "--cpus: CPU %d is outside this process's CPU affinity (allowed: %s); "
                         "pick CPUs from that list",
                         c, list);
                return -EINVAL;
            }
        }
        CPU_AND(&usable, &usable, want);
    }
    if (CPU_COUNT(&usable) == 0) {
        snprintf(err, errlen, "no usable CPU: the affinity mask and the online CPUs do not meet");
        return -EINVAL;
    }

    s = calloc((size_t)CPU_COUNT(&usable), sizeof(*s));
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &usable))
            continue;
        s[n] = (struct slot){.cpu = c, .pkg = t->pkg[c], .core = t->core[c]};
        for (int k = 0; k < c; k++)
            if (CPU_ISSET(k, &t->online) && t->pkg[k] == s[n].pkg && t->core[k] == s[n].core)
                s[n].thread++;
        n++;
    }

    if (groups <= 0 && workers <= 0)
        groups = (n + PLAN_GROUP_CPUS - 1) / PLAN_GROUP_CPUS;
    else if (groups <= 0)
        groups = n / workers > 0 ? n / workers : 1;

    p->ngroups = groups;
    p->pin = pin;
    p->cpus = calloc((size_t)groups, sizeof(*p->cpus));
    p->nworkers = calloc((size_t)groups, sizeof(*p->nworkers));
    if (!p->cpus || !p->nworkers) {
        free(s);
        plan_free(p);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }

    /* Take the CPUs in spread order, then lay the chosen ones out core by core so that each
     * group gets a contiguous run of siblings. Without --workers, every usable CPU is taken
     * and each group gets one worker per CPU of its run. */
    qsort(s, (size_t)n, sizeof(*s), by_spread);
    used = workers > 0 && groups * workers < n ? groups * workers : n;
    qsort(s, (size_t)used, sizeof(*s), by_core);
    for (int g = 0; g < groups; g++) {
        CPU_ZERO(&p->cpus[g]);
        if (groups <= used) {
            /* group g gets CPUs [lo, hi) of the used run, sizes differing by at most one */
            int lo = g * used / groups, hi = (g + 1) * used / groups;
            for (int i = lo; i < hi; i++)
                CPU_SET(s[i].cpu, &p->cpus[g]);
            p->nworkers[g] = workers > 0 ? workers : hi - lo;
        } else {
            CPU_SET(s[g % used].cpu, &p->cpus[g]); /* more groups than CPUs: share */
            p->nworkers[g] = workers > 0 ? workers : 1;
        }
    }
    free(s);
    return 0;
}

void plan_free(struct plan *p)
{
    free(p->cpus);
    free(p->nworkers);
    p->cpus = NULL;
    p->nworkers = NULL;
}
