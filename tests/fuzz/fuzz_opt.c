/* fuzz_opt: lfepolld's command line (opt_parse, with args_next, args_set and cpulist_parse under
 * it).
 *
 * The input is argv, NUL-separated. Invariants: the result is one of the three; an error is one
 * line (not empty, no control character, inside its buffer) and the same line cut short when
 * the buffer is small; --help/--version print whole lines; a parse that succeeds gives a
 * configuration inside every documented range, its addresses point into argv and are HOST:PORT,
 * its CPU set survives cpulist_format -> cpulist_parse; parsing twice gives the same bytes. The
 * size and duration helpers are checked against a reference of their own. */
#include "fuzz.h"

#include "opt.h"
#include "topo.h"

#include <errno.h>
#include <limits.h>

#define MAX_ARGS 64

/* The documented HOST:PORT: a port of 0-65535 after the last colon (digits; "-0" passes too,
 * as getaddrinfo reads it as 0); a host with a colon is bracketed. */
static bool ref_hostport(const char *s)
{
    const char *colon = strrchr(s, ':'), *q;
    bool minus;
    long port = 0;

    if (!colon || colon == s)
        return false;
    minus = colon[1] == '-';
    q = colon + 1 + minus;
    if (!*q)
        return false;
    for (; *q; q++) {
        if (*q < '0' || *q > '9' || port > 65535)
            return false;
        port = port * 10 + (*q - '0');
    }
    if (port > 65535 || (minus && port))
        return false;
    if (s[0] == '[')
        return colon - s >= 3 && colon[-1] == ']';
    return memchr(s, ':', (size_t)(colon - s)) == NULL;
}

static bool points_into(const char *p, char **argv, int argc)
{
    for (int i = 1; i < argc; i++)
        if (p >= argv[i] && p <= argv[i] + strlen(argv[i]))
            return true;
    return false;
}

static void check_config(const struct opt *o, char **argv, int argc)
{
    FZ_CHECK(o->nlisten >= 1 && o->nlisten <= OPT_MAX_LISTEN, "nlisten %d", o->nlisten);
    for (int i = 0; i < o->nlisten; i++) {
        FZ_CHECK(ref_hostport(o->listen[i]), "listen '%s' is not HOST:PORT", o->listen[i]);
        FZ_CHECK(points_into(o->listen[i], argv, argc) ||
                     (o->nlisten == 1 && !strcmp(o->listen[i], "127.0.0.1:9876")),
                 "listen %d points outside argv", i);
    }
    FZ_CHECK(o->backlog >= 1, "backlog %d", o->backlog);
    FZ_CHECK(o->groups >= 0 && o->groups <= 1024, "groups %d", o->groups);
    FZ_CHECK(o->workers >= 0 && o->workers <= 1024, "workers %d", o->workers);
    FZ_CHECK(o->max_conns >= 0 && o->max_conns <= 2147483647L, "max_conns %ld", o->max_conns);
    FZ_CHECK(o->max_pending >= 1024 && o->max_pending <= (1u << 30), "max_pending %zu",
             o->max_pending);
    FZ_CHECK(o->drain_ms >= 0 && o->drain_ms <= 86400000, "drain_ms %d", o->drain_ms);
    FZ_CHECK(o->idle_ms >= 0 && o->idle_ms <= 86400000, "idle_ms %d", o->idle_ms);
    FZ_CHECK(o->max_per_ip >= 0 && o->max_per_ip <= 2147483647L, "max_per_ip %ld", o->max_per_ip);
    FZ_CHECK(o->batch >= 1 && o->batch <= 1024, "batch %d", o->batch);
    FZ_CHECK(o->dispatch == DISPATCH_RR || o->dispatch == DISPATCH_LEAST, "dispatch %d",
             (int)o->dispatch);
    FZ_CHECK(o->verbosity >= 0 && o->verbosity <= 2, "verbosity %d", o->verbosity);
    FZ_CHECK(o->lua_mem % (1u << 20) == 0 && o->lua_mem <= ((size_t)65536 << 20), "lua_mem %zu",
             o->lua_mem);
    FZ_CHECK(o->lua_shared % (1u << 20) == 0 && o->lua_shared >= (1u << 20) &&
                 o->lua_shared <= ((size_t)65536 << 20),
             "lua_shared %zu", o->lua_shared);
    FZ_CHECK(o->lua_ctx % (1u << 20) == 0 && o->lua_ctx >= (1u << 20) &&
                 o->lua_ctx <= ((size_t)65536 << 20),
             "lua_ctx %zu", o->lua_ctx);
    FZ_CHECK(o->lua_timeout_ms >= 0 && o->lua_timeout_ms <= 3600000, "lua_timeout_ms %d",
             o->lua_timeout_ms);
    FZ_CHECK(o->sysctl >= 0 && o->sysctl <= 2, "sysctl %d", o->sysctl);
    FZ_CHECK(!o->lua || (*o->lua && points_into(o->lua, argv, argc)), "lua path");
    FZ_CHECK(!o->sysctl_conf || (*o->sysctl_conf && points_into(o->sysctl_conf, argv, argc)),
             "sysctl_conf path");
    if (o->have_cpus) {
        /* a set the parser accepted, written as a list and read back, is the same set */
        static char list[8192];
        cpu_set_t again;

        FZ_CHECK(CPU_COUNT(&o->cpus) > 0, "--cpus gave an empty set");
        cpulist_format(&o->cpus, list, sizeof(list));
        FZ_CHECK(cpulist_parse(list, &again) == 0 && CPU_EQUAL(&again, &o->cpus),
                 "cpulist_format gave '%s', which does not parse back to the same set", list);
    }
}

