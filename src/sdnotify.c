/* sdnotify: systemd's service protocol without libsystemd: $NOTIFY_SOCKET notifications and
 * socket activation's $LISTEN_FDS. */
#include "sdnotify.h"

#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int nfd = -1; /* the datagram socket, or -1: nobody listens */
static struct sockaddr_un naddr;
static socklen_t naddrlen;
static long long wd_usec;
static bool warned;

/* A non-negative decimal that fits a long long, whole string. */
static int parse_ll(const char *s, long long *out)
{
    char *end;
    long long v;

    if (!s || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

int sdnotify_init(char *err, size_t errlen)
{
    const char *path = getenv("NOTIFY_SOCKET"), *wd = getenv("WATCHDOG_USEC"),
               *wpid = getenv("WATCHDOG_PID");
    long long v;
    size_t len;

    if (wd && *wd) {
        if (parse_ll(wd, &v) < 0 || v <= 0) {
            snprintf(err, errlen, "WATCHDOG_USEC='%s' is not a positive number of microseconds",
                     wd);
            return -1;
        }
        /* WATCHDOG_PID, when set, says which process the watchdog is for. */
        if (!wpid || !*wpid || (parse_ll(wpid, &v) == 0 && v == getpid()))
            parse_ll(wd, &wd_usec);
    }
    if (!path || !*path)
        return 0;
    len = strlen(path);
    if ((path[0] != '/' && path[0] != '@') || len >= sizeof(naddr.sun_path)) {
        snprintf(err, errlen,
                 "NOTIFY_SOCKET='%s' is not a socket path ('/...' or '@abstract', under %zu "
                 "bytes)",
                 path, sizeof(naddr.sun_path));
        return -1;
    }
    naddr.sun_family = AF_UNIX;
    memcpy(naddr.sun_path, path, len);
    if (path[0] == '@')
        naddr.sun_path[0] = '\0'; /* the abstract namespace */
    naddrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + (path[0] == '/'));
    nfd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (nfd < 0) {
        snprintf(err, errlen, "NOTIFY_SOCKET: socket: %s", strerror(errno));
        return -1;
    }
    return 0;
}

void sdnotify_send(const char *msg)
{
    if (nfd < 0)
        return;
    if (sendto(nfd, msg, strlen(msg), MSG_NOSIGNAL, (struct sockaddr *)&naddr, naddrlen) < 0 &&
        !warned) {
        warned = true;
        log_warn("cannot notify the service manager at $NOTIFY_SOCKET: %s (said once)",
                 strerror(errno));
    }
}

long long sdnotify_watchdog_usec(void)
{
    return wd_usec;
}

int sdnotify_listen_fds(int max, char *err, size_t errlen)
{
    const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
    long long p, n;

    if (!pid || !*pid)
        return 0;
    if (parse_ll(pid, &p) < 0) {
        snprintf(err, errlen, "LISTEN_PID='%s' is not a process id", pid);
        return -1;
    }
    if (p != getpid())
        return 0; /* meant for another process (a parent that did not unset it) */
    if (parse_ll(fds, &n) < 0 || n < 1 || n > max) {
        snprintf(err, errlen,
                 "LISTEN_FDS='%s' is not a number of sockets from 1 to %d (socket activation)",
                 fds ? fds : "", max);
        return -1;
    }
    for (int fd = SD_LISTEN_FDS_START; fd < SD_LISTEN_FDS_START + n; fd++) {
        int type = 0, acc = 0, fl;
        socklen_t l1 = sizeof(type), l2 = sizeof(acc);

        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l1) < 0 ||
            getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &l2) < 0 || type != SOCK_STREAM ||
            !acc) {
            snprintf(err, errlen,
                     "socket activation: fd %d is not a listening stream socket (ListenStream= "
                     "in the .socket unit)",
                     fd);
            return -1;
        }
        /* close-on-exec is this descriptor's; O_NONBLOCK would be the socket's, which
         * systemd shares: the server sets it while it serves and puts it back (server.c) */
        fl = fcntl(fd, F_GETFD);
        if (fl < 0 || fcntl(fd, F_SETFD, fl | FD_CLOEXEC) < 0) {
            snprintf(err, errlen, "socket activation: fd %d: fcntl: %s", fd, strerror(errno));
            return -1;
        }
    }
    return (int)n;
}
