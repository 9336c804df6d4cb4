/* shim: an LD_PRELOAD fault injector for the integration tests; LFE_FAULT says which calls fail.
 *
 *   LFE_FAULT="RULE[,RULE...]"     RULE = POINT:ACTION[:OPTION...]
 *
 * POINT   accept4, epoll_ctl_add, epoll_ctl_mod, epoll_ctl_del, calloc, send, connect,
 *         pthread_create (it returns the errno instead of setting it)
 * ACTION  an errno name (EMFILE, ENOMEM, EPROTO...): the call fails with it (calloc returns
 *         NULL); or "short" (send only): half the bytes are sent, the call succeeds short;
 *         or "slow" (connect only): the call takes ms=N milliseconds more, then goes through
 *         (a connect() searching a crowded ephemeral port range)
 * OPTION  nth=N     the Nth counted call only (1-based)
 *         every=N   every Nth counted call (N, 2N, ...); the default is every=1
 *         after=N   every counted call after the first N
 *         times=M   at most M faults from this rule
 *         thread=P  only calls from threads whose name starts with P are counted
 *                   (lfepolld's are lfe-accept and lfe-gG-wW)
 *         exe       only calls made by the program's own code are counted, not a library's
 *                   (libc and the sanitizers allocate too: a thread's start calls calloc)
 *         ms=N      slow only: how long (default 10)
 *         drop      accept4 only: take the connection first (the real accept4), close it, then
 *                   fail: what the kernel does for the network errors of a new connection
 *
 * Example: "epoll_ctl_mod:ENOMEM:nth=3:thread=lfe-g,accept4:EPROTO:every=5:drop".
 *
 * Each rule counts the calls that reach its point and pass its thread filter, with an atomic
 * counter: the same program and the same traffic fault the same calls, from any thread. Rules
 * on one point count independently; the first that fires decides. Each fault writes one line
 * to stderr ("lfe-fault: epoll_ctl_mod -> ENOMEM (call 3)"), so a test can see that it fired.
 * A rule that does not parse is reported and the process exits 97 before main. No LFE_FAULT:
 * every call goes straight through.
 *
 * Under AddressSanitizer the shim must come first in the library list for its calloc to be
 * seen, which ASan refuses unless ASAN_OPTIONS has verify_asan_link_order=0 (the tests set it):
 * the shim's calls then reach ASan's interceptors through dlsym(RTLD_NEXT). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

enum point {
    P_ACCEPT4,
    P_EPOLL_ADD,
    P_EPOLL_MOD,
    P_EPOLL_DEL,
    P_CALLOC,
    P_SEND,
    P_CONNECT,
    P_THREAD,
    P_COUNT
};

static const char *const point_name[P_COUNT] = {"accept4",       "epoll_ctl_add", "epoll_ctl_mod",
                                                "epoll_ctl_del", "calloc",        "send",
                                                "connect",       "pthread_create"};

#define ACT_SHORT (-1) /* action: a short send instead of an error */
#define ACT_SLOW (-2)  /* action: a slow connect instead of an error */
#define MAX_RULES 16

struct rule {
    enum point point;
    int action;        /* an errno value, or ACT_SHORT */
    unsigned long nth; /* 0: not set */
    unsigned long every;
    unsigned long after;
    unsigned long times; /* 0: unlimited */
    unsigned long ms;    /* ACT_SLOW: the delay */
    bool drop;
    bool exe;             /* only calls from the main program's code */
    char thread[16];      /* name prefix; "" = any thread */
    unsigned long calls;  /* atomic: calls counted */
    unsigned long faults; /* atomic: faults injected */
};

static struct rule rules[MAX_RULES];
static uintptr_t exe_lo[8], exe_hi[8]; /* the main program's loaded segments */
static int exe_nseg;
static int nrules;
static bool have_point[P_COUNT];

static const struct {
    const char *name;
    int value;
} errnos[] = {
#define E(x)                                                                                       \
    {                                                                                              \
#x, x                                                                                      \
    }
    E(EAGAIN),   E(EWOULDBLOCK),  E(EINTR),       E(ECONNABORTED), E(EMFILE),      E(ENFILE),
    E(ENOBUFS),  E(ENOMEM),       E(EPROTO),      E(EPERM),        E(EBADF),       E(EINVAL),
    E(ENOTSOCK), E(EFAULT),       E(EOPNOTSUPP),  E(ENETDOWN),     E(ENOPROTOOPT), E(EHOSTDOWN),
    E(ENONET),   E(EHOSTUNREACH), E(ENETUNREACH), E(ETIMEDOUT),    E(ECONNRESET),  E(EPIPE),
    E(EIO),      E(ENOSPC),       E(EEXIST),      E(ENOENT),       E(ELOOP),       E(ENOTCONN),
    E(EMSGSIZE), E(EACCES),
#undef E
};

