/* tune: the kernel parameters of sysctl.conf, checked against /proc/sys and applied.
 *
 * sysctl.conf is the one source: each key has a "# @ SCOPE CHECK: why" line above it, so the
 * file sysctl -p applies and the table this checker compares against cannot drift apart. The
 * parsing and comparing are pure (unit-tested on strings); tune_read/tune_write, the report and
 * the exposed-port warning touch /proc/sys, under a root that tests point at a fixture tree. */
#include "tune.h"

#include "file.h"
#include "log.h"
#include "net.h"
#include "sysrestore.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <unistd.h>

const char *const tune_status_name[] = {"ok", "low", "high", "missing", "read-only"};
const char *const tune_scope_name[] = {"netns", "host"};

#define TW_SECONDS 60 /* TCP_TIMEWAIT_LEN: fixed in the kernel, whatever sysctl says */
#define NOFILE_WANT 65536L

/* Copies s[0..n) into dst with leading/trailing blanks cut and inner runs folded to one space.
 * Returns the folded length: len or more when dst holds only the start of it. */
static size_t fold(char *dst, size_t len, const char *s, size_t n)
{
    size_t o = 0, need = 0;
    bool space = false;

    for (size_t i = 0; i < n && s[i] != '\n'; i++) {
        if (isspace((unsigned char)s[i])) {
            space = need > 0;
            continue;
        }
        if (space) {
            if (o + 1 < len)
                dst[o++] = ' ';
            need++;
        }
        space = false;
        if (o + 1 < len)
            dst[o++] = s[i];
        need++;
    }
    if (o && dst[o - 1] == ' ') /* cut just after a blank */
        o--;
    if (len)
        dst[o < len ? o : len - 1] = '\0';
    return need;
}

static int parse_note(const char *s, struct tune_key *k)
{
    char scope[16], check[16];
    int used = 0;

    if (sscanf(s, " @ %15s %15[a-z]:%n", scope, check, &used) != 2 || used == 0)
        return -1;
    if (!strcmp(scope, "netns"))
        k->scope = TUNE_NETNS;
    else if (!strcmp(scope, "host"))
        k->scope = TUNE_HOST;
    else
        return -1;
    if (!strcmp(check, "min"))
        k->check = TUNE_MIN;
    else if (!strcmp(check, "max"))
        k->check = TUNE_MAX;
    else if (!strcmp(check, "eq"))
        k->check = TUNE_EQ;
    else if (!strcmp(check, "range"))
        k->check = TUNE_RANGE;
    else if (!strcmp(check, "has"))
        k->check = TUNE_HAS;
    else if (!strcmp(check, "bits"))
        k->check = TUNE_BITS;
    else
        return -1;
    fold(k->why, sizeof(k->why), s + used, strlen(s + used));
    return k->why[0] ? 0 : -1;
}

/* "key = value" (sysctl -p also takes "key=value" and a leading '-'). Returns 0, -1 when the
 * line is not that, -2 when the name or the value does not fit in k (cut, it would name another
 * key or apply half a port list). */
static int parse_assign(const char *s, size_t n, struct tune_key *k)
{
    const char *eq = memchr(s, '=', n);
    char name[sizeof(k->name) + 1]; /* and the '-' */
    size_t nl, vl;

    if (!eq)
        return -1;
    nl = fold(name, sizeof(name), s, (size_t)(eq - s));
    vl = fold(k->value, sizeof(k->value), eq + 1, n - (size_t)(eq + 1 - s));
    if (!name[name[0] == '-'] || !k->value[0] || strchr(name, ' '))
        return -1;
    if (nl - (name[0] == '-') >= sizeof(k->name) || vl >= sizeof(k->value))
        return -2;
    strcpy(k->name, name[0] == '-' ? name + 1 : name);
    return 0;
}

