/* opt: lfepolld's command line, parsed into an immutable configuration. */
#include "opt.h"

#include "args.h"
#include "file.h"
#include "sysrestore.h"
#include "topo.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CONF_MAX_SIZE (1u << 20) /* a config file */
#define CONF_MAX_LINE 4096
#define CONF_MAX_OPTS 256

/* The options no args_kind says: a list of addresses, a CPU list, --help and --version. Each
 * returns an enum opt_result. */

/* --listen and --listen-tls: repeatable, OPT_MAX_LISTEN times in all. */
static enum opt_result add_listen(struct opt *o, const char *name, bool tls, const char *val,
                                  char *err, size_t errlen)
{
    static const struct args_kind addr = {.type = ARGS_HOSTPORT,
                                          .size = sizeof(const char *),
                                          .what = "127.0.0.1:9876 or [::1]:9876"};
    const char *a;

    if (args_set(&a, &addr, name, NULL, val, err, errlen) < 0)
        return OPT_ERROR;
    if (o->nlisten == OPT_MAX_LISTEN) {
        snprintf(err, errlen, "%s: at most %d addresses (--listen and --listen-tls together)", name,
                 OPT_MAX_LISTEN);
        return OPT_ERROR;
    }
    o->listen_tls[o->nlisten] = tls;
    o->listen[o->nlisten++] = a;
    o->ntls += tls;
    return OPT_RUN;
}

static enum opt_result set_listen(struct opt *o, const char *val, FILE *out, char *err,
                                  size_t errlen)
{
    (void)out;
    return add_listen(o, "--listen", false, val, err, errlen);
}

static enum opt_result set_listen_tls(struct opt *o, const char *val, FILE *out, char *err,
                                      size_t errlen)
{
    (void)out;
    return add_listen(o, "--listen-tls", true, val, err, errlen);
}

/* --tls-cert and --tls-key: repeatable, OPT_MAX_CERTS times each; the first pair is also
 * tls_cert and tls_key, the default certificate. */
static enum opt_result add_cert(const char **to, int *n, const char *name, const char *val,
                                char *err, size_t errlen)
{
    if (!*val) {
        snprintf(err, errlen, "%s: give the path of a PEM file", name);
        return OPT_ERROR;
    }
    if (*n == OPT_MAX_CERTS) {
        snprintf(err, errlen, "%s: at most %d certificates", name, OPT_MAX_CERTS);
        return OPT_ERROR;
    }
    to[(*n)++] = val;
    return OPT_RUN;
}

static enum opt_result set_tls_cert(struct opt *o, const char *val, FILE *out, char *err,
                                    size_t errlen)
{
    (void)out;
    if (add_cert(o->tls_certs, &o->ntls_certs, "--tls-cert", val, err, errlen) != OPT_RUN)
        return OPT_ERROR;
    o->tls_cert = o->tls_certs[0];
    return OPT_RUN;
}

static enum opt_result set_tls_key(struct opt *o, const char *val, FILE *out, char *err,
                                   size_t errlen)
{
    (void)out;
    if (add_cert(o->tls_keys, &o->ntls_keys, "--tls-key", val, err, errlen) != OPT_RUN)
        return OPT_ERROR;
    o->tls_key = o->tls_keys[0];
    return OPT_RUN;
}

static enum opt_result set_cpus(struct opt *o, const char *val, FILE *out, char *err, size_t errlen)
{
    (void)out;
    if (cpulist_parse(val, &o->cpus) < 0) {
        snprintf(err, errlen, "--cpus: '%s' is not a CPU list; write e.g. 0-3,8 (CPUs below %d)",
                 val, CPU_SETSIZE);
        return OPT_ERROR;
    }
    o->have_cpus = true;
    return OPT_RUN;
}

/* --check-sysctl after --apply-sysctl still applies. */
static enum opt_result set_check_sysctl(struct opt *o, const char *val, FILE *out, char *err,
                                        size_t errlen)
{
    (void)val, (void)out, (void)err, (void)errlen;
    o->sysctl = o->sysctl > 1 ? o->sysctl : 1;
    return OPT_RUN;
}

static enum opt_result show_help(struct opt *o, const char *val, FILE *out, char *err,
                                 size_t errlen)
{
    (void)o, (void)val, (void)err, (void)errlen;
    opt_usage(out);
    return OPT_EXIT;
}

static enum opt_result show_version(struct opt *o, const char *val, FILE *out, char *err,
                                    size_t errlen)
{
    (void)o, (void)val, (void)err, (void)errlen;
    fprintf(out, "lfepolld %s\n", LFE_VERSION);
    return OPT_EXIT;
}

/* An option's field of struct opt, and the kinds its rows use (args.h says what each takes). */
#define KIND(...)                                                                                  \
    {                                                                                              \
        __VA_ARGS__                                                                                \
    }