static const char *errno_name(int e)
{
    for (size_t i = 0; i < sizeof(errnos) / sizeof(errnos[0]); i++)
        if (errnos[i].value == e)
            return errnos[i].name;
    return "?";
}

/* Writes the NULL-terminated strings as one line on stderr with a single write(2): no stdio,
 * no allocation (calloc is interposed). */
static void say(const char *const *parts)
{
    char line[256];
    size_t len = 0;

    for (; *parts; parts++) {
        size_t l = strlen(*parts);

        if (len + l >= sizeof(line) - 1)
            l = sizeof(line) - 2 - len;
        memcpy(line + len, *parts, l);
        len += l;
    }
    line[len++] = '\n';
    if (write(STDERR_FILENO, line, len) < 0) {
        /* nowhere to report */
    }
}

/* "lfe-fault: POINT -> ACTION (call N)" */
static void say_fault(enum point p, int action, unsigned long n)
{
    char num[24];
    int i = (int)sizeof(num) - 1;

    num[i] = '\0';
    do
        num[--i] = (char)('0' + n % 10);
    while ((n /= 10) && i > 0);
    say((const char *const[]){"lfe-fault: ", point_name[p], " -> ",
                              action == ACT_SHORT  ? "short"
                              : action == ACT_SLOW ? "slow"
                                                   : errno_name(action),
                              " (call ", &num[i], ")", NULL});
}

static void bad(const char *rule, const char *why)
{
    char line[512];
    int n = snprintf(line, sizeof(line), "lfe-fault: bad LFE_FAULT rule '%s': %s\n", rule, why);

    if (write(STDERR_FILENO, line, (size_t)n) < 0) {
        /* exiting anyway */
    }
    _exit(97);
}

static bool parse_ulong(const char *s, unsigned long *out)
{
    char *end;

    errno = 0;
    *out = strtoul(s, &end, 10);
    return *s && !*end && !errno && *out > 0;
}

/* Parses one rule (a copy the parser may cut up). */
static void parse_rule(char *text)
{
    char copy[256], *save = NULL, *tok;
    struct rule *r;
    int p;

    snprintf(copy, sizeof(copy), "%s", text); /* for messages */
    if (nrules == MAX_RULES)
        bad(copy, "more than 16 rules");
    r = &rules[nrules];
    memset(r, 0, sizeof(*r));
    tok = strtok_r(text, ":", &save);
    for (p = 0; p < P_COUNT && (!tok || strcmp(tok, point_name[p]) != 0); p++)
        ;
    if (p == P_COUNT)
        bad(copy, "unknown point (accept4, epoll_ctl_add, epoll_ctl_mod, epoll_ctl_del, "
                  "calloc, send, connect, pthread_create)");
    r->point = (enum point)p;
    tok = strtok_r(NULL, ":", &save);
    if (!tok)
        bad(copy, "no action (an errno name, or short)");
    if (strcmp(tok, "short") == 0) {
        if (r->point != P_SEND)
            bad(copy, "short is for send only");
        r->action = ACT_SHORT;
    } else if (strcmp(tok, "slow") == 0) {
        if (r->point != P_CONNECT)
            bad(copy, "slow is for connect only");
        r->action = ACT_SLOW;
        r->ms = 10;
    } else {
        size_t i;

        for (i = 0; i < sizeof(errnos) / sizeof(errnos[0]); i++)
            if (strcmp(tok, errnos[i].name) == 0)
                break;
        if (i == sizeof(errnos) / sizeof(errnos[0]))
            bad(copy, "unknown errno name");
        r->action = errnos[i].value;
    }
    while ((tok = strtok_r(NULL, ":", &save))) {
        if (strncmp(tok, "nth=", 4) == 0 && parse_ulong(tok + 4, &r->nth))
            continue;
        if (strncmp(tok, "ms=", 3) == 0 && r->action == ACT_SLOW && parse_ulong(tok + 3, &r->ms))
            continue;
        if (strncmp(tok, "every=", 6) == 0 && parse_ulong(tok + 6, &r->every))
            continue;
        if (strncmp(tok, "after=", 6) == 0 && parse_ulong(tok + 6, &r->after))
            continue;
        if (strncmp(tok, "times=", 6) == 0 && parse_ulong(tok + 6, &r->times))
            continue;
        if (strncmp(tok, "thread=", 7) == 0 && tok[7] && strlen(tok + 7) < sizeof(r->thread)) {
            snprintf(r->thread, sizeof(r->thread), "%s", tok + 7);
            continue;
        }
        if (strcmp(tok, "exe") == 0) {
            r->exe = true;
            continue;
        }
        if (strcmp(tok, "drop") == 0 && r->point == P_ACCEPT4) {
            r->drop = true;
            continue;
        }
        bad(copy, "bad option (nth=N, every=N, after=N, times=M, thread=PREFIX, exe, drop)");
    }
    if (!!r->nth + !!r->every + !!r->after > 1)
        bad(copy, "nth, every and after exclude each other");
    if (!r->nth && !r->after && !r->every)
        r->every = 1;
    have_point[r->point] = true;
    nrules++;
}

