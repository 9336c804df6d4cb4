/* btune: `lfbench tune`, kernel settings measured against a workload: each variant in a network
 * namespace of its own, rounds interleaved, a verdict per key with its interval. The wing's
 * files: btune.c (the command line, the plan of variants, the run), btune_ns.c (namespaces and
 * their processes), btune_stat.c (the statistics), btune_out.c (text, --json, --plot). */
#ifndef LFE_BTUNE_H
#define LFE_BTUNE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "bcount.h"
#include "btune_ns.h"
#include "btune_stat.h"
#include "kstat.h"

#define BTUNE_MAX_KEYS 32  /* keys of --set, or of a --sysctl-conf file */
#define BTUNE_MAX_VALUES 8 /* values of one --set */
#define BTUNE_MAX_VARIANTS 40
#define BTUNE_MAX_ROUNDS 100
#define BTUNE_MAX_LOAD 64 /* words after -- */

/* What the rounds are judged on. */
enum btune_metric { BTUNE_RATE, BTUNE_P50, BTUNE_P99, BTUNE_CPU };
extern const char *const btune_metric_name[];

/* The command line of lfbench tune. Strings point into argv. */
/* One --set KEY=V1,V2,... */
struct btune_setopt {
    const char *key;
    char text[512];                     /* the key, a NUL, its values split at the commas */
    const char *vals[BTUNE_MAX_VALUES]; /* "default": what a fresh namespace holds */
    int nvals;
};

struct btune_opt {
    struct btune_setopt set[BTUNE_MAX_KEYS];
    int nset;
    const char *conf; /* --sysctl-conf FILE; NULL with --set (neither: the built-in one) */
    int rounds;
    bool rounds_given; /* --rounds N; otherwise the fewest for the level asked (btune_levels) */
    double round_s;
    const char *server;      /* --server 'CMD {port}', or NULL: lfepolld */
    const char *server_args; /* --server-args, for lfepolld */
    int port;
    double alpha;     /* 1 - --confidence: for all the verdicts of a run together */
    bool per_variant; /* --per-variant: alpha is each verdict's alone (no correction) */
    enum btune_metric metric;
    const char *json, *plot;
    bool quiet;
    bool host;                /* --host: host-wide keys set on the host for their rounds */
    const char *restore_file; /* --restore-file: sysrestore's record (SYSRESTORE_RUN_PATH) */
    const char *write_sysctl; /* --write-sysctl FILE: the keys that helped, as sysctl.d */
    bool force;               /* --force: --write-sysctl over a file it did not write */
    char **argv;              /* the command line, for the file's header */
    int argc;
    char **load; /* the load's options, after -- */
    int nload;
};

/* Parses argv (argv[0] is "tune"). Returns 0 to run, 1 when --help was printed on out, -1 with
 * one line in err. Pure: checks the words, not the kernel. */
int btune_parse(int argc, char **argv, struct btune_opt *o, FILE *out, char *err, size_t errlen);

/* Whether key is a sysctl name: dotted words of letters, digits, '_' and '-' (no '/', no empty
 * word: it becomes a path under /proc/sys). Pure. */
bool btune_key_ok(const char *key);

/* A key's scope by name alone, where this build knows it without asking the kernel: true for
 * the host-wide ones (fs.*, kernel.*, vm.*, and the net.* keys of one value for the machine:
 * net.core.netdev_max_backlog, rmem/wmem max and default, busy_poll/busy_read, tcp_mem, ...).
 * Pure. */
bool btune_host_wide(const char *key);

/* One variant: the values written in its namespace. */
struct btune_variant {
    char name[240];  /* "net.ipv4.tcp_tw_reuse=2", "baseline", "all of sysctl.conf" */
    const char *key; /* the one key it changes against the baseline; NULL for those two */
    char value[128]; /* that key's value */
    struct btune_kv set[BTUNE_MAX_KEYS]; /* written in its namespace */
    int nset;
    struct btune_kv host[BTUNE_MAX_KEYS]; /* --host: set on the host for its rounds */
    int nhost;
};

/* One round of one variant. */
struct btune_round {
    bool ok;         /* measured (false: not run, interrupted) */
    bool short_mode; /* the load was --mode short: a response is a connection */
    double seconds;  /* the measured window */
    uint64_t requests, connects;
    double rate; /* responses per second (a short connection's: connections per second) */
    double p50_us, p99_us;
    double cli_us, srv_us; /* CPU per request: lfbench's (its --json), the server's (/proc) */
    uint64_t errors[ERR_KINDS];
    struct kstat kd; /* the namespace's counters over the load */
};

/* A verdict on one variant against the baseline. */
struct btune_judged {
    struct btune_ci ci;
    enum btune_verdict v;
    int pairs_dropped; /* rounds without a figure on either side (no response) */
};

/* The whole run. */
struct btune {
    struct btune_opt o;
    struct btune_variant var[BTUNE_MAX_VARIANTS];
    int nvar;                                    /* var[0] is the baseline */
    struct btune_round (*r)[BTUNE_MAX_VARIANTS]; /* r[round][variant], o.rounds of them */
    struct btune_judged j[BTUNE_MAX_VARIANTS];
    double alpha_each;     /* each verdict's 1 - level: o.alpha / (nvar - 1), or o.alpha */
    char server_desc[512]; /* the server command, {port} filled in */
    const char *source;    /* "--set", or the --sysctl-conf file's name */
};

/* Each verdict's level, once the variants are known: with k variants against the baseline,
 * o.alpha / k (Bonferroni: all k verdicts together say an effect that is not there with
 * probability o.alpha at most, whatever ties them), or o.alpha alone with --per-variant; and,
 * without --rounds, the fewest rounds that make an interval at that level. */
void btune_levels(struct btune *t);

/* The figure a round is judged on, and whether more is better. */
double btune_figure(const struct btune_round *r, enum btune_metric m);
bool btune_more_is_better(enum btune_metric m);

/* Judges every variant against var[0]. */
void btune_judge_all(struct btune *t);

/* The report: the rounds, then a verdict per variant with the counters that moved with it. */
void btune_print(FILE *f, const struct btune *t);

/* --json. Returns 0 or -errno. */
int btune_write_json(FILE *f, const struct btune *t);

/* --write-sysctl: the variants of one key with their verdicts, as tunewrite's file. Returns
 * the keys written, or -1 with one line in err. */
int btune_write_sysctl(const struct btune *t, char *err, size_t errlen);

/* --plot FILE: the median figure per variant with its interval, drawn by gnuplot ($GNUPLOT).
 * Returns 0, or -1 with one line in err. */
int btune_plot(const struct btune *t, const char *path, char *err, size_t errlen);

/* The `tune` subcommand: argv[0] is "tune". Returns the exit status: 0 measured, 1 a run that
 * failed (the server, the load, the kernel refused a value; said on stderr), 2 bad usage, 130
 * interrupted. */
int btune_main(int argc, char **argv);

#endif /* LFE_BTUNE_H */
