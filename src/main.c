/* main: lfepolld's start-up, signal handling and shutdown. */
#include "admin.h"
#include "idle.h"
#include "listeners.h"
#include "log.h"
#include "net.h"
#include "opt.h"
#include "pidfile.h"
#include "report.h"
#include "script.h"
#include "sdnotify.h"
#include "server.h"
#include "sysrestore.h"
#include "takeover.h"
#include "tls_conf.h"
#include "topo.h"
#include "tune.h"

#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static struct server *srv;   /* for the signal helpers below; main thread only */
static struct admin *adm;    /* --admin's listener, or NULL */
static struct takeover *tko; /* --takeover: serving PATH for a successor, or NULL */

/* The signals main takes, synchronously: SIGINT/SIGTERM stop, SIGUSR1 prints the counters,
 * SIGHUP reloads the script. Set by block_signals(); main thread only. */
static sigset_t main_sigs;

/* Blocks main_sigs before the threads start: every thread inherits the mask, so only main takes
 * them (sigwaitinfo, and sigtimedwait while draining). */
static void block_signals(void)
{
    sigemptyset(&main_sigs);
    sigaddset(&main_sigs, SIGINT);
    sigaddset(&main_sigs, SIGTERM);
    sigaddset(&main_sigs, SIGUSR1);
    sigaddset(&main_sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &main_sigs, NULL);
}

/* Descriptors open right now (each costs one from RLIMIT_NOFILE). */
static long count_open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    long n = 0;

    if (!d)
        return 16;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1; /* the directory's own fd */
}

static const char *progname = "lfepolld"; /* argv[0] when it is a path: how it was run */
static bool started_as_root;              /* before --user: whom a remedy speaks to */

/* The command that applies sysctl.conf's values, as the reader can run it where they are. A
 * make target exists only in a clone, where make runs lfepolld (make sysctl-check, make run:
 * MAKELEVEL is in its recipes' environment); elsewhere (installed, or ./lfepolld typed) the
 * binary's own --apply-sysctl, by the name it was run as, with the --sysctl-conf given. */
static const char *apply_command(const struct opt *o, char *buf, size_t len)
{
    if (getenv("MAKELEVEL"))
        return "make sysctl-apply";
    snprintf(buf, len, "%s --apply-sysctl%s%s", progname, o->sysctl_conf ? " --sysctl-conf " : "",
             o->sysctl_conf ? o->sysctl_conf : "");
    return buf;
}

/* Where --apply-sysctl keeps what it changed for --undo-sysctl. */
static const char *undo_file(const struct opt *o)
{
    return o->sysctl_undo_file ? o->sysctl_undo_file : SYSRESTORE_UNDO_PATH;
}

/* The command that puts back what an apply changed, as apply_command names the apply. */
static const char *undo_command(const struct opt *o, char *buf, size_t len)
{
    bool dflt = !o->sysctl_undo_file;

    if (getenv("MAKELEVEL"))
        snprintf(buf, len, "make sysctl-undo%s%s",
                 dflt ? "" : " SYSCTL_UNDO=", dflt ? "" : o->sysctl_undo_file);
    else
        snprintf(buf, len, "%s --undo-sysctl%s%s", progname, dflt ? "" : " --undo-file ",
                 dflt ? "" : o->sysctl_undo_file);
    return buf;
}

/* --undo-sysctl: what --apply-sysctl changed, put back; exit 0, or 1 with one line. */
static int undo_sysctl(const struct opt *o)
{
    char err[768];

    if (geteuid() != 0) {
        fprintf(stderr, "lfepolld: --undo-sysctl changes kernel settings: run it as root (sudo)\n");
        return 1;
    }
    if (tune_undo(stdout, "/proc/sys", undo_file(o), err, sizeof(err)) != 0) {
        fprintf(stderr, "lfepolld: --undo-sysctl: %s\n", err);
        return 1;
    }
    return 0;
}

