/* sysrestore: kernel parameters changed with a durable record of what they were before.
 *
 * DESIGN. Whatever changes a sysctl for a while (lfbench tune --host's rounds) or for good
 * (lfepolld --apply-sysctl) writes down what the key held first, and fsyncs that line, before
 * it writes the new value: a crash at any point leaves a record naming every key that may have
 * changed, and replaying it is harmless for a key that did not (it gets the value it has). The
 * record is locked with flock for the life of the session (a dead process's lock goes with it,
 * so a record nobody holds is a crashed run's). The values are also kept in memory, each with
 * its /proc path made ahead, so that a signal handler can put them back with open and write
 * alone. Newest first: a later change may rest on an earlier one (ip_unprivileged_port_start
 * may not exceed ip_local_port_range's low end), so they are undone the other way round. */
#include "sysrestore.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC "# lfepoll sysctl record v1 "
#define RECORD_MAX (1UL << 20) /* far above SYSRESTORE_MAX_KEYS escaped lines */

struct saved {
    char key[SYSRESTORE_KEY_MAX];
    char path[PATH_MAX]; /* under the session's root: made ahead for the signal path */
    char value[SYSRESTORE_VALUE_MAX];
    size_t len;
};

/* The session. The main thread writes it; the signal path reads saved[0..n) and path. */
static struct {
    struct saved saved[SYSRESTORE_MAX_KEYS];
    volatile sig_atomic_t n;
    volatile sig_atomic_t active;
    pid_t owner;
    int fd; /* the record, O_APPEND, flock'd */
    bool keep;
    char path[PATH_MAX];
    char root[PATH_MAX];
    char boot[64], ns[64]; /* the header's, for a rewind's fresh one */
} S = {.fd = -1};

int sysrestore_encode(const char *src, char *dst, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;

    for (const unsigned char *s = (const unsigned char *)src; *s; s++) {
        char e[4];
        size_t k = 0;

        if (*s == '\\' || *s == '\t' || *s == '\n') {
            e[k++] = '\\';
            e[k++] = *s == '\\' ? '\\' : *s == '\t' ? 't' : 'n';
        } else if (*s < ' ' || *s == 0x7f) {
            e[k++] = '\\';
            e[k++] = 'x';
            e[k++] = hex[*s >> 4];
            e[k++] = hex[*s & 15];
        } else {
            e[k++] = (char)*s;
        }
        if (o + k >= len)
            return -1;
        memcpy(dst + o, e, k);
        o += k;
    }
    if (o >= len)
        return -1;
    dst[o] = '\0';
    return (int)o;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

int sysrestore_decode(const char *src, char *dst, size_t len)
{
    size_t o = 0;

    for (const char *s = src; *s; s++) {
        char c = *s;

        if (c == '\\') {
            s++;
            if (*s == '\\' || *s == 't' || *s == 'n') {
                c = *s == '\\' ? '\\' : *s == 't' ? '\t' : '\n';
            } else if (*s == 'x' && hexval(s[1]) >= 0 && hexval(s[2]) >= 0 &&
                       hexval(s[1]) * 16 + hexval(s[2]) > 0) {
                c = (char)(hexval(s[1]) * 16 + hexval(s[2]));
                s += 2;
            } else {
                return -1;
            }
        } else if ((unsigned char)c < ' ') {
            return -1;
        }
        if (o + 1 >= len)
            return -1;
        dst[o++] = c;
    }
    if (!len)
        return -1;
    dst[o] = '\0';
    return (int)o;
}

/* key's file under root, or -1 when key is not a sysctl name: letters, digits and _-.:@+ only;
 * '.' separates, '/' stands for a '.' inside a name (sysctl(8)); no empty, "." or ".." part. */
static int key_path(const char *root, const char *key, char *path, size_t len)
{
    size_t o, part = 0;
    int n = snprintf(path, len, "%s/", root);

    if (n < 0 || (size_t)n >= len || !*key || strlen(key) >= SYSRESTORE_KEY_MAX)
        return -1;
    o = (size_t)n;
    for (const char *s = key;; s++) {
        char c = *s == '.' ? '/' : *s == '/' ? '.' : *s;

        if (c == '/' || !c) {
            const char *p = path + o - part;
            if (part == 0 || (part == 1 && p[0] == '.') || (part == 2 && !strncmp(p, "..", 2)))
                return -1;
            part = 0;
            if (!c)
                break;
        } else if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-:@+.",
                           c)) {
            return -1;
        } else {
            part++;
        }
        if (o + 1 >= len)
            return -1;
        path[o++] = c;
    }
    path[o] = '\0';
    return 0;
}

