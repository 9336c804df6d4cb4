/* result: one lfbench run's results (or several runs merged), as the summary prints them
 * (result.c) and --json writes them (result_json.c); read back from --json files by
 * `lfbench merge` (merge.c) and `lfbench plot`. */
#ifndef LFE_RESULT_H
#define LFE_RESULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "bcount.h"
#include "bopt.h"
#include "cphase.h"
#include "hist.h"
#include "kstat.h"

/* One second of the run (the last may be shorter). */
struct bsecond {
    double t;    /* seconds since the run's start, at the end of this second */
    double wall; /* the same instant, CLOCK_REALTIME seconds since the epoch: a whole second
                  * (the run's seconds are the wall clock's), but for the run's last, shorter
                  * one; merge adds the seconds of all agents that end at the same one */
    struct bcount c;
    struct hcompact lat; /* latencies completed in this second, warm-up included */
    int open;            /* connections open at its end */
};

/* One step of --rate-sweep or --find-rate: its own measured window on the same connections. */
struct bstep {
    double rate;       /* intended requests/s */
    double start_wall; /* when it began (its warm-up's start), CLOCK_REALTIME seconds since the
                        * epoch; 0 when read from a file without it */
    double measured;   /* seconds */
    struct bcount c;   /* c.http_non2xx: statuses --ok-status does not accept, which break it */
    struct hist *lat;  /* owned */
    uint64_t intended, behind, unsent;
    uint64_t over_bound; /* --find-rate: responses slower than its bound, counted exactly */
    double cpu_percent;  /* the client's CPU over the step, % of one core */
    int attempt;         /* --find-rate: 1 for a rate's first step, 2 and 3 for its re-tests */
    bool kept;           /* the step met the bound (the staircase: failed nothing) */
};

struct bresult {
    /* the configuration (strings owned) */
    char *target, *mode, *expect;
    char *ok_status; /* --ok-status as given ("2xx" by default); NULL when read from a file
                      * without it (2xx) */
    int conns, threads, pipeline, timeout_ms;
    double duration, warmup, rate;
    uint64_t requests_asked; /* -n, 0 with -d */
    int agents;              /* runs merged into this one: 1 for a plain run */
    uint64_t *run_ids;       /* each run merged into this one, by the id drawn at random when it
                              * ran (owned), so that merge counts none twice; fewer than agents
                              * when some came from files written before runs had one */
    size_t nrun_ids;
    double start_wall;    /* the measured window, CLOCK_REALTIME seconds since the epoch */
    double end_wall;      /* a sweep's: when its last step ended (its last response) */
    double window_spread; /* merged: the largest difference between the agents' start_wall */
    /* opening (long mode): how long it took until the connections were open */
    double open_s;          /* seconds from the start until the last connection opened */
    int open_at_start;      /* connections open when the measured window began */
    double connect_busy;    /* seconds the client spent inside connect() itself, opening */
    uint64_t open_connects; /* connect() calls of the opening (0: a file without them) */
    /* connect() over the whole run, reconnects and short mode's connections included */
    double connect_s;       /* seconds inside connect() itself */
    uint64_t connect_calls; /* its calls, refused ones too (0: a file without them) */
    /* the totals of the measured window */
    double measured; /* seconds */
    double wall;     /* seconds of the whole run */
    struct bcount total;
    struct hist *lat;      /* request latency (owned) */
    struct hist *ph[CP_N]; /* the timed connections' phases (owned; NULL: none recorded, or a
                            * file without the phase): connect, handshake, first byte */
    uint64_t resumed;      /* of ph[CP_HANDSHAKE]'s, those that resumed a session */
    int nclasses;
    struct {
        char *name;
        unsigned weight;
        size_t bytes;
        struct hist *lat; /* owned; NULL when there is one class (it is lat) */
    } cls[BOPT_MAX_CLASSES];
    uint64_t intended, behind, unsent; /* open loop */
    uint64_t conn_min, conn_max;       /* requests per connection */
    uint64_t reconnects;               /* --reconnect-every */
    uint64_t http_non2xx;              /* --expect http */
    uint64_t all_requests;             /* issued, warm-up included: the CPU is per one of these */
    double cpu_s;                      /* client CPU seconds over wall (--busy-poll: less idle) */
    bool busy_poll;                    /* --busy-poll (config) */
    double poll_idle_s;                /* --busy-poll: CPU seconds polling with nothing to do */
    bool have_k;
    struct kstat kd; /* kernel deltas over the whole run */
    struct kstat_run kr;
    struct bsecond *series;
    size_t nseries;
    struct bstep *steps; /* --rate-sweep, --find-rate */
    size_t nsteps;
    double found_rate;    /* --find-rate: the answer, 0 when none kept the bound */
    char *found_why;      /* --find-rate: why the search stopped (owned) */
    char *script;         /* --script FILE, NULL without one (owned) */
    char *script_failure; /* the first check response() failed: its message (owned) */
    char *mismatch;       /* the first mismatch: where, and the bytes there (owned), or NULL */
    /* --tls (tls false without): handshakes over the whole run, as the library counted them */
    bool tls;
    bool tls_insecure;    /* --tls-insecure: the server was not verified */
    double tls_resume;    /* --tls-resume asked */
    uint64_t tls_full;    /* handshakes completed in full */
    uint64_t tls_resumed; /* handshakes the server resumed */
    uint64_t tls_offered; /* handshakes that offered a session (resumed ones among them) */
    char *tls_protocol;   /* the first completed handshake's protocol and cipher (owned) */
    char *tls_cipher;
    char *tls_error; /* the first TLS failure's words (owned), or NULL */
};

void result_init(struct bresult *r);
void result_free(struct bresult *r);

/* Whether the result is of --mode m ("long", "short"). */
bool result_is_mode(const struct bresult *r, const char *m);

/* The --ok-status its HTTP statuses were counted against ("2xx" when the file had none). */
const char *result_ok_status(const struct bresult *r);

/* What the hints need of the run: r->kr with its connect() calls and its length. */
struct kstat_run result_kstat_run(const struct bresult *r);

/* Class k's latency: its own, or the total's when there is one class. */
const struct hist *result_class_lat(const struct bresult *r, int k);

/* The human summary (lfbench's stdout). */
void result_print(FILE *f, const struct bresult *r);

/* --json: everything above, histograms included in compact form, so that merge is exact.
 * Returns 0 or -errno. */
int result_write_json(FILE *f, const struct bresult *r);

/* Reads a file result_write_json wrote. Returns 0, or -1 with one line in err. */
int result_read_json(const char *path, struct bresult *r, char *err, size_t errlen);

#endif /* LFE_RESULT_H */
