/* args: the part of command-line parsing lfepolld and lfbench share. */
#include "args.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int args_next(int argc, char **argv, int *i, const char *const *with_value, const char *prog,
              struct arg *a, char *err, size_t errlen)
{
    const char *arg = argv[*i];
    const char *eq = strncmp(arg, "--", 2) == 0 ? strchr(arg, '=') : NULL;
    bool takes = false;

    a->val = NULL;
    if (eq && (size_t)(eq - arg) < sizeof(a->name)) {
        memcpy(a->name, arg, (size_t)(eq - arg));
        a->name[eq - arg] = '\0';
        a->val = eq + 1;
    } else {
        snprintf(a->name, sizeof(a->name), "%s", arg);
    }
    for (int k = 0; with_value[k]; k++)
        takes |= strcmp(a->name, with_value[k]) == 0;
    if (takes && !a->val) {
        if (*i + 1 >= argc) {
            snprintf(err, errlen, "%s needs a value; see %s --help", a->name, prog);
            return -1;
        }
        a->val = argv[++*i];
    } else if (!takes && a->val) {
        snprintf(err, errlen, "%s takes no value (got '%s')", a->name, a->val);
        return -1;
    }
    return 0;
}

void args_one_line(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = '?';
}

int args_duration_ms(const char *s, double plain_ms, double *ms)
{
    size_t digits = s ? strspn(s, "0123456789.") : 0;
    const char *dot = s ? memchr(s, '.', digits) : NULL;
    double v;

    /* strtod alone would take " 5", "1e3", "0x10", "inf": none is a duration anyone writes */
    if (!digits || (dot && memchr(dot + 1, '.', digits - (size_t)(dot - s) - 1)) ||
        (digits == 1 && dot))
        return -EINVAL;
    v = strtod(s, NULL);
    if (strcmp(s + digits, "ms") == 0)
        ;
    else if (strcmp(s + digits, "s") == 0)
        v *= 1000.0;
    else if (strcmp(s + digits, "m") == 0)
        v *= 60000.0;
    else if (strcmp(s + digits, "h") == 0)
        v *= 3600000.0;
    else if (s[digits] == '\0')
        v *= plain_ms;
    else
        return -EINVAL;
    if (v > 86400000.0)
        return -EINVAL;
    *ms = v;
    return 0;
}

int args_size(const char *s, size_t *out)
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

int args_time_ms(const char *s, long *out)
{
    double ms;

    if (args_duration_ms(s, 1000.0, &ms) < 0)
        return -EINVAL;
    if (ms > 0 && ms < 0.5)
        return -ERANGE; /* it would round to 0, which means never for most of them */
    *out = (long)(ms + 0.5);
    return 0;
}

int args_long(const char *s, long min, long max, long *out)
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

int args_num(const char *s, double min, double max, double *out)
{
    char *end;
    double v;

    if (!s || !*s)
        return -EINVAL;
    errno = 0;
    v = strtod(s, &end);
    if (errno || *end || !isfinite(v) || v < min || v > max)
        return -EINVAL;
    *out = v;
    return 0;
}

int args_whole(const char *s, long min, long max, long *out)
{
    double v;

    if (args_num(s, (double)min, (double)max, &v) < 0 || v != floor(v))
        return -EINVAL;
    *out = (long)v;
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
        return args_long(s, min, max, out);
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
    return args_long(colon + 1, 0, 65535, &port) == 0;
}

/* Reads val as kind k wants it into *v (a number in the kind's unit: bytes, milliseconds, an
 * index), checked against k's range. 0, -ERANGE for a time that would round to 0, or -EINVAL. */
