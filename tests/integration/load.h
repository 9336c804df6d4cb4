/* load: an epoll client for the integration tests; every byte echoed is checked against the
 * pattern stream its connection sent. */
#ifndef LFE_TEST_LOAD_H
#define LFE_TEST_LOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct load {
    /* what to do */
    int port;        /* 127.0.0.1:port */
    int ipv6;        /* connect to [::1] instead */
    int conns;       /* concurrent connections */
    int reqs;        /* requests per connection */
    int depth;       /* requests in flight per connection (pipelining), >= 1 */
    size_t min_size; /* request sizes: log-uniform in [min_size, max_size] */
    size_t max_size;
    long short_total; /* > 0: short connections, this many in all (reqs is 1 each) */
    bool half_close;  /* shutdown(SHUT_WR) after the last byte; expect all back, then EOF */
    int noread_ms;    /* do not read for this long at the start (a slow reader) */
    int timeout_ms;   /* the whole run must finish within this */
    /* called every ~10 ms with the elapsed time; returning true stops new requests: each
     * connection finishes what it has in flight, then waits for the server to close it */
    bool (*tick)(long elapsed_ms, void *arg);
    void *tick_arg;
    /* results */
    uint64_t requests;      /* requests echoed in full */
    uint64_t bytes;         /* bytes verified */
    uint64_t mismatches;    /* bytes that differ from what was sent, or extra bytes */
    uint64_t early_eof;     /* closes by the server before all in-flight bytes came back */
    uint64_t errors;        /* connect/read/write errors */
    uint64_t server_closed; /* connections the server closed after finishing (tick mode) */
    bool timed_out;
};

/* Runs the load; returns 0 when every request completed byte-exact, else -1 (see fields). */
int load_run(struct load *l);

#endif /* LFE_TEST_LOAD_H */