/* --check-sysctl / --apply-sysctl: the report, then exit with its status. */
static int check_sysctl(const struct opt *o)
{
    char cmd[600], ucmd[600];
    struct tune_ctx ctx = {.root = "/proc/sys",
                           .backlog = o->backlog,
                           .port = tune_port_of(o->listen[0]),
                           .apply = o->sysctl == 2,
                           .not_root = geteuid() != 0,
                           .apply_cmd = apply_command(o, cmd, sizeof(cmd)),
                           .conf_file = o->sysctl_conf ? o->sysctl_conf : "",
                           .dry_run = o->sysctl_dry,
                           .undo_file = undo_file(o),
                           .undo_cmd = undo_command(o, ucmd, sizeof(ucmd))};
    char err[768], *text = NULL;
    int rc;

    if (o->sysctl_conf && !(text = tune_conf_read(o->sysctl_conf, err, sizeof(err)))) {
        fprintf(stderr, "lfepolld: --sysctl-conf %s: cannot read it: %s\n", o->sysctl_conf, err);
        return 2;
    }
    if (ctx.apply && !ctx.dry_run && geteuid() != 0) {
        fprintf(stderr, "lfepolld: --apply-sysctl needs root: run it with sudo; checking only\n");
        ctx.apply = false; /* as it says: no write is tried */
    }
    rc = tune_report(stdout, text ? text : tune_default_conf, &ctx, err, sizeof(err));
    if (rc == 2 && !strncmp(err, "--", 2)) /* the undo record's, not the file's */
        fprintf(stderr, "lfepolld: %s\n", err);
    else if (rc == 2)
        fprintf(stderr, "lfepolld: %s: %s\n", o->sysctl_conf ? o->sysctl_conf : "sysctl.conf", err);
    free(text);
    return rc;
}

/* --user: after every listener is bound (a port below 1024 needs root), become NAME: its
 * supplementary groups, gid, then uid; then make sure root cannot be taken back. Returns 0, or
 * -1 with one line in err: the daemon must not go on as root when asked not to. */
static int drop_privileges(const char *user, char *err, size_t len)
{
    struct passwd *pw = getpwnam(user);

    if (!pw) {
        snprintf(err, len, "--user %s: no such user (see getent passwd)", user);
        return -1;
    }
    if (geteuid() != 0) {
        if (pw->pw_uid == geteuid())
            return 0; /* already that user */
        snprintf(err, len, "--user %s: only root can become another user (running as uid %d)", user,
                 (int)geteuid());
        return -1;
    }
    if (initgroups(user, pw->pw_gid) < 0 || setgid(pw->pw_gid) < 0 || setuid(pw->pw_uid) < 0) {
        snprintf(err, len, "--user %s: cannot switch to uid %d gid %d: %s", user, (int)pw->pw_uid,
                 (int)pw->pw_gid, strerror(errno));
        return -1;
    }
    if (pw->pw_uid != 0 && (setuid(0) == 0 || geteuid() == 0)) {
        snprintf(err, len, "--user %s: root could be taken back after the switch; refusing to run",
                 user);
        return -1;
    }
    return 0;
}

/* --user's uid and gid, for what must be its before the drop; -1 and -1 (leave as is) without
 * --user, when not root, or for an unknown user (drop_privileges says so). */
static void user_ids(const char *user, uid_t *uid, gid_t *gid)
{
    struct passwd *pw = user && geteuid() == 0 ? getpwnam(user) : NULL;

    *uid = pw ? pw->pw_uid : (uid_t)-1;
    *gid = pw ? pw->pw_gid : (gid_t)-1;
}

static long mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
}

/* READY=1 (at start, after a reload) with the status line systemctl status shows. */
static void notify_ready(long live)
{
    char msg[96];

    snprintf(msg, sizeof(msg), "READY=1\nSTATUS=serving, %ld connection%s", live,
             live == 1 ? "" : "s");
    sdnotify_send(msg);
}

static void print_stats(void)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    if (!f)
        return;
    report_print_stats(srv, f);
    fclose(f);
    if (log_json) { /* each line its own JSON object, like every other line */
        for (char *line = text, *nl; line < text + len; line = nl + 1) {
            nl = memchr(line, '\n', (size_t)(text + len - line));
            if (!nl)
                nl = text + len;
            *nl = '\0';
            log_info("%s", line);
        }
        free(text);
        return;
    }
    /* One write: stats lines are not interleaved with log lines from other threads. */
    if (write(STDERR_FILENO, text, len) < 0) {
        /* nowhere left to report to */
    }
    free(text);
}

/* A stop signal within this of the first (as main took each) is the same stop: one sent to a
 * process group can come twice, a few microseconds apart, too late to merge with the first
 * (timeout(1) signals the daemon and then its group; make forwards the group's to its child). */
#define STOP_SAME_MS 100

static long stop_ms; /* when main took the first stop signal (mono_ms) */

