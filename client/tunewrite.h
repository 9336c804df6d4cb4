/* tunewrite: lfbench tune --write-sysctl, the keys that helped as a sysctl.d file. */
#ifndef LFE_TUNEWRITE_H
#define LFE_TUNEWRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

enum tunewrite_effect {
    TUNEWRITE_NONE,  /* no measurable effect */
    TUNEWRITE_HELPS, /* better than the baseline, the interval excluding 1 */
    TUNEWRITE_HURTS  /* worse, likewise */
};

/* One variant's verdict against the baseline, as lfbench tune measured it. The strings belong to
 * the caller and must hold no newline (a figure is one comment line). */
struct tunewrite_verdict {
    const char *key;   /* dotted: net.ipv4.ip_local_port_range */
    const char *value; /* the variant's value: "1024 65535" */
    enum tunewrite_effect effect;
    double ratio;       /* median of the rounds' ratios to the baseline (1.0: the same) */
    double lo, hi;      /* the confidence interval of that ratio */
    int rounds;         /* the rounds it rests on */
    const char *figure; /* one line for people: "22.2k against 14.2k connections/s" */
};

/* The words of an effect: "helps", "hurts", "no measurable effect". */
const char *tunewrite_effect_name(enum tunewrite_effect e);

/* Writes the sysctl.d text to out: a header comment (how it was made: how, one line, e.g. the
 * lfbench tune command, its workload and method), then for each key whose verdict helps a comment
 * with its figure, ratio, interval and rounds, and "key = value". Keys that hurt or showed no
 * effect are named in one closing comment, never set. When several verdicts of one key help, the
 * first listed is written and the others named in its comment. Returns the number of keys
 * written (0 is a valid file: only comments), or -1 with one line in err when a verdict is
 * unusable (no key, a key that is not a sysctl name, a newline in a string). Pure but for out. */
int tunewrite_sysctl(FILE *out, const struct tunewrite_verdict *v, int n, const char *how,
                     char *err, size_t errlen);

/* --write-sysctl FILE: tunewrite_sysctl's text into path, atomically (a temporary file beside
 * it, fsync'd, renamed over it), so that a reader sees the old file or the whole new one. A file
 * already at path that lfbench tune did not write (its first line is not tunewrite's header) is
 * refused unless force. Returns the number of keys written, or -1 with one line in err (nothing
 * at path changed then). */
int tunewrite_file(const char *path, const struct tunewrite_verdict *v, int n, const char *how,
                   bool force, char *err, size_t errlen);

#endif /* LFE_TUNEWRITE_H */