#define AT(f) offsetof(struct opt, f), sizeof(((struct opt *)0)->f)
#define HOOK(fn) KIND(ARGS_HOOK, 0, 0, 0, 0, NULL, NULL, NULL, NULL), fn
#define FLAG(f, v) KIND(ARGS_FLAG, AT(f), v, v, NULL, NULL, NULL, NULL), NULL
#define INT(f, lo, hi, zero, tail)                                                                 \
    KIND(ARGS_INT, AT(f), lo, hi, "an integer", zero, tail, NULL), NULL
#define MIB(f, lo) KIND(ARGS_MIB, AT(f), lo, 65536, "a whole number of MiB", NULL, NULL, NULL), NULL
#define SIZE(f, lo, hi, tail) KIND(ARGS_SIZE, AT(f), lo, hi, "a size", NULL, tail, NULL), NULL
#define TIME(f, lo, zero, tail, under)                                                             \
    KIND(ARGS_TIME, AT(f), lo, 86400000, "a duration", zero, tail, under), NULL
#define MS(f, lo, under)                                                                           \
    KIND(ARGS_MS, AT(f), lo, 3600000, "a whole number of milliseconds", NULL, NULL, under), NULL
#define NAME(f, what) KIND(ARGS_NAME, AT(f), 0, 0, what, NULL, NULL, NULL), NULL
#define ANY_LENGTH 0 /* PATH: a path of any length but 0 */
#define PATH(f, max, what) KIND(ARGS_STRING, AT(f), 1, max, what, NULL, NULL, NULL), NULL
#define ADDR(f, what) KIND(ARGS_HOSTPORT, AT(f), 0, 0, what, NULL, NULL, NULL), NULL

/* Every option, written once: --help shows them in this order (opt_usage), the parser takes
 * their names, which of them take a value and what the value is from here (args_set, or the
 * row's hook), and tests/unit/test_opt.c checks each against man/lfepolld.8. */