/* Called by server_stop() while it drains: waits up to 10 ms for a signal. Returns 1 on a second
 * SIGTERM/SIGINT (stop waiting), else 0; SIGUSR1 still prints counters. */
static int drain_wait(void)
{
    static const struct timespec tick = {0, 10 * 1000 * 1000};
    int sig = sigtimedwait(&main_sigs, NULL, &tick);
    long now = mono_ms();

    if (sig == SIGUSR1)
        print_stats();
    idle_sweep(srv, now); /* a client that never reads must not hold the drain */
    if ((sig == SIGINT || sig == SIGTERM) && now - stop_ms < STOP_SAME_MS) {
        log_debug("%s %ld ms after the first: the same stop", sig == SIGINT ? "SIGINT" : "SIGTERM",
                  now - stop_ms);
        return 0;
    }
    return sig == SIGINT || sig == SIGTERM;
}

#define STOP_GUARD_MS 1000 /* past --drain-timeout, the process ends whatever it is doing */

static void *stop_guard_main(void *arg)
{
    long ms = (long)(intptr_t)arg;
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
    log_err("stop did not finish within --drain-timeout + %d ms (a callback stuck where the "
            "timeout cannot reach it?); exiting",
            STOP_GUARD_MS);
    _exit(1);
    return NULL;
}

/* The last bound on a stop: whatever main is stuck in (an on_close at shutdown, a write), the
 * process exits ms from now. */
static void stop_guard(long ms)
{
    pthread_t tid;

    if (pthread_create(&tid, NULL, stop_guard_main, (void *)(intptr_t)ms) == 0)
        pthread_detach(tid);
}

/* Loads the --lua script (its main chunk runs once to check it), or prints why not and
 * returns NULL with *rc the exit status. Runs after the --user drop: the script is code, and
 * under --lua-unsafe its main chunk could do anything root can. */
static struct script_env *load_lua(const struct opt *o, int *rc)
{
    struct script_opts so = {.path = o->lua,
                             .mem_cap = o->lua_mem,
                             .timeout_ms = o->lua_timeout_ms,
                             .wall_ms = o->lua_wall_ms,
                             .io_timeout_ms = o->lua_io_ms,
                             .unsafe = o->lua_unsafe,
                             .shared_bytes = o->lua_shared,
                             .max_output = o->max_pending,
                             .ctx_total = o->lua_ctx};
    struct script_env *lua;
    char err[512];

    *rc = 1;
    lua = script_env_new(&so, err, sizeof(err));
    if (!lua) {
        fprintf(stderr, "lfepolld: --lua: %s\n", err);
        return NULL;
    }
    if (o->defer_accept && script_env_connect_first(lua)) {
        fprintf(stderr,
                "lfepolld: --defer-accept with %s, whose on_connect may speak first: its "
                "clients would wait for a greeting the server only sends once they have "
                "sent something; drop --defer-accept\n",
                o->lua);
        script_env_free(lua);
        *rc = 2;
        return NULL;
    }
    return lua;
}

/* --accept-threads' default: one per 2 CPUs of the plan. One accept thread's CPU per new
 * connection caps the connections a second it can take, and 4 CPUs of workers already reach
 * that cap (docs/bench.md, "Many cores", has the figures). */
static int accept_threads_for(const struct plan *p)
{
    cpu_set_t used;
    int n;

    CPU_ZERO(&used);
    for (int gi = 0; gi < p->ngroups; gi++)
        CPU_OR(&used, &used, &p->cpus[gi]);
    n = CPU_COUNT(&used) / 2;
    return n < 1 ? 1 : n > OPT_MAX_ACCEPT ? OPT_MAX_ACCEPT : n;
}

static int nworkers_of(const struct plan *p)
{
    int n = 0;

    for (int gi = 0; gi < p->ngroups; gi++)
        n += p->nworkers[gi];
    return n;
}

/* Parses the command line and readies the process: logging, --check-sysctl, SIGPIPE, a
 * --pid-file already live, RLIMIT_NOFILE raised soft to hard (rl: what it is then). Returns -1
 * to go on, or the exit status. */
