/* log: one-line, timestamped messages on stderr, safe from any thread. */
#ifndef LFE_LOG_H
#define LFE_LOG_H

#include <stdbool.h>

enum log_level { LOG_ERR, LOG_WARN, LOG_INFO, LOG_DEBUG };

/* Messages above this level are dropped. Set once at start, before threads exist. */
extern enum log_level log_threshold;

/* --log-format json: each line is one JSON object, {"time":"<RFC 3339 UTC>","level":"info",
 * "pid":N,"msg":"..."}, the message escaped as a JSON string (control bytes as \u00XX, bytes
 * that are not valid UTF-8 as \ufffd). Set once at start, before threads exist. */
extern bool log_json;

/* Writes "<time> lfepolld[pid]: <level>: <message>\n" with one write(2), so lines from
 * different threads never interleave; control bytes and the backslash in the message are escaped
 * (\n, \xHH, \\), so a message is always one line and cannot forge another. Preserves errno. */
void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_err(...) log_msg(LOG_ERR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif /* LFE_LOG_H */