int tune_parse(const char *text, struct tune_key *keys, int max, char *err, size_t errlen)
{
    struct tune_key pend;
    bool have = false;
    int n = 0, line = 0, rc;

    for (const char *p = text; *p; line++) {
        const char *nl = strchr(p, '\n'), *s = p;
        size_t len = nl ? (size_t)(nl - p) : strlen(p);

        p = nl ? nl + 1 : p + len;
        while (len && isspace((unsigned char)*s)) {
            s++;
            len--;
        }
        if (len >= 3 && !strncmp(s, "# @", 3)) {
            char note[512];
            if (have) {
                snprintf(err, errlen, "line %d: a '# @' line must be followed by its key (line %d)",
                         line + 1, pend.line);
                return -1;
            }
            memset(&pend, 0, sizeof(pend));
            fold(note, sizeof(note), s + 1, len - 1);
            if (parse_note(note, &pend) < 0) {
                snprintf(err, errlen,
                         "line %d: write '# @ SCOPE CHECK: why' with SCOPE netns or host and "
                         "CHECK min, max, eq, range, bits or has",
                         line + 1);
                return -1;
            }
            pend.line = line + 1;
            have = true;
            continue;
        }
        bool checkonly = len >= 2 && !strncmp(s, "#=", 2);
        if (!checkonly && (len == 0 || *s == '#' || *s == ';')) {
            if (have) {
                snprintf(err, errlen, "line %d: a '# @' line must be followed by its key (line %d)",
                         line + 1, pend.line);
                return -1;
            }
            continue;
        }
        if (!have) {
            snprintf(err, errlen, "line %d: a key needs a '# @ SCOPE CHECK: why' line above it",
                     line + 1);
            return -1;
        }
        rc = parse_assign(checkonly ? s + 2 : s, checkonly ? len - 2 : len, &pend);
        if (rc < 0) {
            if (rc == -1)
                snprintf(err, errlen, "line %d: not 'key = value'", line + 1);
            else
                snprintf(err, errlen, "line %d: a key name over %zu characters or a value over %zu",
                         line + 1, sizeof(pend.name) - 1, sizeof(pend.value) - 1);
            return -1;
        }
        if (n == max) {
            snprintf(err, errlen, "line %d: more than %d keys", line + 1, max);
            return -1;
        }
        pend.apply = !checkonly;
        pend.line = line + 1;
        keys[n++] = pend;
        have = false;
    }
    if (have) {
        snprintf(err, errlen, "line %d: a '# @' line with no key after it", pend.line);
        return -1;
    }
    return n;
}

/* Up to max integers from a space-separated value; returns how many, -1 if not all numbers. */
static int numbers(const char *s, long long *v, int max)
{
    int n = 0;

    while (*s) {
        char *end;
        if (n == max)
            return -1;
        errno = 0;
        v[n++] = strtoll(s, &end, 10);
        if (end == s || errno || (*end && *end != ' '))
            return -1;
        s = *end ? end + 1 : end;
    }
    return n;
}

/* Takes the next "N" or "LO-HI" of a port list ("9876,20000-20010", as /proc shows it) from
 * *s. Returns false at the end of the list or on something that is not a number. */
static bool next_range(const char **s, long *lo, long *hi)
{
    char *end;

    while (**s == ',' || **s == ' ')
        (*s)++;
    *lo = *hi = strtol(*s, &end, 10);
    if (end == *s)
        return false;
    if (*end == '-')
        *hi = strtol(end + 1, &end, 10);
    *s = end;
    return true;
}

/* Whether the port list contains port. */
static bool list_has(const char *list, long port)
{
    long lo, hi;

    while (next_range(&list, &lo, &hi))
        if (port >= lo && port <= hi)
            return true;
    return false;
}

static enum tune_status compare(const struct tune_key *k, const char *cur)
{
    long long want[8], have[8];
    int nw, nh;

