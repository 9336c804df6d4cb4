/* pidfile: --pid-file, the file that names the running lfepolld for kill(1) and scripts. */
#include "pidfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The pid path holds, or 0 when absent; -EINVAL when it is not "digits\n". */
static long read_pid(const char *path)
{
    char buf[32];
    ssize_t n;
    long pid;
    char *end;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);

    if (fd < 0)
        return errno == ENOENT ? 0 : -errno;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n < 0)
        return -EINVAL; /* a directory, a FIFO with no writer... */
    buf[n] = '\0';
    if (buf[0] < '1' || buf[0] > '9')
        return -EINVAL;
    errno = 0;
    pid = strtol(buf, &end, 10);
    if (errno || (*end != '\0' && strcmp(end, "\n") != 0) || pid > INT_MAX)
        return -EINVAL;
    return pid;
}

/* Whether pid runs now and is an lfepolld (a pid reused by another program is not). */
static int is_lfepolld(long pid)
{
    char p[64], comm[32] = "";
    FILE *f;

    if (kill((pid_t)pid, 0) < 0 && errno == ESRCH)
        return 0;
    snprintf(p, sizeof(p), "/proc/%ld/comm", pid);
    if (!(f = fopen(p, "re")))
        return 0;
    if (!fgets(comm, sizeof(comm), f))
        comm[0] = '\0';
    fclose(f);
    return strcmp(comm, "lfepolld\n") == 0;
}

/* The directory path names its file in: "." for a bare name, "/" for one at the top. */
static void dir_of(const char *path, char *dir, size_t len)
{
    const char *slash = strrchr(path, '/');

    if (!slash)
        snprintf(dir, len, ".");
    else if (slash == path)
        snprintf(dir, len, "/");
    else
        snprintf(dir, len, "%.*s", (int)(slash - path), path);
}

/* One line in err when path's directory is not one: absent (with systemd's way to make one
 * under /run, which is emptied at boot) or something else. 0 when it is a directory. */
static int check_dir(const char *path, char *err, size_t errlen)
{
    char dir[PATH_MAX];
    struct stat st;
    int e;

    dir_of(path, dir, sizeof(dir));
    e = stat(dir, &st) < 0 ? errno : S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
    if (e == ENOENT && !strncmp(dir, "/run/", 5) && dir[5])
        snprintf(err, errlen,
                 "--pid-file %s: directory %s does not exist: create it (systemd: "
                 "RuntimeDirectory=%s)",
                 path, dir, dir + 5);
    else if (e == ENOENT)
        snprintf(err, errlen, "--pid-file %s: directory %s does not exist: create it", path, dir);
    else if (e == ENOTDIR)
        snprintf(err, errlen, "--pid-file %s: %s is not a directory", path, dir);
    else if (e)
        snprintf(err, errlen, "--pid-file %s: directory %s: %s", path, dir, strerror(e));
    return -e;
}

int pidfile_check(const char *path, char *err, size_t errlen)
{
    long pid = read_pid(path);

    if (pid == -EINVAL) {
        snprintf(err, errlen,
                 "--pid-file %s: exists and holds no pid; it is not overwritten: give another "
                 "path, or remove it",
                 path);
        return -EINVAL;
    }
    if ((pid == 0 || pid == -ENOTDIR) && check_dir(path, err, errlen) < 0)
        return -ENOENT; /* absent: can it be made there? */
    if (pid < 0) {
        snprintf(err, errlen, "--pid-file %s: cannot read it: %s", path, strerror((int)-pid));
        return (int)pid;
    }
    if (pid > 0 && pid != getpid() && is_lfepolld(pid)) {
        snprintf(err, errlen,
                 "--pid-file %s: lfepolld pid %ld is running with it; stop it first (kill "
                 "%ld), or give another path",
                 path, pid, pid);
        return -EEXIST;
    }
    return 0;
}

int pidfile_write(const char *path, char *err, size_t errlen)
{
    char tmp[PATH_MAX], line[32];
    int fd, len, rc = 0;

    if (snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path) >= (int)sizeof(tmp)) {
        snprintf(err, errlen, "--pid-file: the path is too long");
        return -ENAMETOOLONG;
    }
    len = snprintf(line, sizeof(line), "%ld\n", (long)getpid());
    fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        char dir[PATH_MAX];

        rc = -errno;
        if ((rc == -ENOENT || rc == -ENOTDIR) && check_dir(path, err, errlen) < 0)
            return rc; /* gone since the check at start */
        dir_of(path, dir, sizeof(dir));
        snprintf(err, errlen, "--pid-file %s: cannot create a file in %s: %s%s", path, dir,
                 strerror(-rc),
                 rc == -EACCES && geteuid() != 0
                     ? " (it is written as the user lfepolld runs as: --user, if given)"
                     : "");
        return rc;
    }
    if (fchmod(fd, 0644) < 0 || write(fd, line, (size_t)len) != len || fsync(fd) < 0)
        rc = errno ? -errno : -EIO;
    if (close(fd) < 0 && !rc)
        rc = -errno;
    if (!rc && rename(tmp, path) < 0)
        rc = -errno;
    if (rc) {
        snprintf(err, errlen, "--pid-file %s: cannot write it: %s", path, strerror(-rc));
        unlink(tmp);
    }
    return rc;
}

void pidfile_remove(const char *path)
{
    if (path && read_pid(path) == (long)getpid())
        unlink(path);
}
