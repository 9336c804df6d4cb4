/* sdnotify: systemd's service protocol without libsystemd: notifications to $NOTIFY_SOCKET
 * (sd_notify(3): one datagram of "KEY=value" lines) and the listeners of socket activation
 * ($LISTEN_FDS/$LISTEN_PID, sd_listen_fds(3)). Both are documented, stable interfaces. */
#ifndef LFE_SDNOTIFY_H
#define LFE_SDNOTIFY_H

#include <stddef.h>

#define SD_LISTEN_FDS_START 3

/* Reads $NOTIFY_SOCKET ("/path" or "@abstract") and $WATCHDOG_USEC (with $WATCHDOG_PID, when
 * set, naming this process) and opens the datagram socket. Without $NOTIFY_SOCKET every
 * sdnotify_send() is a no-op. Returns 0, or -1 with one line in err (a malformed variable). */
int sdnotify_init(char *err, size_t errlen);

/* Sends msg ("READY=1\nSTATUS=...") without blocking. A failure is logged once, never fatal:
 * the service manager may be gone. */
void sdnotify_send(const char *msg);

/* The watchdog period asked by systemd in microseconds, or 0 for none. */
long long sdnotify_watchdog_usec(void);

/* Socket activation: when $LISTEN_PID is this process, the number of listening sockets handed
 * over from fd 3 ($LISTEN_FDS), each checked to be a listening stream socket and made
 * close-on-exec (its descriptor's flag; nothing of the socket, which systemd keeps, changes
 * here); 0 when none were handed to this process. -1 with one line in err when the variables
 * or a descriptor are not what systemd hands over. */
int sdnotify_listen_fds(int max, char *err, size_t errlen);

#endif /* LFE_SDNOTIFY_H */
