/* report: what the running pool tells the outside: its counters (SIGUSR1, /stats), /metrics,
 * and whether it is healthy (stalled workers, draining), from what its threads publish. */
#include "report.h"

#include "metrics.h"
#include "pool.h"

#include <limits.h>
#include <stdint.h>
#include <time.h>

void report_print_stats(struct server *s, FILE *f)
{
    struct worker_stats total = {0};
    struct accept_stats acc = {0};
    char prefix[192], cpus[64];

    for (int gi = 0; gi < s->ngroups; gi++) {
        struct group *g = &s->groups[gi];
        struct worker_stats gs = {0};

        cpulist_format(&g->cpus, cpus, sizeof(cpus));
        for (int wi = 0; wi < g->nworkers; wi++) {
            struct worker_stats one = {0};

            stats_add_worker(&one, &g->workers[wi].st);
            stats_add_worker(&gs, &one);
            if (s->lua)
                snprintf(prefix, sizeof(prefix), "stats: worker %d.%d cpus=%s lua_kb=%zu:", gi, wi,
                         s->plan->pin ? cpus : "any", script_mem(g->workers[wi].script) >> 10);
            else
                snprintf(prefix, sizeof(prefix), "stats: worker %d.%d cpus=%s:", gi, wi,
                         s->plan->pin ? cpus : "any");
            stats_print_worker(f, prefix, &one);
        }
        snprintf(prefix, sizeof(prefix), "stats: group %d live=%ld dispatched=%llu:", gi,
                 __atomic_load_n(&g->live, __ATOMIC_RELAXED),
                 (unsigned long long)__atomic_load_n(&g->accepted, __ATOMIC_RELAXED));
        stats_print_worker(f, prefix, &gs);
        stats_add_worker(&total, &gs);
    }
    snprintf(prefix, sizeof(prefix),
             "stats: total live=%ld:", __atomic_load_n(&s->live, __ATOMIC_RELAXED));
    stats_print_worker(f, prefix, &total);
    for (int i = 0; i < s->nacc; i++) {
        struct accept_stats one = {0};

        stats_snap_accept(&one, &s->acc[i].st);
        if (s->nacc > 1) {
            snprintf(prefix, sizeof(prefix), "stats: accept thread %d:", i);
            stats_print_accept(f, prefix, &one);
        }
        stats_snap_accept(&acc, &one);
    }
    stats_print_accept(f, "stats: accept:", &acc);
    if (s->lua)
        script_env_print(s->lua, f);
    fflush(f);
}

int report_stalled(struct server *s, long limit_ms)
{
    struct timespec ts;
    int64_t now;
    int n = 0;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    now = ts.tv_sec * 1000000000LL + ts.tv_nsec;
    for (int gi = 0; gi < s->ngroups; gi++)
        for (int wi = 0; wi < s->groups[gi].nworkers; wi++) {
            struct worker *w = &s->groups[gi].workers[wi];

            long lim = limit_ms;

            /* A callback waiting in lfe.sleep or on a socket is not stuck: it may wait up to
             * --lua-wall-timeout-ms in all (no bound without it) */
            if (s->lua && script_waiting(w->script))
                lim = s->opt->lua_wall_ms > 0 ? s->opt->lua_wall_ms + limit_ms : LONG_MAX / 2000000;
            /* busy is stored after busy_since: a busy worker's start time is its own */
            if (__atomic_load_n(&w->busy, __ATOMIC_ACQUIRE) &&
                now - __atomic_load_n(&w->busy_since_ns, __ATOMIC_RELAXED) > lim * 1000000LL)
                n++;
        }
    return n;
}

long report_live(struct server *s)
{
    return __atomic_load_n(&s->live, __ATOMIC_RELAXED);
}

bool report_healthy(struct server *s, long stall_ms, char *why, size_t len)
{
    int n;

    if (__atomic_load_n(&s->draining, __ATOMIC_ACQUIRE)) {
        snprintf(why, len, "draining: stopping, not accepting");
        return false;
    }
    if ((n = report_stalled(s, stall_ms)) > 0) {
        snprintf(why, len, "%d worker%s inside one batch for more than %ld ms (a callback stuck?)",
                 n, n == 1 ? "" : "s", stall_ms);
        return false;
    }
    snprintf(why, len, "ok");
    return true;
}