    if (k->check == TUNE_HAS) {
        /* every port or range of the recommendation must be in the list */
        const char *s = k->value;
        long lo, hi;

        while (next_range(&s, &lo, &hi)) {
            if (lo < 0 || hi > 65535) /* not ports: and a walk to LONG_MAX would not end */
                return TUNE_LOW;
            for (long p = lo; p <= hi; p++)
                if (!list_has(cur, p))
                    return TUNE_LOW;
        }
        return *s ? TUNE_LOW : TUNE_OK; /* a recommendation that is not a list never matches */
    }
    nw = numbers(k->value, want, 8);
    nh = numbers(cur, have, 8);
    if (nw < 0 || nh < 0 || nw != nh) /* not numbers, or another shape: only equality counts */
        return strcmp(k->value, cur) ? TUNE_LOW : TUNE_OK;
    switch (k->check) {
    case TUNE_MIN:
        for (int i = 0; i < nw; i++)
            if (have[i] < want[i])
                return TUNE_LOW;
        return TUNE_OK;
    case TUNE_MAX:
        for (int i = 0; i < nw; i++)
            if (have[i] > want[i])
                return TUNE_HIGH;
        return TUNE_OK;
    case TUNE_BITS:
        for (int i = 0; i < nw; i++)
            if ((have[i] & want[i]) != want[i])
                return TUNE_LOW;
        return TUNE_OK;
    case TUNE_RANGE:
        if (nw != 2)
            return strcmp(k->value, cur) ? TUNE_LOW : TUNE_OK;
        return have[0] <= want[0] && have[1] >= want[1] ? TUNE_OK : TUNE_LOW;
    case TUNE_EQ:
    default:
        for (int i = 0; i < nw; i++)
            if (have[i] != want[i])
                return have[i] < want[i] ? TUNE_LOW : TUNE_HIGH;
        return TUNE_OK;
    }
}

enum tune_status tune_compare(const struct tune_key *k, const char *current, bool writable)
{
    enum tune_status st;

    if (!current)
        return TUNE_MISSING;
    st = compare(k, current);
    return st != TUNE_OK && !writable ? TUNE_READONLY : st;
}

void tune_want(const struct tune_key *k, char *buf, size_t len)
{
    static const char *const how[] = {">= ", "<= ", "= ", "covers ", "has ", "has bits "};
    char v[sizeof(k->value)];

    snprintf(v, sizeof(v), "%s", k->value);
    if (k->check == TUNE_RANGE) {
        char *sp = strchr(v, ' ');
        if (sp)
            *sp = '-';
    }
    snprintf(buf, len, "%s%s", how[k->check], v);
}

double tune_port_ceiling(long lo, long hi, int tw_reuse, long reuse_delay_ms, bool loopback)
{
    double ports = hi >= lo ? (double)(hi - lo + 1) : 0.0;
    bool reuse = tw_reuse == 1 || (tw_reuse == 2 && loopback);

    if (reuse && reuse_delay_ms > 0)
        return ports * 1000.0 / (double)reuse_delay_ms;
    return ports / TW_SECONDS;
}

int tune_port_of(const char *hostport)
{
    const char *colon = strrchr(hostport, ':');

    return colon ? atoi(colon + 1) : 0;
}

bool tune_port_exposed(int port, const char *range, const char *reserved)
{
    long lo, hi;

    if (port <= 0 || !range || sscanf(range, "%ld %ld", &lo, &hi) != 2)
        return false;
    return port >= lo && port <= hi && !(reserved && list_has(reserved, port));
}

static void proc_path(const char *root, const char *name, char *path, size_t len)
{
    size_t o = (size_t)snprintf(path, len, "%s/", root);

    for (const char *s = name; *s && o + 1 < len; s++)
        path[o++] = *s == '.' ? '/' : *s;
    path[o < len ? o : len - 1] = '\0';
}

int tune_read(const char *root, const char *name, char *buf, size_t len)
{
    char path[512], raw[512];
    ssize_t n;
    int fd;

    proc_path(root, name, path, sizeof(path));
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    n = read(fd, raw, sizeof(raw) - 1);
    close(fd);
    if (n < 0)
        return -errno;
    for (ssize_t i = 0; i < n; i++)
        if (raw[i] == '\n' || raw[i] == '\t')
            raw[i] = ' ';
    fold(buf, len, raw, (size_t)n);
    return 0;
}

