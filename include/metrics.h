/* metrics: the Prometheus text exposition format (0.0.4), written to a stdio stream. Pure text
 * and /proc reads: no socket, no thread of its own, so it is unit-tested on its own. */
#ifndef LFE_METRICS_H
#define LFE_METRICS_H

#include <stdint.h>
#include <stdio.h>

#include "stats.h"

/* The Content-Type a scrape answer carries. */
#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* "# HELP name help" (backslash and newline escaped) and "# TYPE name type". */
void metrics_family(FILE *f, const char *name, const char *type, const char *help);

/* One sample: "name{labels} value"; labels is the inside of the braces ("group=\"0\""), or NULL
 * or "" for none. Integers are written exactly (a double would round past 2^53). */
void metrics_u64(FILE *f, const char *name, const char *labels, uint64_t v);
void metrics_double(FILE *f, const char *name, const char *labels, double v);

/* A histogram's samples from h: name_bucket{labels,le="..."} cumulative for every bound and
 * +Inf, then name_sum (seconds) and name_count (the +Inf bucket). The family line is the
 * caller's. */
void metrics_svc(FILE *f, const char *name, const char *labels, const struct svc_hist *h);

/* The standard process_* families (resident and virtual memory, open and maximum descriptors,
 * CPU seconds, start time) of the process whose /proc directory is proc_pid ("/proc/self"),
 * using proc_stat ("/proc/stat") for the boot time. A file that cannot be read leaves its
 * families out. Returns the number of families written. */
int metrics_process(FILE *f, const char *proc_pid, const char *proc_stat);

#endif /* LFE_METRICS_H */