const struct opt_def opt_defs[] = {
    {"--listen", 0, "HOST:PORT", HOOK(set_listen),
     "address to listen on, repeatable; IPv6 as [ADDR]:PORT\n"
     "(default 127.0.0.1:9876; port 0 picks a free port)"},
    {"--listen-tls", 0, "HOST:PORT", HOOK(set_listen_tls),
     "address to listen on with TLS (1.2 and 1.3), repeatable,\n"
     "beside any --listen; needs --tls-cert and --tls-key"},
    {"--tls-cert", 0, "FILE", HOOK(set_tls_cert),
     "a certificate chain of the TLS listeners, PEM: the server's\n"
     "certificate first, then its intermediates; repeatable: the\n"
     "first is the default, each serves the names its certificate\n"
     "holds to the clients asking for them (SNI)"},
    {"--tls-key", 0, "FILE", HOOK(set_tls_key),
     "the private key of the --tls-cert of the same rank (the\n"
     "first key is the first certificate's), PEM, unencrypted"},
    {"--tls-handshake-timeout", 0, "TIME",
     TIME(tls_hs_ms, 1, NULL, "; write 10 (seconds), 2.5s or 500ms", NULL),
     "time for a TLS handshake to finish, from its accept (or\n"
     "the end of its PROXY header), else the connection is\n"
     "closed: 10 (seconds), 2.5s, 500ms (default 10s)"},
    {"--tls-client-ca", 0, "FILE",
     PATH(tls_client_ca, ANY_LENGTH, "the path of a PEM file of CA certificates"),
     "the CA certificates (PEM) a client's certificate must chain\n"
     "to, with --tls-verify-client on or optional"},
    {"--tls-verify-client", 0, "off|optional|on", NAME(tls_verify_client, "a mode"),
     "ask TLS clients for a certificate: on, one that verifies is\n"
     "required; optional, a client may send none, but one sent\n"
     "must verify (default off)"},
    {"--tls-min-version", 0, "1.2|1.3", NAME(tls_min_version, "a TLS version"),
     "the oldest TLS version accepted (default 1.2)"},
    {"--tls-max-version", 0, "1.2|1.3", NAME(tls_max_version, "a TLS version"),
     "the newest TLS version accepted (default 1.3)"},
    {"--tls-ciphers", 0, "LIST",
     PATH(tls_ciphers, ANY_LENGTH, "an OpenSSL cipher list, e.g. ECDHE+AESGCM"),
     "TLS 1.2 ciphers in OpenSSL's syntax, the server's preference\n"
     "first (default OpenSSL's)"},
    {"--tls-ciphersuites", 0, "LIST",
     PATH(tls_ciphersuites, ANY_LENGTH, "TLS 1.3 suites, e.g. TLS_AES_128_GCM_SHA256"),
     "TLS 1.3 cipher suites, colon-separated, the server's\n"
     "preference first (default OpenSSL's)"},
    {"--tls-groups", 0, "LIST", PATH(tls_groups, ANY_LENGTH, "groups, e.g. X25519:P-256"),
     "key exchange groups, colon-separated, the server's\n"
     "preference first (default OpenSSL's)"},
    {"--tls-alpn", 0, "LIST", PATH(tls_alpn, ANY_LENGTH, "protocols, e.g. h2,http/1.1"),
     "ALPN protocols, comma-separated, the server's preference\n"
     "first; a client offering only others is refused (default:\n"
     "no ALPN)"},
    {"--tls-tickets", 0, "on|off", NAME(tls_tickets_off, "a setting"),
     "TLS session tickets, their keys shared by every worker and\n"
     "rotated (default on)"},
    {"--tls-ticket-rotate", 0, "TIME",
     TIME(tls_ticket_rotate_ms, 1000, NULL, "; write 3600 (seconds), 30m or 1h", NULL),
     "a new ticket key every TIME; the one before still opens its\n"
     "tickets for one more TIME (default 1h)"},
    {"--tls-session-cache", 0, "N", INT(tls_session_cache, 0, INT_MAX, "off", NULL),
     "sessions the server keeps for resumption without a ticket\n"
     "(TLS 1.2 session IDs, TLS 1.3 stateful tickets); 0: none\n"
     "(default 20480)"},
    {"--tls-session-timeout", 0, "TIME",
     TIME(tls_session_ms, 1000, NULL, "; write 300 (seconds), 5m or 1h", NULL),
     "how long a TLS session may be resumed (default 5m)"},
    {"--backlog", 0, "N", INT(backlog, 1, INT_MAX, NULL, NULL),
     "listen backlog (default 65535; capped by net.core.somaxconn)"},
    {"--groups", 0, "N", INT(groups, 1, 1024, NULL, NULL),
     "epoll groups (default: echo one per CPU of the plan; Lua, or\n"
     "a --listen-tls, one per 4 CPUs)"},
    {"--workers", 0, "N", INT(workers, 1, 1024, NULL, NULL),
     "worker threads per group (default: echo 1; Lua, or a\n"
     "--listen-tls, the group's CPUs)"},
    {"--accept-threads", 0, "N", INT(accept_threads, 1, OPT_MAX_ACCEPT, NULL, NULL),
     "accept threads, each with its own SO_REUSEPORT listener per\n"
     "--listen address (default: one per 2 CPUs of the plan, 1-16)"},
    {"--cpus", 0, "LIST", HOOK(set_cpus),
     "CPUs to use, e.g. 0-3,8 (default: all this process may use)"},
    {"--no-pin", 0, NULL, FLAG(pin, 0), "do not set CPU affinity on worker threads"},
    {"--max-conns", 0, "N", INT(max_conns, 1, INT_MAX, NULL, NULL),
     "live connections; more are accepted and closed at once\n"
     "(default: what RLIMIT_NOFILE leaves, raised soft to hard)"},
    {"--max-conns-per-ip", 0, "N", INT(max_per_ip, 0, INT_MAX, "no limit", NULL),
     "live connections from one client address; more are closed\n"
     "at once and counted (default 0: no limit)"},
    {"--max-pending", 0, "BYTES", SIZE(max_pending, 1024, 1 << 30, " (e.g. 65536, 64K, 1M)"),
     "output held per connection before reading pauses (default 1M)"},
    {"--idle-timeout", 0, "TIME",
     TIME(idle_ms, 0, "never", "; write 300 (seconds), 30s, 5m or 500ms", "never"),
     "close a connection on which nothing moved (no byte read,\n"
     "none taken) for TIME: 300 (seconds), 30s, 5m, 500ms\n"
     "(default 0: never)"},
    {"--proxy-protocol", 0, NULL, FLAG(proxy, 1),
     "every connection starts with a PROXY protocol v1 or v2\n"
     "header (HAProxy send-proxy); its client address is the\n"
     "peer's; a connection without one is closed"},
    {"--proxy-timeout", 0, "TIME",
     TIME(proxy_ms, 1, NULL, "; write 5 (seconds), 2.5s or 500ms", NULL),
     "time for that header to arrive whole after the accept,\n"
     "else the connection is closed: 5 (seconds), 2.5s, 500ms\n"
     "(default 5s)"},
    {"--drain-timeout", 0, "TIME",
     TIME(drain_ms, 0, NULL, "; write 5 (seconds), 2.5s or 500ms", "no wait for in-flight work"),
     "on SIGTERM/SIGINT, time for in-flight work: 5 (seconds),\n"
     "2.5s, 500ms (default 5s)"},
    {"--batch", 0, "N", INT(batch, 1, 1024, NULL, NULL),
     "events one worker takes per epoll_wait (default 16)"},
    {"--dispatch", 0, "rr|least", NAME(dispatch, "a policy"),
     "group choice per connection: round-robin, or the less loaded\n"
     "of two random groups (default rr)"},
    {"--oneshot", 0, "auto|always", NAME(oneshot_always, "a mode"),
     "auto: a group of one worker registers its connections\n"
     "level-triggered and re-arms only when what it waits for\n"
     "changes; always: EPOLLONESHOT and a re-arm per event in\n"
     "every group (default auto)"},
    {"--lua", 0, "SCRIPT", PATH(lua, ANY_LENGTH, "the path of a Lua script, e.g. lua/echo.lua"),
     "serve connections with this Lua 5.4 script (see lua/README.md)"},
    {"--lua-mem-mb", 0, "N", MIB(lua_mem, 0),
     "memory cap per worker's Lua state, MiB; 0 = none (default 64)"},
    {"--lua-timeout-ms", 0, "N", MS(lua_timeout_ms, 0, "no timeout"),
     "milliseconds (or 2s, 250ms): abort a callback running longer;\n"
     "0 = never (default 1000); time waiting in lfe.sleep or a\n"
     "socket does not count"},
    {"--lua-wall-timeout-ms", 0, "N", MS(lua_wall_ms, 0, "no timeout"),
     "milliseconds (or 2s, 250ms): end a callback taking longer,\n"
     "waits included; 0 = never (default 5000)"},
    {"--lua-io-timeout-ms", 0, "N", MS(lua_io_ms, 1, NULL),
     "milliseconds (or 2s, 250ms): default timeout of lfe.connect\n"
     "and each socket call (default 1000)"},
    {"--lua-shared-mb", 0, "N", MIB(lua_shared, 1), "capacity of lfe.shared, MiB (default 16)"},
    {"--lua-ctx-mb", 0, "N", MIB(lua_ctx, 1),
     "conn.ctx kept in C for all connections together, MiB; a save\n"
     "past it fails its callback (default 64; 1 MiB a connection)"},
    {"--lua-unsafe", 0, NULL, FLAG(lua_unsafe, 1),
     "open every standard library (io, os, package, debug...)"},
    {"--check-sysctl", 0, NULL, HOOK(set_check_sysctl),
     "compare the kernel's network parameters with sysctl.conf,\n"
     "print a row per key and the ceilings they set, exit 0 if\n"
     "all are right, 1 if not (uses --backlog and --listen)"},
    {"--apply-sysctl", 0, NULL, FLAG(sysctl, 2),
     "as root: first set the keys that are not right (never\n"
     "lowering one already above), then check"},
    {"--dry-run", 0, NULL, FLAG(sysctl_dry, 1),
     "with --apply-sysctl: print what it would set (would set\n"
     "KEY = VALUE (now OLD)), change nothing"},
    {"--undo-sysctl", 0, NULL, FLAG(sysctl_undo, 1),
     "as root: put back what --apply-sysctl changed, as its undo\n"
     "file saved it, then remove the file"},
    {"--undo-file", 0, "FILE", PATH(sysctl_undo_file, ANY_LENGTH, "a file's path"),
     "where --apply-sysctl saves what it changes and --undo-sysctl\n"
     "reads it (default " SYSRESTORE_UNDO_PATH ")"},
    {"--sysctl-conf", 0, "FILE", PATH(sysctl_conf, ANY_LENGTH, "the path of a sysctl.conf"),
     "check against FILE instead of the built-in sysctl.conf"},
    {"--admin", 0, "HOST:PORT", ADDR(admin, "127.0.0.1:9877 or [::1]:9877"),
     "HTTP listener for GET /metrics (Prometheus), /health and\n"
     "/stats, on a thread of its own (default: none)"},
    {"--config", 0, "FILE",
     PATH(config, ANY_LENGTH, "the path of a config file, e.g. /etc/lfepolld.conf"),
     "options from FILE, one 'name = value' a line (long names,\n"
     "no dashes; a flag alone or '= true'; # comments); the\n"
     "command line wins, and its --listen or --listen-tls replace\n"
     "the file's addresses, its --tls-cert or --tls-key the file's\n"
     "pairs"},
    {"--user", 0, "NAME", PATH(user, ANY_LENGTH, "a user name, e.g. nobody"),
     "drop to NAME's uid and gid once the listeners are bound"},
    {"--pid-file", 0, "PATH", PATH(pid_file, ANY_LENGTH, "a path, e.g. /run/lfepolld/lfepolld.pid"),
     "write the pid to PATH once started (as --user: its directory\n"
     "must be writable by it), remove it at exit; refuse to start\n"
     "when PATH names a running lfepolld"},
    {"--takeover", 0, "PATH",
     PATH(takeover, 99,
          "the path of a Unix socket (under 100 bytes), e.g. /run/lfepolld/takeover.sock"),
     "restart without refusing anyone: take the listening sockets\n"
     "of the lfepolld serving PATH (it then drains and exits),\n"
     "and serve PATH for the next one"},
    {"--defer-accept", 0, NULL, FLAG(defer_accept, 1),
     "accept a connection once its first bytes came\n"
     "(TCP_DEFER_ACCEPT): cheaper short connections; a client\n"
     "that sends nothing waits in the kernel up to ~1 s"},
    {"--fastopen", 0, "N",
     INT(fastopen, 0, 65535, "off",
         " (the queue of handshakes whose SYN's cookie is not yet proven)"),
     "TCP Fast Open: a client's first bytes may come in its SYN;\n"
     "N handshakes without a cookie pending per listener (needs\n"
     "net.ipv4.tcp_fastopen with bit 2, e.g. 3; default 0: off)"},
    {"--reuseport", 0, NULL, FLAG(reuseport, 1),
     "SO_REUSEPORT on the listeners: several instances may share\n"
     "a port (a closing one resets what waits in its queue)"},
    {"--log-format", 0, "text|json", NAME(log_json, "a format"),
     "log lines as text, or one JSON object each (default text)"},
    {"--quiet", 'q', NULL, FLAG(verbosity, 0), "log warnings and errors only"},
    {"--verbose", 'v', NULL, FLAG(verbosity, 2), "log debug detail"},
    {"--help", 'h', NULL, HOOK(show_help), "this text"},
    {"--version", 'V', NULL, HOOK(show_version), "version"},
    {NULL, 0, NULL, HOOK(NULL), NULL},
};