static int start_up(struct opt *o, int argc, char **argv, struct rlimit *rl)
{
    char err[512];

    if (argc > 0 && strchr(argv[0], '/'))
        progname = argv[0];
    started_as_root = geteuid() == 0;
    switch (opt_parse(o, argc, argv, stdout, err, sizeof(err))) {
    case OPT_EXIT:
        return 0;
    case OPT_ERROR:
        fprintf(stderr, "lfepolld: %s\n", err);
        return 2;
    case OPT_RUN:
        break;
    }
    log_threshold = o->verbosity == 0 ? LOG_WARN : o->verbosity == 1 ? LOG_INFO : LOG_DEBUG;
    log_json = o->log_json;
    if (o->sysctl_undo)
        return undo_sysctl(o);
    if (o->sysctl)
        return check_sysctl(o);
    signal(SIGPIPE, SIG_IGN); /* a vanished peer is an EPIPE, never a signal */
    /* Before anything is bound: a second start with the same --pid-file says why in one line.
     * A --takeover successor replaces its predecessor's file, which it finds live. */
    if (o->pid_file && !o->takeover && pidfile_check(o->pid_file, err, sizeof(err)) < 0) {
        fprintf(stderr, "lfepolld: %s\n", err);
        return 2;
    }
    /* The soft descriptor limit is often 1024; the hard one is what an admin granted. */
    if (getrlimit(RLIMIT_NOFILE, rl) == 0 && rl->rlim_cur < rl->rlim_max) {
        rlim_t soft = rl->rlim_cur;

        rl->rlim_cur = rl->rlim_max;
        if (setrlimit(RLIMIT_NOFILE, rl) < 0) {
            log_warn("cannot raise RLIMIT_NOFILE from %llu to %llu: %s", (unsigned long long)soft,
                     (unsigned long long)rl->rlim_max, strerror(errno));
            getrlimit(RLIMIT_NOFILE, rl);
        }
    }
    return -1;
}

/* The CPU plan from the topology, the affinity mask (allowed) and the options, with main kept
 * on the planned CPUs. Returns 0, or the exit status with its line printed. */
static int plan_cpus(const struct opt *o, struct plan *p, cpu_set_t *allowed)
{
    struct topo *t = malloc(sizeof(*t));
    char err[512];
    int rc;

    if (!t || topo_read("/sys/devices/system/cpu", t) < 0) {
        fprintf(stderr, "lfepolld: cannot read the CPU topology from /sys/devices/system/cpu: %s\n",
                strerror(errno));
        free(t);
        return 1;
    }
    if (sched_getaffinity(0, sizeof(*allowed), allowed) < 0) {
        fprintf(stderr, "lfepolld: sched_getaffinity: %s\n", strerror(errno));
        free(t);
        return 1;
    }
    /* The default plan (docs/architecture.md, "The default plan"). Echo: a group per CPU, one
     * worker each; no echo ever waits, so a group of several workers isolates nothing, and
     * each epoll fd then has one waiter, which served more requests for less CPU than groups
     * of 4 (docs/bench.md, "Many cores"). Lua: groups of PLAN_GROUP_CPUS, since a handler may wait
     * (lfe.sleep, a socket) and the other workers of its group go on serving its connections.
     * TLS listeners the same: a full handshake is the slow handler (an RSA-4096 signature takes
     * milliseconds), and in a group of one the connections behind it wait (README, "Choosing G
     * and W", has the measurement). */
    rc = plan_make(t, allowed, o->have_cpus ? &o->cpus : NULL, o->groups,
                   o->workers || o->groups || o->lua || o->ntls ? o->workers : 1, o->pin, p, err,
                   sizeof(err));
    free(t);
    if (rc < 0) {
        fprintf(stderr, "lfepolld: %s\n", err);
        return 2;
    }
    /* Main (and the threads it starts unpinned: the Lua watchdog) stays inside the CPUs the
     * plan uses, so --cpus 0 means every thread of the process on CPU 0. */
    if (p->pin || o->have_cpus) {
        cpu_set_t used;

        CPU_ZERO(&used);
        for (int gi = 0; gi < p->ngroups; gi++)
            CPU_OR(&used, &used, &p->cpus[gi]);
        if (CPU_COUNT(&used) && sched_setaffinity(0, sizeof(used), &used) < 0) {
            fprintf(stderr, "lfepolld: cannot keep the main thread on the planned CPUs: %s\n",
                    strerror(errno));
            return 2;
        }
    }
    return 0;
}

/* Everything that needs root is done once the listeners are bound: then the admin listener,
 * PATH's socket (it listens before the drop: its credentials are what a successor checks),
 * the drop to --user, and the --pid-file, written as that user (root never writes into a
 * directory the user may own). Returns 0, or the exit status with its line printed. */