/* The exact text of the file at path, less one final newline. 0 or -errno (-EFBIG: too long). */
static int read_exact(const char *path, char *buf, size_t len)
{
    size_t o = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0)
        return -errno;
    for (;;) {
        ssize_t r = read(fd, buf + o, len - 1 - o);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            return -e;
        }
        if (r == 0)
            break;
        o += (size_t)r;
        if (o == len - 1) {
            close(fd);
            return -EFBIG;
        }
    }
    close(fd);
    if (o && buf[o - 1] == '\n')
        o--;
    buf[o] = '\0';
    return 0;
}

/* Writes value to path as one write (procfs takes a value in one go). An empty value is written
 * as "\n": procfs ignores a write of no bytes, and ip_local_reserved_ports would keep its list.
 * Async-signal-safe. */
static int write_value(const char *path, const char *value, size_t len)
{
    int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
    ssize_t w;
    int e;

    if (fd < 0)
        return -errno;
    if (!len) {
        value = "\n";
        len = 1;
    }
    do
        w = write(fd, value, len);
    while (w < 0 && errno == EINTR);
    e = w < 0 ? errno : (size_t)w != len ? EIO : 0;
    close(fd);
    return -e;
}

/* key as a message may show it: at most 96 bytes, a control character as '?' (one line). */
static const char *shown(const char *key, char *buf, size_t len)
{
    size_t o = 0;

    for (const char *s = key; *s && o + 1 < len && o < 96; s++)
        buf[o++] = (unsigned char)*s < ' ' || *s == 0x7f ? '?' : *s;
    buf[o] = '\0';
    return buf;
}

/* Why key cannot be set, for people, or NULL when it can. */
static const char *unsettable(const char *root, const char *key, char *path, size_t len)
{
    struct stat st;

    if (key_path(root, key, path, len) < 0)
        return "not a sysctl name (letters, digits and _-:@+ in parts joined by '.')";
    if (stat(path, &st) < 0)
        return errno == ENOENT || errno == ENOTDIR ? "no such key in this kernel or namespace"
                                                   : strerror(errno);
    if (S_ISDIR(st.st_mode))
        return "a directory of keys, not a key";
    if (!S_ISREG(st.st_mode))
        return "not a key";
    if (access(path, W_OK) < 0)
        return errno == EACCES || errno == EPERM || errno == EROFS
                   ? "read-only here (the kernel's, or this namespace's /proc/sys)"
                   : strerror(errno);
    return NULL;
}

static int fsync_dir(const char *path)
{
    char dir[PATH_MAX];
    char *slash;
    int fd, rc;

    snprintf(dir, sizeof(dir), "%s", path);
    slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof(dir), ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    rc = fsync(fd) < 0 ? -errno : 0;
    close(fd);
    return rc;
}

/* mkdir -p of path's directory, each new one 0700. */
static int make_dirs(const char *path)
{
    char dir[PATH_MAX];

    snprintf(dir, sizeof(dir), "%s", path);
    for (char *s = dir + 1; (s = strchr(s, '/')); s++) {
        *s = '\0';
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
            return -errno;
        *s = '/';
    }
    return 0;
}