#define OPT_COUNT (sizeof(opt_defs) / sizeof(opt_defs[0]) - 1)

static const char usage_head[] =
    "usage: lfepolld [options]\n"
    "\n"
    "Leader-follower TCP daemon: accept threads hand connections to epoll groups; each\n"
    "group's worker threads share one epoll fd (EPOLLONESHOT) and are pinned to its CPUs.\n"
    "Each connection is a byte-exact echo, or served by a Lua 5.4 script (--lua).\n"
    "A TIME is seconds (5, 2.5) or has a unit: 500ms, 2.5s, 1m, 1h; an option named -ms\n"
    "takes milliseconds (250) or a unit as well.\n"
    "\n";

static const char usage_tail[] =
    "\n"
    "Under systemd: READY=1, RELOADING=1, STOPPING=1, STATUS= and WATCHDOG=1 go to\n"
    "$NOTIFY_SOCKET; sockets handed over by socket activation ($LISTEN_FDS) are used as\n"
    "they are, in place of --listen.\n"
    "\n"
    "Signals: SIGTERM/SIGINT drain and exit 0 (a second one exits at once); SIGUSR1 prints\n"
    "counters per worker, group and in total; SIGHUP reloads the Lua script, and the TLS\n"
    "certificates and keys (what fails to load is logged and the running one stays).\n";

