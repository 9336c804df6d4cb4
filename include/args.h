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

/* Keeps a message that quotes what the user typed on one line: each control character in s (a
 * newline, a terminal escape) becomes '?'. */
void args_one_line(char *s);

#endif /* LFE_ARGS_H */
