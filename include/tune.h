/* tune: the kernel parameters of sysctl.conf, checked against /proc/sys and applied. */
#ifndef LFE_TUNE_H
#define LFE_TUNE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define TUNE_MAX_KEYS 64

enum tune_scope {
    TUNE_NETNS, /* one value per network namespace */
    TUNE_HOST   /* one value for the machine */
};

enum tune_check {
    TUNE_MIN,   /* every field at least the recommendation */
    TUNE_MAX,   /* every field at most */
    TUNE_EQ,    /* exactly */
    TUNE_RANGE, /* "LO HI": covers at least the recommended range */
    TUNE_HAS,   /* a list of ports and ranges ("9876,20000-20010") containing the recommended */
    TUNE_BITS   /* a bit mask with every bit of the recommendation set (others may be too) */
};

enum tune_status { TUNE_OK, TUNE_LOW, TUNE_HIGH, TUNE_MISSING, TUNE_READONLY };

/* One key of sysctl.conf with the "# @ SCOPE CHECK: why" line above it. */
struct tune_key {
    char name[96];   /* dotted, as sysctl writes it: net.core.somaxconn */
    char value[128]; /* recommended, fields separated by single spaces */
    char why[320];
    enum tune_scope scope;
    enum tune_check check;
    bool apply; /* false for "#= key = value": checked only */
    int line;
};

extern const char *const tune_status_name[];
extern const char *const tune_scope_name[];

/* Parses the text of sysctl.conf. Every key line needs its "# @" line; a "# @" line needs a
 * key. Returns the number of keys, or -1 with err set to "line N: what is wrong". Pure. */
int tune_parse(const char *text, struct tune_key *keys, int max, char *err, size_t errlen);

/* The status of current (the /proc/sys text; NULL when the file is absent) against k. A value
 * that is not right reads as TUNE_READONLY when !writable. Pure. */
enum tune_status tune_compare(const struct tune_key *k, const char *current, bool writable);

/* What the check wants, for people: ">= 65535", "= 1", "covers 1024-65535", "has 9876". */
void tune_want(const struct tune_key *k, char *buf, size_t len);

/* Connections per second a client that closes first can open to one server address from one
 * source address: the ephemeral ports, each reusable after reuse_delay_ms when tw_reuse is on
 * (loopback only for 2), else after TIME_WAIT's fixed 60 s. Pure. */
double tune_port_ceiling(long lo, long hi, int tw_reuse, long reuse_delay_ms, bool loopback);

/* The port of a "HOST:PORT" or "[ADDR]:PORT" string (what follows its last ':', as atoi reads
 * it), 0 if it has no ':'. Pure. */
int tune_port_of(const char *hostport);

/* Whether a listening port lies in the ephemeral range "LO HI" and is not in the reserved list,
 * so that an outgoing connect() may take it while the server is down. Pure. */
bool tune_port_exposed(int port, const char *range, const char *reserved);

/* Reads /proc/sys/NAME under root ("/proc/sys" normally) into buf, whitespace runs folded into
 * single spaces. Returns 0, or -errno (-ENOENT: the kernel or this namespace lacks the key). */
int tune_read(const char *root, const char *name, char *buf, size_t len);

/* Writes value to root/NAME. Returns 0 or -errno. */
int tune_write(const char *root, const char *name, const char *value);

/* The judgement --check-sysctl makes of one key, for whoever else advises on it (lfbench's
 * hints): the same sysctl.conf line, the same reading of the tree, the same comparison. */
struct tune_verdict {
    enum tune_status st;
    bool have;      /* false: the key is absent under root (st is TUNE_MISSING) */
    char cur[128];  /* what root holds, blanks folded */
    char want[160]; /* tune_want's text: ">= 65535" */
};

/* Judges key name of conf (sysctl.conf's text) against the tree under root, exactly as a row of
 * tune_report does. Returns 0, -ENOENT when conf has no such key, -EINVAL when conf does not
 * parse, -ENOMEM. */