#define HELP_COL 23 /* --help's text starts 2 + HELP_COL columns in (further after a long name) */

void opt_usage(FILE *out)
{
    fputs(usage_head, out);
    for (const struct opt_def *d = opt_defs; d->name; d++) {
        char spec[64];
        const char *h = d->help, *nl;
        int n;

        if (d->letter)
            n = snprintf(spec, sizeof(spec), "-%c, %s", d->letter, d->name);
        else
            n = snprintf(spec, sizeof(spec), "%s%s%s", d->name, d->value ? " " : "",
                         d->value ? d->value : "");
        fprintf(out, "  %-*s%s", HELP_COL, spec, n < HELP_COL ? "" : "  ");
        for (int indent = 0;; indent = 2 + HELP_COL) {
            nl = strchr(h, '\n');
            fprintf(out, "%*s%.*s\n", indent, "", nl ? (int)(nl - h) : (int)strlen(h), h);
            if (!nl)
                break;
            h = nl + 1;
        }
    }
    fputs(usage_tail, out);
}

/* The option named name ("--listen", or "-q" for one with a letter), or NULL. */
static const struct opt_def *find(const char *name)
{
    for (const struct opt_def *d = opt_defs; d->name; d++)
        if (!strcmp(name, d->name) ||
            (d->letter && name[0] == '-' && name[1] == d->letter && !name[2]))
            return d;
    return NULL;
}

/* The names of the options that take a value, for args_next (NULL-terminated). */
static const char *const *with_value(void)
{
    static const char *names[OPT_COUNT + 1];
    int n = 0;

    for (const struct opt_def *d = opt_defs; d->name; d++)
        if (d->value)
            names[n++] = d->name;
    names[n] = NULL;
    return names;
}

/* Applies option d, as the user named it (name), with its value val (NULL for a flag) to o. */
static enum opt_result apply(struct opt *o, const struct opt_def *d, const char *name,
                             const char *val, FILE *out, char *err, size_t errlen)
{
    int rc;

    if (d->hook)
        return d->hook(o, val, out, err, errlen);
    rc = args_set(o, &d->kind, name, d->value, val, err, errlen);
    if (rc == -ENOTSUP)
        snprintf(err, errlen, "%s: lfepolld's option table gives it a kind that does not handle it",
                 name);
    return rc < 0 ? OPT_ERROR : OPT_RUN;
}