static int write_all(int fd, const char *s, size_t len)
{
    while (len) {
        ssize_t w = write(fd, s, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        s += w;
        len -= (size_t)w;
    }
    return 0;
}

/* This boot's id and this process's network namespace, as the record's header names them. */
static void whereabouts(char *boot, size_t blen, char *ns, size_t nlen)
{
    ssize_t n;

    if (read_exact("/proc/sys/kernel/random/boot_id", boot, blen) < 0 || !boot[0])
        snprintf(boot, blen, "unknown");
    n = readlink("/proc/self/ns/net", ns, nlen - 1);
    if (n <= 0)
        snprintf(ns, nlen, "unknown");
    else
        ns[n] = '\0';
}

/* The record's first line. */
struct header {
    char kind[16];
    long pid;
    char boot[64];
    char ns[64];
};

static int parse_header(const char *text, struct header *h)
{
    char line[256];
    int used = 0;

    snprintf(line, sizeof(line), "%.*s", (int)strcspn(text, "\n"), text);
    if (strncmp(line, MAGIC, strlen(MAGIC)))
        return -1;
    if (sscanf(line + strlen(MAGIC), "%15s pid %ld boot %63s netns %63s%n", h->kind, &h->pid,
               h->boot, h->ns, &used) != 4 ||
        line[strlen(MAGIC) + (size_t)used])
        return -1;
    return strcmp(h->kind, "restore") && strcmp(h->kind, "undo") ? -1 : 0;
}

static void reset(void)
{
    if (S.fd >= 0)
        close(S.fd); /* and the lock with it */
    S.fd = -1;
    S.active = 0;
    S.n = 0;
}

/* Adds key = value (raw) to the session's memory, unless it is there: the first value stays. */
static int remember(const char *key, const char *value, char *err, size_t errlen)
{
    struct saved *s;

    for (int i = 0; i < S.n; i++)
        if (!strcmp(S.saved[i].key, key))
            return 0;
    if (S.n == SYSRESTORE_MAX_KEYS) {
        snprintf(err, errlen, "%s: more than %d keys in one record", key, SYSRESTORE_MAX_KEYS);
        return -1;
    }
    s = &S.saved[S.n];
    if (key_path(S.root, key, s->path, sizeof(s->path)) < 0 || strlen(value) >= sizeof(s->value)) {
        char k[100];
        snprintf(err, errlen, "'%s' is not a sysctl name, or its value is too long",
                 shown(key, k, sizeof(k)));
        return -1;
    }
    snprintf(s->key, sizeof(s->key), "%s", key);
    memcpy(s->value, value, strlen(value) + 1);
    s->len = strlen(value);
    atomic_signal_fence(memory_order_release); /* the entry is whole before the count shows it */
    S.n = S.n + 1;
    return 0;
}

/* The record's lines after its header into the session's memory. Returns 0, or -1 with err. */
static int load(const char *text, const char *path, char *err, size_t errlen)
{
    int line = 2; /* the header is line 1 */

    for (const char *p = strchr(text, '\n') + 1; *p; line++) {
        const char *nl = strchr(p, '\n'), *eq;
        char raw[SYSRESTORE_KEY_MAX + 4 * SYSRESTORE_VALUE_MAX], key[SYSRESTORE_KEY_MAX];
        char value[SYSRESTORE_VALUE_MAX];
        size_t len;

        if (!nl) /* its write never reached the disk: the key was not changed */
            break;
        len = (size_t)(nl - p);
        if (*p != '#' && len) {
            eq = memchr(p, '=', len);
            if (!eq || len >= sizeof(raw) || (size_t)(eq - p) >= sizeof(key))
                goto bad;
            memcpy(key, p, (size_t)(eq - p));
            key[eq - p] = '\0';
            memcpy(raw, eq + 1, len - (size_t)(eq + 1 - p));
            raw[len - (size_t)(eq + 1 - p)] = '\0';
            if (sysrestore_decode(raw, value, sizeof(value)) < 0 ||
                remember(key, value, err, errlen) < 0)
                goto bad;
        }
        p = nl + 1;
    }
    return 0;
bad:
    snprintf(err, errlen, "%s line %d is not KEY=VALUE: check those keys by hand, then remove it",
             path, line);
    return -1;
}

/* Puts back saved[0..n) newest first. Returns how many failed; names them in err. */
static int put_back(char *err, size_t errlen)
{
    int failed = 0;
    size_t o = 0;

    for (int i = S.n - 1; i >= 0; i--) {
        int rc = write_value(S.saved[i].path, S.saved[i].value, S.saved[i].len);
        if (rc < 0 && o < errlen) {
            int w = snprintf(err + o, errlen - o, "%s%s (%s)", failed ? ", " : "", S.saved[i].key,
                             strerror(-rc));
            o += w > 0 ? (size_t)w : 0;
        }
        failed += rc < 0;
    }
    return failed;
}

/* A record left by a run that did not finish: put back, then said in one line. Returns the
 * number of keys, or -1 with err (the record is kept). */
static int replay(const struct header *h, char *err, size_t errlen)
{
    char failed[512] = "";
    size_t o;
    int n = S.n;

    if (put_back(failed, sizeof(failed))) {
        snprintf(err, errlen,
                 "%s: a run that did not finish (pid %ld) left keys changed and these cannot be "
                 "put back: %s; set them by hand, then remove it",
                 S.path, h->pid, failed);
        return -1;
    }
    o = (size_t)snprintf(err, errlen,
                         "sysctl: a run that did not finish (pid %ld) left %d key%s changed; put "
                         "back from %s:",
                         h->pid, n, n == 1 ? "" : "s", S.path);
    for (int i = n - 1; i >= 0 && o < errlen; i--) {
        char shown[SYSRESTORE_VALUE_MAX];
        int w;

        snprintf(shown, sizeof(shown), "%s", S.saved[i].value);
        for (char *c = shown; *c; c++)
            if (*c == '\t' || *c == '\n')
                *c = ' ';
        w = snprintf(err + o, errlen - o, "%s %s = %s", i == n - 1 ? "" : ",", S.saved[i].key,
                     shown);
        o += w > 0 ? (size_t)w : 0;
    }
    S.n = 0;
    return n;
}

/* Opens and locks path, the same file as its name still names (a holder that ended may have
 * removed it while we waited). Returns the fd or -1 with err. */
static int lock_record(const char *path, char *err, size_t errlen)
{
    for (int tries = 0; tries < 8; tries++) {
        struct stat a, b;
        int fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);

        if (fd < 0) {
            snprintf(err, errlen, "%s: cannot open it: %s", path, strerror(errno));
            return -1;
        }
        if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
            char head[200] = "";
            struct header h = {.pid = 0};
            ssize_t r = pread(fd, head, sizeof(head) - 1, 0);

            head[r > 0 ? r : 0] = '\0';
            parse_header(head, &h);
            snprintf(err, errlen,
                     "%s is held by another run (pid %ld) changing sysctls: wait for it to end",
                     path, h.pid);
            close(fd);
            return -1;
        }
        if (fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_ino == b.st_ino &&
            a.st_dev == b.st_dev) {
            if (!S_ISREG(a.st_mode)) {
                snprintf(err, errlen, "%s is not a regular file", path);
                close(fd);
                return -1;
            }
            if (a.st_uid != geteuid() || (a.st_mode & 022)) { /* another user's values */
                snprintf(err, errlen,
                         "%s belongs to uid %d or others may write it: not trusted, nothing "
                         "read from it; remove it or choose another path",
                         path, (int)a.st_uid);
                close(fd);
                return -1;
            }
            return fd;
        }
        close(fd);
    }
    snprintf(err, errlen, "%s keeps being replaced: is another run starting?", path);
    return -1;
}

