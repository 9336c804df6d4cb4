/* takeover: --takeover PATH, listening sockets handed to a successor over a Unix socket.
 *
 * DESIGN
 *
 * An instance started with --takeover PATH listens on a Unix stream socket, bound under a
 * temporary name (mode 0600) before --user drops its privileges, and renamed over PATH once it
 * serves, so PATH always names a live instance or a stale file, never half of one. Its
 * successor, started with the same PATH:
 *
 *   successor -> "LFE-TAKEOVER 1\n"
 *   instance  -> "LFE-LISTENERS 1 N\n" with its N listening sockets attached (SCM_RIGHTS), or
 *                "LFE-BUSY\n" while another successor holds them (one at a time)
 *   successor    checks each one (a listening TCP socket, or not used), uses those bound where
 *                its --listen asks, binds the others itself, starts every thread, then serves
 *                PATH itself
 *   successor -> "READY\n"
 *   instance     SIGTERM to itself: it stops accepting and drains as on any stop
 *
 * Who may: the listeners are a root-bound port and the admin listener, so each side asks the
 * kernel who the other is (SO_PEERCRED) and deals only with the uid this instance was started
 * as (before --user) or root. The instance learns the successor's uid as of its connect(); the
 * successor learns the instance's as of its listen(), which is why PATH's socket listens before
 * the drop: another process of the --user uid (often nobody, shared with other daemons) can
 * neither take the listeners nor, squatting PATH, hand a successor listeners of its own.
 *
 * Both processes hold the same sockets (one file description each), so closing the old
 * instance's descriptors loses nothing queued: what waits in a queue is accepted by the
 * successor. A successor that dies or closes before READY changes nothing: the instance goes on
 * serving and waits for the next. Each step has one deadline, from its start to its end
 * (STEP_MS for the request, READY_MS for a successor to start every thread), however the bytes
 * come; up to MAX_PEERS successors are served at once, by this module's thread (poll), never by
 * a thread on the request path, so a client that connects to PATH and drips bytes, or says
 * nothing, or garbage, is dropped with one log line at its deadline and holds up no other.
 */
#include "takeover.h"

#include "log.h"
#include "net.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define STEP_MS 5000   /* the successor's request; the instance's answer; a connect */
#define READY_MS 60000 /* for a successor to start every thread */
#define MAX_PEERS 8    /* successors served at once; more wait in the backlog */
#define HELLO "LFE-TAKEOVER 1\n"
#define BUSY "LFE-BUSY\n" /* another successor has the listeners: this one gets none */

/* One client of PATH, the thread's alone. */
struct peer {
    int fd;        /* -1: a free slot */
    bool sent;     /* the listeners went: waiting for READY */
    long deadline; /* CLOCK_MONOTONIC ms: the end of the step */
    size_t len;    /* bytes in line */
    char line[64];
};

struct takeover {
    int lfd;    /* the Unix listener, at tmp until renamed over path */
    int stopfd; /* eventfd: stop the thread */
    int fds[TAKEOVER_MAX_FDS];
    int n;
    uid_t uid;     /* who started this instance: it and root may take over */
    ino_t ino;     /* path's inode once renamed: ours while it is unchanged */
    bool renamed;  /* tmp is path now */
    bool started;  /* the thread runs */
    int handed;    /* atomic: the successor is ready; the SIGTERM that follows is ours */
    long nrefused; /* the thread's: clients of another uid refused since the last line */
    time_t refused_logged;
    pthread_t tid;
    struct peer peers[MAX_PEERS]; /* the thread's */
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    char tmp[sizeof(((struct sockaddr_un *)0)->sun_path) + 16];
};

static long mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
}

