/* btune_ns: the network namespaces of lfbench tune, made by a holder process, and the server
 * and load processes it starts inside them.
 *
 * DESIGN. A namespace is made by a forked holder (unshare(CLONE_NEWNET)), never named with
 * `ip netns add`: nothing under /run/netns can outlive the run, and when the last process in
 * it ends the kernel frees it, its TIME_WAIT sockets with it. The holder writes the variant's
 * values to /proc/sys from inside (the sysctl files show the opener's namespace), reports on a
 * pipe, then waits for the other end of a second pipe to close; it dies with lfbench tune
 * (PR_SET_PDEATHSIG), so even a SIGKILL leaves no namespace held by it. Servers and loads are
 * forked, setns() into the holder's namespace, lead a process group of their own (the
 * terminal's ^C reaches lfbench tune, which stops them in order) and die with it too. lfbench
 * tune is a child subreaper (btune.c), so a server that daemonizes is still its child, found by
 * its namespace and killed at the close. */
#include "btune_ns.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tune.h"

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int lo_up(void)
{
    struct ifreq ifr;
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), rc = 0;

    if (fd < 0)
        return -errno;
    memset(&ifr, 0, sizeof(ifr));
    strcpy(ifr.ifr_name, "lo");
    if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
        rc = -errno;
    ifr.ifr_flags |= IFF_UP;
    if (!rc && ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
        rc = -errno;
    close(fd);
    return rc;
}

char btune_ns_access(const char *key)
{
    char path[512];
    size_t i;

    i = (size_t)snprintf(path, sizeof(path), "/proc/sys/");
    for (const char *k = key; *k && i + 1 < sizeof(path); k++)
        path[i++] = *k == '.' ? '/' : *k;
    path[i] = 0;
    if (access(path, F_OK) < 0)
        return '-';
    return access(path, W_OK) == 0 ? 'w' : 'r';
}

/* The holder's life: its reports are lines on st ("U errno", "L errno", "W index errno",
 * "G index access value", "OK"), read by read_reports. */
static void holder(int ctl, int st, const struct btune_kv *set, int nset,
                   const struct btune_kv *get, int nget)
{
    FILE *f;
    char c, v[128];
    int rc;

    for (int fd = 3; fd < 1024; fd++) /* it never execs: no lock or socket of ours is kept */
        if (fd != ctl && fd != st)
            close(fd);
    f = fdopen(st, "w");

    signal(SIGINT, SIG_IGN); /* the terminal's ^C is lfbench tune's to handle */
    if (!f)
        _exit(1);
    if (unshare(CLONE_NEWNET) < 0) {
        fprintf(f, "U %d\n", errno);
        fclose(f), _exit(1);
    }
    if ((rc = lo_up()) < 0) {
        fprintf(f, "L %d\n", -rc);
        fclose(f), _exit(1);
    }
    for (int i = 0; i < nset; i++)
        if ((rc = tune_write("/proc/sys", set[i].key, set[i].value)) < 0) {
            fprintf(f, "W %d %d\n", i, -rc);
            fclose(f), _exit(1);
        }
    for (int i = 0; i < nget; i++) {
        char a = btune_ns_access(get[i].key);
        if (a == '-' || tune_read("/proc/sys", get[i].key, v, sizeof(v)) < 0)
            strcpy(v, "-");
        fprintf(f, "G %d %c %s\n", i, a, v);
    }
    fprintf(f, "OK\n");
    fclose(f);
    while (read(ctl, &c, 1) != 0 && (errno == EINTR || errno == EAGAIN)) /* until its end closes */
        ;
    _exit(0);
}

/* Words one of the holder's failures for people. */
static void say_failure(const char *line, const struct btune_kv *set, int nset, char *err,
                        size_t errlen)
{
    int i = -1, e = 0;

    if (sscanf(line, "U %d", &e) == 1)
        snprintf(err, errlen,
                 "cannot make a network namespace (%s): lfbench tune needs root "
                 "(CAP_SYS_ADMIN); run it with sudo",
                 strerror(e));
    else if (sscanf(line, "L %d", &e) == 1)
        snprintf(err, errlen, "cannot bring up the namespace's loopback (%s)", strerror(e));
    else if (sscanf(line, "W %d %d", &i, &e) == 2 && i >= 0 && i < nset && e == EINVAL)
        snprintf(err, errlen,
                 "%s: the kernel refuses '%s' (%s): give a value it takes (try one with "
                 "unshare -n sysctl -w %s=VALUE)",
                 set[i].key, set[i].value, strerror(e), set[i].key);
    else if (i >= 0 && i < nset && (e == EACCES || e == EPERM))
        snprintf(err, errlen, "%s is read-only in a network namespace: it cannot be tuned there",
                 set[i].key);
    else if (i >= 0 && i < nset)
        snprintf(err, errlen, "%s: cannot write '%s' in the namespace (%s)", set[i].key,
                 set[i].value, strerror(e));
    else
        snprintf(err, errlen, "the namespace's holder said '%s'", line);
}

