/* opt: lfepolld's command line, parsed into an immutable configuration. */
#include "opt.h"

#include "args.h"
#include "file.h"
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

/* Every option, written once: --help shows them in this order (opt_usage), the parser takes
 * their names and which of them take a value from here, and tests/unit/test_opt.c checks each
 * against man/lfepolld.8. X(ID, long name, short letter or 0, the value's name or NULL for a
 * flag, setter, help): --help prints the help's lines after the first under it. What an option
 * does to struct opt is its setter's case OPT_ID (a row whose setter has no case for it is an
 * error at its first use, and test_opt's test_every_option_is_handled fails). */
#define OPTIONS(X)                                                                                 \
    X(LISTEN, "--listen", 0, "HOST:PORT", set_accept,                                              \
      "address to listen on, repeatable; IPv6 as [ADDR]:PORT\n"                                    \
      "(default 127.0.0.1:9876; port 0 picks a free port)")                                        \
    X(BACKLOG, "--backlog", 0, "N", set_accept,                                                    \
      "listen backlog (default 65535; capped by net.core.somaxconn)")                              \
    X(GROUPS, "--groups", 0, "N", set_pool,                                                        \
      "epoll groups (default: echo one per CPU of the plan, Lua one\n"                             \
      "per 4 CPUs)")                                                                               \
    X(WORKERS, "--workers", 0, "N", set_pool,                                                      \
      "worker threads per group (default: echo 1, Lua the group's\n"                               \
      "CPUs)")                                                                                     \
    X(ACCEPT_THREADS, "--accept-threads", 0, "N", set_pool,                                        \
      "accept threads, each with its own SO_REUSEPORT listener per\n"                              \
      "--listen address (default: one per 2 CPUs of the plan, 1-16)")                              \
    X(CPUS, "--cpus", 0, "LIST", set_pool,                                                         \
      "CPUs to use, e.g. 0-3,8 (default: all this process may use)")                               \
    X(NO_PIN, "--no-pin", 0, NULL, set_pool, "do not set CPU affinity on worker threads")          \
    X(MAX_CONNS, "--max-conns", 0, "N", set_accept,                                                \
      "live connections; more are accepted and closed at once\n"                                   \
      "(default: what RLIMIT_NOFILE leaves, raised soft to hard)")                                 \
    X(MAX_CONNS_PER_IP, "--max-conns-per-ip", 0, "N", set_accept,                                  \
      "live connections from one client address; more are closed\n"                                \
      "at once and counted (default 0: no limit)")                                                 \
    X(MAX_PENDING, "--max-pending", 0, "BYTES", set_pool,                                          \
      "output held per connection before reading pauses (default 1M)")                             \
    X(IDLE_TIMEOUT, "--idle-timeout", 0, "TIME", set_pool,                                         \
      "close a connection on which nothing moved (no byte read,\n"                                 \
      "none taken) for TIME: 300 (seconds), 30s, 5m, 500ms\n"                                      \
      "(default 0: never)")                                                                        \
    X(PROXY_PROTOCOL, "--proxy-protocol", 0, NULL, set_accept,                                     \
      "every connection starts with a PROXY protocol v1 or v2\n"                                   \
      "header (HAProxy send-proxy); its client address is the\n"                                   \
      "peer's; a connection without one is closed")                                                \
    X(PROXY_TIMEOUT, "--proxy-timeout", 0, "TIME", set_accept,                                     \
      "time for that header to arrive whole after the accept,\n"                                   \
      "else the connection is closed: 5 (seconds), 2.5s, 500ms\n"                                  \
      "(default 5s)")                                                                              \
    X(DRAIN_TIMEOUT, "--drain-timeout", 0, "TIME", set_pool,                                       \
      "on SIGTERM/SIGINT, time for in-flight work: 5 (seconds),\n"                                 \
      "2.5s, 500ms (default 5s)")                                                                  \
    X(BATCH, "--batch", 0, "N", set_pool, "events one worker takes per epoll_wait (default 16)")   \
    X(DISPATCH, "--dispatch", 0, "rr|least", set_pool,                                             \
      "group choice per connection: round-robin, or the less loaded\n"                             \
      "of two random groups (default rr)")                                                         \
    X(ONESHOT, "--oneshot", 0, "auto|always", set_pool,                                            \
      "auto: a group of one worker registers its connections\n"                                    \
      "level-triggered and re-arms only when what it waits for\n"                                  \
      "changes; always: EPOLLONESHOT and a re-arm per event in\n"                                  \
      "every group (default auto)")                                                                \
    X(LUA, "--lua", 0, "SCRIPT", set_lua,                                                          \
      "serve connections with this Lua 5.4 script (see lua/README.md)")                            \
    X(LUA_MEM_MB, "--lua-mem-mb", 0, "N", set_lua,                                                 \
      "memory cap per worker's Lua state, MiB; 0 = none (default 64)")                             \
    X(LUA_TIMEOUT_MS, "--lua-timeout-ms", 0, "N", set_lua,                                         \
      "milliseconds (or 2s, 250ms): abort a callback running longer;\n"                            \
      "0 = never (default 1000); time waiting in lfe.sleep or a\n"                                 \
      "socket does not count")                                                                     \
    X(LUA_WALL_TIMEOUT_MS, "--lua-wall-timeout-ms", 0, "N", set_lua,                               \
      "milliseconds (or 2s, 250ms): end a callback taking longer,\n"                               \
      "waits included; 0 = never (default 5000)")                                                  \
    X(LUA_IO_TIMEOUT_MS, "--lua-io-timeout-ms", 0, "N", set_lua,                                   \
      "milliseconds (or 2s, 250ms): default timeout of lfe.connect\n"                              \
      "and each socket call (default 1000)")                                                       \
    X(LUA_SHARED_MB, "--lua-shared-mb", 0, "N", set_lua,                                           \
      "capacity of lfe.shared, MiB (default 16)")                                                  \
    X(LUA_CTX_MB, "--lua-ctx-mb", 0, "N", set_lua,                                                 \
      "conn.ctx kept in C for all connections together, MiB; a save\n"                             \
      "past it fails its callback (default 64; 1 MiB a connection)")                               \
    X(LUA_UNSAFE, "--lua-unsafe", 0, NULL, set_lua,                                                \
      "open every standard library (io, os, package, debug...)")                                   \
    X(CHECK_SYSCTL, "--check-sysctl", 0, NULL, set_process,                                        \
      "compare the kernel's network parameters with sysctl.conf,\n"                                \
      "print a row per key and the ceilings they set, exit 0 if\n"                                 \
      "all are right, 1 if not (uses --backlog and --listen)")                                     \
    X(APPLY_SYSCTL, "--apply-sysctl", 0, NULL, set_process,                                        \
      "as root: first set the keys that are not right (never\n"                                    \
      "lowering one already above), then check")                                                   \
    X(SYSCTL_CONF, "--sysctl-conf", 0, "FILE", set_process,                                        \
      "check against FILE instead of the built-in sysctl.conf")                                    \
    X(ADMIN, "--admin", 0, "HOST:PORT", set_process,                                               \
      "HTTP listener for GET /metrics (Prometheus), /health and\n"                                 \
      "/stats, on a thread of its own (default: none)")                                            \
    X(CONFIG, "--config", 0, "FILE", set_process,                                                  \
      "options from FILE, one 'name = value' a line (long names,\n"                                \
      "no dashes; a flag alone or '= true'; # comments); the\n"                                    \
      "command line wins, and its --listen replaces the file's")                                   \
    X(USER, "--user", 0, "NAME", set_process,                                                      \
      "drop to NAME's uid and gid once the listeners are bound")                                   \
    X(PID_FILE, "--pid-file", 0, "PATH", set_process,                                              \
      "write the pid to PATH once started (as --user: its directory\n"                             \
      "must be writable by it), remove it at exit; refuse to start\n"                              \
      "when PATH names a running lfepolld")                                                        \
    X(TAKEOVER, "--takeover", 0, "PATH", set_process,                                              \
      "restart without refusing anyone: take the listening sockets\n"                              \
      "of the lfepolld serving PATH (it then drains and exits),\n"                                 \
      "and serve PATH for the next one")                                                           \
    X(DEFER_ACCEPT, "--defer-accept", 0, NULL, set_accept,                                         \
      "accept a connection once its first bytes came\n"                                            \
      "(TCP_DEFER_ACCEPT): cheaper short connections; a client\n"                                  \
      "that sends nothing waits in the kernel up to ~1 s")                                         \
    X(FASTOPEN, "--fastopen", 0, "N", set_accept,                                                  \
      "TCP Fast Open: a client's first bytes may come in its SYN;\n"                               \
      "N handshakes without a cookie pending per listener (needs\n"                                \
      "net.ipv4.tcp_fastopen with bit 2, e.g. 3; default 0: off)")                                 \
    X(REUSEPORT, "--reuseport", 0, NULL, set_accept,                                               \
      "SO_REUSEPORT on the listeners: several instances may share\n"                               \
      "a port (a closing one resets what waits in its queue)")                                     \
    X(LOG_FORMAT, "--log-format", 0, "text|json", set_process,                                     \
      "log lines as text, or one JSON object each (default text)")                                 \
    X(QUIET, "--quiet", 'q', NULL, set_process, "log warnings and errors only")                    \
    X(VERBOSE, "--verbose", 'v', NULL, set_process, "log debug detail")                            \
    X(HELP, "--help", 'h', NULL, set_process, "this text")                                         \
    X(VERSION, "--version", 'V', NULL, set_process, "version")