static int unix_addr(const char *path, struct sockaddr_un *a, char *err, size_t errlen)
{
    memset(a, 0, sizeof(*a));
    a->sun_family = AF_UNIX;
    if (strlen(path) >= sizeof(a->sun_path)) {
        snprintf(err, errlen, "--takeover: '%s' is longer than a socket path may be (%zu bytes)",
                 path, sizeof(a->sun_path) - 1);
        return -1;
    }
    strcpy(a->sun_path, path);
    return 0;
}

/* Whether uid may be on the other end: the uid this process was started as, or root. */
static bool trusted(uid_t uid, uid_t self)
{
    return uid == 0 || uid == self;
}

/* What path is when it is there and not a socket ("a regular file"...), or NULL: absent, or a
 * socket (a live instance's or a stale one, which rename may replace). lstat: a symbolic link
 * is named as one, never followed (rename would replace the link, not what it names). */
static const char *not_a_socket(const char *path)
{
    struct stat st;

    if (lstat(path, &st) < 0 || S_ISSOCK(st.st_mode))
        return NULL;
    return S_ISREG(st.st_mode)    ? "a regular file"
           : S_ISDIR(st.st_mode)  ? "a directory"
           : S_ISLNK(st.st_mode)  ? "a symbolic link"
           : S_ISFIFO(st.st_mode) ? "a FIFO"
                                  : "a device or other file";
}

/* One line in err saying that path is not lfepolld's to replace. */
static void refuse_path(const char *path, const char *what, char *err, size_t errlen)
{
    snprintf(err, errlen,
             "--takeover %s: it is %s, not a socket: refused, and left as it is (PATH is the "
             "Unix socket lfepolld serves for its successor, created and removed by it: give "
             "a path of its own, e.g. /run/lfepolld/takeover.sock)",
             path, what);
}

/* Why fd, handed over as a listener, cannot be one (NULL: it is a listening TCP socket). */
static const char *not_a_listener(int fd)
{
    int domain = 0, type = 0, proto = 0, acc = 0;
    socklen_t l1 = sizeof(domain), l2 = sizeof(type), l3 = sizeof(proto), l4 = sizeof(acc);

    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &l1) < 0 ||
        getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l2) < 0 ||
        getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &l3) < 0 ||
        getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &l4) < 0)
        return "not a socket";
    if (domain != AF_INET && domain != AF_INET6)
        return "not an IPv4 or IPv6 socket";
    if (type != SOCK_STREAM || proto != IPPROTO_TCP)
        return type == SOCK_DGRAM ? "a datagram (UDP) socket" : "not a TCP socket";
    if (!acc)
        return "bound but not listening";
    return NULL;
}

/* Keeps the listening TCP sockets of fds[0..n) (made non-blocking: the accept thread relies on
 * EAGAIN, and a blocking one would hold it in accept4), closes the others with a line each.
 * Returns how many are kept, at the front of fds. */
static int keep_listeners(const char *path, int *fds, int n)
{
    int kept = 0;

    for (int i = 0; i < n; i++) {
        const char *why = not_a_listener(fds[i]);
        char name[80];
        int fl;

        if (!why &&
            ((fl = fcntl(fds[i], F_GETFL)) < 0 || fcntl(fds[i], F_SETFL, fl | O_NONBLOCK) < 0))
            why = "a socket whose flags cannot be set";
        if (!why) {
            fds[kept++] = fds[i];
            continue;
        }
        net_local_name(fds[i], name, sizeof(name));
        log_warn("--takeover %s: socket %d of %d handed over (bound to %s) is %s, not a "
                 "listening TCP socket: not used (a --listen there is bound afresh)",
                 path, i + 1, n, name, why);
        close(fds[i]);
    }
    return kept;
}

/* Whether the directory of path (at a) is missing, then err says to create it: a connect() that
 * says ENOENT means no instance there only when the directory is there. */
