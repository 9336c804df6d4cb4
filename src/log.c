/* log: one-line, timestamped messages on stderr, safe from any thread. */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

enum log_level log_threshold = LOG_INFO;

static const char *const level_name[] = {"error", "warning", "info", "debug"};

void log_msg(enum log_level level, const char *fmt, ...)
{
    int saved = errno;
    char line[1024];
    struct timespec ts;
    struct tm tm;
    va_list ap;
    int n, m;

    if (level > log_threshold)
        return;
    clock_gettime(CLOCK_REALTIME, &ts);
    localtime_r(&ts.tv_sec, &tm);
    n = snprintf(line, sizeof(line), "%02d:%02d:%02d.%03ld lfepolld[%d]: %s: ", tm.tm_hour,
                 tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, (int)getpid(), level_name[level]);
    va_start(ap, fmt);
    m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (m < 0)
        m = 0;
    n += m;
    if ((size_t)n > sizeof(line) - 2)
        n = sizeof(line) - 2; /* truncated: still one line */
    line[n++] = '\n';
    /* One write per line: stderr is unbuffered, and concurrent lines must not interleave. */
    if (write(STDERR_FILENO, line, (size_t)n) < 0) {
        /* nowhere left to report to */
    }
    errno = saved;
}