/* The record's text (at most RECORD_MAX), malloc'd. NULL with err. */
static char *read_record(int fd, const char *path, char *err, size_t errlen)
{
    struct stat st;
    char *text;
    size_t o = 0;

    if (fstat(fd, &st) < 0 || (size_t)st.st_size > RECORD_MAX) {
        snprintf(err, errlen, "%s is over 1 MiB: not a sysctl record of lfepoll", path);
        return NULL;
    }
    text = malloc((size_t)st.st_size + 1);
    if (!text) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    while (o < (size_t)st.st_size) {
        ssize_t r = pread(fd, text + o, (size_t)st.st_size - o, (off_t)o);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        o += (size_t)r;
    }
    text[o] = '\0';
    return text;
}

/* Empties the record and writes this session's header, durably. */
static int fresh(const char *kind, const char *boot, const char *ns, char *err, size_t errlen)
{
    char head[256];
    int n = snprintf(head, sizeof(head), MAGIC "%s pid %ld boot %s netns %s\n", kind,
                     (long)getpid(), boot, ns);

    if (ftruncate(S.fd, 0) < 0 || write_all(S.fd, head, (size_t)n) < 0 || fsync(S.fd) < 0 ||
        fsync_dir(S.path) < 0) {
        snprintf(err, errlen, "%s: cannot write it: %s", S.path, strerror(errno));
        return -1;
    }
    return 0;
}