#define OPT_ENUM(id, name, letter, value, set, help) OPT_##id,
enum opt_id { OPTIONS(OPT_ENUM) OPT_COUNT };

#define OPT_DEF(id, name, letter, value, set, help) {name, letter, value, help},
const struct opt_def opt_defs[] = {OPTIONS(OPT_DEF){NULL, 0, NULL, NULL}};

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
    "counters per worker, group and in total; SIGHUP reloads the Lua script (a script that\n"
    "fails to load is logged and the running one stays).\n";

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

int opt_parse_size(const char *s, size_t *out)
{
    char *end;
    unsigned long long v;
    unsigned shift = 0;

    if (!s || *s < '0' || *s > '9')
        return -EINVAL;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno)
        return -EINVAL;
    switch (*end) {
    case '\0':
        break;
    case 'k':
    case 'K':
        shift = 10;
        end++;
        break;
    case 'm':
    case 'M':
        shift = 20;
        end++;
        break;
    case 'g':
    case 'G':
        shift = 30;
        end++;
        break;
    default:
        return -EINVAL;
    }
    if (*end == 'i' && shift) /* accept KiB/MiB spelled out */
        end++;
    if ((*end == 'b' || *end == 'B') && shift)
        end++;
    if (*end || v > (SIZE_MAX >> shift))
        return -EINVAL;
    *out = (size_t)(v << shift);
    return 0;
}

