/* takeover: --takeover PATH, listening sockets handed to a successor over a Unix socket.
 *
 * DESIGN
 *
 * An instance started with --takeover PATH, once it serves, listens on PATH (a stream socket,
 * mode 0600, bound under a temporary name and renamed over PATH, so PATH always names a live
 * instance or a stale file, never half of one). Its successor, started with the same PATH:
 *
 *   successor -> "LFE-TAKEOVER 1\n"
 *   instance  -> "LFE-LISTENERS 1 N\n" with its N listening sockets attached (SCM_RIGHTS)
 *   successor    uses those bound where its --listen asks, binds the others itself, starts
 *                every thread, then serves PATH itself
 *   successor -> "READY\n"
 *   instance     SIGTERM to itself: it stops accepting and drains as on any stop
 *
 * Both processes hold the same sockets (one file description each), so closing the old
 * instance's descriptors loses nothing queued: what waits in a queue is accepted by the
 * successor. A successor that dies or closes before READY changes nothing: the instance goes on
 * serving and waits for the next. Each step has a deadline (TIMEOUT_MS), so a client that
 * connects to PATH and says nothing, or garbage, is dropped with one log line; one successor is
 * served at a time, by this module's thread, never by a thread on the request path.
 */
#include "takeover.h"

#include "log.h"

#include <errno.h>
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
#include <unistd.h>

#define TIMEOUT_MS 5000 /* per step of the exchange */
#define READY_MS 60000  /* for a successor to start every thread */
#define HELLO "LFE-TAKEOVER 1\n"

struct takeover {
    int lfd;    /* the Unix listener at path */
    int stopfd; /* eventfd: stop the thread */
    int fds[TAKEOVER_MAX_FDS];
    int n;
    ino_t ino;  /* path's inode once renamed: ours while it is unchanged */
    int handed; /* atomic: the successor is ready; the SIGTERM that follows is ours */
    pthread_t tid;
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

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

/* Reads one line ending in '\n' within ms into buf; gives up when stopfd (>= 0) is readable.
 * Returns its length, or -1. */
static ssize_t read_line(int fd, int stopfd, char *buf, size_t len, int ms)
{
    size_t n = 0;

    while (n + 1 < len) {
        struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = stopfd, .events = POLLIN}};
        ssize_t r;

        if (poll(p, stopfd >= 0 ? 2 : 1, ms) <= 0 || p[1].revents)
            return -1;
        r = recv(fd, buf + n, 1, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        if (buf[n++] == '\n') {
            buf[n] = '\0';
            return (ssize_t)n;
        }
    }
    return -1;
}

int takeover_receive(const char *path, int *fds, int max, int *conn, char *err, size_t errlen)
{
    struct sockaddr_un a;
    char head[64], ctl[CMSG_SPACE(sizeof(int) * TAKEOVER_MAX_FDS)];
    struct iovec iov = {.iov_base = head, .iov_len = sizeof(head) - 1};
    struct msghdr m = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
    struct pollfd p;
    struct cmsghdr *c;
    int fd, n = 0, want;
    ssize_t r;

    *conn = -1;
    if (unix_addr(path, &a, err, errlen) < 0)
        return -1;
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "--takeover: socket: %s", strerror(errno));
        return -1;
    }
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        int e = errno;

        close(fd);
        if (e == ENOENT) {
            char dir[sizeof(a.sun_path)];
            char *slash;
            struct stat st;

            strcpy(dir, path);
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
                return -1;
            }
        }
        if (e == ENOENT || e == ECONNREFUSED)
            return 0; /* nobody there: start afresh */
        snprintf(err, errlen, "--takeover %s: cannot reach the running instance: %s", path,
                 strerror(e));
        return -1;
    }
    if (send(fd, HELLO, sizeof(HELLO) - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof(HELLO) - 1))
        goto out_proto;
    p = (struct pollfd){.fd = fd, .events = POLLIN};
    if (poll(&p, 1, TIMEOUT_MS) <= 0)
        goto out_proto;
    r = recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
    if (r <= 0)
        goto out_proto;
    for (c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
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
    head[r] = '\0';
    if (sscanf(head, "LFE-LISTENERS 1 %d\n", &want) != 1 || want != n ||
        (m.msg_flags & MSG_CTRUNC)) {
        for (int i = 0; i < n; i++)
            close(fds[i]);
        goto out_proto;
    }
    *conn = fd;
    return n;

out_proto:
    close(fd);
    snprintf(err, errlen,
             "--takeover %s: the process there did not hand its listeners over (not an "
             "lfepolld, or it stopped); nothing taken",
             path);
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

/* One successor on fd: hands the listeners over, waits for READY. */
static void serve_one(struct takeover *t, int fd)
{
    char line[64], head[64], ctl[CMSG_SPACE(sizeof(int) * TAKEOVER_MAX_FDS)];
    struct iovec iov = {.iov_base = head};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    struct cmsghdr *c;

    if (read_line(fd, t->stopfd, line, sizeof(line), TIMEOUT_MS) < 0 || strcmp(line, HELLO) != 0) {
        log_warn("--takeover %s: a client said nothing a successor says; dropped", t->path);
        return;
    }
    iov.iov_len = (size_t)snprintf(head, sizeof(head), "LFE-LISTENERS 1 %d\n", t->n);
    memset(ctl, 0, sizeof(ctl));
    m.msg_control = ctl;
    m.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)t->n);
    c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)t->n);
    memcpy(CMSG_DATA(c), t->fds, sizeof(int) * (size_t)t->n);
    if (sendmsg(fd, &m, MSG_NOSIGNAL) < 0) {
        log_warn("--takeover %s: sending the listeners: %s", t->path, strerror(errno));
        return;
    }
    log_info("--takeover: %d listener%s handed to a successor; serving until it is ready", t->n,
             t->n == 1 ? "" : "s");
    if (read_line(fd, t->stopfd, line, sizeof(line), READY_MS) < 0 ||
        strcmp(line, "READY\n") != 0) {
        log_warn("--takeover: the successor went away before it was ready; still serving");
        return;
    }
    log_info("--takeover: the successor serves; stopping");
    __atomic_store_n(&t->handed, 1, __ATOMIC_RELEASE);
    kill(getpid(), SIGTERM); /* main takes it: the drain of any stop */
}