static int become_user(const struct opt *o, struct listeners *l, bool *pid_written)
{
    char err[512];

    if (o->admin && l->admin_fd < 0 &&
        (l->admin_fd = net_listen(o->admin, 64, err, sizeof(err))) < 0) {
        fprintf(stderr, "lfepolld: --admin: %s\n", err);
        return 1;
    }
    if (o->takeover) {
        uid_t uid;
        gid_t gid;

        user_ids(o->user, &uid, &gid);
        if (!(tko = takeover_open(o->takeover, uid, gid, err, sizeof(err)))) {
            fprintf(stderr, "lfepolld: %s\n", err);
            return 1;
        }
    }
    if (o->user) {
        if (drop_privileges(o->user, err, sizeof(err)) < 0) {
            fprintf(stderr, "lfepolld: %s\n", err);
            return 2;
        }
        log_info("running as user %s (uid %d, gid %d)", o->user, (int)getuid(), (int)getgid());
    }
    if (o->pid_file) {
        if (pidfile_write(o->pid_file, err, sizeof(err)) < 0) {
            fprintf(stderr, "lfepolld: %s\n", err);
            return 2;
        }
        *pid_written = true;
    }
    return 0;
}

/* The warnings of a start that goes on (after the errors that stop one: a broken script is
 * its one line): a listen port a client's connect() may take, and the accept queue the
 * kernel cuts. */
static void warn_at_start(const struct opt *o, const struct listeners *l)
{
    long somaxconn = net_somaxconn();
    const char *sudo = started_as_root ? "" : "sudo "; /* root may have no sudo at all */
    char cmd[600];

    if (!l->activated) {
        int firsts[OPT_MAX_LISTEN];

        for (int i = 0; i < o->nlisten; i++)
            firsts[i] = l->fds[l->first[i]];
        tune_warn_exposed("/proc/sys", o->listen, firsts, o->nlisten);
        /* the stop's SYN filter (server_stop), said now rather than at the stop: too late */
        if (net_can_refuse_syns() == -EPERM)
            log_warn("a stop cannot hold new connections off the listeners: this kernel lets "
                     "only CAP_NET_ADMIN attach a socket filter, and lfepolld runs as uid %d "
                     "without it, so connections that come while a stop closes its listeners "
                     "may be reset; restart with --takeover or under systemd's socket "
                     "activation, which reset no one",
                     (int)getuid());
    }
    /* A backlog the user chose and the kernel cuts is a warning; the default cut by a stock
     * kernel's somaxconn is every start's news, so it is said once, at info. */
    if (somaxconn > 0 && o->backlog > somaxconn && o->backlog_set)
        log_warn("--backlog %d exceeds net.core.somaxconn %ld: the kernel caps the accept queue "
                 "at %ld; raise it with sysctl -w net.core.somaxconn=%d",
                 o->backlog, somaxconn, somaxconn, o->backlog);
    else if (somaxconn > 0 && o->backlog > somaxconn)
        log_info("accept queue %ld per listener: net.core.somaxconn %ld caps the default backlog "
                 "%d; for bursts of connects raise it (%s%s, or %ssysctl -w "
                 "net.core.somaxconn=%d)",
                 somaxconn, somaxconn, o->backlog, sudo, apply_command(o, cmd, sizeof(cmd)), sudo,
                 o->backlog);
}

/* The connection budget: what this process holds now, plus two fds per group and per accept
 * thread, plus slack for /proc reads and logging, plus what the admin thread and the workers'
 * Lua sockets may hold; the rest of RLIMIT_NOFILE is for connections, so that at --max-conns
 * /health still answers and lfe.connect still connects. --max-conns above it is warned of. */
