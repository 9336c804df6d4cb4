/* lfb_util: what the lfbench integration tests share (test_lfbench*.c, test_plot.c,
 * test_merge.c): a free port and a server started on it, lfbench run with its output caught,
 * numbers read from its summary and its --json, and a strict validator of the JSON it writes.
 * A helper whose system call fails fails the test (cmocka). */
#ifndef LFE_TEST_LFB_UTIL_H
#define LFE_TEST_LFB_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* What the helpers share with a test file: the binaries, the timeout multiplier, the server
 * started last and lfbench's output of the last run. */
struct lfb {
    const char *lfbench, *lfepolld, *badserver; /* $LFBENCH, $LFEPOLLD, $BADSERVER */
    int slow;                                   /* $TEST_SLOW: timeouts' multiplier (1) */
    pid_t server_pid;                           /* lfb_start's server, 0 when none */
    int server_port;
    char out[1 << 17]; /* lfbench's stdout and stderr of the last lfb_bench */
};
extern struct lfb lfb;

/* The tests' main(), before cmocka runs: the environment into lfb (with_lfepolld: whether the
 * test needs LFEPOLLD too), SIGPIPE ignored, TEST_FILTER (e.g. 'test_short*': run only those)
 * passed on. Returns 0, or -1 with one line on stderr when a path is not set. */
int lfb_init(bool with_lfepolld);

/* lfb_start_server into lfb.server_pid and lfb.server_port, on a free port. */
void lfb_start(const char *const *argv);

/* A cmocka teardown: the server of lfb_start, if any, is killed and reaped. */
int lfb_teardown(void **state);

/* Runs lfbench with the arguments (NULL-terminated; at most 44) and 127.0.0.1:port last, its
 * output into lfb.out; returns what lfb_run does. */
int lfb_bench(int port, ...);

/* lfb_field_of(lfb.out, name). */
long lfb_field(const char *name);

void lfb_sleep_ms(long ms);

/* A TCP port free now on 127.0.0.1 (another process may take it before the caller binds it). */
int lfb_free_port(void);

/* Whether something accepts connections on 127.0.0.1:port. */
bool lfb_port_open(int port);

/* Starts argv (argv[0] a path; at most 15 words) with "PORT" and "127.0.0.1:PORT" replaced by
 * *port, its output to /dev/null, and waits until the port accepts (5 s times slow); fails the
 * test when it does not. *port: a port picked by the caller (a server whose configuration names
 * it), or 0 for a free one, returned there. Returns its pid. */
pid_t lfb_start_server(const char *const *argv, int *port, int slow);

/* SIGKILL and reap *pid when it is a process; *pid is 0 after. */
void lfb_stop_server(pid_t *pid);

/* Starts argv (argv[0] a path) with its stdout and stderr on the files fo and fe, killed by
 * SIGALRM after alarm_s seconds, or by lfb_wait with SIGKILL a second later (lfbench re-arms
 * its own alarm): a hung client fails its test, not the suite. */
pid_t lfb_spawn(const char *const *argv, int fo, int fe, unsigned alarm_s);

/* Waits for pid: its exit status, or 128 + the signal that ended it. */
int lfb_wait(pid_t pid);

/* The file fd holds, from its start, into buf (NUL-terminated, at most size - 1 bytes). */
void lfb_read_back(int fd, char *buf, size_t size);

/* Runs argv to its end, stdout and stderr together into out (NUL-terminated); returns what
 * lfb_wait does. */
int lfb_run(const char *const *argv, char *out, size_t size, unsigned alarm_s);

/* A counter of lfbench's summary in out: the first word of a line ("requests     12"), else
 * one within a line ("mismatch 3"); -1 when absent. A line's first word comes first: the
 * kernel hints, which other tests in this network namespace can bring up, say "... connections
 * were reset". */
long lfb_field_of(const char *out, const char *name);

/* A number of JSON text: the first "name": in it; NAN when absent. */
double lfb_jnum(const char *json, const char *name);

/* A number of a --json file: the top-level "name" (a line of its own), else the first one;
 * NAN when absent. */
double lfb_jtop(const char *json, const char *name);

/* The file's contents, NUL-terminated, in a static buffer (1 MiB); the file is removed. */
const char *lfb_slurp(const char *path);

/* Whether text[0, len) is exactly one JSON value (RFC 8259, strictly: no trailing commas,
 * leading zeros, lone surrogates or raw control characters) in valid UTF-8 (RFC 3629). */
bool lfb_json_valid(const char *text, size_t len);

#endif /* LFE_TEST_LFB_UTIL_H */