int tune_write(const char *root, const char *name, const char *value)
{
    char path[512];
    size_t n = strlen(value);
    ssize_t w;
    int fd;

    proc_path(root, name, path, sizeof(path));
    fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC); /* O_TRUNC: what a shell does too */
    if (fd < 0)
        return -errno;
    w = write(fd, value, n);
    if (w < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    close(fd);
    return (size_t)w == n ? 0 : -EIO;
}

static bool writable(const char *root, const char *name)
{
    char path[512];

    proc_path(root, name, path, sizeof(path));
    return access(path, W_OK) == 0;
}

static long read_long(const char *root, const char *name, long dflt)
{
    char buf[64];

    return tune_read(root, name, buf, sizeof(buf)) == 0 ? atol(buf) : dflt;
}

/* One row's judgement: tune_report and tune_judge both come here, so that lfbench's hints and
 * --check-sysctl cannot call the same value different things. */
static void judge(const struct tune_key *k, const char *root, struct tune_verdict *v)
{
    v->have = tune_read(root, k->name, v->cur, sizeof(v->cur)) == 0;
    if (!v->have)
        v->cur[0] = '\0';
    v->st = tune_compare(k, v->have ? v->cur : NULL, writable(root, k->name));
    tune_want(k, v->want, sizeof(v->want));
}

int tune_judge(const char *conf, const char *root, const char *name, struct tune_verdict *v)
{
    struct tune_key *keys = calloc(TUNE_MAX_KEYS, sizeof(*keys));
    char err[160];
    int n, rc = -ENOENT;

    if (!keys)
        return -ENOMEM;
    n = tune_parse(conf, keys, TUNE_MAX_KEYS, err, sizeof(err));
    if (n < 0)
        rc = -EINVAL;
    for (int i = 0; i < n && rc == -ENOENT; i++)
        if (!strcmp(keys[i].name, name)) {
            judge(&keys[i], root, v);
            rc = 0;
        }
    free(keys);
    return rc;
}

/* The value --apply-sysctl writes for k over cur: a has key gets the port appended, a bits key
 * the bits added (clearing none the admin set), any other the recommendation. */
static void apply_value(const struct tune_key *k, const char *cur, char *val, size_t len)
{
    if (k->check == TUNE_HAS && cur[0])
        snprintf(val, len, "%s,%s", cur, k->value);
    else if (k->check == TUNE_BITS)
        snprintf(val, len, "%lld", strtoll(cur, NULL, 10) | strtoll(k->value, NULL, 10));
    else
        snprintf(val, len, "%s", k->value);
}

/* One key's write: through the undo record when there is one, so that what it held is saved
 * (and fsync'd) first. 0, or -1 with why. */
static int apply_write(const struct tune_ctx *ctx, const char *name, const char *val, char *why,
                       size_t len)
{
    int rc;

    if (ctx->undo_file)
        return sysrestore_set(name, val, why, len);
    rc = tune_write(ctx->root, name, val);
    if (rc < 0)
        snprintf(why, len, "%s", strerror(-rc));
    return rc < 0 ? -1 : 0;
}

/* Whether root may write name: asked of the file when we are root; for another user's dry run
 * (what root would set) every key is, unless the tree is mounted read-only (a container's). */
static bool root_may_write(const struct tune_ctx *ctx, const char *name)
{
    struct statvfs vfs;

    if (!(ctx->dry_run && ctx->not_root))
        return writable(ctx->root, name);
    return statvfs(ctx->root, &vfs) < 0 || !(vfs.f_flag & ST_RDONLY);
}

/* Whether --apply-sysctl sets k: a key it applies, present, not right and writable here (a
 * read-only one, a container's /proc/sys, is left to its row). cur: what it holds; val: what to
 * write. */
static bool to_set(const struct tune_key *k, const struct tune_ctx *ctx, char *cur, size_t clen,
                   char *val, size_t vlen)
{
    enum tune_status st;

    if (!k->apply || tune_read(ctx->root, k->name, cur, clen) < 0)
        return false;
    st = tune_compare(k, cur, root_may_write(ctx, k->name));
    if (st != TUNE_LOW && st != TUNE_HIGH)
        return false;
    apply_value(k, cur, val, vlen);
    return true;
}

