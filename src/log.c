/* log: one-line, timestamped messages on stderr, safe from any thread. */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum log_level log_threshold = LOG_INFO;
bool log_json;

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

/* Length of the valid UTF-8 sequence at p (1-4), or 0 when it is not one (a stray continuation
 * byte, a cut sequence, an overlong form, a surrogate, past U+10FFFF). */
static size_t utf8_len(const unsigned char *p)
{
    if (p[0] < 0x80)
        return 1;
    if (p[0] >= 0xc2 && p[0] <= 0xdf)
        return (p[1] & 0xc0) == 0x80 ? 2 : 0;
    if (p[0] >= 0xe0 && p[0] <= 0xef) {
        if ((p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80)
            return 0;
        if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0))
            return 0;
        return 3;
    }
    if (p[0] >= 0xf0 && p[0] <= 0xf4) {
        if ((p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80 || (p[3] & 0xc0) != 0x80)
            return 0;
        if ((p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90))
            return 0;
        return 4;
    }
    return 0;
}

/* Appends msg to line[n, cap) as the inside of a JSON string: quote, backslash and control
 * bytes escaped, a byte that is not part of valid UTF-8 written as U+FFFD (\ufffd), so the line
 * is always one valid JSON object whatever a client put in the message. */
static size_t escape_json(char *line, size_t n, size_t cap, const char *msg)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)msg;

    while (*p) {
        char e[8];
        size_t k = 0, u = utf8_len(p);

        if (*p == '"' || *p == '\\') {
            e[k++] = '\\';
            e[k++] = (char)*p;
        } else if (*p == '\n' || *p == '\t' || *p == '\r') {
            e[k++] = '\\';
            e[k++] = *p == '\n' ? 'n' : *p == '\t' ? 't' : 'r';
        } else if (*p < 0x20 || *p == 0x7f) {
            memcpy(e, "\\u00", 4);
            k = 4;
            e[k++] = hex[*p >> 4];
            e[k++] = hex[*p & 15];
        } else if (u == 0) {
            memcpy(e, "\\ufffd", 6);
            k = 6;
            u = 1;
        } else {
            memcpy(e, p, u);
            k = u;
        }
        if (u == 0)
            u = 1;
        if (n + k > cap)
            break;
        memcpy(line + n, e, k);
        n += k;
        p += u;
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
    va_start(ap, fmt);
    if (vsnprintf(msg, sizeof(msg), fmt, ap) < 0)
        msg[0] = '\0';
    va_end(ap);
    if (log_json) {
        gmtime_r(&ts.tv_sec, &tm);
        n = snprintf(line, sizeof(line),
                     "{\"time\":\"%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ\",\"level\":\"%s\","
                     "\"pid\":%d,\"msg\":\"",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     ts.tv_nsec / 1000000, level_name[level], (int)getpid());
        /* truncated: still one line and valid JSON (room kept for the closing "}\n) */
        n = (int)escape_json(line, (size_t)n, sizeof(line) - 3, msg);
        line[n++] = '"';
        line[n++] = '}';
    } else {
        localtime_r(&ts.tv_sec, &tm);
        n = snprintf(line, sizeof(line), "%02d:%02d:%02d.%03ld lfepolld[%d]: %s: ", tm.tm_hour,
                     tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, (int)getpid(), level_name[level]);
        /* truncated: still one line */
        n = (int)escape(line, (size_t)n, sizeof(line) - 1, msg);
    }
    line[n++] = '\n';
    /* One write per line: stderr is unbuffered, and concurrent lines must not interleave. */
    if (write(STDERR_FILENO, line, (size_t)n) < 0) {
        /* nowhere left to report to */
    }
    errno = saved;
}