static long conn_budget(const struct opt *o, const struct plan *p, const struct rlimit *rl,
                        int naccept)
{
    long reserved =
             count_open_fds() + 2L * p->ngroups + 2L * naccept + 8 + (o->admin ? ADMIN_FDS : 0),
         max_conns;

    if (o->lua) {
        long lua_fds = (long)SCRIPT_FDS * nworkers_of(p);

        if (lua_fds > (long)rl->rlim_cur / 2) {
            log_warn("RLIMIT_NOFILE %llu: the %ld descriptors the workers' lfe.connect sockets "
                     "may hold (%d each) would leave few for connections; %ld are kept for "
                     "them, and lfe.connect fails with EMFILE past that: raise ulimit -n",
                     (unsigned long long)rl->rlim_cur, lua_fds, SCRIPT_FDS, (long)rl->rlim_cur / 2);
            lua_fds = (long)rl->rlim_cur / 2;
        }
        reserved += lua_fds;
    }
    max_conns = (long)rl->rlim_cur - reserved;
    if (max_conns < 1)
        max_conns = 1;
    if (o->max_conns) {
        if (o->max_conns > max_conns)
            log_warn("--max-conns %ld exceeds the %ld connections RLIMIT_NOFILE %llu leaves; "
                     "accepting pauses when descriptors run out: raise ulimit -n",
                     o->max_conns, max_conns, (unsigned long long)rl->rlim_cur);
        max_conns = o->max_conns;
    }
    return max_conns;
}

/* --takeover: PATH is served for the next instance before the predecessor is told to go (if it
 * cannot be, this instance stops and the predecessor goes on serving). Returns 0 or -1. */
static int hand_over(struct listeners *l, const struct opt *o)
{
    int hand[OPT_MAX_LFDS + 1], nhand = 0;
    char err[512];

    for (int i = 0; i < l->n; i++)
        hand[nhand++] = l->fds[i];
    if (admin_listener(adm) >= 0)
        hand[nhand++] = admin_listener(adm);
    if (tko && takeover_serve(tko, hand, nhand, err, sizeof(err)) < 0) {
        log_err("%s", err);
        return -1;
    }
    if (l->tconn >= 0) {
        takeover_ready(l->tconn);
        l->tconn = -1;
        server_listeners_shared(srv, false); /* the predecessor lets them go: ours now */
        listeners_taken_over(l, o);
        log_info("--takeover: %d of %d listener%s taken over from the running instance, which "
                 "now drains",
                 l->reused, l->ntaken, l->ntaken == 1 ? "" : "s");
    }
    return 0;
}

/* What was planned, once every thread runs: "listening on" means ready. */
static void log_plan(const struct opt *o, const struct plan *p, const struct listeners *l,
                     const cpu_set_t *allowed, int naccept, long max_conns, const struct rlimit *rl)
{
    char cpus[256];
    int nthreads = nworkers_of(p);

    if (adm) {
        char name[128];

        admin_name(adm, name, sizeof(name));
        log_info("admin HTTP on %s: GET /metrics, /health, /stats", name);
    }
    listeners_log(l, o);
    cpulist_format(allowed, cpus, sizeof(cpus));
    if (o->lua)
        log_info("mode lua: %s (memory cap %zu MiB per state, timeout %d ms, lfe.shared %zu MiB%s)",
                 o->lua, o->lua_mem >> 20, o->lua_timeout_ms, o->lua_shared >> 20,
                 o->lua_unsafe ? ", every library" : "");
    log_info("mode %s; %d accept thread%s, %d group%s, %d worker%s, batch %d, dispatch %s; "
             "allowed CPU%s %s",
             o->lua ? "lua" : "echo", naccept, naccept == 1 ? "" : "s", p->ngroups,
             p->ngroups == 1 ? "" : "s", nthreads, nthreads == 1 ? "" : "s", o->batch,
             o->dispatch == DISPATCH_RR ? "rr" : "least", CPU_COUNT(allowed) == 1 ? "" : "s", cpus);
    for (int gi = 0; gi < p->ngroups; gi++) {
        cpulist_format(&p->cpus[gi], cpus, sizeof(cpus));
        log_info("group %d: %d worker%s on %s %s", gi, p->nworkers[gi],
                 p->nworkers[gi] == 1 ? "" : "s",
                 !p->pin || CPU_COUNT(&p->cpus[gi]) > 1 ? "CPUs" : "CPU",
                 p->pin ? cpus : "any (--no-pin)");
        if (p->nworkers[gi] > CPU_COUNT(&p->cpus[gi]))
            log_info("group %d: %d workers for %d CPU%s: right for Lua handlers that wait (on a "
                     "backend, lfe.sleep), which hold a worker but no CPU; for handlers that only "
                     "compute, give one worker per CPU",
                     gi, p->nworkers[gi], CPU_COUNT(&p->cpus[gi]),
                     CPU_COUNT(&p->cpus[gi]) == 1 ? "" : "s");
    }
    log_info("limits: max-conns %ld (RLIMIT_NOFILE %llu), max-pending %zu bytes per connection",
             max_conns, (unsigned long long)rl->rlim_cur, o->max_pending);
}

