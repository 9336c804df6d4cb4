/* harness: starting, watching and stopping lfepolld for the integration tests. */
#ifndef LFE_TEST_HARNESS_H
#define LFE_TEST_HARNESS_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct daemon {
    pid_t pid;
    int port;
    char log[64];
};

extern const char *lfepolld;  /* path from $LFEPOLLD */
extern const char *sanitizer; /* $LFE_SANITIZER: memory figures mean nothing under it */
extern int slow;              /* $TEST_SLOW: timeout multiplier for sanitizer builds */

/* The most a TCP socket's send buffer may grow to here (tcp_wmem's third field), in bytes: a
 * slow-reader test must send more than this per connection, or the kernel holds it all. */
size_t tcp_wmem_max(void);

/* Reads the environment, raises RLIMIT_NOFILE, ignores SIGPIPE. -1 when LFEPOLLD is unset. */
int harness_init(void);

long now_ms(void);
void sleep_ms(long ms);

/* The daemon's whole log so far (static buffer). */
const char *log_text(const struct daemon *d);

/* Starts lfepolld with args (NULL-terminated; "--listen 127.0.0.1:0" is added when args name
 * no --listen). nofile > 0 sets RLIMIT_NOFILE, cpus pins the process (as taskset would).
 * Returns 0 with d filled once the daemon logs its port, or -1 (then d->pid may have exited:
 * see its log). */
int spawn(struct daemon *d, const char *const *args, long nofile, const cpu_set_t *cpus);

/* Sends sig and waits up to timeout_ms; returns the exit status, 128+signal if killed by one,
 * or -1 if it had to be killed with SIGKILL. */
int stop_daemon(struct daemon *d, int sig, long timeout_ms);

void cleanup(struct daemon *d);

/* After every test, pass or fail: no daemon or log file outlives it. */
int teardown(void **state);

int count_lines(const char *s);

/* lfepolld with args must fail to start with want_status and one line containing needle. */
void bad_start(const char *const *args, int want_status, const char *needle);

/* Clients the daemon tests share; each fails the test on a system call that fails. */
int tcp_connect(int port);
void send_all(int fd, const void *p, size_t n);
/* Reads until EOF (or timeout_ms): the whole answer of a Connection: close server. Returns a
 * malloc'd, NUL-terminated string. */
char *read_all(int fd, long timeout_ms);
/* Exactly n bytes, up to timeout_ms a read; returns how many came. */
size_t read_exact(int fd, char *buf, size_t n, long timeout_ms);
/* Sends the raw request and returns the whole answer (malloc'd). */
char *http_raw(int port, const char *req);
/* GET path: returns the status code, *body (malloc'd) the body. */
int http_get(int port, const char *path, char **body);
/* The admin port from the daemon's log. */
int admin_port(struct daemon *d);
/* The sum over every sample of family name (labels ignored) in a /metrics body. */
double metric_sum(const char *body, const char *name);
/* A connection from source address src (127.x.y.z) to port, or -1. */
int connect_from(int port, const char *src);
/* Whether fd echoes a line (true), or was closed by the server (false). */
bool echoes(int fd);
/* A TCP port free now on 127.0.0.1 (another process may take it before the caller binds it). */
int free_port(void);

#endif /* LFE_TEST_HARNESS_H */
