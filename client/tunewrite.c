/* tunewrite: lfbench tune --write-sysctl, the keys that helped as a sysctl.d file. */
#include "tunewrite.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The first line of every file tunewrite writes: how it knows one of its own. */
#define HEADER "# written by lfbench tune --write-sysctl: "

const char *tunewrite_effect_name(enum tunewrite_effect e)
{
    return e == TUNEWRITE_HELPS ? "helps" : e == TUNEWRITE_HURTS ? "hurts" : "no measurable effect";
}

/* Whether s holds a character that would end a line or a comment early (tab allowed: values
 * such as tcp_rmem may be written with one). */
static bool breaks_line(const char *s)
{
    for (; s && *s; s++)
        if ((unsigned char)*s < ' ' && *s != '\t')
            return true;
    return false;
}

static bool is_key(const char *k)
{
    if (!k || !*k || *k == '.' || k[strlen(k) - 1] == '.' || strstr(k, ".."))
        return false;
    return k[strspn(k, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-:@+./")] ==
           '\0';
}

/* One line in err for the first verdict that cannot be written, or 0. */
static int check(const struct tunewrite_verdict *v, int n, const char *how, char *err,
                 size_t errlen)
{
    if (breaks_line(how)) {
        snprintf(err, errlen, "--write-sysctl: the description of the run holds a line break");
        return -1;
    }
    for (int i = 0; i < n; i++) {
        if (!is_key(v[i].key)) {
            char shown[81];
            size_t k = 0;

            for (const char *c = v[i].key ? v[i].key : ""; *c && k + 1 < sizeof(shown); c++)
                shown[k++] = (unsigned char)*c < ' ' ? '?' : *c; /* the message stays one line */
            shown[k] = '\0';
            snprintf(err, errlen, "--write-sysctl: verdict %d: '%s' is not a sysctl name", i + 1,
                     shown);
            return -1;
        }
        if (!v[i].value || !*v[i].value || breaks_line(v[i].value) || breaks_line(v[i].figure)) {
            snprintf(err, errlen,
                     "--write-sysctl: %s: its value is empty, or it or its figure holds a line "
                     "break",
                     v[i].key);
            return -1;
        }
    }
    return 0;
}

/* The comment above a key that helped: its figure and statistics, and any other value of it
 * that helped too. */
static void key_comment(FILE *out, const struct tunewrite_verdict *v, int n, int i)
{
    fprintf(out,
            "\n# %s = %s helps: %s; median ratio %.3f to the baseline, interval %.3f-%.3f, "
            "%d rounds\n",
            v[i].key, v[i].value, v[i].figure ? v[i].figure : "", v[i].ratio, v[i].lo, v[i].hi,
            v[i].rounds);
    for (int j = i + 1; j < n; j++)
        if (v[j].effect == TUNEWRITE_HELPS && !strcmp(v[j].key, v[i].key))
            fprintf(out,
                    "#   %s helped too (median ratio %.3f, interval %.3f-%.3f): the first "
                    "listed is written\n",
                    v[j].value, v[j].ratio, v[j].lo, v[j].hi);
}

static bool written_before(const struct tunewrite_verdict *v, int i)
{
    for (int j = 0; j < i; j++)
        if (v[j].effect == TUNEWRITE_HELPS && !strcmp(v[j].key, v[i].key))
            return true;
    return false;
}

int tunewrite_sysctl(FILE *out, const struct tunewrite_verdict *v, int n, const char *how,
                     char *err, size_t errlen)
{
    int keys = 0, others = 0;

    if (check(v, n, how, err, errlen) < 0)
        return -1;
    fprintf(out, HEADER "the keys that helped, each with what was measured\n");
    fprintf(out, "# how: %s\n", how && *how ? how : "(not given)");
    fprintf(out, "# A key is here when its interval excludes 1 on the better side. To keep these\n"
                 "# across reboots put the file in /etc/sysctl.d/ (read at boot); sysctl -p FILE\n"
                 "# applies it now. Measured on one machine and workload: re-run lfbench tune\n"
                 "# where either differs.\n");
    for (int i = 0; i < n; i++) {
        if (v[i].effect != TUNEWRITE_HELPS || written_before(v, i))
            continue;
        key_comment(out, v, n, i);
        fprintf(out, "%s = %s\n", v[i].key, v[i].value);
        keys++;
    }
    for (int i = 0; i < n; i++) {
        if (v[i].effect == TUNEWRITE_HELPS)
            continue;
        fprintf(out, "%s %s = %s (%s: median ratio %.3f, interval %.3f-%.3f, %d rounds)",
                others++ ? "\n#  " : "\n# not set, measured without a gain:\n#  ", v[i].key,
                v[i].value, tunewrite_effect_name(v[i].effect), v[i].ratio, v[i].lo, v[i].hi,
                v[i].rounds);
    }
    fprintf(out, "%s", others ? "\n" : "");
    if (!keys)
        fprintf(out, "\n# no key helped: nothing is set\n");
    return keys;
}

/* Whether the file at path may be replaced: absent, or written by tunewrite. 0, or -1 with err. */
static int may_replace(const char *path, bool force, char *err, size_t errlen)
{
    char first[sizeof(HEADER)] = "";
    struct stat st;
    FILE *f;

    if (lstat(path, &st) < 0)
        return errno == ENOENT
                   ? 0
                   : (snprintf(err, errlen, "--write-sysctl %s: %s", path, strerror(errno)), -1);
    if (S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "--write-sysctl %s: a directory: name the file to write", path);
        return -1;
    }
    if (force)
        return 0;
    f = S_ISREG(st.st_mode) ? fopen(path, "r") : NULL;
    if (f) {
        if (!fgets(first, sizeof(first), f))
            first[0] = '\0';
        fclose(f);
    }
    if (strcmp(first, HEADER)) {
        snprintf(err, errlen,
                 "--write-sysctl %s: the file exists and lfbench tune did not write it: give "
                 "--force to replace it, or another name",
                 path);
        return -1;
    }
    return 0;
}

static int sync_dir(const char *path)
{
    char dir[PATH_MAX];
    char *slash;
    int fd, rc;

    snprintf(dir, sizeof(dir), "%s", path);
    slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof(dir), ".");
    else
        slash[slash == dir] = '\0';
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    rc = fsync(fd);
    close(fd);
    return rc;
}

