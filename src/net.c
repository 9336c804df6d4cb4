/* net: listening sockets, the accept(2) wrapper and a socket's addresses as text; the edge cases
 * of each live here. */
#include "net.h"
#include "sysc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/filter.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* setsockopt(fd, level, name, 1). Returns 0, or -errno with err saying which option failed. */
static int set_flag(int fd, int level, int name, const char *what, const char *orig, char *err,
                    size_t errlen)
{
    int one = 1, rc;

    if (setsockopt(fd, level, name, &one, sizeof(one)) == 0)
        return 0;
    rc = -errno;
    snprintf(err, errlen, "cannot listen on %s: setsockopt(%s): %s", orig, what, strerror(-rc));
    return rc;
}

int net_listen(const char *hostport, int backlog, char *err, size_t errlen)
{
    return net_listen_reuseport(hostport, backlog, false, err, errlen);
}

/* net_listen_reuseport, or with backlog < 0 net_claim: bound, not listening. */
static int bind_listen(const char *hostport, int backlog, bool reuseport, char *err, size_t errlen)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    char host[256];
    const char *colon = strrchr(hostport, ':'), *orig = hostport;
    size_t hl;
    int fd = -1, rc;

    if (!colon) {
        snprintf(err, errlen, "'%s' is not HOST:PORT", hostport);
        return -EINVAL;
    }
    hl = (size_t)(colon - hostport);
    if (hostport[0] == '[' && hl >= 2) { /* [v6addr]:port */
        hostport++;
        hl -= 2;
    }
    if (hl >= sizeof(host)) {
        snprintf(err, errlen, "host name too long in '%s'", hostport);
        return -EINVAL;
    }
    memcpy(host, hostport, hl);
    host[hl] = '\0';
    rc = getaddrinfo(hl ? host : NULL, colon + 1, &hints, &res);
    if (rc) {
        snprintf(err, errlen, "cannot resolve '%s': %s", host, gai_strerror(rc));
        return -EINVAL;
    }
    fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        rc = -errno;
        snprintf(err, errlen, "socket: %s", strerror(errno));
        goto out_free;
    }
    /* Each option is part of what --listen promises, so a failure is fatal, not a silent
     * difference: without IPV6_V6ONLY, [::]:P would also take IPv4 connections (and claim
     * 0.0.0.0:P); without SO_REUSEADDR a restart fails while old connections sit in TIME_WAIT;
     * without TCP_NODELAY every small reply waits on Nagle. */
    if ((rc = set_flag(fd, SOL_SOCKET, SO_REUSEADDR, "SO_REUSEADDR", orig, err, errlen)) < 0 ||
        (res->ai_family == AF_INET6 &&
         (rc = set_flag(fd, IPPROTO_IPV6, IPV6_V6ONLY, "IPV6_V6ONLY", orig, err, errlen)) < 0) ||
        (rc = set_flag(fd, IPPROTO_TCP, TCP_NODELAY, "TCP_NODELAY", orig, err, errlen)) < 0 ||
        (reuseport &&
         (rc = set_flag(fd, SOL_SOCKET, SO_REUSEPORT, "SO_REUSEPORT", orig, err, errlen)) < 0))
        goto out_close;
    if (bind(fd, res->ai_addr, res->ai_addrlen) < 0) {
        rc = -errno;
        if (errno == EADDRINUSE)
            snprintf(err, errlen,
                     "cannot listen on %s: port in use; stop the other server or pick another "
                     "port with --listen",
                     orig);
        else if (errno == EADDRNOTAVAIL)
            snprintf(err, errlen,
                     "cannot listen on %s: no such local address; use an address of this "
                     "machine",
                     orig);
        else if (errno == EACCES)
            snprintf(err, errlen,
                     "cannot listen on port %s: permission denied (ports below 1024 need root "
                     "or CAP_NET_BIND_SERVICE)",
                     colon + 1);
        else
            snprintf(err, errlen, "cannot listen on %s: bind: %s", orig, strerror(errno));
        goto out_close;
    }
    if (backlog >= 0 && listen(fd, backlog) < 0) {
        rc = -errno;
        snprintf(err, errlen, "cannot listen on %s: listen: %s", orig, strerror(errno));
        goto out_close;
    }
    freeaddrinfo(res);
    return fd;

out_close:
    close(fd);
out_free:
    freeaddrinfo(res);
    return rc;
}

int net_listen_reuseport(const char *hostport, int backlog, bool reuseport, char *err,
                         size_t errlen)
{
    return bind_listen(hostport, backlog < 0 ? 0 : backlog, reuseport, err, errlen);
}

int net_claim(const char *hostport, char *err, size_t errlen)
{
    return bind_listen(hostport, -1, false, err, errlen);
}

bool net_reuseport(int fd)
{
    int on = 0;
    socklen_t sl = sizeof(on);

    return getsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, &sl) == 0 && on;
}

