/* opt: lfepolld's command line, parsed into an immutable configuration. */
#ifndef LFE_OPT_H
#define LFE_OPT_H

#include "args.h"

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define OPT_MAX_LISTEN 16
#define OPT_MAX_ACCEPT 16 /* --accept-threads */
#define OPT_MAX_LFDS 64   /* listening sockets in all: addresses x accept threads (shards) */
#define OPT_MAX_CERTS 16  /* --tls-cert (and --tls-key) pairs */

enum dispatch_policy {
    DISPATCH_RR,    /* round-robin over groups */
    DISPATCH_LEAST, /* power of two choices on live connections per group */
};

/* The configuration. Filled by opt_parse() before any thread starts, read-only after. */
struct opt {
    const char *listen[OPT_MAX_LISTEN]; /* HOST:PORT strings, pointing into argv */
    bool listen_tls[OPT_MAX_LISTEN];    /* listen[i] came from --listen-tls: TLS spoken there */
    int nlisten;                        /* at least 1 after opt_parse() */
    int ntls;                           /* how many of them are --listen-tls */
    bool listen_default;                /* no --listen given: listen[0] is the default */
    int backlog;                        /* listen(2) backlog */
    bool backlog_set;                   /* --backlog given (command line or config file) */
    int groups;                         /* epoll groups; 0 = from the CPU plan */
    int workers;                        /* workers per group; 0 = from the CPU plan */
    int accept_threads;                 /* --accept-threads; 0 = from the CPU plan */
    bool have_cpus;                     /* --cpus given */
    cpu_set_t cpus;                     /* --cpus, valid when have_cpus */
    bool pin;                           /* false with --no-pin */
    long max_conns;                     /* 0 = derived from RLIMIT_NOFILE at start */
    size_t max_pending;                 /* per-connection output cap, bytes */
    int drain_ms;                       /* SIGTERM grace for in-flight work */
    int batch;                          /* maxevents per epoll_wait of a worker */
    enum dispatch_policy dispatch;      /* how the accept thread picks a group */
    bool oneshot_always;                /* --oneshot always: no level-triggered solo groups */
    int verbosity;                      /* 0 quiet (warnings), 1 info, 2 debug */
    const char *lua;                    /* --lua SCRIPT, or NULL: echo */
    size_t lua_mem;                     /* --lua-mem-mb, bytes per lua_State (0: no cap) */
    int lua_timeout_ms;                 /* --lua-timeout-ms (0: none) */
    int lua_wall_ms;                    /* --lua-wall-timeout-ms (0: none) */
    int lua_io_ms;                      /* --lua-io-timeout-ms */
    bool lua_unsafe;                    /* --lua-unsafe: every standard library */
    size_t lua_shared;                  /* --lua-shared-mb, bytes */
    size_t lua_ctx;                     /* --lua-ctx-mb, bytes: conn.ctx of all connections */
    int sysctl;                         /* 1 --check-sysctl, 2 --apply-sysctl: report and exit */
    const char *sysctl_conf;            /* --sysctl-conf FILE, or NULL: the built-in copy */
    bool sysctl_dry;                    /* --dry-run: --apply-sysctl says what it would set */
    bool sysctl_undo;                   /* --undo-sysctl: put back what --apply-sysctl set */
    const char *sysctl_undo_file;       /* --undo-file FILE, or NULL: SYSRESTORE_UNDO_PATH */
    const char *admin;                  /* --admin HOST:PORT, or NULL: no admin listener */
    bool log_json;                      /* --log-format json */
    bool reuseport;                     /* --reuseport: SO_REUSEPORT on the listeners */
    const char *config;                 /* --config FILE, or NULL */
    const char *user;                   /* --user NAME: drop to it after binding, or NULL */
    const char *pid_file;               /* --pid-file PATH, or NULL */
    long max_per_ip;                    /* --max-conns-per-ip: 0 = no limit */
    const char *takeover;               /* --takeover PATH: listener hand-over socket, or NULL */
    int idle_ms;                        /* --idle-timeout: 0 = never */
    bool proxy;                         /* --proxy-protocol: a PROXY header opens each connection */
    int proxy_ms;                       /* --proxy-timeout: the header's deadline after accept */
    bool defer_accept;                  /* --defer-accept: TCP_DEFER_ACCEPT on the listeners */
    int fastopen;                       /* --fastopen N: TCP_FASTOPEN queue per listener, 0 off */
    const char *tls_cert;               /* --tls-cert FILE: the certificate chain (PEM), or NULL */
    const char *tls_key;                /* --tls-key FILE: its private key (PEM), or NULL */
    int tls_hs_ms;                      /* --tls-handshake-timeout: the handshake's deadline */
    const char *tls_certs[OPT_MAX_CERTS]; /* every --tls-cert, in order: [0] is tls_cert */
    const char *tls_keys[OPT_MAX_CERTS];  /* every --tls-key: [i] is tls_certs[i]'s */
    int ntls_certs, ntls_keys;            /* how many of each were given */
    const char *tls_client_ca;            /* --tls-client-ca FILE, or NULL */
    int tls_verify_client;                /* --tls-verify-client: 0 off, 1 optional, 2 on */
    int tls_min_version, tls_max_version; /* --tls-min/max-version: 0 is TLS 1.2, 1 TLS 1.3 */
    const char *tls_ciphers;              /* --tls-ciphers (TLS 1.2), or NULL: OpenSSL's */
    const char *tls_ciphersuites;         /* --tls-ciphersuites (TLS 1.3), or NULL: OpenSSL's */
    const char *tls_groups;               /* --tls-groups, or NULL: OpenSSL's */
    const char *tls_alpn;                 /* --tls-alpn "h2,http/1.1", or NULL: no ALPN */
    bool tls_tickets_off;                 /* --tls-tickets off */
    int tls_ticket_rotate_ms;             /* --tls-ticket-rotate: a new ticket key this often */
    int tls_session_cache;                /* --tls-session-cache: sessions kept, 0 none */
    int tls_session_ms;                   /* --tls-session-timeout: a session's lifetime */
};