static bool missing_dir(const char *path, const struct sockaddr_un *a, char *err, size_t errlen)
{
    char dir[sizeof(a->sun_path)];
    char *slash;
    struct stat st;

    strcpy(dir, a->sun_path); /* path, which unix_addr found short enough */
    slash = strrchr(dir, '/');
    if (slash && slash != dir)
        *slash = '\0';
    else
        strcpy(dir, slash ? "/" : ".");
    if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, errlen,
                 "--takeover %s: the directory %s does not exist; create it (e.g. "
                 "RuntimeDirectory= under systemd)",
                 path, dir);
        return true;
    }
    return false;
}

/* Connects to the instance serving path at a. Returns 1 with *fd the connected socket, 0 when
 * nobody serves path (no socket there, or a stale one), -1 with one line in err. */
static int dial(const char *path, const struct sockaddr_un *a, int *fd, char *err, size_t errlen)
{
    struct timeval tv = {STEP_MS / 1000, 0};

    *fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (*fd < 0) {
        snprintf(err, errlen, "--takeover: socket: %s", strerror(errno));
        return -1;
    }
    /* A Unix connect waits while the instance's backlog is full: no longer than a step. */
    setsockopt(*fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (connect(*fd, (const struct sockaddr *)a, sizeof(*a)) < 0) {
        int e = errno;

        close(*fd);
        if (e == ENOENT && missing_dir(path, a, err, errlen))
            return -1;
        if (e == ENOENT || e == ECONNREFUSED)
            return 0; /* nobody there: start afresh */
        snprintf(err, errlen, "--takeover %s: cannot reach the running instance: %s", path,
                 strerror(e));
        return -1;
    }
    return 1;
}

/* Whether the process that listens at fd's other end runs as this process's uid or root (as of
 * its listen(): an lfepolld's socket listens before --user); err says who it is when not. */
static bool peer_trusted(int fd, const char *path, char *err, size_t errlen)
{
    struct ucred cr = {.uid = (uid_t)-1};
    socklen_t crl = sizeof(cr);

    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crl) == 0 && trusted(cr.uid, geteuid()))
        return true;
    snprintf(err, errlen,
             "--takeover %s: the process serving it (pid %d) runs as uid %d, neither this "
             "one's uid %d nor root: refused, nothing taken (only an instance started as "
             "the same user, or root, may hand its listeners over)",
             path, (int)cr.pid, (int)cr.uid, (int)geteuid());
    return false;
}

/* The descriptors m carries (SCM_RIGHTS), the first max into fds, the others closed. Returns
 * how many are in fds. */
static int take_rights(struct msghdr *m, int *fds, int max)
{
    int n = 0;

    for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            int *got = (int *)CMSG_DATA(c);

            for (int i = 0; i < k; i++) {
                if (n < max)
                    fds[n++] = got[i];
                else
                    close(got[i]);
            }
        }
    return n;
}

