/* btune: `lfbench tune`: the command line, the plan of variants, and the rounds run in turn. */
#include "btune.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "bopt.h"
#include "result.h"
#include "sysrestore.h"
#include "tune.h"

const char *const btune_metric_name[] = {"rate", "p50", "p99", "cpu"};

static const char usage_text[] =
    "usage: lfbench tune [--set KEY=V1,V2,...]... | [--sysctl-conf FILE]\n"
    "                    [--rounds N] [--round-seconds S] [--confidence C] [--per-variant]\n"
    "                    [--metric M]\n"
    "                    [--server 'CMD ... {port}' | --server-args 'ARGS'] [--port N]\n"
    "                    [--json FILE] [--plot FILE.png] [--write-sysctl FILE [--force]]\n"
    "                    [--host [--restore-file FILE]] [-q] -- LOAD-OPTIONS\n"
    "\n"
    "Measures what kernel settings do to a workload. Each variant runs in a network namespace\n"
    "of its own (loopback up, the values written there, the server and the load started\n"
    "inside), one round of each in turn (A B C, B C A, ...), and each key gets a verdict: the\n"
    "median of its rounds' ratios to the baseline with a distribution-free interval (the sign\n"
    "test's), \"helps\", \"hurts\" or \"no measurable effect\", and the kernel counters that\n"
    "moved with it.\n"
    "Host-wide keys (net.core.netdev_max_backlog, rmem_max, fs.*...) cannot be isolated in a\n"
    "namespace: refused unless --host. Needs root (it makes network namespaces). Without\n"
    "--host nothing of the host is changed.\n"
    "\n"
    "  --set KEY=V1,V2,...  V1 is the baseline, each other value a variant (repeatable: each\n"
    "                       key alone against all at V1); 'default' is what a fresh namespace\n"
    "                       holds; KEY=V alone holds V in every variant. A value with blanks\n"
    "                       goes in quotes: '...=32768 60999,1024 65535'\n"
    "  --sysctl-conf FILE   ablation: each key of FILE alone against a fresh namespace's\n"
    "                       defaults, then all of them together (neither option: the\n"
    "                       sysctl.conf lfbench was built with)\n"
    "  --rounds N           rounds of every variant (default: the fewest for the intervals:\n"
    "                       6 for one variant at 95%, 9 for the built-in sysctl.conf's 7)\n"
    "  --round-seconds S    each round's load, lfbench -d (default 5)\n"
    "  --confidence C       0.5 to 0.999 (default 0.95): the chance that none of the run's\n"
    "                       verdicts says an effect that is not there is C or more; with K\n"
    "                       variants each interval is at 1 - (1 - C) / K (Bonferroni)\n"
    "  --per-variant        C is each verdict's level alone: fewer rounds, but on average\n"
    "                       up to K x (1 - C) of K verdicts name an effect that is not there\n"
    "  --metric M           what is judged: rate (responses/s, default), p50, p99, cpu (the\n"
    "                       server's CPU per request)\n"
    "  --server CMD         any server, run by /bin/sh in the namespace, {port} its port; it\n"
    "                       must stay in the foreground (a daemon: its no-daemon option)\n"
    "  --server-args ARGS   lfepolld's options besides --listen (default: none)\n"
    "  --port N             the port the server listens on in each namespace (default 9876)\n"
    "  --json FILE          every round and verdict as JSON\n"
    "  --plot FILE.png      the verdicts drawn by gnuplot\n"
    "  --host               also host-wide keys, set on the host for their rounds only: each\n"
    "                       old value recorded first (--restore-file), put back after the\n"
    "                       round, on SIGINT/SIGTERM, and at the next start after a crash\n"
    "  --restore-file FILE  that record (default " SYSRESTORE_RUN_PATH ")\n"
    "  --write-sysctl FILE  the keys that helped as a sysctl.d file, each with its figure\n"
    "  --force              write it over a file lfbench tune did not write\n"
    "  -q, --quiet          no progress line on stderr\n"
    "  -- LOAD-OPTIONS      lfbench's own options for the load (not -d, -n, --json or a\n"
    "                       target: each round gets -d S and 127.0.0.1:PORT)\n"
    "\n"
    "Exit status: 0 measured, 1 a run that failed (said on stderr), 2 bad usage, 130\n"
    "interrupted.\n";

enum {
    T_SET = 256,
    T_CONF,
    T_ROUNDS,
    T_SECONDS,
    T_CONF_LEVEL,
    T_EACH,
    T_METRIC,
    T_SERVER,
    T_SARGS,
    T_PORT,
    T_JSON,
    T_PLOT,
    T_HOST,
    T_RESTORE,
    T_WRITE,
    T_FORCE,
    T_HELP
};

static const struct option long_opts[] = {
    {"set", required_argument, NULL, T_SET},
    {"sysctl-conf", required_argument, NULL, T_CONF},
    {"rounds", required_argument, NULL, T_ROUNDS},
    {"round-seconds", required_argument, NULL, T_SECONDS},
    {"confidence", required_argument, NULL, T_CONF_LEVEL},
    {"per-variant", no_argument, NULL, T_EACH},
    {"metric", required_argument, NULL, T_METRIC},
    {"server", required_argument, NULL, T_SERVER},
    {"server-args", required_argument, NULL, T_SARGS},
    {"port", required_argument, NULL, T_PORT},
    {"json", required_argument, NULL, T_JSON},
    {"plot", required_argument, NULL, T_PLOT},
    {"host", no_argument, NULL, T_HOST},
    {"restore-file", required_argument, NULL, T_RESTORE},
    {"write-sysctl", required_argument, NULL, T_WRITE},
    {"force", no_argument, NULL, T_FORCE},
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, T_HELP},
    {NULL, 0, NULL, 0},
};

bool btune_key_ok(const char *key)
{
    size_t word = 0, n = 0;

    for (const char *p = key; *p; p++, n++) {
        if (*p == '.') {
            if (!word)
                return false;
            word = 0;
        } else if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                   (*p >= '0' && *p <= '9') || *p == '_' || *p == '-') {
            word++;
        } else {
            return false;
        }
    }
    return word > 0 && n < 96 && strchr(key, '.');
}