/* Whether network namespace ns ("net:[4026532178]") still exists: a process is in it, or
 * ip netns holds it open under /run/netns. */
static bool netns_alive(const char *ns)
{
    unsigned long long ino = 0;
    const char *dirs[] = {"/proc", "/run/netns"};

    if (sscanf(ns, "net:[%llu]", &ino) != 1)
        return true; /* not a name we made: assume the worst */
    for (int d = 0; d < 2; d++) {
        DIR *dir = opendir(dirs[d]);
        struct dirent *e;

        while (dir && (e = readdir(dir))) {
            char path[300], link[64];
            struct stat st;
            ssize_t n;

            if (d == 0) {
                if (e->d_name[0] < '0' || e->d_name[0] > '9')
                    continue;
                snprintf(path, sizeof(path), "/proc/%s/ns/net", e->d_name);
                n = readlink(path, link, sizeof(link) - 1);
                if (n > 0 && (link[n] = '\0', !strcmp(link, ns))) {
                    closedir(dir);
                    return true;
                }
            } else if (e->d_name[0] != '.') {
                snprintf(path, sizeof(path), "/run/netns/%s", e->d_name);
                if (stat(path, &st) == 0 && (unsigned long long)st.st_ino == ino) {
                    closedir(dir);
                    return true;
                }
            }
        }
        if (dir)
            closedir(dir);
    }
    return false;
}

/* A record from a network namespace that is gone: its net.* keys went with it (in a namespace
 * other than the host's every key under net is the namespace's own); the others are the host's
 * and are put back. */
static void drop_net_keys(void)
{
    int k = 0;

    for (int i = 0; i < S.n; i++)
        if (strncmp(S.saved[i].key, "net.", 4))
            S.saved[k++] = S.saved[i];
    S.n = k;
}

/* What the record holds, judged: 0 when it can be used as it is (or was empty, or stale: then
 * *stale, or from a namespace that is gone: then *gone), -1 with err. */
static int judge(const char *text, struct header *h, bool keep, const char *boot, const char *ns,
                 bool *stale, bool *gone, char *err, size_t errlen)
{
    const char *want = keep ? "undo" : "restore";

    *stale = *gone = false;
    if (!text[0])
        return 0;
    if (parse_header(text, h) < 0 || !strchr(text, '\n')) {
        snprintf(err, errlen,
                 "%s is not a sysctl record of lfepoll (its first line): choose another path",
                 S.path);
        return -1;
    }
    if (strcmp(h->boot, boot)) {
        *stale = true; /* the reboot reset every key it names */
        return 0;
    }
    if (strcmp(h->kind, want)) {
        snprintf(err, errlen,
                 keep ? "%s is a running tool's restore record, not lfepolld --apply-sysctl's: "
                        "give --undo-file another path"
                      : "%s is lfepolld --apply-sysctl's undo record, not a restore record: "
                        "choose another path (or put it back with lfepolld --undo-sysctl)",
                 S.path);
        return -1;
    }
    if (strcmp(h->ns, ns) && !netns_alive(h->ns)) {
        *gone = true;
    } else if (strcmp(h->ns, ns)) {
        snprintf(err, errlen,
                 "%s was written in network namespace %s, this is %s: use it from there", S.path,
                 h->ns, ns);
        return -1;
    }
    return 0;
}

