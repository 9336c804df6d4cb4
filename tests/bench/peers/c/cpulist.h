/* cpulist: the CPU lists of the peers' command lines (0-7, 0,2,4-6), as taskset writes them. */
#ifndef LFE_CPULIST_H
#define LFE_CPULIST_H

/* Parses s into cpus[] (at most max, in the order written). Every CPU must be in the affinity
 * mask the process started with: a thread pinned outside the set taskset gave would run on the
 * load generator's CPUs and make the figures wrong. Returns the count (> 0), or -1 after one
 * line on stderr starting with who (the program's name) that says what is wrong. */
int cpulist_parse(const char *who, const char *s, int *cpus, int max);

#endif
