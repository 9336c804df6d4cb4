/* bopt: lfbench's command line. */
#ifndef LFE_BOPT_H
#define LFE_BOPT_H

#include "args.h"

#include <netinet/in.h>
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define BOPT_MAX_CLASSES 16
#define BOPT_MAX_SOURCES 256
#define BOPT_MAX_PIPELINE 1024
#define BOPT_MAX_HEADERS 64 /* -H */

enum bmode { MODE_LONG, MODE_SHORT };
enum expect { EXPECT_ECHO, EXPECT_LINE, EXPECT_LEN32, EXPECT_BYTES, EXPECT_HTTP };

#define BOPT_MAX_STEPS 1000 /* --rate-sweep steps */

struct bclass {
    const char *file; /* payload file (argv-owned), NULL: generated */
    unsigned weight;  /* --mix weight */
};

/* The configuration, immutable once threads start. */
struct bopt {
    int threads;         /* -t */
    bool have_cpus;      /* --cpus given */
    cpu_set_t cpus;      /* --cpus */
    int conns;           /* -c: connections (long) or connections in flight (short) */
    enum bmode mode;     /* --mode */
    int pipeline;        /* --pipeline: requests in flight per connection */
    double duration;     /* -d seconds (0 with -n) */
    uint64_t requests;   /* -n (0 with -d) */
    double warmup;       /* --warmup seconds */
    int timeout_ms;      /* --timeout per request */
    double rate;         /* -R total requests per second, 0 = closed loop */
    double connect_rate; /* --connect-rate new connections per second, 0 = no cap */
    bool linger0;        /* --linger0 */
    bool fastopen;       /* --fastopen: TCP_FASTOPEN_CONNECT on every connection */
    bool busy_poll;      /* --busy-poll: threads poll, never sleep */
    size_t size;         /* --size of generated payloads */
    struct bclass cls[BOPT_MAX_CLASSES];      /* --payload (1 class) or --mix */
    int nclasses;                             /* 0: one generated class */
    enum expect expect;                       /* --expect */
    size_t expect_bytes;                      /* --expect bytes N */
    struct in_addr sources[BOPT_MAX_SOURCES]; /* --source range */
    int nsources;                             /* 0: the kernel picks */
    const char *json;                         /* --json FILE */
    const char *json_stream;                  /* --json-stream FILE ("-": stdout) */
    const char *hdr_log;                      /* --hdr-log FILE */
    const char *request;                      /* --request FILE (the --payload of HTTP) */
    const char *script;                       /* --script FILE, NULL: none */
    unsigned script_buffers_mb;               /* --script-buffers-mb: held for response() */
    const char *const *script_args;           /* after the target and "--" (argv's) */
    int nscript_args;
    double start_at;                         /* --start-at: CLOCK_REALTIME seconds, 0 = now */
    uint64_t reconnect_every;                /* --reconnect-every N requests, 0 = never */
    double sweep_from, sweep_to, sweep_step; /* --rate-sweep FROM:TO:STEP (sweep_step 0: off) */
    double find_pct;                         /* --find-rate pP=BOUND: the percentile (0: off) */
    double find_bound_us;                    /* ... and its bound, µs */
    uint64_t ok_status[10];                  /* bit S: status S answers (--ok-status) */
    const char *ok_status_arg;               /* --ok-status as given, NULL: 2xx */
    double open_timeout;                     /* --open-timeout seconds: wait for connections */
    uint64_t max_errors;                     /* --max-errors */
    bool quiet;                              /* -q: no progress lines */
    bool latency;                            /* --latency: the percentile table too */
    const char *headers[BOPT_MAX_HEADERS];   /* -H "Name: value" (argv's), checked */
    int nheaders;
    char *mixbuf;                 /* --mix list, split in place: cls[].file point into it */
    const char *target;           /* HOST:PORT as given, or hostport of a URL */
    const char *url;              /* the target as given when it is an http:// URL, else NULL */
    char hostport[80];            /* a URL's ADDR:PORT (port 80 when it names none) */
    char authority[80];           /* a URL's host and port as written: the Host header */
    char *path;                   /* a URL's path and query (malloc'd), NULL: "/" */
    char *get_name;               /* "GET PATH" (malloc'd): the default request's class name */
    char warning[256];            /* one line the user should see (a changed meaning), or "" */
    struct sockaddr_storage addr; /* the target, resolved */
    socklen_t addrlen;
    /* TLS (tls.c): --tls, or an https:// target */
    bool tls;
    const char *tls_sni;          /* the server name sent: --tls-sni, else the target's host;
                                   * NULL for an address (none is sent, as curl and wrk do) */
    char tls_host[80];            /* the target's host as written: "localhost", "127.0.0.1" */
    const char *tls_name;         /* what the certificate must be for: --tls-sni, or the host */
    bool tls_name_ip;             /* ... an address (checked as one) */
    const char *tls_ca;           /* --tls-ca FILE, NULL: the system's store */
    const char *tls_cert;         /* --tls-cert FILE */
    const char *tls_key;          /* --tls-key FILE */
    bool tls_insecure;            /* --tls-insecure: no verification */
    int tls_min, tls_max;         /* --tls-version: 0x0303 (1.2), 0x0304 (1.3); 0: any */
    const char *tls_ciphers;      /* --tls-ciphers (TLS 1.2), NULL: the library's */
    const char *tls_ciphersuites; /* --tls-ciphersuites (TLS 1.3) */
    const char *tls_groups;       /* --tls-groups */
    const char *tls_alpn;         /* --tls-alpn LIST; https:// defaults to http/1.1 */
    double tls_resume;            /* --tls-resume: the share of new connections offering a
                                   * session */
};