/* Reads the holder's reports; 0 on "OK". */
static int read_reports(int st, const struct btune_kv *set, int nset, struct btune_kv *get,
                        int nget, char *err, size_t errlen)
{
    FILE *f = fdopen(st, "r");
    char line[256];
    int rc = -1;

    if (!f) {
        close(st);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    snprintf(err, errlen, "the namespace's holder ended without a word");
    while (fgets(line, sizeof(line), f)) {
        int i, n = 0;
        char a;
        line[strcspn(line, "\n")] = 0;
        if (!strcmp(line, "OK")) {
            rc = 0;
            break;
        }
        if (sscanf(line, "G %d %c %n", &i, &a, &n) == 2 && n > 0 && i >= 0 && i < nget) {
            get[i].access = a;
            snprintf(get[i].value, sizeof(get[i].value), "%s", line + n);
            continue;
        }
        say_failure(line, set, nset, err, errlen);
        break;
    }
    fclose(f);
    return rc;
}

static void reap(pid_t pid)
{
    for (int i = 0; i < 500; i++) { /* bounded: 5 s, then it is killed */
        if (waitpid(pid, NULL, WNOHANG) != 0)
            return;
        if (i == 100)
            kill(pid, SIGKILL);
        sleep_ms(10);
    }
}

int btune_ns_open(struct btune_ns *ns, const struct btune_kv *set, int nset, struct btune_kv *get,
                  int nget, char *err, size_t errlen)
{
    int ctl[2], st[2];
    char path[64];
    pid_t parent;
    ssize_t n;

    memset(ns, 0, sizeof(*ns));
    ns->ctl = ns->nsfd = -1;
    if (pipe2(ctl, O_CLOEXEC) < 0)
        goto no_pipe;
    if (pipe2(st, O_CLOEXEC) < 0)
        goto no_st;
    fflush(NULL);
    parent = getpid();
    ns->holder = fork();
    if (ns->holder < 0)
        goto no_fork;
    if (ns->holder == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) /* it died before the prctl: no one would end us */
            _exit(1);
        close(ctl[1]);
        close(st[0]);
        holder(ctl[0], st[1], set, nset, get, nget);
    }
    close(ctl[0]);
    close(st[1]);
    ns->ctl = ctl[1];
    if (read_reports(st[0], set, nset, get, nget, err, errlen) < 0)
        goto fail;
    snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)ns->holder);
    if ((ns->nsfd = open(path, O_RDONLY | O_CLOEXEC)) < 0 ||
        (n = readlink(path, ns->id, sizeof(ns->id) - 1)) < 0) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        goto fail;
    }
    ns->id[n] = 0;
    return 0;
no_fork:
    close(st[0]);
    close(st[1]);
no_st:
    close(ctl[0]);
    close(ctl[1]);
no_pipe:
    snprintf(err, errlen, "cannot start a namespace's holder: %s", strerror(errno));
    ns->holder = 0;
    return -1;
fail:
    btune_ns_close(ns);
    return -1;
}

pid_t btune_ns_spawn(const struct btune_ns *ns, char *const argv[], int logfd)
{
    int ep[2], e = 0, nullfd;
    pid_t pid, parent = getpid();

    if (pipe2(ep, O_CLOEXEC) < 0)
        return -errno;
    fflush(NULL);
    if ((pid = fork()) < 0) {
        e = errno;
        close(ep[0]);
        close(ep[1]);
        return -e;
    }
    if (pid == 0) {
        sigset_t all;
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        setpgid(0, 0);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGPIPE, SIG_DFL);
        sigemptyset(&all);
        sigprocmask(SIG_SETMASK, &all, NULL);
        nullfd = open("/dev/null", O_RDONLY);
        if (setns(ns->nsfd, CLONE_NEWNET) == 0 && nullfd >= 0 && dup2(nullfd, 0) == 0 &&
            dup2(logfd, 1) == 1 && dup2(logfd, 2) == 2)
            execvp(argv[0], argv);
        e = errno;
        if (write(ep[1], &e, sizeof(e)) < 0)
            _exit(127);
        _exit(127);
    }
    close(ep[1]);
    setpgid(pid, pid); /* the child does it too: whichever comes first */
    if (read(ep[0], &e, sizeof(e)) == (ssize_t)sizeof(e)) {
        close(ep[0]);
        waitpid(pid, NULL, 0);
        return -e;
    }
    close(ep[0]);
    return pid;
}