int takeover_receive(const char *path, int *fds, int max, int *conn, char *err, size_t errlen)
{
    struct sockaddr_un a;
    char head[64], ctl[CMSG_SPACE(sizeof(int) * TAKEOVER_MAX_FDS)];
    struct iovec iov = {.iov_base = head, .iov_len = sizeof(head) - 1};
    struct msghdr m = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
    struct pollfd p;
    const char *what;
    int fd, n, want, rc;
    ssize_t r;

    *conn = -1;
    if (unix_addr(path, &a, err, errlen) < 0)
        return -1;
    /* connect() is refused by a file that is no socket as by a stale socket: without this
     * check, the start would go on and rename its own socket over the file (and remove it at
     * exit) */
    if ((what = not_a_socket(path))) {
        refuse_path(path, what, err, errlen);
        return -1;
    }
    if ((rc = dial(path, &a, &fd, err, errlen)) <= 0)
        return rc;
    if (!peer_trusted(fd, path, err, errlen)) {
        close(fd);
        return -1;
    }
    if (send(fd, HELLO, sizeof(HELLO) - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof(HELLO) - 1))
        goto out_proto;
    /* One message, one step: the instance sends its answer with a single sendmsg; a step more
     * while it serves MAX_PEERS others (this one waits in its backlog, each of them a step). */
    p = (struct pollfd){.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 2 * STEP_MS) <= 0)
        goto out_proto;
    r = recvmsg(fd, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (r <= 0)
        goto out_proto;
    n = take_rights(&m, fds, max);
    head[r] = '\0';
    if (!n && !strcmp(head, BUSY)) {
        close(fd);
        snprintf(err, errlen,
                 "--takeover %s: another successor is being handed the listeners right now; "
                 "nothing taken (start this one again once that one serves or gave up)",
                 path);
        return -1;
    }
    if (sscanf(head, "LFE-LISTENERS 1 %d\n", &want) != 1 || want != n ||
        (m.msg_flags & MSG_CTRUNC)) {
        for (int i = 0; i < n; i++)
            close(fds[i]);
        goto out_proto;
    }
    *conn = fd;
    return keep_listeners(path, fds, n);

out_proto:
    close(fd);
    snprintf(err, errlen,
             "--takeover %s: the process there did not hand its listeners over within %d s (not "
             "an lfepolld, it stopped, or it refused this uid %d: see its log); nothing taken",
             path, 2 * STEP_MS / 1000, (int)geteuid());
    return -1;
}

bool takeover_match(int fd, const char *hostport)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    const char *colon = strrchr(hostport, ':');
    char host[256];
    size_t hl;
    bool ok = false;

    if (!colon || getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
        return false;
    hl = (size_t)(colon - hostport);
    if (hostport[0] == '[' && hl >= 2) {
        hostport++;
        hl -= 2;
    }
    if (hl >= sizeof(host))
        return false;
    memcpy(host, hostport, hl);
    host[hl] = '\0';
    if (getaddrinfo(hl ? host : NULL, colon + 1, &hints, &res) != 0)
        return false;
    for (struct addrinfo *ai = res; ai && !ok; ai = ai->ai_next) {
        if (ai->ai_family != ss.ss_family)
            continue;
        if (ss.ss_family == AF_INET) {
            struct sockaddr_in *x = (struct sockaddr_in *)&ss, *y = (void *)ai->ai_addr;
            ok = x->sin_addr.s_addr == y->sin_addr.s_addr &&
                 (y->sin_port == 0 || x->sin_port == y->sin_port);
        } else if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *x = (struct sockaddr_in6 *)&ss, *y = (void *)ai->ai_addr;
            ok = !memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr)) &&
                 (y->sin6_port == 0 || x->sin6_port == y->sin6_port);
        }
    }
    freeaddrinfo(res);
    return ok;
}

void takeover_ready(int conn)
{
    if (send(conn, "READY\n", 6, MSG_NOSIGNAL) != 6)
        log_warn("--takeover: could not tell the previous instance it may stop: %s; stop it "
                 "with SIGTERM",
                 strerror(errno));
    close(conn);
}

static void drop(struct peer *pe)
{
    close(pe->fd);
    pe->fd = -1;
}

/* A client of PATH connected: kept for the exchange if its uid may take over and a slot is
 * free, else closed (a refusal is logged once a second, with how many there were). */
static void accept_peer(struct takeover *t)
{
    struct ucred cr = {.uid = (uid_t)-1};
    socklen_t crl = sizeof(cr);
    int fd = accept4(t->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

    if (fd < 0)
        return; /* gone already, or out of descriptors: it may connect again */
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crl) < 0 || !trusted(cr.uid, t->uid)) {
        time_t now = time(NULL);

        close(fd);
        t->nrefused++;
        if (t->refused_logged != now) {
            log_warn("--takeover %s: refused a client of uid %d (pid %d%s): only uid %d, who "
                     "started this instance, or root may take its listeners over",
                     t->path, (int)cr.uid, (int)cr.pid,
                     t->nrefused > 1 ? ", and others since the last such line" : "", (int)t->uid);
            t->refused_logged = now;
            t->nrefused = 0;
        }
        return;
    }
    for (int i = 0; i < MAX_PEERS; i++)
        if (t->peers[i].fd < 0) {
            t->peers[i] = (struct peer){.fd = fd, .deadline = mono_ms() + STEP_MS};
            return;
        }
    close(fd); /* not reached: the listener is not polled while every slot is taken */
}