/* Reference args_size: digits, then K/M/G with an optional "i" and "B" (or "b"). */
static int ref_size(const char *s, size_t *out)
{
    unsigned long long v = 0;
    unsigned shift = 0;

    if (*s < '0' || *s > '9')
        return -EINVAL;
    for (; *s >= '0' && *s <= '9'; s++) {
        unsigned d = (unsigned)(*s - '0');

        if (v > ULLONG_MAX / 10 || (v == ULLONG_MAX / 10 && d > ULLONG_MAX % 10))
            return -EINVAL;
        v = v * 10 + d;
    }
    if (*s && strchr("kKmMgG", *s)) {
        shift = *s == 'k' || *s == 'K' ? 10 : *s == 'm' || *s == 'M' ? 20 : 30;
        s++;
        if (*s == 'i')
            s++;
        if (*s == 'b' || *s == 'B')
            s++;
    }
    if (*s || v > (SIZE_MAX >> shift))
        return -EINVAL;
    *out = (size_t)(v << shift);
    return 0;
}

static void check_helpers(const char *s)
{
    size_t a = 0, b = 0;
    long ms = -1;
    int ra = args_size(s, &a), rb = ref_size(s, &b);

    FZ_CHECK(ra == rb && (ra < 0 || a == b), "args_size('%s') = %d %zu, reference %d %zu", s, ra, a,
             rb, b);
    if (args_time_ms(s, &ms) == 0)
        FZ_CHECK(ms >= 0 && ms <= 86400000, "args_time_ms('%s') = %ld", s, ms);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char prog[] = "lfepolld";
    char *buf = malloc(size + 1), *argv[MAX_ARGS + 1];
    char err[512], err2[512], small[24], *outtext = NULL;
    size_t outlen = 0;
    struct opt o, o2;
    int argc = 1;
    enum opt_result rc;
    const char *why;
    FILE *out;

    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    argv[0] = prog;
    for (char *p = buf; p < buf + size && argc < MAX_ARGS; p += strlen(p) + 1)
        argv[argc++] = p;
    argv[argc] = NULL;
    if (argc > 1)
        check_helpers(argv[1]);

    memset(err, 0xa5, sizeof(err));
    out = open_memstream(&outtext, &outlen);
    FZ_CHECK(out != NULL, "open_memstream");
    rc = opt_parse(&o, argc, argv, out, err, sizeof(err));
    fclose(out);
    FZ_CHECK(rc == OPT_RUN || rc == OPT_EXIT || rc == OPT_ERROR, "result %d", (int)rc);
    if (rc == OPT_ERROR) {
        why = fz_one_line(err, sizeof(err));
        FZ_CHECK(!why, "the error %s: '%.*s'", why, (int)strnlen(err, sizeof(err)), err);
        FZ_CHECK(outlen == 0, "an error printed %zu bytes of help", outlen);
    } else if (rc == OPT_EXIT) {
        FZ_CHECK(outlen > 0 && outtext[outlen - 1] == '\n', "help/version output");
    } else {
        FZ_CHECK(outlen == 0, "a run printed %zu bytes", outlen);
        check_config(&o, argv, argc);
    }
    free(outtext);

    /* the same argv again: the same configuration, byte for byte, and the same error */
    memset(err2, 0x5a, sizeof(err2));
    out = fopen("/dev/null", "w");
    FZ_CHECK(out != NULL, "/dev/null");
    FZ_CHECK(opt_parse(&o2, argc, argv, out, err2, sizeof(err2)) == rc, "second parse");
    FZ_CHECK(rc != OPT_RUN || !memcmp(&o, &o2, sizeof(o)), "second parse, other configuration");
    FZ_CHECK(rc != OPT_ERROR || !strcmp(err, err2), "second parse, other error");
    /* a small buffer: the same line, cut */
    if (rc == OPT_ERROR) {
        FZ_CHECK(opt_parse(&o2, argc, argv, out, small, sizeof(small)) == rc, "small buffer");
        FZ_CHECK(strnlen(small, sizeof(small)) < sizeof(small) &&
                     !strncmp(small, err, strlen(small)),
                 "small buffer: '%s' is not the start of '%s'", small, err);
    }
    fclose(out);
    free(buf);
    return 0;
}