bool btune_host_wide(const char *key)
{
    /* The kernel registers these only in the initial namespace or shows them read-only in
     * others (net/core/sysctl_net_core.c net_core_table, net/ipv4/sysctl_net_ipv4.c
     * ipv4_table): one value for the machine. */
    static const char *const host[] = {
        "net.core.netdev_max_backlog", "net.core.rmem_max",      "net.core.wmem_max",
        "net.core.rmem_default",       "net.core.wmem_default",  "net.core.busy_poll",
        "net.core.busy_read",          "net.core.netdev_budget", "net.core.netdev_budget_usecs",
        "net.core.dev_weight",         "net.ipv4.tcp_mem",       "net.ipv4.udp_mem",
        "net.ipv4.tcp_max_orphans",    "net.core.default_qdisc", "net.core.rps_sock_flow_entries",
    };

    if (!strncmp(key, "fs.", 3) || !strncmp(key, "kernel.", 7) || !strncmp(key, "vm.", 3))
        return true;
    for (size_t i = 0; i < sizeof(host) / sizeof(host[0]); i++)
        if (!strcmp(key, host[i]))
            return true;
    return false;
}

/* --set KEY=V1,V2,...: each value at most 127 bytes, not empty. */
static int take_set(struct btune_opt *o, const char *arg, char *err, size_t errlen)
{
    const char *eq = strchr(arg, '=');
    struct btune_setopt *s;
    char *v;

    if (o->nset == BTUNE_MAX_KEYS) {
        snprintf(err, errlen, "--set: at most %d keys; run the rest in another lfbench tune",
                 BTUNE_MAX_KEYS);
        return -1;
    }
    s = &o->set[o->nset];
    if (!eq || eq == arg || (size_t)(eq - arg) >= 96) {
        snprintf(err, errlen, "--set '%.80s': write KEY=V1,V2,... (net.ipv4.tcp_tw_reuse=0,2)",
                 arg);
        return -1;
    }
    if (strlen(eq + 1) >= sizeof(s->text)) {
        snprintf(err, errlen, "--set %.*s: the values are over %zu bytes", (int)(eq - arg), arg,
                 sizeof(s->text) - 1);
        return -1;
    }
    memcpy(s->text, arg, (size_t)(eq - arg)); /* the key first, then its values after a NUL */
    s->text[eq - arg] = 0;
    s->key = s->text;
    v = s->text + (eq - arg) + 1;
    strcpy(v, eq + 1);
    if (!btune_key_ok(s->key)) {
        snprintf(err, errlen,
                 "--set: '%.96s' is not a sysctl name (dotted words: net.ipv4.tcp_tw_reuse)",
                 s->key);
        return -1;
    }
    for (int i = 0; i < o->nset; i++)
        if (!strcmp(o->set[i].key, s->key)) {
            snprintf(err, errlen, "--set %s is given twice: give its values in one --set", s->key);
            return -1;
        }
    for (char *save = NULL, *w = strtok_r(v, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
        if (s->nvals == BTUNE_MAX_VALUES || strlen(w) >= 128) {
            snprintf(err, errlen, "--set %s: at most %d values of under 128 bytes each", s->key,
                     BTUNE_MAX_VALUES);
            return -1;
        }
        s->vals[s->nvals++] = w;
    }
    if (!s->nvals) {
        snprintf(err, errlen, "--set %s= has no value: write %s=V1,V2,... (V alone: held at V)",
                 s->key, s->key);
        return -1;
    }
    o->nset++;
    return 0;
}

/* One option's value, checked. */
static int take(struct btune_opt *o, int c, const char *val, char *err, size_t errlen)
{
    long n;
    double d, ms;

    switch (c) {
    case T_SET:
        return take_set(o, val, err, errlen);
    case T_CONF:
        o->conf = val;
        return 0;
    case T_ROUNDS:
        if (args_whole(val, 1, BTUNE_MAX_ROUNDS, &n) == 0)
            return o->rounds = (int)n, o->rounds_given = true, 0;
        snprintf(err, errlen, "--rounds: '%.40s' is not a whole number of 1 to %d", val,
                 BTUNE_MAX_ROUNDS);
        return -1;
    case T_SECONDS:
        if (args_duration_ms(val, 1000, &ms) == 0 && ms >= 1000 && ms <= 3600000)
            return o->round_s = ms / 1000, 0;
        snprintf(err, errlen, "--round-seconds: '%.40s' is not 1 s to 1 h (5, 2.5s, 1m)", val);
        return -1;
    case T_CONF_LEVEL:
        if (args_num(val, 0.5, 0.999, &d) == 0)
            return o->alpha = 1 - d, 0;
        snprintf(err, errlen, "--confidence: '%.40s' is not 0.5 to 0.999 (0.95: a 95%% interval)",
                 val);
        return -1;
    case T_EACH:
        return o->per_variant = true, 0;
    case T_METRIC:
        for (int m = 0; m <= BTUNE_CPU; m++)
            if (!strcmp(val, btune_metric_name[m]))
                return o->metric = (enum btune_metric)m, 0;
        snprintf(err, errlen, "--metric: '%.40s' is not rate, p50, p99 or cpu", val);
        return -1;
    case T_PORT:
        if (args_whole(val, 1, 65535, &n) == 0)
            return o->port = (int)n, 0;
        snprintf(err, errlen, "--port: '%.40s' is not a port of 1 to 65535", val);
        return -1;
    case T_SERVER:
        return o->server = val, 0;
    case T_SARGS:
        return o->server_args = val, 0;
    case T_JSON:
        return o->json = val, 0;
    case T_PLOT:
        return o->plot = val, 0;
    case 'q':
        return o->quiet = true, 0;
    case T_HOST:
        return o->host = true, 0;
    case T_RESTORE:
        return o->restore_file = val, 0;
    case T_WRITE:
        return o->write_sysctl = val, 0;
    case T_FORCE:
        return o->force = true, 0;
    }
    snprintf(err, errlen, "unknown option; see lfbench tune --help");
    return -1;
}

/* The checks of one option against another. */
static int check(struct btune_opt *o, char *err, size_t errlen)
{
    static const char *const owned[] = {"-d",     "--duration",    "-n",        "--requests",
                                        "--json", "--json-stream", "--hdr-log", NULL};

    if (o->nset && o->conf) {
        snprintf(err, errlen, "--set and --sysctl-conf are two experiments: give one of them");
        return -1;
    }
    if (o->nset) {
        int varied = 0;
        for (int i = 0; i < o->nset; i++)
            varied += o->set[i].nvals > 1;
        if (!varied) {
            snprintf(err, errlen,
                     "--set %s=%s holds one value in every variant: nothing is compared; give a "
                     "key two values or more, the baseline first (%s=default,%s)",
                     o->set[0].key, o->set[0].vals[0], o->set[0].key, o->set[0].vals[0]);
            return -1;
        }
    }
    if (o->server && o->server_args) {
        snprintf(err, errlen,
                 "--server-args is for lfepolld; with --server put the options in "
                 "its command");
        return -1;
    }
    if (o->force && !o->write_sysctl) {
        snprintf(err, errlen, "--force is for --write-sysctl: give the file to write");
        return -1;
    }
    if (!o->nload) {
        snprintf(err, errlen,
                 "no load: give lfbench's load options after -- (-- --mode short -c 50)");
        return -1;
    }
    for (int i = 0; i < o->nload; i++)
        for (int k = 0; owned[k]; k++) {
            size_t n = strlen(owned[k]);
            if (!strncmp(o->load[i], owned[k], n) &&
                (o->load[i][n] == 0 || o->load[i][n] == '=' || (n == 2 && o->load[i][n])))
                return snprintf(err, errlen,
                                "the load options after -- may not hold %s: lfbench tune gives "
                                "each round -d (--round-seconds) and its own --json",
                                owned[k]),
                       -1;
        }
    return 0;
}

int btune_parse(int argc, char **argv, struct btune_opt *o, FILE *out, char *err, size_t errlen)
{
    int c, dash = argc;

    memset(o, 0, sizeof(*o));
    o->rounds = 6;
    o->round_s = 5;
    o->alpha = 0.05;
    o->port = 9876;
    o->restore_file = SYSRESTORE_RUN_PATH;
    o->argv = argv;
    o->argc = argc;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--")) {
            dash = i;
            break;
        }
    optind = 0; /* glibc: a fresh scan */
    opterr = 0;
    while ((c = getopt_long(dash, argv, "+:q", long_opts, NULL)) != -1) {
        if (c == '?' || c == ':') {
            snprintf(err, errlen,
                     c == ':' ? "%.40s needs a value; see lfbench tune --help"
                              : "unknown option '%.40s'; see lfbench tune --help",
                     argv[optind - 1]);
            return -1;
        }
        if (c == T_HELP) {
            fputs(usage_text, out);
            return 1;
        }
        if (take(o, c, optarg, err, errlen) < 0)
            return -1;
    }
    if (optind < dash) {
        snprintf(err, errlen,
                 "'%.60s' is not an option of lfbench tune: the load's options go "
                 "after --",
                 argv[optind]);
        return -1;
    }
    o->load = argv + dash + (dash < argc);
    o->nload = argc - dash - (dash < argc);
    if (o->nload > BTUNE_MAX_LOAD) {
        snprintf(err, errlen, "more than %d words after --", BTUNE_MAX_LOAD);
        return -1;
    }
    return check(o, err, errlen);
}