static bool listens_in(const char *path, int port)
{
    FILE *f = fopen(path, "r");
    char line[512];
    unsigned lport, state;
    bool yes = false;

    if (!f)
        return false;
    while (!yes && fgets(line, sizeof(line), f))
        if (sscanf(line, " %*d: %*[0-9A-Fa-f]:%x %*[0-9A-Fa-f]:%*x %x", &lport, &state) == 2)
            yes = (int)lport == port && state == 0x0A; /* TCP_LISTEN */
    fclose(f);
    return yes;
}

bool btune_ns_listening(const struct btune_ns *ns, int port)
{
    char path[64];

    snprintf(path, sizeof(path), "/proc/%d/net/tcp", (int)ns->holder);
    if (listens_in(path, port))
        return true;
    snprintf(path, sizeof(path), "/proc/%d/net/tcp6", (int)ns->holder);
    return listens_in(path, port);
}

void btune_ns_procnet(const struct btune_ns *ns, char *buf, size_t len)
{
    snprintf(buf, len, "/proc/%d/net", (int)ns->holder);
}

/* Calls fn(pid, arg) for every process in /proc. */
static void each_process(void (*fn)(pid_t, void *), void *arg)
{
    DIR *d = opendir("/proc");
    struct dirent *e;

    if (!d)
        return;
    while ((e = readdir(d)))
        if (e->d_name[0] >= '1' && e->d_name[0] <= '9')
            fn((pid_t)atoi(e->d_name), arg);
    closedir(d);
}

struct group_cpu {
    pid_t pgid;
    unsigned long ticks;
    int found;
};

static void add_cpu(pid_t pid, void *arg)
{
    struct group_cpu *g = arg;
    char path[64], buf[1024], *p;
    unsigned long ut, st;
    long cut, cst;
    int pgrp, n;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if (!(f = fopen(path, "r")))
        return;
    n = (int)fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n > 0 ? n : 0] = 0;
    if (!(p = strrchr(buf, ')'))) /* the command name may hold spaces and parentheses */
        return;
    if (sscanf(p + 1, " %*c %*d %d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu %ld %ld", &pgrp, &ut,
               &st, &cut, &cst) == 5 &&
        pgrp == g->pgid) {
        g->ticks +=
            ut + st + (unsigned long)(cut > 0 ? cut : 0) + (unsigned long)(cst > 0 ? cst : 0);
        g->found++;
    }
}

double btune_ns_group_cpu(pid_t pgid)
{
    struct group_cpu g = {pgid, 0, 0};

    each_process(add_cpu, &g);
    return g.found ? (double)g.ticks / (double)sysconf(_SC_CLK_TCK) : -1;
}

bool btune_ns_alive(pid_t pid, int *status)
{
    return waitpid(pid, status, WNOHANG) == 0;
}

void btune_ns_stop(pid_t pid, int grace_ms, int *status)
{
    *status = -1;
    if (pid <= 0)
        return;
    kill(-pid, SIGTERM);
    for (int t = 0; t < grace_ms + 3000; t += 10) { /* bounded: SIGKILL cannot be refused */
        pid_t w = waitpid(pid, status, WNOHANG);
        if (w == pid || (w < 0 && errno == ECHILD))
            break;
        if (t >= grace_ms)
            kill(-pid, SIGKILL);
        sleep_ms(10);
    }
    kill(-pid, SIGKILL); /* what the leader left in its group */
}

struct in_ns {
    const struct btune_ns *ns;
    int found;
};

static void kill_in_ns(pid_t pid, void *arg)
{
    struct in_ns *x = arg;
    char path[64], id[64];
    ssize_t n;

    if (pid == x->ns->holder || pid == getpid())
        return;
    snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
    if ((n = readlink(path, id, sizeof(id) - 1)) < 0)
        return;
    id[n] = 0;
    if (!strcmp(id, x->ns->id)) {
        kill(pid, SIGKILL);
        x->found++;
    }
}

void btune_ns_close(struct btune_ns *ns)
{
    if (!ns->holder)
        return;
    for (int i = 0; ns->id[0] && i < 300; i++) { /* bounded: 3 s of SIGKILLs */
        struct in_ns x = {ns, 0};
        each_process(kill_in_ns, &x);
        while (waitpid(-1, NULL, WNOHANG) > 0) /* orphans that came to us, the subreaper */
            ;
        if (!x.found)
            break;
        sleep_ms(10);
    }
    if (ns->nsfd >= 0)
        close(ns->nsfd);
    if (ns->ctl >= 0)
        close(ns->ctl); /* the holder's read ends: it exits */
    reap(ns->holder);
    ns->holder = 0;
    ns->ctl = ns->nsfd = -1;
}
