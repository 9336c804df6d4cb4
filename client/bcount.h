/* bcount: what lfbench counts (responses, bytes, errors by kind) over a second, a step or a run,
 * and the two sums every reader of them makes. Pure data: no engine, no libev. */
#ifndef LFE_BCOUNT_H
#define LFE_BCOUNT_H

#include <stdint.h>

enum berr {
    ERR_REFUSED,      /* ECONNREFUSED */
    ERR_RESET,        /* ECONNRESET, EPIPE */
    ERR_TIMEOUT,      /* a request (or connect) over --timeout, or unanswered at the end */
    ERR_ADDRNOTAVAIL, /* no ephemeral port left */
    ERR_EMFILE,       /* out of descriptors */
    ERR_CLOSED,       /* the server closed with requests in flight */
    ERR_MISMATCH,     /* a response that is not what it must be */
    ERR_OTHER,        /* anything else */
    /* --tls: the handshake's and the stream's failures (tls.c names them); a file written
     * before them has none of these kinds, read as 0 */
    ERR_TLS_VERIFY,    /* the server's certificate did not verify */
    ERR_TLS_ALERT,     /* the server refused the handshake with an alert */
    ERR_TLS_TIMEOUT,   /* a handshake over --timeout: a server that stalls in it */
    ERR_TLS_NOT_TLS,   /* the server answered the ClientHello with no TLS */
    ERR_TLS_TRUNCATED, /* a body read until the close ended without close_notify */
    ERR_TLS_OTHER,     /* any other handshake failure (the server closed in it...) */
    ERR_KINDS
};
#define ERR_TLS_FIRST ERR_TLS_VERIFY

/* The kinds' names: --json keys and summary words, which must not change. */
extern const char *const berr_name[ERR_KINDS];

/* Counters of one interval (a second) or of the whole run. Every request issued ends as a
 * response (requests) or as an error: errors count one per request a failure ended (each one in
 * flight on a connection that closed, reset or timed out), or one for a failure that ended none
 * (a refused connect, an idle connection reset). A response that failed the script's check is
 * both: a response (the server answered it whole) and a mismatch (as wrk counts a non-2xx one
 * in its rate and in its errors). */
struct bcount {
    uint64_t requests;     /* responses complete and verified (a script's failed check too) */
    uint64_t bytes_out;    /* request bytes written */
    uint64_t bytes_in;     /* response bytes read */
    uint64_t connects;     /* connections established */
    uint64_t lost;         /* requests whose response never came whole: cut short part-way (by
                            * a timeout, a close or a reset; also counted as that error), still
                            * unanswered when the run ended (also counted as timeouts), or, open
                            * loop, pipelined behind an HTTP Connection: close (also "closed") */
    uint64_t reconnects;   /* connections closed cleanly and reopened, not errors:
                            * --reconnect-every, or an HTTP server's Connection: close */
    uint64_t http_non2xx;  /* --expect http: responses whose status was not 2xx */
    uint64_t checks;       /* --script: responses handed to response(), of requests, and those
                            * refused as too big (check_unkept) */
    uint64_t check_failed; /* of those, the ones it failed (also counted as mismatches) */
    uint64_t check_unkept; /* of those, responses refused before they were whole (over 64 MiB,
                            * or past --script-buffers-mb): their connection failed, and they are
                            * not in requests */
    uint64_t errors[ERR_KINDS];
};

/* d += s, every field. */
void bcount_add(struct bcount *d, const struct bcount *s);

/* The errors of every kind together. */
uint64_t bcount_errors(const struct bcount *c);

#endif /* LFE_BCOUNT_H */