/* --- the plan: which keys, which variants ------------------------------------------------- */

/* A key of the experiment, and what the kernel and sysctl.conf say of it. */
struct key_info {
    const char *key;
    bool conf_host;       /* sysctl.conf's scope line says host */
    struct btune_kv ns;   /* a fresh namespace's access and value */
    char host;            /* the host's access */
    char host_value[128]; /* what the host holds now */
    bool on_host;         /* --host: set on the host for its rounds */
    const char *value;    /* --sysctl-conf: the file's value */
};

/* Why key cannot be run, or NULL when it can (words for one line); a host-wide key runs on the
 * host with --host. */
static const char *refusal(struct key_info *k, bool host, char *buf, size_t len)
{
    if (k->ns.access == '-' && k->host == '-')
        snprintf(buf, len,
                 "unknown key %s: no /proc/sys entry of that name on this kernel "
                 "(sysctl -a lists them)",
                 k->key);
    else if (k->ns.access != 'w' && k->host != 'w')
        snprintf(buf, len, "%s is read-only: the kernel reports it, nobody sets it", k->key);
    else if ((k->conf_host || btune_host_wide(k->key) || k->ns.access != 'w') && !host)
        snprintf(buf, len,
                 "%s is host-wide: a network namespace cannot isolate it; give --host to run it "
                 "on the host in turns (put back after each round, at exit, after a crash)",
                 k->key);
    else if (k->conf_host || btune_host_wide(k->key) || k->ns.access != 'w')
        return k->on_host = true, NULL;
    else
        return NULL;
    return buf;
}

/* What "default" means for k: a fresh namespace's value, or the host's for a host-wide key. */
static const char *default_of(const struct key_info *k)
{
    return k->on_host ? k->host_value : k->ns.value;
}

/* Reads the keys' state in a fresh namespace and on the host. */
static int probe(struct key_info *k, int n, char *err, size_t errlen)
{
    struct btune_kv get[BTUNE_MAX_KEYS];
    struct btune_ns ns;

    for (int i = 0; i < n; i++) {
        memset(&get[i], 0, sizeof(get[i]));
        get[i].key = k[i].key;
    }
    if (btune_ns_open(&ns, NULL, 0, get, n, err, errlen) < 0)
        return -1;
    btune_ns_close(&ns);
    for (int i = 0; i < n; i++) {
        k[i].ns = get[i];
        k[i].host = btune_ns_access(k[i].key);
        if (k[i].host == '-' ||
            tune_read("/proc/sys", k[i].key, k[i].host_value, sizeof(k[i].host_value)) < 0)
            strcpy(k[i].host_value, "-");
    }
    return 0;
}

