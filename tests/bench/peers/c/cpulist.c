/* cpulist: the CPU lists of the peers' command lines (0-7, 0,2,4-6), as taskset writes them. */
#include "cpulist.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cpulist_parse(const char *who, const char *s, int *cpus, int max)
{
    const char *list = s;
    cpu_set_t allowed;
    int n = 0;

    if (sched_getaffinity(0, sizeof(allowed), &allowed)) {
        fprintf(stderr, "%s: sched_getaffinity: %s\n", who, strerror(errno));
        return -1;
    }
    while (*s) {
        char *end;
        long lo = strtol(s, &end, 10), hi = lo;
        if (end == s || lo < 0)
            goto bad;
        if (*end == '-') {
            s = end + 1;
            hi = strtol(s, &end, 10);
            if (end == s || hi < lo)
                goto bad;
        }
        for (long c = lo; c <= hi; c++) {
            if (c >= CPU_SETSIZE || !CPU_ISSET((int)c, &allowed)) {
                fprintf(stderr,
                        "%s: CPU %ld is not in this process's affinity mask: pin only to CPUs "
                        "that taskset gave it\n",
                        who, c);
                return -1;
            }
            if (n == max) {
                fprintf(stderr, "%s: more than %d CPUs in '%s'\n", who, max, list);
                return -1;
            }
            cpus[n++] = (int)c;
        }
        if (*end == ',' && end[1])
            end++;
        else if (*end)
            goto bad;
        s = end;
    }
    if (n == 0)
        goto bad;
    return n;
bad:
    fprintf(stderr, "%s: CPU list '%s': want CPUs like 0-7 or 0,2,4-6\n", who, list);
    return -1;
}