int sysrestore_open(const char *path, const char *root, bool keep, char *err, size_t errlen)
{
    char boot[64], ns[64], *text;
    struct header h = {.pid = 0};
    bool stale, gone;
    int rc = -1;

    err[0] = '\0';
    if (S.active) {
        snprintf(err, errlen, "a sysctl record is open already (%s)", S.path);
        return -1;
    }
    if (strlen(path) >= sizeof(S.path) || strlen(root) >= sizeof(S.root) || !*path) {
        snprintf(err, errlen, "a sysctl record's path or root is empty or too long");
        return -1;
    }
    snprintf(S.path, sizeof(S.path), "%s", path);
    snprintf(S.root, sizeof(S.root), "%s", root);
    if (make_dirs(path) < 0) {
        snprintf(err, errlen, "%s: cannot make its directory: %s", path, strerror(errno));
        return -1;
    }
    S.fd = lock_record(path, err, errlen);
    if (S.fd < 0)
        return -1;
    S.n = 0;
    S.keep = keep;
    S.owner = getpid();
    whereabouts(boot, sizeof(boot), ns, sizeof(ns));
    snprintf(S.boot, sizeof(S.boot), "%s", boot);
    snprintf(S.ns, sizeof(S.ns), "%s", ns);
    text = read_record(S.fd, path, err, errlen);
    if (!text || judge(text, &h, keep, boot, ns, &stale, &gone, err, errlen) < 0)
        goto fail;
    if (stale)
        snprintf(err, errlen,
                 "sysctl: dropped %s: written before the last reboot, which reset the keys it "
                 "names",
                 path);
    if (!stale && text[0] && load(text, path, err, errlen) < 0)
        goto fail;
    if (gone) {
        drop_net_keys();
        if (!S.n)
            snprintf(err, errlen,
                     "sysctl: dropped %s: written in network namespace %s, which is gone with "
                     "the keys it changed",
                     path, h.ns);
    }
    if (keep && S.n && !gone) {
        rc = S.n; /* appended to as it is: the values from before the first apply stay */
    } else {
        rc = S.n ? replay(&h, err, errlen) : 0;
        if (rc < 0 || fresh(keep ? "undo" : "restore", boot, ns, err, errlen) < 0)
            goto fail;
    }
    free(text);
    S.active = 1;
    return rc;
fail:
    free(text);
    reset();
    return -1;
}

int sysrestore_begin(const char *path, char *err, size_t errlen)
{
    return sysrestore_open(path, "/proc/sys", false, err, errlen);
}

int sysrestore_get(const char *key, char *buf, size_t len, char *err, size_t errlen)
{
    char path[PATH_MAX];
    int rc;

    if (key_path(S.active ? S.root : "/proc/sys", key, path, sizeof(path)) < 0) {
        char k[100];
        snprintf(err, errlen, "'%s': not a sysctl name", shown(key, k, sizeof(k)));
        return -1;
    }
    rc = read_exact(path, buf, len);
    if (rc < 0) {
        snprintf(err, errlen, "%s: %s", key,
                 rc == -ENOENT  ? "no such key in this kernel or namespace"
                 : rc == -EFBIG ? "its value is too long"
                                : strerror(-rc));
        return -1;
    }
    return 0;
}

int sysrestore_set(const char *key, const char *value, char *err, size_t errlen)
{
    char path[PATH_MAX], cur[SYSRESTORE_VALUE_MAX],
        line[SYSRESTORE_KEY_MAX + 4 * SYSRESTORE_VALUE_MAX + 2];
    const char *why;
    bool known = false;
    int rc, n;

    if (!S.active || S.owner != getpid()) {
        snprintf(err, errlen, "'%s': no sysctl record is open: nothing is set without one",
                 shown(key, cur, sizeof(cur)));
        return -1;
    }
    if ((why = unsettable(S.root, key, path, sizeof(path)))) {
        snprintf(err, errlen, "'%s': %s", shown(key, cur, sizeof(cur)), why);
        return -1;
    }
    if (!*value || strlen(value) >= SYSRESTORE_VALUE_MAX) {
        snprintf(err, errlen, "%s: the value is empty or over %d bytes", key,
                 SYSRESTORE_VALUE_MAX - 1);
        return -1;
    }
    if (sysrestore_get(key, cur, sizeof(cur), err, errlen) < 0)
        return -1;
    for (int i = 0; i < S.n; i++)
        known = known || !strcmp(S.saved[i].key, key);
    if (!known) {
        n = snprintf(line, sizeof(line), "%s=", key);
        if (S.n == SYSRESTORE_MAX_KEYS ||
            sysrestore_encode(cur, line + n, sizeof(line) - (size_t)n - 1) < 0) {
            snprintf(err, errlen, "%s: not set: more than %d keys in one record", key,
                     SYSRESTORE_MAX_KEYS);
            return -1;
        }
        strcat(line, "\n");
        if (write_all(S.fd, line, strlen(line)) < 0 || fsync(S.fd) < 0) {
            snprintf(err, errlen, "%s: not set: its old value cannot be written to %s: %s", key,
                     S.path, strerror(errno));
            return -1;
        }
        if (remember(key, cur, err, errlen) < 0)
            return -1;
    }
    rc = write_value(path, value, strlen(value));
    if (rc < 0) {
        snprintf(err, errlen, "%s: the kernel refused '%s': %s", key, value, strerror(-rc));
        return -1;
    }
    return 0;
}