enum opt_result {
    OPT_RUN = 0,   /* parsed: start the daemon */
    OPT_EXIT = 1,  /* --help or --version printed: exit 0 */
    OPT_ERROR = -1 /* bad input: err holds one line saying what is wrong and what to do */
};

/* One of lfepolld's options: its name and --help's words, and what its value is; opt_defs lists
 * them all (opt.c's table, the one place an option is written), in --help's order, and ends
 * with a NULL name. */
struct opt_def {
    const char *name;      /* "--listen" */
    char letter;           /* 'q' for -q, or 0 */
    const char *value;     /* the name of its value in --help ("HOST:PORT"), or NULL: a flag;
                            * an ARGS_NAME's names ("rr|least") */
    struct args_kind kind; /* what args_set does with it, when it has no hook */
    enum opt_result (*hook)(struct opt *o, const char *val, FILE *out, char *err,
                            size_t errlen); /* an option's own code (addresses, --help), or NULL */
    const char *help;                       /* what --help says, a '\n' between its lines */
};

extern const struct opt_def opt_defs[];

/* Writes --help's text, made from opt_defs, to out. */
void opt_usage(FILE *out);

/* Fills o with the defaults, then applies the --config file's options (when argv names one),
 * then argv: the command line wins, and a --listen there replaces the file's. No I/O but the
 * config file's read and --help/--version text on out. o's strings point into argv and into
 * what the file held, which stays until the next opt_parse. Errors in the file name it and the
 * line ("FILE:7: unknown option '--lisen'..."). Returns an enum opt_result. Not thread-safe. */
enum opt_result opt_parse(struct opt *o, int argc, char **argv, FILE *out, char *err,
                          size_t errlen);

#endif /* LFE_OPT_H */
