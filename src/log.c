/* log: one-line, timestamped messages on stderr, safe from any thread. */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum log_level log_threshold = LOG_INFO;

static const char *const level_name[] = {"error", "warning", "info", "debug"};

/* Appends the message to line[n, cap) with control bytes, DEL and the backslash escaped (\n,
 * \t, \xHH, \\): client bytes that reach a message (a Lua error, lfe.log) cannot start a forged
 * line or move the cursor. Returns the new length; stops where an escape would not fit. */
static size_t escape(char *line, size_t n, size_t cap, const char *msg)
{
    static const char hex[] = "0123456789abcdef";

    for (const unsigned char *p = (const unsigned char *)msg; *p; p++) {
        unsigned char ch = *p;
        char e[4];
        size_t k = 0;

        if (ch == '\\') {
            e[k++] = '\\';
            e[k++] = '\\';
        } else if (ch == '\n' || ch == '\t' || ch == '\r') {
            e[k++] = '\\';
            e[k++] = ch == '\n' ? 'n' : ch == '\t' ? 't' : 'r';
        } else if (ch < 0x20 || ch == 0x7f) {
            e[k++] = '\\';
            e[k++] = 'x';
            e[k++] = hex[ch >> 4];
            e[k++] = hex[ch & 15];
        } else {
            e[k++] = (char)ch;
        }
        if (n + k > cap)
            break;
        memcpy(line + n, e, k);
        n += k;
    }
    return n;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
    int saved = errno;
    char line[1024], msg[1024];
    struct timespec ts;
    struct tm tm;
    va_list ap;
    int n;

    if (level > log_threshold)
        return;
    clock_gettime(CLOCK_REALTIME, &ts);
    localtime_r(&ts.tv_sec, &tm);
    n = snprintf(line, sizeof(line), "%02d:%02d:%02d.%03ld lfepolld[%d]: %s: ", tm.tm_hour,
                 tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, (int)getpid(), level_name[level]);
    va_start(ap, fmt);
    if (vsnprintf(msg, sizeof(msg), fmt, ap) < 0)
        msg[0] = '\0';
    va_end(ap);
    /* truncated: still one line */
    n = (int)escape(line, (size_t)n, sizeof(line) - 1, msg);
    line[n++] = '\n';
    /* One write per line: stderr is unbuffered, and concurrent lines must not interleave. */
    if (write(STDERR_FILENO, line, (size_t)n) < 0) {
        /* nowhere left to report to */
    }
    errno = saved;
}