/* SIGHUP: the TLS certificates and keys, and the Lua script; what fails to load is logged in one
 * line and what runs stays. */
static void reload(const struct opt *o, const struct tls_conf *tls)
{
    char err[512];

    if (tls && tls_conf_reload(tls, err, sizeof(err)) < 0)
        log_err("SIGHUP: TLS reload failed, the running certificates stay: %s", err);
    else if (tls)
        log_info("SIGHUP: TLS certificates and keys reloaded (%d); new connections get them",
                 o->ntls_certs);
    if (!tls || o->lua)
        server_reload(srv);
}

/* Main's loop until SIGTERM/SIGINT: signals (SIGUSR1 counters, SIGHUP reload), the idle sweep,
 * systemd's watchdog (fed at half its period, and only while every worker comes back from its
 * batches: a stuck one lets WatchdogSec= restart the service) and STATUS=. */
static void serve(const struct opt *o, const struct tls_conf *tls, long stall)
{
    long wd_ms = (long)(sdnotify_watchdog_usec() / 2000), tick_ms, next_wd = 0, last_live = 0;

    if (sdnotify_watchdog_usec() && wd_ms < 1)
        wd_ms = 1;
    tick_ms = wd_ms && wd_ms < 1000 ? wd_ms : 1000;
    /* --idle-timeout, --proxy-timeout and --tls-handshake-timeout are swept each tick: one goes
     * between TIME and TIME + a tick (a quarter of TIME, 50 ms to 1 s) after its date */
    if (o->idle_ms) {
        long q = o->idle_ms / 4 < 50 ? 50 : o->idle_ms / 4;

        tick_ms = q < tick_ms ? q : tick_ms;
    }
    if (o->proxy) {
        long q = o->proxy_ms / 4 < 50 ? 50 : o->proxy_ms / 4;

        tick_ms = q < tick_ms ? q : tick_ms;
    }
    if (o->ntls) {
        long q = o->tls_hs_ms / 4 < 50 ? 50 : o->tls_hs_ms / 4;

        tick_ms = q < tick_ms ? q : tick_ms;
    }
    notify_ready(0);
    for (;;) {
        struct timespec tick = {tick_ms / 1000, (tick_ms % 1000) * 1000000L};
        int sig = sigtimedwait(&main_sigs, NULL, &tick);
        long now = mono_ms(), live;

        if (sig == SIGUSR1) {
            print_stats();
        } else if (sig == SIGHUP) {
            char msg[64];
            struct timespec ts;

            clock_gettime(CLOCK_MONOTONIC, &ts);
            snprintf(msg, sizeof(msg), "RELOADING=1\nMONOTONIC_USEC=%lld",
                     (long long)ts.tv_sec * 1000000LL + ts.tv_nsec / 1000);
            sdnotify_send(msg);
            reload(o, tls);
            notify_ready(report_live(srv));
        } else if (sig == SIGINT || sig == SIGTERM) {
            stop_ms = mono_ms();
            log_info("%s: stopping", sig == SIGINT ? "SIGINT" : "SIGTERM");
            return;
        }
        idle_sweep(srv, now);
        if (wd_ms && now >= next_wd && report_stalled(srv, stall) == 0) {
            sdnotify_send("WATCHDOG=1");
            next_wd = now + wd_ms;
        }
        if ((live = report_live(srv)) != last_live) {
            char msg[64];

            snprintf(msg, sizeof(msg), "STATUS=serving, %ld connection%s", live,
                     live == 1 ? "" : "s");
            sdnotify_send(msg);
            last_live = live;
        }
    }
}

/* The stop: a hand-over's successor answers /health from here on; PATH closes before the
 * listeners do (none is handed over closed); the drain, bounded by a guard. Exits the process
 * with 1 where a worker is stuck in a callback whose state cannot be freed under it. */
static void stop(const struct opt *o)
{
    sdnotify_send("STOPPING=1\nSTATUS=draining");
    /* The thread first: once it is joined, no successor is handed anything more. */
    if (takeover_stop(tko) && !takeover_handed(tko)) {
        log_warn("--takeover: stopping while a successor that holds the listeners is not yet "
                 "ready; leaving them to it");
        server_listeners_shared(srv, true);
    }
    if (takeover_handed(tko)) {
        admin_release(adm);
        server_handover(srv);
    }
    takeover_free(tko);
    tko = NULL;
    stop_guard(o->drain_ms + STOP_GUARD_MS);
    if (server_stop(srv, o->drain_ms, drain_wait) > 0) {
        print_stats();
        log_err("stopped with a worker still stuck in a callback (named above)");
        _exit(1);
    }
    print_stats();
    log_info("stopped");
}