/* The TLS options together: a TLS listener needs a certificate and its key, and they need one. */
static enum opt_result check_tls(const struct opt *o, char *err, size_t errlen)
{
    if (o->ntls && (!o->tls_cert || !o->tls_key)) {
        snprintf(err, errlen, "--listen-tls needs --tls-cert FILE and --tls-key FILE (%s missing)",
                 !o->tls_cert && !o->tls_key ? "both"
                 : !o->tls_cert              ? "--tls-cert"
                                             : "--tls-key");
        return OPT_ERROR;
    }
    if (!o->ntls && (o->tls_cert || o->tls_key)) {
        snprintf(err, errlen,
                 "%s given without --listen-tls: add --listen-tls HOST:PORT (or drop it)",
                 o->tls_cert ? "--tls-cert" : "--tls-key");
        return OPT_ERROR;
    }
    return OPT_RUN;
}

/* The options of the TLS configuration (tls_conf.c) against each other. */
static enum opt_result check_tls_conf(const struct opt *o, char *err, size_t errlen)
{
    const char *alone = o->tls_client_ca      ? "--tls-client-ca"
                        : o->tls_alpn         ? "--tls-alpn"
                        : o->tls_ciphers      ? "--tls-ciphers"
                        : o->tls_ciphersuites ? "--tls-ciphersuites"
                        : o->tls_groups       ? "--tls-groups"
                                              : NULL;

    if (!o->ntls && alone) {
        snprintf(err, errlen,
                 "%s given without --listen-tls: add --listen-tls HOST:PORT (or drop it)", alone);
        return OPT_ERROR;
    }
    if (o->ntls_certs != o->ntls_keys) {
        snprintf(err, errlen,
                 "--tls-cert given %d times and --tls-key %d: give each certificate its key, in "
                 "the same order",
                 o->ntls_certs, o->ntls_keys);
        return OPT_ERROR;
    }
    if (o->tls_verify_client && !o->tls_client_ca) {
        snprintf(err, errlen,
                 "--tls-verify-client %s needs --tls-client-ca FILE: the CA certificates a "
                 "client's certificate must chain to",
                 o->tls_verify_client == 2 ? "on" : "optional");
        return OPT_ERROR;
    }
    if (o->tls_client_ca && !o->tls_verify_client) {
        snprintf(err, errlen,
                 "--tls-client-ca without --tls-verify-client: add --tls-verify-client on (a "
                 "certificate required) or optional");
        return OPT_ERROR;
    }
    if (o->tls_min_version > o->tls_max_version) {
        snprintf(err, errlen, "--tls-min-version 1.3 above --tls-max-version 1.2: no version left");
        return OPT_ERROR;
    }
    return OPT_RUN;
}

static enum opt_result parse(struct opt *o, int argc, char **argv, FILE *out, char *err,
                             size_t errlen)
{
    const char *const *wv;
    enum opt_result r;

    memset(o, 0, sizeof(*o));
    o->backlog = 65535;
    o->pin = true;
    o->max_pending = 1 << 20;
    o->drain_ms = 5000;
    o->proxy_ms = 5000;
    o->tls_hs_ms = 10000;
    o->tls_max_version = 1;
    o->tls_ticket_rotate_ms = 3600 * 1000;
    o->tls_session_cache = 20480;
    o->tls_session_ms = 300 * 1000;
    o->batch = 16;
    o->dispatch = DISPATCH_RR;
    o->verbosity = 1;
    o->lua_mem = (size_t)64 << 20;
    o->lua_timeout_ms = 1000;
    o->lua_wall_ms = 5000;
    o->lua_io_ms = 1000;
    o->lua_shared = (size_t)16 << 20;
    o->lua_ctx = (size_t)64 << 20;

    wv = with_value();
    for (int i = 1; i < argc; i++) {
        const struct opt_def *d;
        struct arg a;
        const char *name = a.name;

        if (argv[i][0] != '-') {
            snprintf(err, errlen, "unexpected argument '%s': options start with --; see --help",
                     argv[i]);
            return OPT_ERROR;
        }
        if (args_next(argc, argv, &i, wv, "lfepolld", &a, err, errlen) < 0)
            return OPT_ERROR;
        if (!(d = find(name))) {
            snprintf(err, errlen, "unknown option '%s'; see lfepolld --help", name);
            return OPT_ERROR;
        }
        if ((r = apply(o, d, name, a.val, out, err, errlen)) != OPT_RUN)
            return r;
        o->backlog_set |= !strcmp(d->name, "--backlog");
    }
    if (o->sysctl_undo && o->sysctl) {
        snprintf(err, errlen,
                 "--undo-sysctl puts back what --apply-sysctl set: give it alone, "
                 "without --apply-sysctl or --check-sysctl");
        return OPT_ERROR;
    }
    if (o->sysctl_dry && o->sysctl != 2) {
        snprintf(err, errlen,
                 "--dry-run goes with --apply-sysctl (a check changes nothing anyway)");
        return OPT_ERROR;
    }
    if (o->sysctl_undo_file && o->sysctl != 2 && !o->sysctl_undo) {
        snprintf(err, errlen, "--undo-file goes with --apply-sysctl or --undo-sysctl");
        return OPT_ERROR;
    }
    if (o->nlisten == 0) {
        o->listen[o->nlisten++] = "127.0.0.1:9876";
        o->listen_default = true;
    }
    return OPT_RUN;
}