/* The main program comes first in dl_iterate_phdr's list: its segments, then stop. */
static int note_exe(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    for (int i = 0; i < info->dlpi_phnum && exe_nseg < 8; i++)
        if (info->dlpi_phdr[i].p_type == PT_LOAD) {
            exe_lo[exe_nseg] = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
            exe_hi[exe_nseg] = exe_lo[exe_nseg] + info->dlpi_phdr[i].p_memsz;
            exe_nseg++;
        }
    return 1;
}

static bool from_exe(const void *caller)
{
    uintptr_t a = (uintptr_t)caller;

    for (int i = 0; i < exe_nseg; i++)
        if (a >= exe_lo[i] && a < exe_hi[i])
            return true;
    return false;
}

/* Runs before main, while the process has one thread. */
__attribute__((constructor)) static void shim_init(void)
{
    static char spec[2048];
    const char *env = getenv("LFE_FAULT");
    char *save = NULL, *text;

    if (!env || !*env)
        return;
    if (strlen(env) >= sizeof(spec))
        bad(env, "longer than 2047 bytes");
    memcpy(spec, env, strlen(env) + 1);
    /* strtok_r per rule, then per field: cut the rules apart first. */
    {
        char *rule_text[MAX_RULES + 1];
        int n = 0;

        for (text = strtok_r(spec, ",", &save); text; text = strtok_r(NULL, ",", &save)) {
            if (n == MAX_RULES)
                bad(text, "more than 16 rules");
            rule_text[n++] = text;
        }
        for (int i = 0; i < n; i++)
            parse_rule(rule_text[i]);
    }
    dl_iterate_phdr(note_exe, NULL);
}

static bool thread_matches(const struct rule *r)
{
    char name[17] = "";

    if (!r->thread[0])
        return true;
    if (prctl(PR_GET_NAME, name, 0, 0, 0) < 0)
        return false;
    return strncmp(name, r->thread, strlen(r->thread)) == 0;
}

/* The rule that faults this call to point p from caller, or NULL. Counts the call in every
 * rule of p whose filters it passes. */
static const struct rule *check(enum point p, const void *caller)
{
    const struct rule *hit = NULL;

    if (!have_point[p])
        return NULL;
    for (int i = 0; i < nrules; i++) {
        struct rule *r = &rules[i];
        unsigned long n;
        bool fire;

        if (r->point != p || (r->exe && !from_exe(caller)) || !thread_matches(r))
            continue;
        n = __atomic_add_fetch(&r->calls, 1, __ATOMIC_RELAXED);
        fire = r->nth ? n == r->nth : r->after ? n > r->after : n % r->every == 0;
        if (!fire || hit)
            continue;
        if (r->times && __atomic_add_fetch(&r->faults, 1, __ATOMIC_RELAXED) > r->times)
            continue;
        hit = r;
        say_fault(p, r->action, n);
    }
    return hit;
}

/* The real functions, found on first use. dlsym may itself allocate: a calloc reached while
 * resolving returns NULL (glibc's dlsym copes with that). */
static __thread int resolving;

static void *real(const char *name)
{
    void *f;

    resolving++;
    f = dlsym(RTLD_NEXT, name);
    resolving--;
    if (!f) {
        say((const char *const[]){"lfe-fault: cannot find the real ", name, NULL});
        _exit(98);
    }
    return f;
}