int opt_parse_duration_ms(const char *s, long *out)
{
    double ms;

    if (args_duration_ms(s, 1000.0, &ms) < 0)
        return -EINVAL;
    if (ms > 0 && ms < 0.5)
        return -ERANGE; /* it would round to 0, which means never for most of them */
    *out = (long)(ms + 0.5);
    return 0;
}

/* A time under a millisecond (rc -ERANGE from opt_parse_duration_ms or parse_ms), for option
 * name: one line in err, where zero says what 0 would mean (NULL: the option takes no 0). */
static enum opt_result under_ms(const char *name, const char *val, const char *zero, char *err,
                                size_t errlen)
{
    snprintf(err, errlen,
             "%s: '%s' is less than a millisecond, which would round to 0%s%s%s: give 1ms or "
             "more%s%s",
             name, val, zero ? " (" : "", zero ? zero : "", zero ? ")" : "",
             zero ? ", or 0 for " : "", zero ? zero : "");
    return OPT_ERROR;
}

static int parse_long(const char *s, long min, long max, long *out)
{
    char *end;
    long v;

    if (!s || !*s || (*s != '-' && (*s < '0' || *s > '9')))
        return -EINVAL;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || *end || v < min || v > max)
        return -EINVAL;
    *out = v;
    return 0;
}