/* --apply-sysctl: writes the applied keys that are not right. A min key already above its
 * recommendation is left alone (sysctl -p would lower it). Returns how many it set (or, dry, would
 * set); *failed: how many it could not. */
static int apply(FILE *out, const struct tune_key *keys, int n, const struct tune_ctx *ctx,
                 int *failed)
{
    int changed = 0;

    for (int i = 0; i < n; i++) {
        const struct tune_key *k = &keys[i];
        char cur[256], val[400], why[600];

        if (!to_set(k, ctx, cur, sizeof(cur), val, sizeof(val)))
            continue;
        if (ctx->dry_run) {
            fprintf(out, "would set %s = %s (now %s)\n", k->name, val, cur[0] ? cur : "empty");
            changed++;
        } else if (apply_write(ctx, k->name, val, why, sizeof(why)) < 0) {
            fprintf(out, "cannot set %s = %s: %s\n", k->name, val, why);
            (*failed)++;
        } else {
            fprintf(out, "set %s = %s (was %s)\n", k->name, val, cur[0] ? cur : "empty");
            changed++;
        }
    }
    return changed;
}

/* Applies under the undo record: opened (keeping what an earlier apply saved), written to, kept.
 * Returns what apply does, or -1 with err when the record cannot be opened (nothing set). */
static int apply_recorded(FILE *out, const struct tune_key *keys, int n, const struct tune_ctx *ctx,
                          int *failed, char *err, size_t errlen)
{
    char note[600];
    int changed, want = 0;

    for (int i = 0; i < n; i++) {
        char cur[256], val[400];
        want += to_set(&keys[i], ctx, cur, sizeof(cur), val, sizeof(val));
    }
    if (!ctx->undo_file || ctx->dry_run || !want) /* nothing to save: no record needed */
        return apply(out, keys, n, ctx, failed);
    if (sysrestore_open(ctx->undo_file, ctx->root, true, note, sizeof(note)) < 0) {
        snprintf(err, errlen,
                 "--apply-sysctl: nothing set: the undo record: %s (--undo-file names another)",
                 note);
        return -1;
    }
    if (note[0])
        fprintf(out, "%s\n", note);
    changed = apply(out, keys, n, ctx, failed);
    if (sysrestore_keep(note, sizeof(note)) < 0)
        fprintf(out, "the undo record: %s\n", note);
    return changed;
}

/* The last lines of an apply: how long its values last, and how to undo them. */
static void apply_epilogue(FILE *out, const struct tune_ctx *ctx, int changed)
{
    const char *file = ctx->conf_file && *ctx->conf_file ? ctx->conf_file : "sysctl.conf";
    struct stat st;

    if (ctx->dry_run)
        fprintf(out, "dry run: nothing changed; %d key%s would be set\n", changed,
                changed == 1 ? "" : "s");
    fprintf(out,
            "a value set with --apply-sysctl lasts until the next reboot; to keep sysctl.conf's "
            "values, put the file in /etc/sysctl.d (read at boot): cp %s "
            "/etc/sysctl.d/60-lfepoll.conf\n",
            file);
    if (!ctx->dry_run && ctx->undo_file && stat(ctx->undo_file, &st) == 0)
        fprintf(out, "what it changed is saved in %s%s%s%s\n", ctx->undo_file,
                ctx->undo_cmd ? ": " : "", ctx->undo_cmd ? ctx->undo_cmd : "",
                ctx->undo_cmd ? " puts it back" : "");
}