/* dst = src, cut to len - 1 bytes; the two may overlap. */
static void copy_str(char *dst, size_t len, const char *src)
{
    size_t n = strnlen(src, len - 1);

    memmove(dst, src, n);
    dst[n] = 0;
}

/* Adds key = value to what v writes: in its namespace, or on the host (--host). */
static void add_kv(struct btune_variant *v, bool on_host, const char *key, const char *value)
{
    struct btune_kv *kv = on_host ? &v->host[v->nhost++] : &v->set[v->nset++];

    kv->key = key;
    copy_str(kv->value, sizeof(kv->value), value);
}

/* v's name: "KEY=VALUE" of the one key it changes. */
static void name_one(struct btune_variant *v, const char *value)
{
    size_t a = strnlen(v->key, 95);

    copy_str(v->value, sizeof(v->value), value);
    memcpy(v->name, v->key, a);
    v->name[a] = '=';
    copy_str(v->name + a + 1, sizeof(v->name) - a - 1, v->value);
}

/* --set: the baseline is every key at its first value; a variant is one key at another. */
static int plan_set(struct btune *t, struct key_info *k, char *err, size_t errlen)
{
    struct btune_opt *o = &t->o;
    struct btune_variant *b = &t->var[0];
    char buf[320];
    size_t at;

    for (int i = 0; i < o->nset; i++)
        if (refusal(&k[i], o->host, buf, sizeof(buf)))
            return snprintf(err, errlen, "%s", buf), -1;
    at = (size_t)snprintf(b->name, sizeof(b->name), "baseline");
    for (int i = 0; i < o->nset; i++) {
        bool dflt = !strcmp(o->set[i].vals[0], "default");
        const char *v0 = dflt ? default_of(&k[i]) : o->set[i].vals[0];
        if (!dflt)
            add_kv(b, k[i].on_host, o->set[i].key, v0);
        if (at < sizeof(b->name))
            at += (size_t)snprintf(b->name + at, sizeof(b->name) - at, "%s%s=%s", i ? ", " : " ",
                                   o->set[i].key, v0);
    }
    t->nvar = 1;
    for (int i = 0; i < o->nset; i++)
        for (int j = 1; j < o->set[i].nvals; j++) {
            struct btune_variant *v = &t->var[t->nvar];
            bool dflt = !strcmp(o->set[i].vals[j], "default");
            if (t->nvar == BTUNE_MAX_VARIANTS)
                return snprintf(err, errlen, "more than %d variants", BTUNE_MAX_VARIANTS), -1;
            v->key = o->set[i].key;
            name_one(v, dflt ? default_of(&k[i]) : o->set[i].vals[j]);
            for (int m = 0; m < o->nset; m++) {
                const char *val = m == i ? o->set[i].vals[j] : o->set[m].vals[0];
                if (strcmp(val, "default"))
                    add_kv(v, k[m].on_host, o->set[m].key, val);
            }
            t->nvar++;
        }
    return 0;
}

/* --sysctl-conf: the baseline is a fresh namespace; a variant is one key of the file, the last
 * all of them. Keys it cannot run, or that are the default already, are said and left out. */
static int plan_conf(struct btune *t, struct key_info *k, int n, FILE *notes, char *err,
                     size_t errlen)
{
    struct btune_variant *all = NULL;
    char buf[320];
    int used = 0;

    snprintf(t->var[0].name, sizeof(t->var[0].name), "baseline (a fresh namespace's defaults)");
    t->nvar = 1;
    for (int i = 0; i < n; i++) {
        struct btune_variant *v = &t->var[t->nvar];
        if (refusal(&k[i], t->o.host, buf, sizeof(buf))) {
            fprintf(notes, "lfbench tune: left out: %s\n", buf);
            continue;
        }
        if (!strcmp(default_of(&k[i]), k[i].value)) {
            fprintf(notes, "lfbench tune: left out: %s = %s is %s already\n", k[i].key, k[i].value,
                    k[i].on_host ? "the host's value" : "a fresh namespace's default");
            continue;
        }
        if (t->nvar == BTUNE_MAX_VARIANTS - 1)
            return snprintf(err, errlen, "more than %d keys to try", BTUNE_MAX_VARIANTS - 2), -1;
        v->key = k[i].key;
        name_one(v, k[i].value);
        add_kv(v, k[i].on_host, v->key, v->value);
        t->nvar++;
        used++;
    }
    if (!used)
        return snprintf(err, errlen, "%s: no key to try in a namespace (each is left out above)",
                        t->source),
               -1;
    if (used > 1) {
        all = &t->var[t->nvar++];
        snprintf(all->name, sizeof(all->name), "all %d keys together", used);
        for (int i = 1; i < t->nvar - 1; i++)
            add_kv(all, t->var[i].nhost > 0, t->var[i].key, t->var[i].value);
    }
    return 0;
}

/* --- the rounds ----------------------------------------------------------------------------- */

static volatile sig_atomic_t stop_signal;

static void on_stop(int sig)
{
    sysrestore_undo_signal_safe(); /* --host: the host as it was, at once */
    stop_signal = sig;
}