int main(int argc, char **argv)
{
    struct opt o;
    struct script_env *lua = NULL;
    struct tls_conf *tls = NULL;
    struct plan p = {0};
    struct listeners l = {.admin_fd = -1, .tconn = -1};
    struct rlimit rl;
    cpu_set_t allowed;
    char err[512];
    int rc, naccept;
    bool pid_written = false, handed = false;
    long max_conns, stall;

    tls_alloc_init(); /* before anything of OpenSSL's */
    if ((rc = start_up(&o, argc, argv, &rl)) >= 0)
        return rc;
    if ((rc = plan_cpus(&o, &p, &allowed)) != 0)
        goto out;
    naccept = o.accept_threads ? o.accept_threads : accept_threads_for(&p);
    if (sdnotify_init(err, sizeof(err)) < 0 ||
        (rc = listeners_acquire(&l, &o, naccept, err, sizeof(err))) != 0) {
        fprintf(stderr, "lfepolld: %s\n", err);
        rc = rc ? rc : 2;
        goto out;
    }
    rc = 1;
    /* before --user, as nginx does: a key readable by root alone is the usual case */
    if (o.ntls && !(tls = tls_conf_new(&o, err, sizeof(err)))) {
        fprintf(stderr, "lfepolld: %s\n", err);
        goto out;
    }
    if ((rc = become_user(&o, &l, &pid_written)) != 0)
        goto out;
    rc = 1;
    if (o.lua && !(lua = load_lua(&o, &rc)))
        goto out;
    warn_at_start(&o, &l);
    max_conns = conn_budget(&o, &p, &rl, naccept);
    srv = server_new(&o, &p, l.fds, l.n, naccept, max_conns, lua, err, sizeof(err));
    if (!srv) {
        l.n = 0; /* the server owned them, and closed them */
        fprintf(stderr, "lfepolld: %s\n", err);
        goto out;
    }
    if (tls)
        server_set_tls(srv, tls, l.tls);
    /* Until it is told READY, the predecessor serves the listeners it handed over: a start
     * that fails from here must leave them as they are (no SYN filter on its sockets). */
    server_listeners_shared(srv, l.reused > 0);
    if (l.activated)
        server_listeners_kept(srv);
    /* /health and the watchdog call a worker stuck past the Lua timeout (1 s where there is
     * none) unresponsive */
    stall = o.lua && o.lua_timeout_ms > 0 ? o.lua_timeout_ms : 1000;
    if (o.admin) {
        adm = admin_new(o.admin, l.admin_fd, srv, stall, err, sizeof(err));
        l.admin_fd = -1; /* the admin's now, even on failure */
        if (!adm) {
            fprintf(stderr, "lfepolld: %s\n", err);
            goto out_server;
        }
    }
    block_signals();
    if (server_start(srv) < 0)
        goto out_server;
    if (adm && (rc = admin_start(adm, NULL)) < 0) {
        log_err("cannot create the admin thread: %s", strerror(-rc));
        rc = 1;
        server_stop(srv, 0, NULL);
        goto out_server;
    }
    rc = 1;
    if (hand_over(&l, &o) < 0) {
        server_stop(srv, 0, NULL);
        goto out_server;
    }
    log_plan(&o, &p, &l, &allowed, naccept, max_conns, &rl);
    serve(&o, tls, stall);
    handed = takeover_handed(tko);
    stop(&o);
    rc = 0;
out_server:
    l.n = 0; /* the server owns the listeners */
out:
    if (l.tconn >= 0)
        close(l.tconn); /* never told READY: the predecessor goes on */
    listeners_close(&l);
    /* handed over: the successor rewrites the file (it may have already); leave it to it */
    if (pid_written && !handed && !takeover_handed(tko))
        pidfile_remove(o.pid_file);
    takeover_free(tko);
    admin_free(adm); /* after server_stop: /health says 503 while draining */
    server_free(srv);
    script_env_free(lua);
    tls_conf_free(tls);
    plan_free(&p);
    return rc;
}