#define W_FAMILY(name, help)                                                                       \
    metrics_family(f, "lfepolld_worker_" #name "_total", "counter", "Per worker: " help ".");      \
    for (int gi = 0; gi < s->ngroups; gi++)                                                        \
        for (int wi = 0; wi < s->groups[gi].nworkers; wi++) {                                      \
            snprintf(lab, sizeof(lab), "group=\"%d\",worker=\"%d\"", gi, wi);                      \
            metrics_u64(f, "lfepolld_worker_" #name "_total", lab,                                 \
                        __atomic_load_n(&s->groups[gi].workers[wi].st.name, __ATOMIC_RELAXED));    \
        }
#define A_FAMILY(name, help)                                                                       \
    metrics_family(f, "lfepolld_accept_" #name "_total", "counter",                                \
                   "Per accept thread: " help ".");                                                \
    for (int ti = 0; ti < s->nacc; ti++) {                                                         \
        snprintf(lab, sizeof(lab), "thread=\"%d\"", ti);                                           \
        metrics_u64(f, "lfepolld_accept_" #name "_total", lab,                                     \
                    __atomic_load_n(&s->acc[ti].st.name, __ATOMIC_RELAXED));                       \
    }

/* A family of one sample without labels: its HELP and TYPE lines, then the sample. */
static void metric_one(FILE *f, const char *name, const char *type, const char *help, uint64_t v)
{
    metrics_family(f, name, type, help);
    metrics_u64(f, name, NULL, v);
}

void report_write_metrics(struct server *s, FILE *f)
{
    char lab[64];

    metrics_family(f, "lfepolld_build_info", "gauge", "lfepolld's version; always 1.");
    fprintf(f, "lfepolld_build_info{version=\"%s\",mode=\"%s\"} 1\n", LFE_VERSION,
            s->lua ? "lua" : "echo");
    metrics_family(f, "lfepolld_connections", "gauge", "Live connections per epoll group.");
    for (int gi = 0; gi < s->ngroups; gi++) {
        snprintf(lab, sizeof(lab), "group=\"%d\"", gi);
        metrics_u64(f, "lfepolld_connections", lab,
                    (uint64_t)__atomic_load_n(&s->groups[gi].live, __ATOMIC_RELAXED));
    }
    metric_one(f, "lfepolld_connections_max", "gauge",
               "The live connection limit (--max-conns, or what RLIMIT_NOFILE leaves).",
               (uint64_t)s->max_conns);
    metric_one(f, "lfepolld_connections_pending_output", "gauge",
               "Connections with output waiting for the client to read it.",
               (uint64_t)__atomic_load_n(&s->npending, __ATOMIC_RELAXED));
    metrics_family(f, "lfepolld_group_dispatched_total", "counter",
                   "Connections the accept threads handed to each epoll group.");
    for (int gi = 0; gi < s->ngroups; gi++) {
        snprintf(lab, sizeof(lab), "group=\"%d\"", gi);
        metrics_u64(f, "lfepolld_group_dispatched_total", lab,
                    __atomic_load_n(&s->groups[gi].accepted, __ATOMIC_RELAXED));
    }
    metric_one(f, "lfepolld_draining", "gauge", "1 once a stop began (SIGTERM), else 0.",
               (uint64_t)__atomic_load_n(&s->draining, __ATOMIC_RELAXED));
    metric_one(f, "lfepolld_accept_paused", "gauge",
               "Accept threads paused (out of descriptors or memory): 0 to --accept-threads.",
               (uint64_t)__atomic_load_n(&s->accept_paused, __ATOMIC_RELAXED));
    {
        uint64_t busy = 0;

        for (int gi = 0; gi < s->ngroups; gi++)
            for (int wi = 0; wi < s->groups[gi].nworkers; wi++)
                busy +=
                    (uint64_t)__atomic_load_n(&s->groups[gi].workers[wi].busy, __ATOMIC_RELAXED);
        metric_one(f, "lfepolld_workers_busy", "gauge",
                   "Workers inside a batch of events at the moment of the scrape.", busy);
    }
    WORKER_STATS(W_FAMILY)
    ACCEPT_STATS(A_FAMILY)
    metrics_family(f, "lfepolld_service_seconds", "histogram",
                   "Per epoll group: time from the epoll_wait return that took an event to its "
                   "re-arm or close, seconds.");
    for (int gi = 0; gi < s->ngroups; gi++) {
        struct svc_hist h = {0};

        for (int wi = 0; wi < s->groups[gi].nworkers; wi++)
            stats_add_svc(&h, &s->groups[gi].workers[wi].svc);
        snprintf(lab, sizeof(lab), "group=\"%d\"", gi);
        metrics_svc(f, "lfepolld_service_seconds", lab, &h);
    }
    if (s->tls) {
        metrics_family(f, "lfepolld_tls_handshake_seconds", "histogram",
                       "Per epoll group: TLS handshakes finished, from their first step (the "
                       "first event of a handshaking connection) to the last, seconds.");
        for (int gi = 0; gi < s->ngroups; gi++) {
            struct svc_hist h = {0};

            for (int wi = 0; wi < s->groups[gi].nworkers; wi++)
                stats_add_svc(&h, &s->groups[gi].workers[wi].hs);
            snprintf(lab, sizeof(lab), "group=\"%d\"", gi);
            metrics_svc(f, "lfepolld_tls_handshake_seconds", lab, &h);
        }
    }
    if (s->lua) {
        metrics_family(f, "lfepolld_lua_memory_bytes", "gauge",
                       "Memory of each worker's Lua state, bytes.");
        for (int gi = 0; gi < s->ngroups; gi++)
            for (int wi = 0; wi < s->groups[gi].nworkers; wi++) {
                snprintf(lab, sizeof(lab), "group=\"%d\",worker=\"%d\"", gi, wi);
                metrics_u64(f, "lfepolld_lua_memory_bytes", lab,
                            script_mem(s->groups[gi].workers[wi].script));
            }
        script_env_metrics(s->lua, f);
    }
    metrics_process(f, "/proc/self", "/proc/stat");
}