/* The listeners, in one message (its answer is one step for the successor). */
static int send_listeners(struct takeover *t, struct peer *pe)
{
    char head[64], ctl[CMSG_SPACE(sizeof(int) * TAKEOVER_MAX_FDS)];
    struct iovec iov = {.iov_base = head};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    struct cmsghdr *c;
    ssize_t r;

    iov.iov_len = (size_t)snprintf(head, sizeof(head), "LFE-LISTENERS 1 %d\n", t->n);
    memset(ctl, 0, sizeof(ctl));
    m.msg_control = ctl;
    m.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)t->n);
    c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)t->n);
    memcpy(CMSG_DATA(c), t->fds, sizeof(int) * (size_t)t->n);
    r = sendmsg(pe->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r < 0)
        return -errno;
    return (size_t)r == iov.iov_len ? 0 : -EMSGSIZE;
}

/* One line from pe: the request, or READY. Returns false when pe was dropped. */
static bool peer_line(struct takeover *t, struct peer *pe, const char *line)
{
    int rc = 0;

    if (!pe->sent) {
        if (strcmp(line, HELLO) != 0) {
            log_warn("--takeover %s: a client said nothing a successor says; dropped", t->path);
            drop(pe);
            return false;
        }
        for (int i = 0; i < MAX_PEERS; i++)
            if (t->peers[i].fd >= 0 && t->peers[i].sent)
                rc = 1;
        if (rc == 1 || __atomic_load_n(&t->handed, __ATOMIC_ACQUIRE)) {
            /* One successor at a time: two given the listeners would both serve them, and
             * the one that does not end up at PATH could never be reached again. */
            send(pe->fd, BUSY, sizeof(BUSY) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
            log_warn("--takeover %s: a second successor asked while one is %s; refused", t->path,
                     rc == 1 ? "starting" : "taking over");
            drop(pe);
            return false;
        }
        if ((rc = send_listeners(t, pe)) < 0) {
            log_warn("--takeover %s: sending the listeners: %s", t->path, strerror(-rc));
            drop(pe);
            return false;
        }
        pe->sent = true;
        pe->deadline = mono_ms() + READY_MS;
        log_info("--takeover: %d listener%s handed to a successor; serving until it is ready", t->n,
                 t->n == 1 ? "" : "s");
        return true;
    }
    if (strcmp(line, "READY\n") != 0) {
        log_warn("--takeover: the successor said something else than READY; still serving");
        drop(pe);
        return false;
    }
    log_info("--takeover: the successor serves; stopping");
    drop(pe);
    if (!__atomic_exchange_n(&t->handed, 1, __ATOMIC_ACQ_REL))
        kill(getpid(), SIGTERM); /* main takes it: the drain of any stop */
    return false;
}

/* pe is readable: takes what came, acts on each whole line. */
static void peer_read(struct takeover *t, struct peer *pe)
{
    ssize_t r = recv(pe->fd, pe->line + pe->len, sizeof(pe->line) - 1 - pe->len, 0);
    char *nl;

    if (r < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (r <= 0) {
        if (pe->sent)
            log_warn("--takeover: the successor went away before it was ready; still serving");
        else
            log_warn("--takeover %s: a client said nothing a successor says; dropped", t->path);
        drop(pe);
        return;
    }
    pe->len += (size_t)r;
    pe->line[pe->len] = '\0';
    while ((nl = strchr(pe->line, '\n')) != NULL) {
        size_t k = (size_t)(nl + 1 - pe->line);
        char line[sizeof(pe->line)];

        memcpy(line, pe->line, k);
        line[k] = '\0';
        memmove(pe->line, pe->line + k, pe->len - k + 1);
        pe->len -= k;
        if (!peer_line(t, pe, line))
            return;
    }
    if (pe->len == sizeof(pe->line) - 1) {
        log_warn("--takeover %s: a client said nothing a successor says; dropped", t->path);
        drop(pe);
    }
}

/* pe's step is over: whatever it sent or did not, it is dropped. */
static void peer_late(struct takeover *t, struct peer *pe)
{
    if (pe->sent)
        log_warn("--takeover: the successor was not ready within %d s; still serving",
                 READY_MS / 1000);
    else
        log_warn("--takeover %s: a client said nothing a successor says within %d s; dropped",
                 t->path, STEP_MS / 1000);
    drop(pe);
}

bool takeover_handed(const struct takeover *t)
{
    return t && __atomic_load_n(&t->handed, __ATOMIC_ACQUIRE);
}

static void *takeover_main(void *arg)
{
    struct takeover *t = arg;

    for (;;) {
        struct pollfd p[2 + MAX_PEERS] = {{.fd = t->lfd, .events = POLLIN},
                                          {.fd = t->stopfd, .events = POLLIN}};
        struct peer *polled[MAX_PEERS];
        int np = 2, ms = -1, busy = 0;
        long now = mono_ms();

        for (int i = 0; i < MAX_PEERS; i++) {
            struct peer *pe = &t->peers[i];

            if (pe->fd < 0)
                continue;
            busy++;
            if (ms < 0 || pe->deadline - now < ms)
                ms = pe->deadline - now > 0 ? (int)(pe->deadline - now) : 0;
            polled[np - 2] = pe;
            p[np++] = (struct pollfd){.fd = pe->fd, .events = POLLIN};
        }
        /* every slot taken: the next client waits in the backlog, not dropped, until one frees
         * (each within its step's deadline) */
        p[0].events = busy == MAX_PEERS ? 0 : POLLIN;
        if (poll(p, (nfds_t)np, ms) < 0 && errno != EINTR)
            return NULL;
        if (p[1].revents)
            return NULL;
        for (int i = 2; i < np; i++)
            if (p[i].revents)
                peer_read(t, polled[i - 2]);
        now = mono_ms();
        for (int i = 0; i < MAX_PEERS; i++)
            if (t->peers[i].fd >= 0 && now >= t->peers[i].deadline)
                peer_late(t, &t->peers[i]);
        if (p[0].revents & POLLIN)
            accept_peer(t);
    }
}

/* bind(2) with the file made 0600 by the umask: a chmod by name, as root, in a directory the
 * --user may write, would follow a symlink that user put in its place. Before any thread
 * starts (the umask is the process's). */
static int bind_private(int fd, const struct sockaddr_un *a)
{
    mode_t old = umask(0177);
    int rc = bind(fd, (const struct sockaddr *)a, sizeof(*a));

    umask(old);
    return rc;
}

/* The socket file at path to owner and group, never what a symlink or another file put there
 * meanwhile would name: opened without following, checked to be a socket, changed by fd. */
static int give(const char *path, uid_t owner, gid_t group)
{
    int fd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC), rc = -1;
    struct stat st;

    if (fd < 0)
        return -1;
    if (fstat(fd, &st) < 0)
        goto out;
    if (!S_ISSOCK(st.st_mode)) {
        errno = EEXIST; /* replaced under us */
        goto out;
    }
    rc = fchownat(fd, "", owner, group, AT_EMPTY_PATH);
out:
    close(fd);
    return rc;
}

struct takeover *takeover_open(const char *path, uid_t owner, gid_t group, char *err, size_t errlen)
{
    struct takeover *t = calloc(1, sizeof(*t));
    struct sockaddr_un a;

    if (!t) {
        snprintf(err, errlen, "--takeover: out of memory");
        return NULL;
    }
    t->lfd = t->stopfd = -1;
    t->uid = geteuid();
    for (int i = 0; i < MAX_PEERS; i++)
        t->peers[i].fd = -1;
    snprintf(t->path, sizeof(t->path), "%s", path);
    snprintf(t->tmp, sizeof(t->tmp), "%s.%d", path, (int)getpid());
    if (unix_addr(t->tmp, &a, err, errlen) < 0)
        goto out_free;
    t->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    t->stopfd = eventfd(0, EFD_CLOEXEC);
    if (!not_a_socket(t->tmp))
        unlink(t->tmp); /* a socket a crashed start left; anything else makes bind fail, named */
    /* listen() records this process's credentials, the ones a successor is shown: before the
     * drop. The file goes to the --user so that the process after it can rename it over path
     * and remove it, in a sticky directory too. */
    if (t->lfd < 0 || t->stopfd < 0 || bind_private(t->lfd, &a) < 0 ||
        ((owner != (uid_t)-1 || group != (gid_t)-1) && give(t->tmp, owner, group) < 0) ||
        listen(t->lfd, 16) < 0) {
        snprintf(err, errlen,
                 "--takeover %s: cannot serve it: %s (is its directory there and "
                 "writable?)",
                 path, strerror(errno));
        unlink(t->tmp);
        goto out_free;
    }
    return t;

out_free:
    if (t->lfd >= 0)
        close(t->lfd);
    if (t->stopfd >= 0)
        close(t->stopfd);
    free(t);
    return NULL;
}

int takeover_serve(struct takeover *t, const int *lfds, int n, char *err, size_t errlen)
{
    struct stat st;
    const char *what;
    int rc;

    /* path may have become a file since takeover_receive looked: rename would replace it */
    if ((what = not_a_socket(t->path))) {
        refuse_path(t->path, what, err, errlen);
        return -1;
    }
    t->n = n < TAKEOVER_MAX_FDS ? n : TAKEOVER_MAX_FDS;
    memcpy(t->fds, lfds, sizeof(int) * (size_t)t->n);
    /* The thread first: once renamed, path is ours, and a failure would leave the predecessor
     * unreachable. */
    if ((rc = pthread_create(&t->tid, NULL, takeover_main, t)) != 0) {
        snprintf(err, errlen, "--takeover: cannot create its thread: %s", strerror(rc));
        return -1;
    }
    t->started = true;
    pthread_setname_np(t->tid, "lfe-takeover");
    if (rename(t->tmp, t->path) < 0 || stat(t->path, &st) < 0) {
        snprintf(err, errlen,
                 "--takeover %s: cannot serve it: rename: %s (is its directory writable by the "
                 "--user?)",
                 t->path, strerror(errno));
        return -1;
    }
    t->renamed = true;
    t->ino = st.st_ino;
    return 0;
}

bool takeover_stop(struct takeover *t)
{
    if (!t)
        return false;
    if (t->started) {
        eventfd_write(t->stopfd, 1);
        pthread_join(t->tid, NULL);
        t->started = false;
    }
    for (int i = 0; i < MAX_PEERS; i++) /* the thread's, and it is joined */
        if (t->peers[i].fd >= 0 && t->peers[i].sent)
            return true;
    return false;
}

void takeover_free(struct takeover *t)
{
    struct stat st;

    if (!t)
        return;
    takeover_stop(t);
    if (!t->renamed)
        unlink(t->tmp);
    else if (stat(t->path, &st) == 0 && st.st_ino == t->ino)
        unlink(t->path); /* still ours: no successor took the name */
    for (int i = 0; i < MAX_PEERS; i++)
        if (t->peers[i].fd >= 0)
            close(t->peers[i].fd);
    close(t->lfd);
    close(t->stopfd);
    free(t);
}
