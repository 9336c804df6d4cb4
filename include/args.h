/* args: the part of command-line parsing lfepolld and lfbench share. */
#ifndef LFE_ARGS_H
#define LFE_ARGS_H

#include <stddef.h>

#define LFE_VERSION "0.1.0" /* lfepolld --version, lfbench --version, lfepolld_build_info */

/* An option as the user wrote it. */
struct arg {
    char name[64];   /* "--listen", "-c" (without "=value") */
    const char *val; /* its value, or NULL for a flag */
};

/* Reads the option at argv[*i]: "--name=value", "--name value" or "-x value" when name is in
 * with_value (NULL-terminated), else a flag. Advances *i past a separate value. Returns 0, or -1
 * with one line in err: a value missing ("--x needs a value; see <prog> --help") or given to a
 * flag ("--x takes no value"). argv[*i] must start with '-'. */
int args_next(int argc, char **argv, int *i, const char *const *with_value, const char *prog,
              struct arg *a, char *err, size_t errlen);

/* Parses a duration as both binaries take it: "N" (in units of plain_ms milliseconds: 1000 for
 * an option in seconds, 1 for one in milliseconds), "Nms", "Ns", "Nm" or "Nh"; N is decimal
 * digits with at most one '.' (2.5s, .5s, 500ms, 1.5m). Returns 0 with *ms, or -EINVAL for
 * anything else, or for more than a day. */
int args_duration_ms(const char *s, double plain_ms, double *ms);

/* Parses a decimal integer (strtol's digits, a '-' first, nothing around them) of min to max.
 * Returns 0 or -EINVAL. */
int args_long(const char *s, long min, long max, long *out);

/* Parses a finite number as strtod reads it ("2.5", "1e3", "0x10"; nothing after it) of min to
 * max; args_whole also wants it whole. Returns 0 or -EINVAL. */
int args_num(const char *s, double min, double max, double *out);
int args_whole(const char *s, long min, long max, long *out);

/* Parses "N", "Nk", "NK", "NM", "NG" (binary units, "KiB" and "MB" spelled out too) into bytes.
 * Returns 0 or -EINVAL. */
int args_size(const char *s, size_t *out);

/* Parses "N" (seconds, fractions allowed), "Nms", "Ns", "Nm" or "Nh" into milliseconds, rounded.
 * 0; -ERANGE for a time above 0 under half a millisecond (it would round to 0, which most of the
 * options take as never); -EINVAL for anything else. */
int args_time_ms(const char *s, long *out);

/* What an option's value is: how args_set reads, checks and stores it, and what its message
 * says when the value is bad: "NAME: 'VALUE' is not WHAT", a range made from min and max, and
 * the tail ("NAME: give WHAT" for an ARGS_STRING, "...; use A or B" for an ARGS_NAME). */
enum args_type {
    ARGS_HOOK,     /* none here: the binary's table names a function of its own for it */
    ARGS_FLAG,     /* takes no value: stores min (1: on; --no-pin stores 0, --verbose 2) */
    ARGS_INT,      /* a decimal integer (strtol's digits, a '-' first) from min to max */
    ARGS_MIB,      /* an ARGS_INT of MiB, stored in bytes */
    ARGS_WHOLE,    /* a number as strtod reads it ("1e3" too) that is whole, from min to max */
    ARGS_NUM,      /* a finite number as strtod reads it, from min to max; its range goes unsaid */
    ARGS_SIZE,     /* args_size's bytes (64K, 1M) from min to max */
    ARGS_TIME,     /* args_time_ms's milliseconds (a bare N is seconds) from min to max */
    ARGS_MS,       /* a bare whole number of milliseconds, or a time with its unit, rounded */
    ARGS_SECONDS,  /* args_duration_ms's time (a bare N is seconds), min to max ms, stored in
                    * seconds as a double, not rounded */
    ARGS_NAME,     /* one of the names its value has in --help ("rr|least"): stores its index */
    ARGS_STRING,   /* min to max bytes (max 0: any), stored as a pointer to the value */
    ARGS_HOSTPORT, /* HOST:PORT, a port of 0-65535 after the last colon, IPv6 in brackets;
                    * stored as a pointer to the value; what: examples ("127.0.0.1:9876 or
                    * [::1]:9876") */
};

/* An option's value: its kind, where it goes in the configuration and what it may be. */
struct args_kind {
    enum args_type type;
    size_t off, size;  /* the field in the configuration: offsetof, sizeof (1, 4 or 8 bytes) */
    double min, max;   /* its range; for ARGS_SIZE in bytes, for times in milliseconds */
    const char *what;  /* the message's noun ("an integer"); for ARGS_STRING what to give */
    const char *zero;  /* what 0 means, said after the 0 of the range ("never"), or NULL */
    const char *tail;  /* the message's end after the range ("; write 5 (seconds)..."), or NULL */
    const char *under; /* ARGS_TIME, ARGS_MS: what 0 means, said to a time that rounds to 0;
                        * NULL: such a time is told that 0 is refused */
};

/* An ARGS_WHOLE's max for no bound worth saying: its range reads "of at least MIN" ("of 0 or
 * more"). */
#define ARGS_NO_MAX 1e15

/* Applies the value val of option name (as messages write it: "--backlog", "-t") of kind k to
 * the configuration conf; names is its value's name in --help ("rr|least"), for ARGS_NAME.
 * Returns 0, or -EINVAL with one line in err saying what is wrong (and -ENOTSUP for a kind it
 * does not apply: an ARGS_HOOK, or a field of another size). Touches nothing but conf's field. */
int args_set(void *conf, const struct args_kind *k, const char *name, const char *names,
             const char *val, char *err, size_t errlen);

/* Keeps a message that quotes what the user typed on one line: each control character in s (a
 * newline, a terminal escape) becomes '?'. */
void args_one_line(char *s);

#endif /* LFE_ARGS_H */