#define REAL(type, name, args)                                                                     \
    static type(*real_##name) args;                                                                \
    if (!real_##name)                                                                              \
        real_##name = (type(*) args)real(#name);

/* Each point's fault, for a call from caller (the libc name's and syscall(2)'s alike). */
static int fault_accept4(const void *caller, int fd, struct sockaddr *addr, socklen_t *len,
                         int flags)
{
    const struct rule *r;
    int nfd;

    REAL(int, accept4, (int, struct sockaddr *, socklen_t *, int))
    r = check(P_ACCEPT4, caller);
    if (!r)
        return real_accept4(fd, addr, len, flags);
    if (r->drop) {
        nfd = real_accept4(fd, addr, len, flags);
        if (nfd < 0)
            return nfd; /* nothing queued: the real answer */
        close(nfd);
    }
    errno = r->action;
    return -1;
}

int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
    return fault_accept4(__builtin_return_address(0), fd, addr, len, flags);
}

int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
    const struct rule *r;

    REAL(int, epoll_ctl, (int, int, int, struct epoll_event *))
    r = check(op == EPOLL_CTL_ADD   ? P_EPOLL_ADD
              : op == EPOLL_CTL_MOD ? P_EPOLL_MOD
                                    : P_EPOLL_DEL,
              __builtin_return_address(0));
    if (!r)
        return real_epoll_ctl(epfd, op, fd, ev);
    errno = r->action;
    return -1;
}

static ssize_t fault_send(const void *caller, int fd, const void *buf, size_t n, int flags)
{
    const struct rule *r;

    REAL(ssize_t, send, (int, const void *, size_t, int))
    r = check(P_SEND, caller);
    if (!r)
        return real_send(fd, buf, n, flags);
    if (r->action == ACT_SHORT)
        return real_send(fd, buf, n > 1 ? n / 2 : n, flags);
    errno = r->action;
    return -1;
}

ssize_t send(int fd, const void *buf, size_t n, int flags)
{
    return fault_send(__builtin_return_address(0), fd, buf, n, flags);
}

static int fault_connect(const void *caller, int fd, const struct sockaddr *addr, socklen_t len)
{
    const struct rule *r;

    REAL(int, connect, (int, const struct sockaddr *, socklen_t))
    r = check(P_CONNECT, caller);
    if (r && r->action == ACT_SLOW) {
        struct timespec ts = {(time_t)(r->ms / 1000), (long)(r->ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    } else if (r) {
        errno = r->action;
        return -1;
    }
    return real_connect(fd, addr, len);
}

int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
    return fault_connect(__builtin_return_address(0), fd, addr, len);
}

int pthread_create(pthread_t *tid, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    const struct rule *r;

    REAL(int, pthread_create, (pthread_t *, const pthread_attr_t *, void *(*)(void *), void *))
    r = check(P_THREAD, __builtin_return_address(0));
    return r ? r->action : real_pthread_create(tid, attr, fn, arg);
}

/* lfepolld's and lfbench's hot paths (include/sysc.h) call syscall(2) itself, not the libc
 * names: the same points, told apart by the number. Every other call goes through. */
long syscall(long nr, ...)
{
    const void *caller = __builtin_return_address(0);
    long a[6];
    va_list ap;

    REAL(long, syscall, (long, ...))
    va_start(ap, nr);
    for (int i = 0; i < 6; i++)
        a[i] = va_arg(ap, long);
    va_end(ap);
    switch (nr) {
    case SYS_accept4:
        return fault_accept4(caller, (int)a[0], (struct sockaddr *)a[1], (socklen_t *)a[2],
                             (int)a[3]);
    case SYS_sendto:
        if (!a[4]) /* send(2) is sendto without an address */
            return fault_send(caller, (int)a[0], (const void *)a[1], (size_t)a[2], (int)a[3]);
        break;
    case SYS_connect:
        return fault_connect(caller, (int)a[0], (const struct sockaddr *)a[1], (socklen_t)a[2]);
    }
    return real_syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

void *calloc(size_t n, size_t size)
{
    static void *(*real_calloc)(size_t, size_t);
    const struct rule *r;

    if (!real_calloc) {
        if (resolving)
            return NULL;
        real_calloc = (void *(*)(size_t, size_t))real("calloc");
    }
    r = check(P_CALLOC, __builtin_return_address(0));
    if (!r)
        return real_calloc(n, size);
    errno = r->action;
    return NULL;
}
