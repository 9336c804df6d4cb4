/* metrics: the Prometheus text exposition format (0.0.4), written to a stdio stream. */
#include "metrics.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

void metrics_family(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s ", name);
    /* The format escapes only these two in HELP text. */
    for (const char *p = help; *p; p++) {
        if (*p == '\\')
            fputs("\\\\", f);
        else if (*p == '\n')
            fputs("\\n", f);
        else
            fputc(*p, f);
    }
    fprintf(f, "\n# TYPE %s %s\n", name, type);
}

static void head(FILE *f, const char *name, const char *labels)
{
    if (labels && *labels)
        fprintf(f, "%s{%s} ", name, labels);
    else
        fprintf(f, "%s ", name);
}

void metrics_u64(FILE *f, const char *name, const char *labels, uint64_t v)
{
    head(f, name, labels);
    fprintf(f, "%" PRIu64 "\n", v);
}

void metrics_double(FILE *f, const char *name, const char *labels, double v)
{
    head(f, name, labels);
    fprintf(f, "%.17g\n", v);
}

void metrics_svc(FILE *f, const char *name, const char *labels, const struct svc_hist *h)
{
    const char *sep = labels && *labels ? "," : "";
    uint64_t cum = 0;

    if (!labels)
        labels = "";
    for (int i = 0; i < SVC_BUCKETS; i++) {
        cum += h->count[i];
        if (i < SVC_BUCKETS - 1)
            fprintf(f, "%s_bucket{%s%sle=\"%g\"} %" PRIu64 "\n", name, labels, sep,
                    (double)svc_bounds_ns[i] / 1e9, cum);
        else
            fprintf(f, "%s_bucket{%s%sle=\"+Inf\"} %" PRIu64 "\n", name, labels, sep, cum);
    }
    fprintf(f, "%s_sum%s%s%s %.9f\n", name, *labels ? "{" : "", labels, *labels ? "}" : "",
            (double)h->sum_ns / 1e9);
    fprintf(f, "%s_count%s%s%s %" PRIu64 "\n", name, *labels ? "{" : "", labels, *labels ? "}" : "",
            cum);
}

/* Reads a small /proc file whole into buf. Returns its length, or -1. */
static long slurp(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "re");
    size_t n;

    if (!f)
        return -1;
    n = fread(buf, 1, len - 1, f);
    fclose(f);
    buf[n] = '\0';
    return (long)n;
}

int metrics_process(FILE *f, const char *proc_pid, const char *proc_stat)
{
    char path[256], buf[4096];
    const char *p;
    int n = 0;
    long tck = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
    struct rlimit rl;
    DIR *d;

    snprintf(path, sizeof(path), "%s/stat", proc_pid);
    /* The command name (field 2) may hold spaces and ')': the fields resume after the last ')'. */
    if (slurp(path, buf, sizeof(buf)) > 0 && (p = strrchr(buf, ')'))) {
        unsigned long long utime, stime, start, vsize;
        long long rss;

        /* After ") ": state(3) ... utime(14) stime(15) ... starttime(22) vsize(23) rss(24). */
        if (sscanf(p + 2,
                   "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d "
                   "%llu %llu %lld",
                   &utime, &stime, &start, &vsize, &rss) == 5 &&
            tck > 0) {
            char st[8192];
            const char *bt;

            metrics_family(f, "process_cpu_seconds_total", "counter",
                           "Total user and system CPU time spent in seconds.");
            metrics_double(f, "process_cpu_seconds_total", NULL, (double)(utime + stime) / tck);
            metrics_family(f, "process_virtual_memory_bytes", "gauge",
                           "Virtual memory size in bytes.");
            metrics_u64(f, "process_virtual_memory_bytes", NULL, vsize);
            metrics_family(f, "process_resident_memory_bytes", "gauge",
                           "Resident memory size in bytes.");
            metrics_u64(f, "process_resident_memory_bytes", NULL,
                        rss > 0 ? (uint64_t)rss * (uint64_t)page : 0);
            n += 3;
            if (slurp(proc_stat, st, sizeof(st)) > 0 && (bt = strstr(st, "\nbtime "))) {
                metrics_family(f, "process_start_time_seconds", "gauge",
                               "Start time of the process since unix epoch in seconds.");
                metrics_double(f, "process_start_time_seconds", NULL,
                               strtod(bt + 7, NULL) + (double)start / tck);
                n++;
            }
        }
    }
    snprintf(path, sizeof(path), "%s/fd", proc_pid);
    if ((d = opendir(path))) {
        struct dirent *e;
        uint64_t fds = 0;

        while ((e = readdir(d)))
            if (e->d_name[0] != '.')
                fds++;
        closedir(d);
        /* Our own: the directory stream holds one while it is read. */
        if (fds && strcmp(proc_pid, "/proc/self") == 0)
            fds--;
        metrics_family(f, "process_open_fds", "gauge", "Number of open file descriptors.");
        metrics_u64(f, "process_open_fds", NULL, fds);
        n++;
    }
    if (strcmp(proc_pid, "/proc/self") == 0 && getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        metrics_family(f, "process_max_fds", "gauge", "Maximum number of open file descriptors.");
        metrics_u64(f, "process_max_fds", NULL,
                    rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_cur);
        n++;
    }
    return n;
}