int tunewrite_file(const char *path, const struct tunewrite_verdict *v, int n, const char *how,
                   bool force, char *err, size_t errlen)
{
    char tmp[PATH_MAX];
    FILE *f;
    int fd, keys;

    if (check(v, n, how, err, errlen) < 0 || may_replace(path, force, err, errlen) < 0)
        return -1;
    if (snprintf(tmp, sizeof(tmp), "%s.tmp-XXXXXX", path) >= (int)sizeof(tmp)) {
        snprintf(err, errlen, "--write-sysctl: the path is too long");
        return -1;
    }
    fd = mkstemp(tmp);
    if (fd < 0) {
        snprintf(err, errlen, "--write-sysctl %s: cannot make a file beside it: %s", path,
                 strerror(errno));
        return -1;
    }
    if (fchmod(fd, 0644) < 0 || !(f = fdopen(fd, "w"))) {
        int e = errno;
        close(fd);
        errno = e;
        goto fail;
    }
    keys = tunewrite_sysctl(f, v, n, how, err, errlen);
    if (fflush(f) != 0 || fsync(fd) < 0) {
        int e = errno;
        fclose(f);
        errno = e;
        goto fail;
    }
    if (fclose(f) != 0 || rename(tmp, path) < 0)
        goto fail;
    sync_dir(path);
    return keys;
fail:
    snprintf(err, errlen, "--write-sysctl %s: %s; nothing written", path, strerror(errno));
    unlink(tmp);
    return -1;
}