enum bopt_result { BOPT_RUN = 0, BOPT_EXIT = 1, BOPT_ERROR = -1 };

/* What bopt.c's parser holds as it reads argv (the hooks of bopt_options take it). */
struct bparse;

/* One row of lfbench's option table, the one list of its options: the parser (getopt_long's
 * arrays, and what each value is), --help and the test that holds the man page to them are all
 * made from it. */
struct bopt_option {
    int id;                /* the parser's case: the short letter, or a value above 255; 0 for a row
                            * of --help only (another value of the option above it: --expect line) */
    char letter;           /* -x, or 0 */
    const char *name;      /* --name, or NULL */
    const char *arg;       /* the value as --help names it ("N", "LIST"), NULL for a flag; an
                            * ARGS_NAME's names ("long|short") */
    struct args_kind kind; /* what args_set does with its value, when it has no hook */
    int (*take)(struct bparse *p, const char *val, char *err,
                size_t errlen); /* its own code (lists, checks), or NULL: 0, or -1 (err) */
    const char *help;           /* --help's words; a '\n' goes on in the same column */
};

extern const struct bopt_option bopt_options[];
extern const size_t bopt_noptions;

/* --help: the usage line, a line or more per row of bopt_options, the subcommands and the exit
 * statuses. */
void bopt_usage(FILE *out);

/* Whether HTTP status s is one --ok-status accepts (200-299 unless it names others): any other
 * is counted (http_non2xx), and breaks a --rate-sweep or --find-rate step. */
static inline bool bopt_status_ok(const struct bopt *o, unsigned s)
{
    return s < 64 * 10 && (o->ok_status[s / 64] >> (s % 64) & 1);
}

/* Parses --ok-status's LIST ("2xx,404", "200-299,301": codes, Nxx classes, ranges, from 100 to
 * 599) into the bit set ok (ok[10], cleared first). Returns 0 or -EINVAL. */
int bopt_parse_statuses(const char *s, uint64_t *ok);

/* Defaults, then argv. Resolves the target numerically (no DNS). Returns an enum bopt_result;
 * on BOPT_ERROR err holds one line saying what is wrong and what to do. */
enum bopt_result bopt_parse(struct bopt *o, int argc, char **argv, FILE *out, char *err,
                            size_t errlen);

/* Frees what bopt_parse() allocated (the --mix list, a URL's path). */
void bopt_free(struct bopt *o);

/* Parses "A" or "A-B" (IPv4, same /24 walk is not required: any ascending range of at most
 * BOPT_MAX_SOURCES addresses). Returns the count, or -EINVAL. */
int bopt_parse_sources(const char *s, struct in_addr *out, int max);

/* Parses "[v6]:port" or "v4:port" into ss. Returns 0 or -EINVAL. */
int bopt_parse_target(const char *s, struct sockaddr_storage *ss, socklen_t *len);

/* Splits an "http://HOST[:PORT][/PATH]" or "https://..." target (the scheme in any case; HOST
 * an IPv4 address, localhost or [IPv6]) into hostport ("HOST:PORT", port 80, or 443 for https,
 * when absent, for bopt_parse_target), authority (HOST[:PORT] as written: the Host header) and
 * *path (malloc'd: the path and query, "/" when absent, "/?q" for "?q"; a #fragment dropped, as
 * clients do). Returns 0 for http://, 1 for https://; -ENOMEM; -EINVAL for anything else: user
 * info (@), an empty or bad port, a path or fragment byte that is a space, a control or not
 * ASCII, a path over 8 KiB. Does not check that HOST is an address (bopt_parse_target does). */
int bopt_parse_url(const char *s, char *hostport, size_t hpl, char *authority, size_t al,
                   char **path);

#endif /* LFE_BOPT_H */