int tune_undo(FILE *out, const char *root, const char *undo_file, char *err, size_t errlen)
{
    char note[600];
    int n = sysrestore_open(undo_file, root, true, note, sizeof(note));

    if (n < 0) {
        snprintf(err, errlen, "%s", note);
        return 1;
    }
    if (note[0])
        fprintf(out, "%s\n", note);
    if (n == 0) {
        sysrestore_keep(note, sizeof(note)); /* an empty record: removed */
        fprintf(out, "nothing to undo: %s holds no change of lfepolld --apply-sysctl\n", undo_file);
        return 0;
    }
    for (int i = n - 1; i >= 0; i--) {
        const char *key, *old;
        char now[256], shown[256];

        if (sysrestore_saved(i, &key, &old) < 0)
            break;
        if (tune_read(root, key, now, sizeof(now)) < 0)
            snprintf(now, sizeof(now), "absent");
        fold(shown, sizeof(shown), old, strlen(old));
        fprintf(out, "put back %s = %s (was %s)\n", key, shown[0] ? shown : "empty",
                now[0] ? now : "empty");
    }
    if (sysrestore_undo(err, errlen) < 0)
        return 1;
    fprintf(out, "undone: %d key%s put back; %s removed\n", n, n == 1 ? "" : "s", undo_file);
    return 0;
}

/* What the report counts as it goes: the rows that need attention, and by which remedy. */
struct tally {
    int bad;         /* every row that is not ok, RLIMIT_NOFILE's too */
    int applied;     /* low or high, of the keys sysctl.conf sets */
    int checked;     /* low or high, of the keys it only checks */
    int here;        /* missing or read-only here */
    int here_host;   /* ... of them host-wide */
    bool nofile_low; /* RLIMIT_NOFILE's hard limit is below NOFILE_WANT */
};

/* Where the report was made: the kernel, the network namespace, who ran it; then the columns. */
static void report_header(FILE *out, const char *root)
{
    char ns[64] = "?";
    struct utsname u;
    ssize_t nl;

    nl = readlink("/proc/self/ns/net", ns, sizeof(ns) - 1);
    ns[nl > 0 ? nl : 1] = '\0';
    uname(&u);
    fprintf(out, "kernel %s, network namespace %s, uid %d: %s%s\n", u.release, ns, (int)getuid(),
            root, getuid() ? " (not root: nothing can be changed)" : "");
    fprintf(out, "%-36s %-24s %-24s %-9s %s\n", "key", "current", "recommended", "status", "scope");
}

/* A key's row, and under one that is not ok the reason it matters. */
static void report_key(FILE *out, const struct tune_key *k, const char *root, struct tally *t)
{
    struct tune_verdict v;

    judge(k, root, &v);
    fprintf(out, "%-36s %-24s %-24s %-9s %s%s\n", k->name,
            !v.have    ? "-"
            : v.cur[0] ? v.cur
                       : "(empty)",
            v.want, tune_status_name[v.st], tune_scope_name[k->scope],
            k->apply ? "" : ", check only");
    if (v.st == TUNE_OK)
        return;
    t->bad++;
    if (v.st != TUNE_MISSING && v.st != TUNE_READONLY) {
        *(k->apply ? &t->applied : &t->checked) += 1;
    } else {
        t->here++;
        t->here_host += k->scope == TUNE_HOST;
    }
    fprintf(out, "    %s%s\n", k->why,
            v.st == TUNE_MISSING && k->scope == TUNE_HOST
                ? " [host-wide: absent in this namespace or kernel; set it on the host]"
                : "");
}

/* The process's row: descriptors, one per connection. */
static void report_nofile(FILE *out, const struct rlimit *rl, struct tally *t)
{
    char cur[256];

    snprintf(cur, sizeof(cur), "%llu soft, %llu hard", (unsigned long long)rl->rlim_cur,
             (unsigned long long)rl->rlim_max);
    fprintf(out, "%-36s %-24s >= %-21ld %-9s process\n", "RLIMIT_NOFILE (ulimit -n)", cur,
            NOFILE_WANT, rl->rlim_max >= (rlim_t)NOFILE_WANT ? "ok" : "low");
    t->nofile_low = rl->rlim_max < (rlim_t)NOFILE_WANT;
    if (t->nofile_low) {
        t->bad++;
        fprintf(out, "    descriptors per process: one per connection; raise the hard limit "
                     "(limits.conf nofile, systemd LimitNOFILE=) and lfepolld/lfbench raise "
                     "the soft one\n");
    }
}