static bool takes_value(const char *name)
{
    const struct opt_def *d = find(name);

    return d && d->value;
}

/* What --config read, kept until the next opt_parse: struct opt points into it. */
static char *conf_text;
static char **conf_argv;

/* Reads the config file at path into conf_text, and makes room for its words in conf_argv.
 * 0, or -1 with one line in err. */
static int conf_read(const char *path, char *err, size_t errlen)
{
    char why[384];
    size_t len;
    struct stat st;

    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "--config %s: not a regular file", path);
        return -1;
    }
    conf_text = file_read(path, CONF_MAX_SIZE, &len, why, sizeof(why));
    if (!conf_text) {
        snprintf(err, errlen, "--config: %s%s", why,
                 errno == EFBIG ? " (a config file is at most 1 MiB)" : "");
        return -1;
    }
    if (memchr(conf_text, '\0', len)) {
        snprintf(err, errlen, "--config %s: holds a NUL byte: not a text file", path);
        return -1;
    }
    conf_argv = calloc(CONF_MAX_OPTS, sizeof(*conf_argv));
    if (!conf_argv) {
        snprintf(err, errlen, "--config %s: out of memory", path);
        return -1;
    }
    return 0;
}

/* Cuts the line at *p off the text (a NUL in place of its '\n'), and moves *p past it. */
static char *conf_next(char **p)
{
    char *line = *p, *end = strchr(line, '\n');

    if (end) {
        *end = '\0';
        *p = end + 1;
    } else {
        *p = line + strlen(line);
    }
    return line;
}

/* Splits a line into its option's name and, after a '=', its value (*val NULL: none), white
 * space trimmed. False for a blank line or a comment. */
static bool conf_split(char *line, char **name, char **val)
{
    char *eq;

    while (*line == ' ' || *line == '\t')
        line++;
    for (char *t = line + strlen(line); t > line && strchr(" \t\r", t[-1]); t--)
        t[-1] = '\0';
    if (!*line || *line == '#')
        return false;
    *name = line;
    *val = NULL;
    if ((eq = strchr(line, '='))) {
        *eq = '\0';
        *val = eq + 1;
        while (**val == ' ' || **val == '\t')
            ++*val;
        for (char *t = eq; t > line && (t[-1] == ' ' || t[-1] == '\t'); t--)
            t[-1] = '\0';
    }
    return true;
}

/* Whether name may stand in a config file; when not, why says so. */
static bool conf_name_ok(const char *name, char *why, size_t whylen)
{
    if (strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(name) || !*name ||
        *name == '-') {
        snprintf(why, whylen,
                 "'%s' is not an option name; write e.g. 'listen = 127.0.0.1:9876' (long names "
                 "without the dashes)",
                 name);
        return false;
    }
    if (!strcmp(name, "config") || !strcmp(name, "help") || !strcmp(name, "version")) {
        snprintf(why, whylen, "'%s' cannot be set in a config file", name);
        return false;
    }
    return true;
}

/* Whether the command line would take word alone; when not, why holds its message. */
static bool conf_parses(char *word, char *why, size_t whylen)
{
    char *one[2] = {(char *)"lfepolld", word}, msg[384];
    struct opt tmp;

    if (parse(&tmp, 2, one, NULL, msg, sizeof(msg)) != OPT_ERROR)
        return true;
    snprintf(why, whylen, "%s", msg);
    return false;
}

/* A config file's line as the command-line word in *word (malloc'd): "--name=value" for an
 * option that takes a value; a flag is "name" or "name = true", and *word is NULL for one set
 * false ("name = false") and for a blank line or a comment; full: there is no room for another.
 * 0; -1 with why (what follows "FILE:LINE: "); -ENOMEM. */