bool takeover_handed(const struct takeover *t)
{
    return t && __atomic_load_n(&t->handed, __ATOMIC_ACQUIRE);
}

static void *takeover_main(void *arg)
{
    struct takeover *t = arg;

    for (;;) {
        struct pollfd p[2] = {{.fd = t->lfd, .events = POLLIN},
                              {.fd = t->stopfd, .events = POLLIN}};
        int fd;

        if (poll(p, 2, -1) < 0 && errno != EINTR)
            return NULL;
        if (p[1].revents)
            return NULL;
        if (!(p[0].revents & POLLIN))
            continue;
        fd = accept4(t->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        serve_one(t, fd);
        close(fd);
    }
}

struct takeover *takeover_serve(const char *path, const int *lfds, int n, char *err, size_t errlen)
{
    struct takeover *t = calloc(1, sizeof(*t));
    struct sockaddr_un a;
    char tmp[sizeof(a.sun_path) + 32];
    struct stat st;
    int rc;

    if (!t) {
        snprintf(err, errlen, "--takeover: out of memory");
        return NULL;
    }
    t->lfd = t->stopfd = -1;
    t->n = n < TAKEOVER_MAX_FDS ? n : TAKEOVER_MAX_FDS;
    memcpy(t->fds, lfds, sizeof(int) * (size_t)t->n);
    snprintf(t->path, sizeof(t->path), "%s", path);
    snprintf(tmp, sizeof(tmp), "%s.%d", path, (int)getpid());
    if (unix_addr(tmp, &a, err, errlen) < 0)
        goto out_free;
    t->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    t->stopfd = eventfd(0, EFD_CLOEXEC);
    unlink(tmp);
    if (t->lfd < 0 || t->stopfd < 0 || bind(t->lfd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        chmod(tmp, 0600) < 0 || listen(t->lfd, 4) < 0 || rename(tmp, path) < 0 ||
        stat(path, &st) < 0) {
        snprintf(err, errlen,
                 "--takeover %s: cannot serve it: %s (is its directory there and "
                 "writable?)",
                 path, strerror(errno));
        unlink(tmp);
        goto out_free;
    }
    t->ino = st.st_ino;
    if ((rc = pthread_create(&t->tid, NULL, takeover_main, t)) != 0) {
        snprintf(err, errlen, "--takeover: cannot create its thread: %s", strerror(rc));
        unlink(path);
        goto out_free;
    }
    pthread_setname_np(t->tid, "lfe-takeover");
    return t;

out_free:
    if (t->lfd >= 0)
        close(t->lfd);
    if (t->stopfd >= 0)
        close(t->stopfd);
    free(t);
    return NULL;
}

void takeover_free(struct takeover *t)
{
    struct stat st;

    if (!t)
        return;
    eventfd_write(t->stopfd, 1);
    pthread_join(t->tid, NULL);
    if (stat(t->path, &st) == 0 && st.st_ino == t->ino)
        unlink(t->path); /* still ours: no successor took the name */
    close(t->lfd);
    close(t->stopfd);
    free(t);
}