/* What the values add up to: the accept queue, the client's connection rate, the descriptors,
 * and whether the listen port is exposed to outgoing connect()s. */
static void report_ceilings(FILE *out, const struct tune_ctx *ctx, const struct rlimit *rl)
{
    const char *root = ctx->root;
    char range[64], reserved[256];
    long somaxconn, lo = 32768, hi = 60999, nr_open, reuse, delay;

    somaxconn = read_long(root, "net.core.somaxconn", -1);
    nr_open = read_long(root, "fs.nr_open", -1);
    reuse = read_long(root, "net.ipv4.tcp_tw_reuse", 2);
    delay = read_long(root, "net.ipv4.tcp_tw_reuse_delay", 1000); /* 6.x; 1 s before it */
    if (tune_read(root, "net.ipv4.ip_local_port_range", range, sizeof(range)) == 0)
        sscanf(range, "%ld %ld", &lo, &hi);
    else
        snprintf(range, sizeof(range), "%ld %ld", lo, hi);
    if (tune_read(root, "net.ipv4.ip_local_reserved_ports", reserved, sizeof(reserved)) < 0)
        reserved[0] = '\0';
    fprintf(out, "ceilings\n");
    if (somaxconn > 0)
        fprintf(out, "  accept queue: min(--backlog %d, somaxconn %ld) = %ld per listener%s\n",
                ctx->backlog, somaxconn, ctx->backlog < somaxconn ? ctx->backlog : somaxconn,
                ctx->backlog > somaxconn ? " (the kernel cuts the backlog: raise somaxconn)" : "");
    fprintf(out,
            "  client closes first: %ld ephemeral ports, tcp_tw_reuse %ld: about %.0f new "
            "connections/s per source and server address on loopback, %.0f/s to another "
            "host%s; lfbench --source multiplies it; a server that closes first keeps TIME_WAIT "
            "on its side and frees the client of it\n",
            hi - lo + 1, reuse, tune_port_ceiling(lo, hi, (int)reuse, delay, true),
            tune_port_ceiling(lo, hi, (int)reuse, delay, false),
            reuse ? "" : " (no reuse: each port waits out TIME_WAIT's 60 s)");
    fprintf(out,
            "  descriptors: lfepolld can hold about %llu connections (RLIMIT_NOFILE hard); "
            "fs.nr_open %ld caps how far ulimit -n can go\n",
            (unsigned long long)(rl->rlim_max > 32 ? rl->rlim_max - 32 : 0), nr_open);
    if (tune_port_exposed(ctx->port, range, reserved))
        fprintf(out,
                "  listen port %d is inside the ephemeral range %s and not reserved: an outgoing "
                "connect() can take it while lfepolld is down (net.ipv4.ip_local_reserved_ports)\n",
                ctx->port, range);
}

