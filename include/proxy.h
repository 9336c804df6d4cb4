/* proxy: the PROXY protocol header (HAProxy's send-proxy and send-proxy-v2) that a load balancer
 * puts before a connection's first byte, so the server learns the client's address.
 * Spec: https://www.haproxy.org/download/2.8/doc/proxy-protocol.txt */
#ifndef LFE_PROXY_H
#define LFE_PROXY_H

#include <stddef.h>
#include <sys/socket.h>

/* The longest header accepted: v1 is at most 107 bytes; v2 is 16 + its length, TLVs included.
 * Longer v2 headers (TLVs over 4 KB) are refused rather than buffered. */
#define PROXY_MAX 4096

struct proxy_hdr {
    int family;                  /* AF_INET or AF_INET6: src and dst hold the client's
                                  * connection; AF_UNSPEC: LOCAL (v2), UNKNOWN (v1) or another
                                  * family: use the socket's own peer */
    struct sockaddr_storage src; /* the client, as the proxy saw it */
    struct sockaddr_storage dst; /* where the client connected to */
    int version;                 /* 1 or 2 */
};

/* Parses the header at the start of p[0..n). Returns its length (> 0, <= PROXY_MAX) with h
 * filled; 0 when every byte so far can start a header but it is not complete yet (read more,
 * keep these); -1 when p cannot start a valid header, with *why saying what is wrong (a static
 * string). Bytes after the header are the connection's own and are not looked at. */
int proxy_parse(const char *p, size_t n, struct proxy_hdr *h, const char **why);

#endif /* LFE_PROXY_H */