static int parse_value(const struct args_kind *k, const char *names, const char *val, double *v)
{
    long l = 0, min = (long)k->min, max = (long)k->max;
    size_t sz;
    int rc;

    switch (k->type) {
    case ARGS_INT:
    case ARGS_MIB:
        rc = args_long(val, min, max, &l);
        break;
    case ARGS_WHOLE:
        rc = args_whole(val, min, max, &l);
        break;
    case ARGS_TIME:
        if ((rc = args_time_ms(val, &l)) == 0 && (l < min || l > max))
            rc = -EINVAL;
        break;
    case ARGS_MS:
        rc = parse_ms(val, min, max, &l);
        break;
    case ARGS_SIZE:
        if (args_size(val, &sz) < 0 || (double)sz < k->min || (double)sz > k->max)
            return -EINVAL;
        *v = (double)sz;
        return 0;
    case ARGS_NUM:
        return args_num(val, k->min, k->max, v);
    case ARGS_SECONDS:
        return args_duration_ms(val, 1000.0, v) < 0 || *v < k->min || *v > k->max ? -EINVAL : 0;
    case ARGS_NAME:
        for (size_t at = 0, len, i = 0;; at += len + 1, i++) {
            len = strcspn(names + at, "|");
            if (strlen(val) == len && !strncmp(names + at, val, len)) {
                *v = (double)i;
                return 0;
            }
            if (!names[at + len])
                return -EINVAL;
        }
    default:
        return -EINVAL;
    }
    *v = (double)l;
    return rc;
}

/* Whether args_set can apply k: its field is one it stores values of k's kind in. */
static bool kind_ok(const struct args_kind *k)
{
    switch (k->type) {
    case ARGS_HOOK:
        return false;
    case ARGS_NUM:
    case ARGS_SECONDS:
        return k->size == sizeof(double);
    case ARGS_STRING:
    case ARGS_HOSTPORT:
        return k->size == sizeof(const char *);
    default:
        return k->size == sizeof(bool) || k->size == sizeof(int32_t) || k->size == sizeof(int64_t);
    }
}

/* Stores v, in k's unit, in the field of conf that k names, as the field's type has it. */
static void store(void *conf, const struct args_kind *k, double v)
{
    char *p = (char *)conf + k->off;

    if (k->type == ARGS_MIB)
        v *= 1024.0 * 1024.0;
    if (k->type == ARGS_NUM || k->type == ARGS_SECONDS) {
        v /= k->type == ARGS_SECONDS ? 1000.0 : 1.0;
        memcpy(p, &v, sizeof(v));
    } else if (k->size == sizeof(bool)) {
        *(bool *)p = v != 0;
    } else if (k->size == sizeof(int32_t)) {
        int32_t i = (int32_t)v;
        memcpy(p, &i, sizeof(i));
    } else {
        int64_t i = (int64_t)v;
        memcpy(p, &i, sizeof(i));
    }
}

/* A number of k's unit as its messages write a range's end: bytes as 1K or 1G, milliseconds as
 * 1ms or 86400s, a count as itself. */
static void say_end(char *buf, size_t len, const struct args_kind *k, double v)
{
    long long n = (long long)v;

    if (k->type == ARGS_SIZE && n && n % (1 << 30) == 0)
        snprintf(buf, len, "%lldG", n >> 30);
    else if (k->type == ARGS_SIZE && n && n % (1 << 20) == 0)
        snprintf(buf, len, "%lldM", n >> 20);
    else if (k->type == ARGS_SIZE && n && n % (1 << 10) == 0)
        snprintf(buf, len, "%lldK", n >> 10);
    else if ((k->type == ARGS_TIME || k->type == ARGS_SECONDS) && n && n % 1000 == 0)
        snprintf(buf, len, "%llds", n / 1000);
    else if ((k->type == ARGS_TIME || k->type == ARGS_SECONDS) && n)
        snprintf(buf, len, "%lldms", n);
    else
        snprintf(buf, len, "%lld", n);
}

/* The range of k as its message says it: " from 1 to 1024", " of 0 (never) to 86400s",
 * " of at least 1"; "" for a kind whose range goes unsaid. */
