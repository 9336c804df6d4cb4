/* net: listening sockets and the accept(2) wrapper; the edge cases of both live here. */
#include "net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int net_listen(const char *hostport, int backlog, char *err, size_t errlen)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    char host[256];
    const char *colon = strrchr(hostport, ':'), *orig = hostport;
    size_t hl;
    int fd = -1, one = 1, rc;

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
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (res->ai_family == AF_INET6) /* [::]:P must not also claim 0.0.0.0:P */
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
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
    if (listen(fd, backlog) < 0) {
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

int net_accept(int lfd)
{
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

        if (fd >= 0)
            return fd;
        if (errno == EINTR || errno == ECONNABORTED)
            continue;
        return errno == EWOULDBLOCK ? -EAGAIN : -errno;
    }
}

void net_local_name(int fd, char *buf, size_t len)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    char a[INET6_ADDRSTRLEN];

    if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
        snprintf(buf, len, "?");
        return;
    }
    if (ss.ss_family == AF_INET6) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &s6->sin6_addr, a, sizeof(a));
        snprintf(buf, len, "[%s]:%u", a, ntohs(s6->sin6_port));
    } else {
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &s4->sin_addr, a, sizeof(a));
        snprintf(buf, len, "%s:%u", a, ntohs(s4->sin_port));
    }
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