/* An option whose name ends in -ms: a bare whole number of milliseconds, as the name says (its
 * old configs keep their meaning), or a time with its unit (2s, 250ms, 1.5m), rounded to the
 * millisecond. */
static int parse_ms(const char *s, long min, long max, long *out)
{
    double ms;
    long v;

    if (!s || !*s || s[strspn(s, "0123456789")] == '\0')
        return parse_long(s, min, max, out);
    if (s[strspn(s, "0123456789.")] == '\0' || args_duration_ms(s, 1.0, &ms) < 0)
        return -EINVAL; /* 1.5 alone: no fraction of a bare millisecond */
    if (ms > 0 && ms < 0.5)
        return -ERANGE; /* it would round to 0: never, for a timeout */
    v = (long)(ms + 0.5);
    if (v < min || v > max)
        return -EINVAL;
    *out = v;
    return 0;
}

/* A HOST:PORT must have a port of 0-65535 after its last colon, and IPv6 must be bracketed. */
static bool hostport_ok(const char *s)
{
    const char *colon = strrchr(s, ':');
    long port;

    if (!colon || colon == s)
        return false;
    if (s[0] == '[' ? colon[-1] != ']' || colon - s < 3
                    : memchr(s, ':', (size_t)(colon - s)) != NULL)
        return false;
    return parse_long(colon + 1, 0, 65535, &port) == 0;
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

/* A row of OPTIONS whose setter has no case for it. */
static enum opt_result unhandled(const char *name, char *err, size_t errlen)
{
    snprintf(err, errlen, "%s: lfepolld's option table names a setter that does not handle it",
             name);
    return OPT_ERROR;
}

/* Applies one of the Lua options (--lua and its scripts' states) to o. Returns OPT_RUN or
 * OPT_ERROR (err filled); so do the setters below, and set_process may return OPT_EXIT. */
static enum opt_result set_lua(struct opt *o, enum opt_id id, const char *name, const char *val,
                               FILE *out, char *err, size_t errlen)
{
    long v;
    int rc;

    (void)out;
    switch (id) {
    case OPT_LUA_UNSAFE:
        o->lua_unsafe = true;
        break;
    case OPT_LUA:
        if (!*val) {
            snprintf(err, errlen, "--lua: give the path of a Lua script, e.g. lua/echo.lua");
            return OPT_ERROR;
        }
        o->lua = val;
        break;
    case OPT_LUA_MEM_MB:
    case OPT_LUA_SHARED_MB:
    case OPT_LUA_CTX_MB: {
        bool mem = name[6] == 'm';
        if (parse_long(val, mem ? 0 : 1, 65536, &v) < 0) {
            snprintf(err, errlen, "%s: '%s' is not a whole number of MiB from %d to 65536", name,
                     val, mem ? 0 : 1);
            return OPT_ERROR;
        }
        *(mem ? &o->lua_mem : name[6] == 's' ? &o->lua_shared : &o->lua_ctx) = (size_t)v << 20;
        break;
    }
    case OPT_LUA_TIMEOUT_MS:
        if ((rc = parse_ms(val, 0, 3600000, &v)) == -ERANGE)
            return under_ms(name, val, "no timeout", err, errlen);
        if (rc < 0) {
            snprintf(err, errlen,
                     "--lua-timeout-ms: '%s' is not a whole number of milliseconds from 0 "
                     "to 3600000, nor a time with a unit (2s, 250ms) up to 3600s",
                     val);
            return OPT_ERROR;
        }
        o->lua_timeout_ms = (int)v;
        break;
    case OPT_LUA_WALL_TIMEOUT_MS:
    case OPT_LUA_IO_TIMEOUT_MS: {
        bool wall = name[6] == 'w';

        if ((rc = parse_ms(val, wall ? 0 : 1, 3600000, &v)) == -ERANGE)
            return under_ms(name, val, wall ? "no timeout" : NULL, err, errlen);
        if (rc < 0) {
            snprintf(err, errlen,
                     "%s: '%s' is not a whole number of milliseconds from %d to 3600000, nor a "
                     "time with a unit (2s, 250ms) up to 3600s",
                     name, val, wall ? 0 : 1);
            return OPT_ERROR;
        }
        *(wall ? &o->lua_wall_ms : &o->lua_io_ms) = (int)v;
        break;
    }
    default:
        return unhandled(name, err, errlen);
    }
    return OPT_RUN;
}

/* Applies one of the options of the listeners and the accept thread (addresses, queue,
 * shedding, PROXY headers) to o. */
static enum opt_result set_accept(struct opt *o, enum opt_id id, const char *name, const char *val,
                                  FILE *out, char *err, size_t errlen)
{
    long v;
    int rc;

    (void)out;
    switch (id) {
    case OPT_LISTEN:
        if (!hostport_ok(val)) {
            snprintf(err, errlen,
                     "--listen: '%s' is not HOST:PORT; write 127.0.0.1:9876 or [::1]:9876 "
                     "(port 0-65535)",
                     val);
            return OPT_ERROR;
        }
        if (o->nlisten == OPT_MAX_LISTEN) {
            snprintf(err, errlen, "--listen: at most %d addresses", OPT_MAX_LISTEN);
            return OPT_ERROR;
        }
        o->listen[o->nlisten++] = val;
        break;
    case OPT_BACKLOG:
        if (parse_long(val, 1, INT_MAX, &v) < 0) {
            snprintf(err, errlen, "--backlog: '%s' is not an integer from 1 to %d", val, INT_MAX);
            return OPT_ERROR;
        }
        o->backlog = (int)v;
        o->backlog_set = true;
        break;
    case OPT_MAX_CONNS:
        if (parse_long(val, 1, INT_MAX, &v) < 0) {
            snprintf(err, errlen, "--max-conns: '%s' is not an integer from 1 to %d", val, INT_MAX);
            return OPT_ERROR;
        }
        o->max_conns = v;
        break;
    case OPT_PROXY_TIMEOUT:
        if ((rc = opt_parse_duration_ms(val, &v)) == -ERANGE)
            return under_ms(name, val, NULL, err, errlen);
        if (rc < 0 || v < 1) {
            snprintf(err, errlen,
                     "--proxy-timeout: '%s' is not a duration of 1ms to 86400s; write 5 "
                     "(seconds), 2.5s or 500ms",
                     val);
            return OPT_ERROR;
        }
        o->proxy_ms = (int)v;
        break;
    case OPT_PROXY_PROTOCOL:
        o->proxy = true;
        break;
    case OPT_DEFER_ACCEPT:
        o->defer_accept = true;
        break;
    case OPT_FASTOPEN:
        if (parse_long(val, 0, 65535, &v) < 0) {
            snprintf(err, errlen,
                     "--fastopen: '%s' is not an integer from 0 (off) to 65535 (the queue of "
                     "handshakes whose SYN's cookie is not yet proven)",
                     val);
            return OPT_ERROR;
        }
        o->fastopen = (int)v;
        break;
    case OPT_MAX_CONNS_PER_IP:
        if (parse_long(val, 0, INT_MAX, &v) < 0) {
            snprintf(err, errlen,
                     "--max-conns-per-ip: '%s' is not an integer from 0 (no limit) to %d", val,
                     INT_MAX);
            return OPT_ERROR;
        }
        o->max_per_ip = v;
        break;
    case OPT_REUSEPORT:
        o->reuseport = true;
        break;
    default:
        return unhandled(name, err, errlen);
    }
    return OPT_RUN;
}

/* Applies one of the options of the pool's threads, and of what they hold per connection, to o. */
static enum opt_result set_pool(struct opt *o, enum opt_id id, const char *name, const char *val,
                                FILE *out, char *err, size_t errlen)
{
    long v;
    int rc;

    (void)out;
    switch (id) {
    case OPT_NO_PIN:
        o->pin = false;
        break;
    case OPT_ACCEPT_THREADS:
        if (parse_long(val, 1, OPT_MAX_ACCEPT, &v) < 0) {
            snprintf(err, errlen, "--accept-threads: '%s' is not an integer from 1 to %d", val,
                     OPT_MAX_ACCEPT);
            return OPT_ERROR;
        }
        o->accept_threads = (int)v;
        break;
    case OPT_GROUPS:
    case OPT_WORKERS:
        if (parse_long(val, 1, 1024, &v) < 0) {
            snprintf(err, errlen, "%s: '%s' is not an integer from 1 to 1024", name, val);
            return OPT_ERROR;
        }
        *(name[2] == 'g' ? &o->groups : &o->workers) = (int)v;
        break;
    case OPT_CPUS:
        if (cpulist_parse(val, &o->cpus) < 0) {
            snprintf(err, errlen,
                     "--cpus: '%s' is not a CPU list; write e.g. 0-3,8 (CPUs below %d)", val,
                     CPU_SETSIZE);
            return OPT_ERROR;
        }
        o->have_cpus = true;
        break;
    case OPT_MAX_PENDING: {
        size_t sz;
        if (opt_parse_size(val, &sz) < 0 || sz < 1024 || sz > (1u << 30)) {
            snprintf(err, errlen,
                     "--max-pending: '%s' is not a size from 1K to 1G (e.g. 65536, 64K, 1M)", val);
            return OPT_ERROR;
        }
        o->max_pending = sz;
        break;
    }
    case OPT_DRAIN_TIMEOUT:
        if ((rc = opt_parse_duration_ms(val, &v)) == -ERANGE)
            return under_ms(name, val, "no wait for in-flight work", err, errlen);
        if (rc < 0) {
            snprintf(err, errlen,
                     "--drain-timeout: '%s' is not a duration of 0 to 86400s; write 5 (seconds), "
                     "2.5s or 500ms",
                     val);
            return OPT_ERROR;
        }
        o->drain_ms = (int)v;
        break;
    case OPT_IDLE_TIMEOUT:
        if ((rc = opt_parse_duration_ms(val, &v)) == -ERANGE)
            return under_ms(name, val, "never", err, errlen);
        if (rc < 0) {
            snprintf(err, errlen,
                     "--idle-timeout: '%s' is not a duration of 0 (never) to 86400s; write "
                     "300 (seconds), 30s, 5m or 500ms",
                     val);
            return OPT_ERROR;
        }
        o->idle_ms = (int)v;
        break;
    case OPT_BATCH:
        if (parse_long(val, 1, 1024, &v) < 0) {
            snprintf(err, errlen, "--batch: '%s' is not an integer from 1 to 1024", val);
            return OPT_ERROR;
        }
        o->batch = (int)v;
        break;
    case OPT_DISPATCH:
        if (!strcmp(val, "rr"))
            o->dispatch = DISPATCH_RR;
        else if (!strcmp(val, "least"))
            o->dispatch = DISPATCH_LEAST;
        else {
            snprintf(err, errlen, "--dispatch: '%s' is not a policy; use rr or least", val);
            return OPT_ERROR;
        }
        break;
    case OPT_ONESHOT:
        if (!strcmp(val, "auto") || !strcmp(val, "always"))
            o->oneshot_always = val[1] == 'l';
        else {
            snprintf(err, errlen, "--oneshot: '%s' is not a mode; use auto or always", val);
            return OPT_ERROR;
        }
        break;
    default:
        return unhandled(name, err, errlen);
    }
    return OPT_RUN;
}

/* Applies one of the options of the process around the pool (sysctl, admin, config, user, files,
 * logging) to o, or prints --help or --version on out (OPT_EXIT). */
static enum opt_result set_process(struct opt *o, enum opt_id id, const char *name, const char *val,
                                   FILE *out, char *err, size_t errlen)
{
    switch (id) {
    case OPT_HELP:
        opt_usage(out);
        return OPT_EXIT;
    case OPT_VERSION:
        fprintf(out, "lfepolld %s\n", LFE_VERSION);
        return OPT_EXIT;
    case OPT_QUIET:
        o->verbosity = 0;
        break;
    case OPT_VERBOSE:
        o->verbosity = 2;
        break;
    case OPT_CHECK_SYSCTL:
        o->sysctl = o->sysctl > 1 ? o->sysctl : 1;
        break;
    case OPT_APPLY_SYSCTL:
        o->sysctl = 2;
        break;
    case OPT_SYSCTL_CONF:
        if (!*val) {
            snprintf(err, errlen, "--sysctl-conf: give the path of a sysctl.conf");
            return OPT_ERROR;
        }
        o->sysctl_conf = val;
        break;
    case OPT_CONFIG:
        if (!*val) {
            snprintf(err, errlen,
                     "--config: give the path of a config file, e.g. "
                     "/etc/lfepolld.conf");
            return OPT_ERROR;
        }
        o->config = val;
        break;
    case OPT_USER:
        if (!*val) {
            snprintf(err, errlen, "--user: give a user name, e.g. nobody");
            return OPT_ERROR;
        }
        o->user = val;
        break;
    case OPT_PID_FILE:
        if (!*val) {
            snprintf(err, errlen, "--pid-file: give a path, e.g. /run/lfepolld/lfepolld.pid");
            return OPT_ERROR;
        }
        o->pid_file = val;
        break;
    case OPT_TAKEOVER:
        if (!*val || strlen(val) >= 100) {
            snprintf(err, errlen,
                     "--takeover: give the path of a Unix socket (under 100 bytes), e.g. "
                     "/run/lfepolld/takeover.sock");
            return OPT_ERROR;
        }
        o->takeover = val;
        break;
    case OPT_ADMIN:
        if (!hostport_ok(val)) {
            snprintf(err, errlen,
                     "--admin: '%s' is not HOST:PORT; write 127.0.0.1:9877 or [::1]:9877 "
                     "(port 0-65535)",
                     val);
            return OPT_ERROR;
        }
        o->admin = val;
        break;
    case OPT_LOG_FORMAT:
        if (strcmp(val, "text") && strcmp(val, "json")) {
            snprintf(err, errlen, "--log-format: '%s' is not a format; use text or json", val);
            return OPT_ERROR;
        }
        o->log_json = val[0] == 'j';
        break;
    default:
        return unhandled(name, err, errlen);
    }
    return OPT_RUN;
}

#define OPT_SETTER(id, name, letter, value, set, help) set,
static enum opt_result (*const setters[])(struct opt *, enum opt_id, const char *, const char *,
                                          FILE *, char *, size_t) = {OPTIONS(OPT_SETTER)};

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
        r = setters[d - opt_defs](o, (enum opt_id)(d - opt_defs), name, a.val, out, err, errlen);
        if (r != OPT_RUN)
            return r;
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

/* Reads the config file into conf_argv as command-line words ("--name=value", "--name"), each
 * line checked as the command line checks it. Returns how many, or -1 with one line in err that
 * names the file and the line. */
static int conf_load(const char *path, char *err, size_t errlen)
{
    char why[384];
    size_t len;
    struct stat st;
    int n = 0, lineno = 0;
    char *p;

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
    for (p = conf_text; *p;) {
        char *line = p, *end = strchr(p, '\n'), *eq, *name, *val = NULL, *word;
        struct opt tmp;
        char *one[2] = {(char *)"lfepolld", NULL};
        size_t wl;

        lineno++;
        if (end) {
            *end = '\0';
            p = end + 1;
        } else {
            p = line + strlen(line);
        }
        if (strlen(line) > CONF_MAX_LINE) {
            snprintf(err, errlen, "%s:%d: line longer than %d bytes", path, lineno, CONF_MAX_LINE);
            return -1;
        }
        while (*line == ' ' || *line == '\t')
            line++;
        for (char *t = line + strlen(line); t > line && strchr(" \t\r", t[-1]); t--)
            t[-1] = '\0';
        if (!*line || *line == '#')
            continue;
        name = line;
        if ((eq = strchr(line, '='))) {
            *eq = '\0';
            val = eq + 1;
            while (*val == ' ' || *val == '\t')
                val++;
            for (char *t = eq; t > name && (t[-1] == ' ' || t[-1] == '\t'); t--)
                t[-1] = '\0';
        }
        if (strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(name) || !*name ||
            *name == '-') {
            snprintf(err, errlen,
                     "%s:%d: '%s' is not an option name; write e.g. 'listen = "
                     "127.0.0.1:9876' (long names without the dashes)",
                     path, lineno, name);
            return -1;
        }
        if (!strcmp(name, "config") || !strcmp(name, "help") || !strcmp(name, "version")) {
            snprintf(err, errlen, "%s:%d: '%s' cannot be set in a config file", path, lineno, name);
            return -1;
        }
        if (n == CONF_MAX_OPTS) {
            snprintf(err, errlen, "%s:%d: more than %d options", path, lineno, CONF_MAX_OPTS);
            return -1;
        }
        /* "--name=value" (the command line's own form) for an option that takes a value; a
         * flag is "name" or "name = true", and "name = false" leaves it out. */
        wl = strlen(name) + (val ? strlen(val) : 0) + 4;
        word = malloc(wl);
        if (!word) {
            snprintf(err, errlen, "--config %s: out of memory", path);
            return -1;
        }
        snprintf(word, wl, "--%s", name);
        one[1] = word;
        if (val && !takes_value(word) &&
            parse(&tmp, 2, one, NULL, why, sizeof(why)) == OPT_ERROR) { /* not an option */
            snprintf(err, errlen, "%s:%d: %s", path, lineno, why);
            free(word);
            return -1;
        }
        if (val && !takes_value(word)) {
            if (!strcmp(val, "false") || !strcmp(val, "no") || !strcmp(val, "off")) {
                free(word);
                continue;
            }
            if (strcmp(val, "true") && strcmp(val, "yes") && strcmp(val, "on")) {
                snprintf(err, errlen, "%s:%d: '%s' is a flag: write '%s' or '%s = true'", path,
                         lineno, name, name, name);
                free(word);
                return -1;
            }
        } else if (val) {
            snprintf(word, wl, "--%s=%s", name, val);
        }
        conf_argv[n++] = word;
        one[1] = word;
        if (parse(&tmp, 2, one, NULL, why, sizeof(why)) == OPT_ERROR) {
            snprintf(err, errlen, "%s:%d: %s", path, lineno, why);
            return -1;
        }
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
    bool cli_listen = false;
    char **merged = NULL;
    enum opt_result r;
    int n = 0, m = 0;

    conf_free();
    for (int i = 1; i < argc; i++) {
        if (is_opt(argv[i], "--listen"))
            cli_listen = true;
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
            if (!(cli_listen && is_opt(conf_argv[i], "--listen")))
                merged[m++] = conf_argv[i];
        for (int i = 1; i < argc; i++)
            merged[m++] = argv[i];
        argc = m;
        argv = merged;
    }
    r = parse(o, argc, argv, out, err, errlen);
    free(merged); /* the words it held live on in conf_argv and argv */

    if (r == OPT_ERROR) /* the messages quote arguments, which may hold a newline */
        args_one_line(err);
    return r;
}