/* One count of the nrows rows, then its parts, each with its remedy: the parts add up to it. */
static void report_summary(FILE *out, int nrows, const struct tune_ctx *ctx, const struct tally *t)
{
    const char *sudo = ctx->not_root ? "sudo " : "";
    const char *apply_cmd = ctx->apply_cmd ? ctx->apply_cmd : "make sysctl-apply";
    const char *file = ctx->conf_file ? ctx->conf_file : "sysctl.conf";
    int here_ns = t->here - t->here_host;

    if (t->bad)
        fprintf(out, "%d of %d need attention:\n", t->bad, nrows);
    else
        fprintf(out, "all %d ok\n", nrows);
    if (t->applied && *file)
        fprintf(out, "  %d that sysctl.conf sets: %s%s (or %ssysctl -p %s), then check again\n",
                t->applied, sudo, apply_cmd, sudo, file);
    else if (t->applied)
        fprintf(out, "  %d that sysctl.conf sets: %s%s, then check again\n", t->applied, sudo,
                apply_cmd);
    if (t->checked)
        fprintf(out,
                "  %d that sysctl.conf only checks, changed from what it expects: put %s back "
                "with sysctl -w KEY=VALUE\n",
                t->checked, t->checked == 1 ? "it" : "them");
    /* Not root: read-only may only mean "not yours". Root: a host-wide key absent from a
     * network namespace, or a /proc/sys that a container mounted read-only. */
    if (t->here && ctx->not_root)
        fprintf(out,
                "  %d read-only or absent here: set %s as root (sudo %s), or on the host for a "
                "host-wide key\n",
                t->here, t->here == 1 ? "it" : "them", apply_cmd);
    if (t->here_host && !ctx->not_root)
        fprintf(out, "  %d host-wide, read-only or absent here: set %s on the host\n", t->here_host,
                t->here_host == 1 ? "it" : "them");
    if (here_ns && !ctx->not_root)
        fprintf(out,
                "  %d read-only here even for root: set %s from outside this container (its "
                "runtime's sysctl setting)\n",
                here_ns, here_ns == 1 ? "it" : "them");
    if (t->nofile_low)
        fprintf(out, "  1 RLIMIT_NOFILE: raise the hard limit (its row says how)\n");
}

int tune_report(FILE *out, const char *conf, const struct tune_ctx *ctx, char *err, size_t errlen)
{
    struct tune_key *keys = calloc(TUNE_MAX_KEYS, sizeof(*keys));
    struct tally t = {0};
    struct rlimit rl;
    int n, failed = 0, changed = 0;

    if (!keys) {
        snprintf(err, errlen, "out of memory");
        return 2;
    }
    n = tune_parse(conf, keys, TUNE_MAX_KEYS, err, errlen);
    if (n < 0) {
        free(keys);
        return 2;
    }
    if (ctx->apply) {
        changed = apply_recorded(out, keys, n, ctx, &failed, err, errlen);
        if (changed < 0) {
            free(keys);
            return 2;
        }
        if (changed == 0 && !failed)
            fprintf(out, "nothing to change\n");
    }
    report_header(out, ctx->root);
    for (int i = 0; i < n; i++)
        report_key(out, &keys[i], ctx->root, &t);
    getrlimit(RLIMIT_NOFILE, &rl);
    report_nofile(out, &rl, &t);
    report_ceilings(out, ctx, &rl);
    report_summary(out, n + 1, ctx, &t);
    if (ctx->apply)
        apply_epilogue(out, ctx, changed);
    free(keys);
    if (ctx->apply && !ctx->dry_run && (failed || t.applied))
        return 3;
    return t.bad ? 1 : 0;
}

char *tune_conf_read(const char *path, char *why, size_t whylen)
{
    size_t len;
    char *text = file_read(path, TUNE_CONF_MAX, &len, NULL, 0);

    int e = errno;

    if (!text) {
        snprintf(why, whylen, "%s", e == EFBIG ? "over 1 MiB" : strerror(e));
        errno = e;
    }
    return text;
}

void tune_warn_exposed(const char *root, const char *const *listen, const int *lfds, int n)
{
    char range[64], reserved[256], name[128];

    if (tune_read(root, "net.ipv4.ip_local_port_range", range, sizeof(range)) < 0)
        return;
    if (tune_read(root, "net.ipv4.ip_local_reserved_ports", reserved, sizeof(reserved)) < 0)
        reserved[0] = '\0';
    for (int i = 0; i < n; i++) {
        int port;

        if (tune_port_of(listen[i]) == 0) /* HOST:0: the kernel's pick is ephemeral anyway */
            continue;
        net_local_name(lfds[i], name, sizeof(name));
        port = tune_port_of(name);
        if (tune_port_exposed(port, range, reserved))
            log_warn("listen port %d is inside the ephemeral port range %s and not reserved: a "
                     "client's connect() can take it while lfepolld is down; reserve it with "
                     "sysctl -w net.ipv4.ip_local_reserved_ports=%s%s%d",
                     port, range, reserved, reserved[0] ? "," : "", port);
    }
}