/* What every round needs besides the plan. */
struct env {
    char dir[PATH_MAX]; /* the run's own temporary directory: the logs, each round's --json */
    char self[PATH_MAX], lfepolld[PATH_MAX];
    double started, trial_s; /* the run's start; the seconds its rounds took, summed */
    int done, total;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {0, (long)ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* The last line of the file at path that is not blank, for a message ("" when none). */
static void last_line(const char *path, char *buf, size_t len)
{
    char tail[2048];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    off_t end;
    ssize_t n = 0;
    char *p;

    buf[0] = 0;
    if (fd < 0)
        return;
    end = lseek(fd, 0, SEEK_END);
    if (end > 0 &&
        lseek(fd, end > (off_t)sizeof(tail) - 1 ? end - (off_t)sizeof(tail) + 1 : 0, SEEK_SET) >= 0)
        n = read(fd, tail, sizeof(tail) - 1);
    close(fd);
    tail[n > 0 ? n : 0] = 0;
    while (n > 0 && (tail[n - 1] == '\n' || tail[n - 1] == ' ' || tail[n - 1] == '\r'))
        tail[--n] = 0;
    p = strrchr(tail, '\n');
    snprintf(buf, len, "%s", p ? p + 1 : tail);
}

/* "exited with status N" or "was killed by signal N", for a wait status. */
static void say_status(int st, char *buf, size_t len)
{
    if (WIFEXITED(st))
        snprintf(buf, len, "exited with status %d", WEXITSTATUS(st));
    else if (WIFSIGNALED(st))
        snprintf(buf, len, "was killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    else
        snprintf(buf, len, "ended");
}

/* The server's command for /bin/sh: --server with {port} filled in, or lfepolld's. */
static int server_command(const struct btune *t, const struct env *e, char *cmd, size_t len)
{
    const char *s = t->o.server;
    size_t at = 0;

    if (!s) {
        at = (size_t)snprintf(cmd, len, "exec '%s' --listen 127.0.0.1:%d -q%s%s", e->lfepolld,
                              t->o.port, t->o.server_args ? " " : "",
                              t->o.server_args ? t->o.server_args : "");
        return at < len ? 0 : -1;
    }
    at = (size_t)snprintf(cmd, len, "exec ");
    for (; *s && at + 8 < len; s++) {
        if (!strncmp(s, "{port}", 6)) {
            at += (size_t)snprintf(cmd + at, len - at, "%d", t->o.port);
            s += 5;
        } else {
            cmd[at++] = *s;
        }
    }
    cmd[at] = 0;
    return *s ? -1 : 0;
}

/* Starts the server in ns and waits until it listens (10 s at most). Its pid, or -1 (err). */
static pid_t start_server(const struct btune *t, const struct env *e, const struct btune_ns *ns,
                          char *err, size_t errlen)
{
    char cmd[4096], log[PATH_MAX + 16], line[256], how[96];
    char sh[] = "/bin/sh", dash_c[] = "-c", *argv[] = {sh, dash_c, cmd, NULL};
    int fd, st;
    pid_t pid;

    if (server_command(t, e, cmd, sizeof(cmd)) < 0)
        return snprintf(err, errlen, "the server's command is over %zu bytes", sizeof(cmd)), -1;
    snprintf(log, sizeof(log), "%s/server.log", e->dir);
    if ((fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0)
        return snprintf(err, errlen, "cannot write %.300s: %s", log, strerror(errno)), -1;
    pid = btune_ns_spawn(ns, argv, fd);
    close(fd);
    if (pid < 0)
        return snprintf(err, errlen, "cannot start /bin/sh: %s", strerror((int)-pid)), -1;
    for (int i = 0; i < 1000 && !stop_signal; i++) { /* bounded: 10 s */
        if (btune_ns_listening(ns, t->o.port))
            return pid;
        if (!btune_ns_alive(pid, &st)) {
            last_line(log, line, sizeof(line));
            say_status(st, how, sizeof(how));
            snprintf(err, errlen,
                     "the server %s at start, before it listened on port %d%s%s: "
                     "run its command by hand to see why (%s)",
                     how, t->o.port, line[0] ? ": " : "", line, t->server_desc);
            return -1;
        }
        sleep_ms(10);
    }
    btune_ns_stop(pid, 1000, &st);
    if (stop_signal)
        return snprintf(err, errlen, "interrupted"), -1;
    last_line(log, line, sizeof(line));
    snprintf(err, errlen,
             "the server did not listen on port %d within 10 s%s%s: give its port "
             "with --port, or check its command (%s)",
             t->o.port, line[0] ? "; it said: " : "", line, t->server_desc);
    return -1;
}

/* The load's command line: the options after --, the round's length, its --json, the target. */
static void load_argv(const struct btune *t, const struct env *e, char *json, char *dur,
                      char *target, char **argv)
{
    static char d[] = "-d", j[] = "--json";
    int n = 0;

    argv[n++] = (char *)(uintptr_t)e->self; /* exec's argv is not const, and not written */
    for (int i = 0; i < t->o.nload; i++)
        argv[n++] = t->o.load[i];

    snprintf(dur, 32, "%gs", t->o.round_s);
    argv[n++] = d;
    argv[n++] = dur;
    argv[n++] = j;
    argv[n++] = json;
    snprintf(target, 32, "127.0.0.1:%d", t->o.port);
    argv[n++] = target;
    argv[n] = NULL;
}

/* Waits for the load, watching the server. 0 when the load ended (its status in *st), -1 (err)
 * when the server died, the load overran its time, or a signal came. */
static int wait_load(const struct btune *t, pid_t load, pid_t srv, int *st, const char *slog,
                     char *err, size_t errlen)
{
    double deadline = now_s() + 2 * t->o.round_s + 60; /* its warm-up, opening and closing */
    char line[256], how[96];
    int sst;

    for (;;) {
        if (!btune_ns_alive(load, st))
            return 0;
        if (!btune_ns_alive(srv, &sst)) {
            last_line(slog, line, sizeof(line));
            say_status(sst, how, sizeof(how));
            snprintf(err, errlen,
                     "the server %s during the round%s%s: its figures are not used; "
                     "run its command by hand under this load to see why (%s)",
                     how, line[0] ? "; it said: " : "", line, t->server_desc);
            return -1;
        }
        if (stop_signal)
            return snprintf(err, errlen, "interrupted"), -1;
        if (now_s() > deadline)
            return snprintf(err, errlen, "the load ran past %g s and was stopped",
                            2 * t->o.round_s + 60),
                   -1;
        sleep_ms(20);
    }
}

/* Takes the load's --json into r. */
static int read_round(const char *json, double srv_cpu, struct btune_round *r, char *err,
                      size_t errlen)
{
    struct bresult res;
    uint64_t all;

    result_init(&res);
    if (result_read_json(json, &res, err, errlen) < 0) {
        result_free(&res);
        return -1;
    }
    r->short_mode = result_is_mode(&res, "short");
    r->seconds = res.measured;
    r->requests = res.total.requests;
    r->connects = res.total.connects;
    r->rate = res.measured > 0 ? (double)res.total.requests / res.measured : 0;
    r->p50_us = hist_us(hist_percentile(res.lat, 50));
    r->p99_us = hist_us(hist_percentile(res.lat, 99));
    all = res.all_requests;
    r->cli_us = all ? res.cpu_s * 1e6 / (double)all : 0;
    r->srv_us = all && srv_cpu >= 0 ? srv_cpu * 1e6 / (double)all : 0;
    memcpy(r->errors, res.total.errors, sizeof(r->errors));
    r->ok = true;
    result_free(&res);
    return 0;
}

/* The load in ns against the server srv: r filled from its --json and the namespace's counters. */
static int measure(const struct btune *t, const struct env *e, const struct btune_ns *ns, pid_t srv,
                   struct btune_round *r, char *err, size_t errlen)
{
    char json[PATH_MAX + 16], llog[PATH_MAX + 16], slog[PATH_MAX + 16], dir[64], line[256];
    char dur[32], target[32], how[96], *argv[BTUNE_MAX_LOAD + 8];
    struct kstat k0, k1;
    double c0, c1;
    int fd, st, rc;
    pid_t load;

    snprintf(json, sizeof(json), "%s/round.json", e->dir);
    snprintf(llog, sizeof(llog), "%s/load.log", e->dir);
    snprintf(slog, sizeof(slog), "%s/server.log", e->dir);
    unlink(json);
    load_argv(t, e, json, dur, target, argv);
    btune_ns_procnet(ns, dir, sizeof(dir));
    if ((fd = open(llog, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0)
        return snprintf(err, errlen, "cannot write %.300s: %s", llog, strerror(errno)), -1;
    memset(&k0, 0, sizeof(k0));
    memset(&k1, 0, sizeof(k1));
    kstat_read(dir, &k0);
    c0 = btune_ns_group_cpu(srv);
    load = btune_ns_spawn(ns, argv, fd);
    close(fd);
    if (load < 0)
        return snprintf(err, errlen, "cannot run %.300s: %s", e->self, strerror((int)-load)), -1;
    if (wait_load(t, load, srv, &st, slog, err, errlen) < 0) {
        btune_ns_stop(load, 1000, &rc);
        return -1;
    }
    c1 = btune_ns_group_cpu(srv);
    kstat_read(dir, &k1);
    kstat_delta(&k0, &k1, &r->kd);
    /* softnet_stat is the machine's, whatever namespace reads it: not this round's to report */
    r->kd.have[KS_SOFTNET_DROPPED] = r->kd.have[KS_SOFTNET_SQUEEZED] = false;
    if (access(json, F_OK) < 0) {
        last_line(llog, line, sizeof(line));
        say_status(st, how, sizeof(how));
        return snprintf(err, errlen, "the load %s without results: %s", how,
                        line[0] ? line : "it said nothing"),
               -1;
    }
    return read_round(json, c0 >= 0 && c1 >= 0 ? c1 - c0 : -1, r, err, errlen);
}

/* --host: puts back what host_apply set; the session (begun for the whole run by
 * restore_leftover, its lock held) stays for the next round. */
static int host_restore(char *err, size_t errlen)
{
    char why[768];

    if (sysrestore_rewind(why, sizeof(why)) < 0)
        return snprintf(err, errlen, "--host: %.700s", why), -1;
    return 0;
}

/* --host: sets v's host-wide keys on the host, each old value recorded first (sysrestore). */
static int host_apply(const struct btune_variant *v, char *err, size_t errlen)
{
    char why[768];

    for (int i = 0; i < v->nhost; i++)
        if (sysrestore_set(v->host[i].key, v->host[i].value, why, sizeof(why)) < 0) {
            snprintf(err, errlen, "--host: %.700s", why);
            host_restore(why, sizeof(why));
            return -1;
        }
    return 0;
}

/* One round of variant vi: its namespace (and --host's keys on the host), its server, the
 * load; all of it gone, and the host as it was, on return. */
static int run_one(const struct btune *t, const struct env *e, int vi, struct btune_round *r,
                   char *err, size_t errlen)
{
    struct btune_ns ns;
    pid_t srv;
    int st, rc = -1;

    memset(r, 0, sizeof(*r));
    if (host_apply(&t->var[vi], err, errlen) < 0)
        return -1;
    if (btune_ns_open(&ns, t->var[vi].set, t->var[vi].nset, NULL, 0, err, errlen) < 0)
        goto restore;
    if ((srv = start_server(t, e, &ns, err, errlen)) > 0) {
        rc = measure(t, e, &ns, srv, r, err, errlen);
        btune_ns_stop(srv, 2000, &st);
    }
    btune_ns_close(&ns);
restore:
    if (t->var[vi].nhost && host_restore(rc < 0 ? NULL : err, rc < 0 ? 0 : errlen) < 0)
        rc = -1;
    return rc;
}

/* The progress line: the runs left and the time they should take. */
static void progress(const struct btune *t, const struct env *e, int round, int vi)
{
    int left = e->total - e->done;
    double per = e->done ? e->trial_s / e->done : t->o.round_s + 1.5;
    int eta = (int)(per * left + 0.5);
    bool tty = isatty(2);

    if (t->o.quiet)
        return;
    if (left == 0) {
        if (tty)
            fprintf(stderr, "\r\033[K");
        return;
    }
    fprintf(stderr, "%slfbench tune: round %d/%d, %s: %d run%s left, about %dm%02ds%s",
            tty ? "\r\033[K" : "", round + 1, t->o.rounds, t->var[vi].name, left,
            left == 1 ? "" : "s", eta / 60, eta % 60, tty ? "" : "\n");
}

/* Every round of every variant, in turn. 0, 1 (a run failed: said), 130 (a signal). */
static int run_all(struct btune *t, struct env *e)
{
    char err[1024];

    e->total = t->o.rounds * t->nvar;
    for (int r = 0; r < t->o.rounds; r++)
        for (int i = 0; i < t->nvar; i++) {
            int v = (r + i) % t->nvar; /* rotated: no variant always first, or after one */
            double t0 = now_s();
            progress(t, e, r, v);
            if (run_one(t, e, v, &t->r[r][v], err, sizeof(err)) < 0) {
                const char *nl = !t->o.quiet && isatty(2) ? "\n" : ""; /* past the progress */
                if (stop_signal) {
                    fprintf(stderr,
                            "%slfbench tune: interrupted (%s) in round %d of %s; nothing is "
                            "left behind\n",
                            nl, strsignal(stop_signal), r + 1, t->var[v].name);
                    return 130;
                }
                fprintf(stderr, "%slfbench tune: round %d of %s: %s\n", nl, r + 1, t->var[v].name,
                        err);
                return 1;
            }
            e->trial_s += now_s() - t0;
            e->done++;
        }
    progress(t, e, 0, 0);
    return 0;
}

/* bopt_parse on argv: its result; the target it found in target (when it ran). */
static int try_parse(char **argv, char *target, size_t tlen, char *err, size_t errlen)
{
    FILE *null = fopen("/dev/null", "w");
    struct bopt b;
    int argc = 0, rc;

    while (argv[argc])
        argc++;
    rc = bopt_parse(&b, argc, argv, null ? null : stderr, err, errlen);
    if (null)
        fclose(null);
    if (rc == BOPT_RUN) {
        snprintf(target, tlen, "%s", b.target ? b.target : "");
        bopt_free(&b);
    }
    return rc;
}

/* The load's options, checked by lfbench's own parser before anything starts: first without
 * the target (a target of the user's then parses), then with it. */
static int check_load(const struct btune *t, char *err, size_t errlen)
{
    char *argv[BTUNE_MAX_LOAD + 8], dur[32], target[32], json[] = "/dev/null", found[256];
    char berr[512];
    struct env e;
    int n = 0;

    strcpy(e.self, "lfbench");
    load_argv(t, &e, json, dur, target, argv);
    while (argv[n])
        n++;
    argv[n - 1] = NULL; /* without ours */
    if (try_parse(argv, found, sizeof(found), berr, sizeof(berr)) == BOPT_RUN) {
        snprintf(err, errlen,
                 "the load options after -- name a target (%s): leave it out; each "
                 "round's load goes to its namespace's server, %s",
                 found, target);
        return -1;
    }
    argv[n - 1] = target;
    switch (try_parse(argv, found, sizeof(found), berr, sizeof(berr))) {
    case BOPT_RUN:
        return 0;
    case BOPT_EXIT:
        snprintf(err, errlen, "the load options after -- ask for lfbench's help, not a load");
        return -1;
    default:
        snprintf(err, errlen, "the load options after --: %s", berr);
        return -1;
    }
}

/* --- the command ---------------------------------------------------------------------------- */

/* The keys of the experiment: --set's, or the applied keys of the --sysctl-conf file. */
static int gather(struct btune *t, struct tune_key *conf, struct key_info *k, char *err,
                  size_t errlen)
{
    char *text = NULL, why[128], perr[256];
    int n = 0, nconf;

    if (t->o.conf && !(text = tune_conf_read(t->o.conf, why, sizeof(why))))
        return snprintf(err, errlen, "--sysctl-conf %s: %s", t->o.conf, why), -1;
    nconf = tune_parse(text ? text : tune_default_conf, conf, TUNE_MAX_KEYS, perr, sizeof(perr));
    free(text);
    if (nconf < 0)
        return snprintf(err, errlen, "%s: %s", t->source, perr), -1;
    if (t->o.nset) {
        for (int i = 0; i < t->o.nset; i++, n++) {
            memset(&k[n], 0, sizeof(k[n]));
            k[n].key = t->o.set[i].key;
            for (int c = 0; c < nconf; c++)
                k[n].conf_host |= !strcmp(conf[c].name, k[n].key) && conf[c].scope == TUNE_HOST;
        }
        return n;
    }
    for (int c = 0; c < nconf && n < BTUNE_MAX_KEYS; c++) {
        if (!conf[c].apply) /* "#= key = value": checked, not set */
            continue;
        memset(&k[n], 0, sizeof(k[n]));
        k[n].key = conf[c].name;
        k[n].conf_host = conf[c].scope == TUNE_HOST;
        k[n].value = conf[c].value;
        n++;
    }
    return n;
}

/* Where lfbench itself and lfepolld are, and the run's temporary directory. */
static int make_env(struct env *e, char *err, size_t errlen)
{
    const char *tmp = getenv("TMPDIR");
    ssize_t n;
    char *slash;

    memset(e, 0, sizeof(*e));
    n = readlink("/proc/self/exe", e->self, sizeof(e->self) - 1);
    if (n <= 0)
        return snprintf(err, errlen, "cannot find lfbench itself: %s", strerror(errno)), -1;
    e->self[n] = 0;
    snprintf(e->lfepolld, sizeof(e->lfepolld), "%s", e->self);
    if ((slash = strrchr(e->lfepolld, '/')))
        snprintf(slash + 1, sizeof(e->lfepolld) - (size_t)(slash + 1 - e->lfepolld), "lfepolld");
    if (access(e->lfepolld, X_OK) < 0)
        snprintf(e->lfepolld, sizeof(e->lfepolld), "lfepolld"); /* from PATH */
    snprintf(e->dir, sizeof(e->dir), "%s/lfbench-tune.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(e->dir))
        return snprintf(err, errlen, "cannot make a directory under %s: %s",
                        tmp && *tmp ? tmp : "/tmp", strerror(errno)),
               -1;
    return 0;
}

static void remove_env(const struct env *e)
{
    static const char *const files[] = {"round.json", "load.log", "server.log"};
    char path[PATH_MAX + 16];

    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", e->dir, files[i]);
        unlink(path);
    }
    rmdir(e->dir);
}

/* The plan, from the command line and a probe of a fresh namespace. 0, or -1 (err). */
static int plan(struct btune *t, struct env *e, char *err, size_t errlen)
{
    static struct tune_key conf[TUNE_MAX_KEYS]; /* the key names point into it */
    struct key_info k[BTUNE_MAX_KEYS];
    int n;

    t->source = t->o.nset ? "--set" : t->o.conf ? t->o.conf : "the built-in sysctl.conf";
    if ((n = gather(t, conf, k, err, errlen)) < 0 || probe(k, n, err, errlen) < 0)
        return -1;
    if (t->o.nset ? plan_set(t, k, err, errlen) < 0 : plan_conf(t, k, n, stderr, err, errlen) < 0)
        return -1;
    for (int v = 0; v < t->nvar; v++) { /* a value the kernel refuses, before any round */
        struct btune_ns ns;
        if (btune_ns_open(&ns, t->var[v].set, t->var[v].nset, NULL, 0, err, errlen) < 0)
            return -1;
        btune_ns_close(&ns);
        if (host_apply(&t->var[v], err, errlen) < 0 ||
            (t->var[v].nhost && host_restore(err, errlen) < 0))
            return -1;
    }
    if (server_command(t, e, t->server_desc, sizeof(t->server_desc)) < 0)
        return snprintf(err, errlen, "the server's command is too long"), -1;
    memmove(t->server_desc, t->server_desc + 5, strlen(t->server_desc + 5) + 1); /* "exec " */
    return 0;
}

static void catch_signals(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop; /* no SA_RESTART: a wait in progress returns */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* The results: the report, --json, --plot. 0, or 1 when a file could not be written. */
static int report(struct btune *t)
{
    char err[512];
    int rc = 0;

    btune_judge_all(t);
    btune_print(stdout, t);
    fflush(stdout);
    if (t->o.json) {
        FILE *f = fopen(t->o.json, "w");
        if (!f || btune_write_json(f, t) < 0 || fclose(f) != 0) {
            fprintf(stderr, "lfbench tune: cannot write --json %s: %s\n", t->o.json,
                    strerror(errno));
            rc = 1;
        }
    }
    if (t->o.plot && btune_plot(t, t->o.plot, err, sizeof(err)) < 0) {
        fprintf(stderr, "lfbench tune: --plot: %s\n", err);
        rc = 1;
    }
    if (t->o.write_sysctl) {
        int n = btune_write_sysctl(t, err, sizeof(err));
        if (n < 0) {
            fprintf(stderr, "lfbench tune: --write-sysctl: %s\n", err);
            rc = 1;
        } else {
            printf("wrote %s: %d key%s that helped\n", t->o.write_sysctl, n, n == 1 ? "" : "s");
        }
    }
    return rc;
}

/* A record a run that did not finish left (a crash, SIGKILL): its keys put back first, said in
 * one line. With --host the session then stays open for the whole run (its lock held, so that
 * no other run shares the record), ended by end_host. -1 when --host cannot run. */
static int restore_leftover(const struct btune_opt *o)
{
    char why[768];
    int n;

    if (!o->host && access(o->restore_file, F_OK) < 0)
        return 0;
    n = sysrestore_begin(o->restore_file, why, sizeof(why));
    if (why[0])
        fprintf(stderr, "lfbench tune: %s%s\n", n < 0 && o->host ? "--host: " : "", why);
    if (n < 0)
        return o->host ? -1 : 0;
    if (!o->host && sysrestore_undo(why, sizeof(why)) < 0) {
        fprintf(stderr, "lfbench tune: %s\n", why);
        return -1;
    }
    return 0;
}

/* --host: the session ended, every key as it was and the record removed. 0, or 1 (said). */
static int end_host(const struct btune_opt *o)
{
    char why[768];

    if (!o->host || sysrestore_undo(why, sizeof(why)) == 0)
        return 0;
    fprintf(stderr, "lfbench tune: --host: %s\n", why);
    return 1;
}

int btune_main(int argc, char **argv)
{
    static struct btune t;
    struct env e;
    char err[1024];
    int rc;

    memset(&t, 0, sizeof(t));
    if ((rc = btune_parse(argc, argv, &t.o, stdout, err, sizeof(err))) != 0) {
        if (rc < 0)
            fprintf(stderr, "lfbench tune: %s\n", err);
        return rc < 0 ? 2 : 0;
    }
    if (restore_leftover(&t.o) < 0)
        return 1;
    if (make_env(&e, err, sizeof(err)) < 0) {
        fprintf(stderr, "lfbench tune: %s\n", err);
        end_host(&t.o);
        return 1;
    }
    prctl(PR_SET_CHILD_SUBREAPER, 1); /* a server that daemonizes stays ours to end */
    catch_signals();
    rc = 2;
    if (plan(&t, &e, err, sizeof(err)) < 0 || check_load(&t, err, sizeof(err)) < 0) {
        fprintf(stderr, "lfbench tune: %s\n", err);
        rc = strstr(err, "needs root") ? 1 : 2;
        goto out;
    }
    btune_levels(&t);
    if (!(t.r = calloc((size_t)t.o.rounds, sizeof(*t.r)))) {
        fprintf(stderr, "lfbench tune: out of memory\n");
        rc = 1;
        goto out;
    }
    if ((rc = run_all(&t, &e)) == 0)
        rc = report(&t);
out:
    if (end_host(&t.o) && rc == 0)
        rc = 1;
    remove_env(&e);
    free(t.r);
    return rc;
}