int tune_judge(const char *conf, const char *root, const char *name, struct tune_verdict *v);

/* What the checker needs from the daemon's own configuration. */
struct tune_ctx {
    const char *root; /* "/proc/sys", or a fixture tree in tests */
    int backlog;      /* lfepolld's --backlog */
    int port;         /* its first --listen port, 0 if none */
    bool apply;       /* write the keys that are low or high first (never lowering a min) */
    bool not_root;    /* run by a user other than root: the remedies then start with sudo */
    /* The remedies' commands, as the reader can run them where they are: the one that applies
     * sysctl.conf's values ("make sysctl-apply" in a clone, "lfepolld --apply-sysctl" where it
     * is installed) and the file "sysctl -p" would apply ("" when there is none to name: the
     * built-in one). NULL: "make sysctl-apply" and "sysctl.conf". */
    const char *apply_cmd;
    const char *conf_file;
    bool dry_run; /* with apply: say what would be set ("would set ..."), write nothing */
    /* With apply: the undo record (sysrestore) that keeps what each key held before, for
     * tune_undo; NULL writes without one (fixture trees in tests). */
    const char *undo_file;
    const char *undo_cmd; /* the command that puts it back, as the reader runs it; NULL: none */
};

/* The report of --check-sysctl: a row per key (current, recommended, status, scope), then
 * RLIMIT_NOFILE and the ceilings that follow. With ctx->apply, first writes each applied key that
 * is not right, a line for each ("set KEY = VALUE (was OLD)" or "cannot set KEY = VALUE: why").
 * With ctx->dry_run it writes nothing and says "would set KEY = VALUE (now OLD)" instead; with
 * ctx->undo_file each write goes through sysrestore, which saves the old value there first. An
 * apply ends with the line saying that its values last until the next reboot (and how to keep
 * them), and where the undo record is.
 * Returns 0 when every key is right, 1 otherwise, 2 when the text does not parse (err says why)
 * or the undo record cannot be opened (nothing is set then);
 * with ctx->apply (not dry_run), 3 when a key it sets is still not right after applying (a write
 * failed), and
 * 1 only for what it does not set (keys it only checks, read-only or absent ones,
 * RLIMIT_NOFILE). */
int tune_report(FILE *out, const char *conf, const struct tune_ctx *ctx, char *err, size_t errlen);

/* lfepolld --undo-sysctl: writes back under root what the undo record at undo_file holds (what
 * --apply-sysctl changed, as it was before the first apply), newest first, a line for each ("put
 * back KEY = OLD (was NOW)"), then removes the record. Returns 0 (also when there is nothing to
 * undo: it says so), or 1 with one line in err (the record cannot be read or a key not written
 * back: the record is kept). */
int tune_undo(FILE *out, const char *root, const char *undo_file, char *err, size_t errlen);

/* One warning in the log for each listener (listen[i] as --listen gave it, lfds[i] its socket)
 * whose port lies in root's net.ipv4.ip_local_port_range and not in ip_local_reserved_ports: an
 * outgoing connect() can take it while the server is down. Not for HOST:0 (a port the kernel
 * picked is an ephemeral one by definition); nothing when the range cannot be read. Main
 * thread, at start. */
void tune_warn_exposed(const char *root, const char *const *listen, const int *lfds, int n);

#define TUNE_CONF_MAX (1UL << 20) /* the largest sysctl.conf --sysctl-conf reads */

/* The text of the sysctl.conf at path (--sysctl-conf), at most TUNE_CONF_MAX bytes: malloc'd,
 * NUL-terminated, the caller frees it. NULL when it cannot be read, with why for people ("over 1
 * MiB", or strerror's text) and errno set. */
char *tune_conf_read(const char *path, char *why, size_t whylen);

/* The text of the sysctl.conf this binary was built with. */
extern const char tune_default_conf[];

#endif /* LFE_TUNE_H */