int net_listen_shard(int like, int backlog, char *err, size_t errlen)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    char name[80];
    int fd, rc;

    net_local_name(like, name, sizeof(name));
    if (getsockname(like, (struct sockaddr *)&ss, &sl) < 0) {
        rc = -errno;
        snprintf(err, errlen, "cannot bind a shard beside %s: getsockname: %s", name,
                 strerror(errno));
        return rc;
    }
    fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        rc = -errno;
        snprintf(err, errlen, "cannot bind a shard beside %s: socket: %s", name, strerror(errno));
        return rc;
    }
    /* The options net_listen_reuseport sets, for the same reasons. */
    if ((rc = set_flag(fd, SOL_SOCKET, SO_REUSEADDR, "SO_REUSEADDR", name, err, errlen)) < 0 ||
        (ss.ss_family == AF_INET6 &&
         (rc = set_flag(fd, IPPROTO_IPV6, IPV6_V6ONLY, "IPV6_V6ONLY", name, err, errlen)) < 0) ||
        (rc = set_flag(fd, IPPROTO_TCP, TCP_NODELAY, "TCP_NODELAY", name, err, errlen)) < 0 ||
        (rc = set_flag(fd, SOL_SOCKET, SO_REUSEPORT, "SO_REUSEPORT", name, err, errlen)) < 0)
        goto out_close;
    if (bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, backlog) < 0) {
        rc = -errno;
        if (errno == EADDRINUSE)
            snprintf(err, errlen,
                     "cannot listen on %s: port in use; stop the other server or pick another "
                     "port with --listen",
                     name);
        else
            snprintf(err, errlen, "cannot listen on %s: %s", name, strerror(errno));
        goto out_close;
    }
    return fd;

out_close:
    close(fd);
    return rc;
}

bool net_defers(int lfd)
{
    int secs = 0;
    socklen_t sl = sizeof(secs);

    return getsockopt(lfd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &secs, &sl) == 0 && secs > 0;
}

/* Runs where tcp_v4_rcv/tcp_v6_rcv filter a segment for the listener, with the data at the TCP
 * header: byte 13 holds the flags. A SYN without ACK is dropped (the client retries it in a
 * second, and by then finds the port closed: refused); everything else passes, so a handshake
 * under way completes into the accept queue, where it is accepted. */
static const struct sock_filter refuse_syns[] = {
    BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 13),
    BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x10, 1, 0), /* ACK: keep */
    BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x02, 1, 0), /* SYN: drop */
    BPF_STMT(BPF_RET | BPF_K, 0xffffffff),
    BPF_STMT(BPF_RET | BPF_K, 0),
};
#define NREFUSE (sizeof(refuse_syns) / sizeof(refuse_syns[0]))

int net_refuse_syns(int lfd)
{
    struct sock_fprog prog = {.len = NREFUSE, .filter = (struct sock_filter *)refuse_syns};

    return setsockopt(lfd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) < 0 ? -errno : 0;
}

int net_can_refuse_syns(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), rc;

    if (fd < 0)
        return -errno;
    rc = net_refuse_syns(fd);
    close(fd);
    return rc;
}

bool net_refuses_syns(int lfd)
{
    struct sock_filter got[NREFUSE + 1];
    socklen_t n = NREFUSE + 1; /* SO_GET_FILTER counts instructions, not bytes */

    return getsockopt(lfd, SOL_SOCKET, SO_GET_FILTER, got, &n) == 0 && n == NREFUSE &&
           !memcmp(got, refuse_syns, sizeof(refuse_syns));
}

int net_accept_syns(int lfd)
{
    int zero = 0;

    return setsockopt(lfd, SOL_SOCKET, SO_DETACH_FILTER, &zero, sizeof(zero)) < 0 ? -errno : 0;
}

int net_accept(int lfd)
{
    for (;;) {
        int fd = sysc_accept4(lfd, SOCK_NONBLOCK | SOCK_CLOEXEC);

        if (fd >= 0)
            return fd;
        if (errno == EINTR || errno == ECONNABORTED)
            continue;
        return errno == EWOULDBLOCK ? -EAGAIN : -errno;
    }
}

void net_addr_name(const struct sockaddr_storage *ss, char *buf, size_t len)
{
    char a[INET6_ADDRSTRLEN];

    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ss;
        inet_ntop(AF_INET6, &s6->sin6_addr, a, sizeof(a));
        snprintf(buf, len, "[%s]:%u", a, ntohs(s6->sin6_port));
    } else if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)ss;
        inet_ntop(AF_INET, &s4->sin_addr, a, sizeof(a));
        snprintf(buf, len, "%s:%u", a, ntohs(s4->sin_port));
    } else {
        snprintf(buf, len, "?");
    }
}

void net_local_name(int fd, char *buf, size_t len)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);

    if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
        ss.ss_family = AF_UNSPEC;
    net_addr_name(&ss, buf, len);
}

void net_peer_name(int fd, char *buf, size_t len)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);

    if (fd < 0 || getpeername(fd, (struct sockaddr *)&ss, &sl) < 0)
        ss.ss_family = AF_UNSPEC;
    net_addr_name(&ss, buf, len);
}

void net_client_name(int fd, const char *given, char *buf, size_t len)
{
    if (given)
        snprintf(buf, len, "%s", given);
    else
        net_peer_name(fd, buf, len);
}

long net_somaxconn(void)
{
    FILE *f = fopen("/proc/sys/net/core/somaxconn", "re");
    long v = -1;

    if (f) {
        if (fscanf(f, "%ld", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}