static int conf_line(char *line, bool full, char **word, char *why, size_t whylen)
{
    char *name, *val;
    size_t wl;

    *word = NULL;
    if (strlen(line) > CONF_MAX_LINE) {
        snprintf(why, whylen, "line longer than %d bytes", CONF_MAX_LINE);
        return -1;
    }
    if (!conf_split(line, &name, &val))
        return 0;
    if (!conf_name_ok(name, why, whylen))
        return -1;
    if (full) {
        snprintf(why, whylen, "more than %d options", CONF_MAX_OPTS);
        return -1;
    }
    wl = strlen(name) + (val ? strlen(val) : 0) + 4;
    if (!(*word = malloc(wl)))
        return -ENOMEM;
    snprintf(*word, wl, "--%s", name);
    if (val && !takes_value(*word)) {
        if (!conf_parses(*word, why, whylen)) /* not an option */
            goto free_word;
        if (!strcmp(val, "false") || !strcmp(val, "no") || !strcmp(val, "off")) {
            free(*word);
            *word = NULL;
            return 0;
        }
        if (strcmp(val, "true") && strcmp(val, "yes") && strcmp(val, "on")) {
            snprintf(why, whylen, "'%s' is a flag: write '%s' or '%s = true'", name, name, name);
            goto free_word;
        }
    } else if (val) {
        snprintf(*word, wl, "--%s=%s", name, val);
    }
    if (conf_parses(*word, why, whylen))
        return 0;
free_word:
    free(*word);
    *word = NULL;
    return -1;
}

/* Reads the config file into conf_argv as command-line words ("--name=value", "--name"), each
 * line checked as the command line checks it. Returns how many, or -1 with one line in err that
 * names the file and the line. */
static int conf_load(const char *path, char *err, size_t errlen)
{
    char why[CONF_MAX_LINE + 256], *word;
    int n = 0, lineno = 0, rc;

    if (conf_read(path, err, errlen) < 0)
        return -1;
    for (char *p = conf_text; *p;) {
        lineno++;
        rc = conf_line(conf_next(&p), n == CONF_MAX_OPTS, &word, why, sizeof(why));
        if (rc == -ENOMEM) {
            snprintf(err, errlen, "--config %s: out of memory", path);
            return -1;
        }
        if (rc < 0) {
            snprintf(err, errlen, "%s:%d: %s", path, lineno, why);
            return -1;
        }
        if (word)
            conf_argv[n++] = word;
    }
    return n;
}

static void conf_free(void)
{
    for (int i = 0; conf_argv && i < CONF_MAX_OPTS && conf_argv[i]; i++)
        free(conf_argv[i]);
    free(conf_argv);
    free(conf_text);
    conf_argv = NULL;
    conf_text = NULL;
}

/* Whether argument a of the command line is option name, as "--name" or "--name=...". */
static bool is_opt(const char *a, const char *name)
{
    size_t l = strlen(name);

    return !strncmp(a, name, l) && (a[l] == '\0' || a[l] == '=');
}

enum opt_result opt_parse(struct opt *o, int argc, char **argv, FILE *out, char *err, size_t errlen)
{
    const char *path = NULL;
    bool cli_listen = false, cli_certs = false;
    char **merged = NULL;
    enum opt_result r;
    int n = 0, m = 0;

    conf_free();
    for (int i = 1; i < argc; i++) {
        if (is_opt(argv[i], "--listen") || is_opt(argv[i], "--listen-tls"))
            cli_listen = true;
        if (is_opt(argv[i], "--tls-cert") || is_opt(argv[i], "--tls-key"))
            cli_certs = true; /* the pairs are the command line's, as its addresses are */
        if (is_opt(argv[i], "--config")) {
            const char *v = argv[i][8] == '=' ? argv[i] + 9 : i + 1 < argc ? argv[i + 1] : "";
            if (path) {
                snprintf(err, errlen, "--config: give one config file, not two");
                return OPT_ERROR;
            }
            path = v;
        }
    }
    if (path && *path) {
        if ((n = conf_load(path, err, errlen)) < 0) {
            args_one_line(err);
            conf_free();
            return OPT_ERROR;
        }
        merged = calloc((size_t)(argc + n + 1), sizeof(*merged));
        if (!merged) {
            snprintf(err, errlen, "--config %s: out of memory", path);
            conf_free();
            return OPT_ERROR;
        }
        merged[m++] = argv[0];
        /* the file first: what the command line says after it wins */
        for (int i = 0; i < n; i++)
            if (!(cli_listen &&
                  (is_opt(conf_argv[i], "--listen") || is_opt(conf_argv[i], "--listen-tls"))) &&
                !(cli_certs &&
                  (is_opt(conf_argv[i], "--tls-cert") || is_opt(conf_argv[i], "--tls-key"))))
                merged[m++] = conf_argv[i];
        for (int i = 1; i < argc; i++)
            merged[m++] = argv[i];
        argc = m;
        argv = merged;
    }
    r = parse(o, argc, argv, out, err, errlen);
    if (r == OPT_RUN) /* the options together, once all are read (not a config line alone) */
        r = check_tls(o, err, errlen);
    if (r == OPT_RUN)
        r = check_tls_conf(o, err, errlen);
    free(merged); /* the words it held live on in conf_argv and argv */

    if (r == OPT_ERROR) /* the messages quote arguments, which may hold a newline */
        args_one_line(err);
    return r;
}