int sysrestore_rewind(char *err, size_t errlen)
{
    char failed[512] = "";
    int bad;

    err[0] = '\0';
    if (!S.active || S.owner != getpid())
        return 0;
    bad = put_back(failed, sizeof(failed));
    if (bad) {
        snprintf(err, errlen, "sysctl: %d key%s not put back: %s; %s keeps them", bad,
                 bad == 1 ? "" : "s", failed, S.path);
        return -1;
    }
    S.n = 0; /* before the record forgets them: the signal path then has nothing to repeat */
    return fresh(S.keep ? "undo" : "restore", S.boot, S.ns, err, errlen);
}

int sysrestore_undo(char *err, size_t errlen)
{
    char failed[512] = "";
    int bad;

    err[0] = '\0';
    if (!S.active)
        return 0;
    if (S.owner != getpid()) { /* a forked child's copy: the session is its parent's */
        S.active = 0;
        S.fd = -1;
        return 0;
    }
    S.active = 0; /* the signal path would only repeat what follows */
    bad = put_back(failed, sizeof(failed));
    if (bad) {
        snprintf(err, errlen, "sysctl: %d key%s not put back: %s; %s keeps them", bad,
                 bad == 1 ? "" : "s", failed, S.path);
        fsync(S.fd);
        reset();
        return -1;
    }
    if (unlink(S.path) < 0 && errno != ENOENT) {
        snprintf(err, errlen, "sysctl: every key put back, but %s cannot be removed: %s", S.path,
                 strerror(errno));
        reset();
        return -1;
    }
    fsync_dir(S.path);
    reset();
    return 0;
}

int sysrestore_keep(char *err, size_t errlen)
{
    err[0] = '\0';
    if (!S.active || S.owner != getpid())
        return 0;
    S.active = 0;
    if (!S.n) {
        unlink(S.path);
        fsync_dir(S.path);
    } else if (fsync(S.fd) < 0) {
        snprintf(err, errlen, "%s: cannot sync it: %s", S.path, strerror(errno));
        reset();
        return -1;
    }
    reset();
    return 0;
}

int sysrestore_count(void)
{
    return S.active ? S.n : 0;
}

int sysrestore_saved(int i, const char **key, const char **value)
{
    if (!S.active || i < 0 || i >= S.n)
        return -1;
    *key = S.saved[i].key;
    *value = S.saved[i].value;
    return 0;
}

void sysrestore_undo_signal_safe(void)
{
    int e = errno;
    bool bad = false;

    if (!S.active || S.owner != getpid())
        return;
    S.active = 0;
    atomic_signal_fence(memory_order_acquire);
    for (int i = S.n - 1; i >= 0; i--)
        bad |= write_value(S.saved[i].path, S.saved[i].value, S.saved[i].len) < 0;
    if (!bad)
        unlink(S.path);
    else
        fsync(S.fd);
    errno = e;
}

static void on_signal(int sig)
{
    sysrestore_undo_signal_safe();
    raise(sig); /* SA_RESETHAND made it the default: delivered, and fatal, once this returns */
}

int sysrestore_catch_signals(char *err, size_t errlen)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND;
    sigfillset(&sa.sa_mask); /* one handler at a time */
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        if (sigaction(sigs[i], &sa, NULL) < 0) {
            snprintf(err, errlen, "cannot catch signal %d: %s", sigs[i], strerror(errno));
            return -1;
        }
    return 0;
}
