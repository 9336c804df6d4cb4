/* report: what the running pool tells the outside: counters, /metrics, health. */
#ifndef LFE_REPORT_H
#define LFE_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct server;

/* Prints counters: one line per worker, per group (with its accepted and live connections) and
 * in total, plus the accept thread's. Safe while the server runs. */
void report_print_stats(struct server *s, FILE *f);

/* Workers that have been inside one batch of events (a callback, say) for longer than limit_ms
 * now: 0 while every worker comes back in time. Reads only atomics the workers store (no lock,
 * nothing written): safe from any thread while the server runs. */
int report_stalled(struct server *s, long limit_ms);

/* Live connections now. Any thread. */
long report_live(struct server *s);

/* Whether a load balancer should send traffic here: true while serving; false, with the reason
 * in why, while draining or while report_stalled(s, stall_ms) is non-zero. Any thread. */
bool report_healthy(struct server *s, long stall_ms, char *why, size_t len);

/* Writes every counter, live count and service-time histogram in the Prometheus text format
 * (metrics.h), plus the process's own figures. Reads only what the threads publish: no lock on
 * their path. Any thread, while the server runs. */
void report_write_metrics(struct server *s, FILE *f);

#endif /* LFE_REPORT_H */