static void say_range(char *buf, size_t len, const struct args_kind *k)
{
    bool times = k->type == ARGS_TIME || k->type == ARGS_SECONDS;
    char lo[32], hi[32];

    say_end(lo, sizeof(lo), k, k->min);
    say_end(hi, sizeof(hi), k, k->max);
    if (k->type == ARGS_NUM || k->type == ARGS_NAME)
        snprintf(buf, len, "%s", "");
    else if (k->type == ARGS_WHOLE && k->max >= ARGS_NO_MAX)
        snprintf(buf, len, k->min ? " of at least %s" : " of %s or more", lo);
    else
        snprintf(buf, len, " %s %s%s%s%s to %s", times ? "of" : "from", lo, k->zero ? " (" : "",
                 k->zero ? k->zero : "", k->zero ? ")" : "", hi);
}

/* What the names of an ARGS_NAME's value are, for its message: "rr or least". */
static void say_names(char *buf, size_t len, const char *names)
{
    size_t n = 0;

    for (const char *p = names; *p && n + 4 < len; p++)
        if (*p != '|')
            buf[n++] = *p;
        else if (!strchr(p + 1, '|'))
            n += (size_t)snprintf(buf + n, len - n, " or ");
        else
            n += (size_t)snprintf(buf + n, len - n, ", ");
    buf[n] = '\0';
}

/* A time under half a millisecond given to an option of kind k: it would round to 0. */
static int under_ms(const struct args_kind *k, const char *name, const char *val, char *err,
                    size_t errlen)
{
    const char *z = k->under;

    snprintf(err, errlen,
             "%s: '%s' is less than a millisecond, which would round to 0%s%s%s: give 1ms or "
             "more%s%s",
             name, val, z ? " (" : "", z ? z : "", z ? ")" : "", z ? ", or 0 for " : "",
             z ? z : "");
    return -EINVAL;
}

/* The message of a value that kind k refuses. */
static int refuse(const struct args_kind *k, const char *name, const char *names, const char *val,
                  char *err, size_t errlen)
{
    char range[96], hi[32], list[128];

    if (k->type == ARGS_STRING) {
        snprintf(err, errlen, "%s: give %s", name, k->what);
        return -EINVAL;
    }
    if (k->type == ARGS_HOSTPORT) {
        snprintf(err, errlen, "%s: '%s' is not HOST:PORT; write %s (port 0-65535)", name, val,
                 k->what);
        return -EINVAL;
    }
    say_range(range, sizeof(range), k);
    if (k->type == ARGS_NAME) {
        say_names(list, sizeof(list), names);
        snprintf(err, errlen, "%s: '%s' is not %s; use %s", name, val, k->what, list);
    } else if (k->type == ARGS_MS) {
        say_end(hi, sizeof(hi), &(struct args_kind){.type = ARGS_TIME}, k->max);
        snprintf(err, errlen, "%s: '%s' is not %s%s, nor a time with a unit (2s, 250ms) up to %s",
                 name, val, k->what, range, hi);
    } else {
        snprintf(err, errlen, "%s: '%s' is not %s%s%s", name, val, k->what, range,
                 k->tail ? k->tail : "");
    }
    return -EINVAL;
}

int args_set(void *conf, const struct args_kind *k, const char *name, const char *names,
             const char *val, char *err, size_t errlen)
{
    double v = k->min;
    int rc;

    if (!kind_ok(k))
        return -ENOTSUP;
    switch (k->type) {
    case ARGS_STRING:
    case ARGS_HOSTPORT:
        if (k->type == ARGS_HOSTPORT ? !hostport_ok(val)
                                     : strlen(val) < k->min || (k->max && strlen(val) > k->max))
            return refuse(k, name, names, val, err, errlen);
        memcpy((char *)conf + k->off, &val, sizeof(val));
        return 0;
    case ARGS_FLAG:
        store(conf, k, v);
        return 0;
    default:
        if ((rc = parse_value(k, names, val, &v)) == -ERANGE)
            return under_ms(k, name, val, err, errlen);
        if (rc < 0)
            return refuse(k, name, names, val, err, errlen);
        store(conf, k, v);
        return 0;
    }
}
