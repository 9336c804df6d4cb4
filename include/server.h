/* server: the accept thread, the epoll groups and their worker threads, as one pool. */
#ifndef LFE_SERVER_H
#define LFE_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "opt.h"
#include "script.h"
#include "topo.h"

struct server;
struct tls_conf;

/* Builds the pool for the listening sockets lfds[0..nlisten) (the server takes them over and
 * closes them): one epoll fd and wake-up eventfd per group, nacc accept threads' epoll sets
 * (the j-th socket of an address to thread j % nacc), and the fd -> connection table sized by
 * RLIMIT_NOFILE. Creates no thread. max_conns is the live
 * connection limit (over it: accept and close). lua, when not NULL, is the loaded script: each
 * worker gets its own lua_State from it (the caller frees lua after server_free). Returns the
 * server, or NULL with err filled. o and p must outlive the server. */
struct server *server_new(const struct opt *o, const struct plan *p, const int *lfds, int nlisten,
                          int nacc, long max_conns, struct script_env *lua, char *err,
                          size_t errlen);

/* Creates every thread (G*W workers, pinned per the plan, then the accept thread) and returns.
 * No thread is created or destroyed after this until server_stop(). Returns 0 or -errno (then
 * the threads that did start are stopped and joined). Call with every signal the process
 * handles blocked, so that the threads inherit the mask. */
int server_start(struct server *s);

/* Graceful stop: closes the listeners, lets in-flight work finish for up to timeout_ms (until no
 * byte moves and no output is pending), then stops and joins every thread, writes out what
 * output is still pending within what is left of the timeout (plus 300 ms), and closes every
 * connection. The abort callback is polled while waiting: when it returns non-zero (a second
 * SIGTERM) the wait ends at once. Returns 0, or the number of workers that did not return
 * within the timeout plus 300 ms (each named in the log): then nothing they may touch was freed
 * and the caller must exit without server_free(). Call once, from the main thread. */
int server_stop(struct server *s, int timeout_ms, int (*abort_wait)(void));

/* Before server_stop: this stop is a hand-over (--takeover), a successor serves the same
 * listeners. Echo connections then end between requests at once (a FIN behind an echo), instead
 * of being served until their clients stop: they can reconnect, and lose at most the one request
 * that races the FIN. A plain stop lets every client finish what it sends. */
void server_handover(struct server *s);

/* Before server_stop: another lfepolld holds the listeners too and may go on serving them (a
 * successor not yet ready, or the predecessor this instance has not yet told it is ready), so
 * the stop leaves them as they are: no SYN filter, no drain of their queues (what waits there
 * is the other's to accept). false: they are this instance's alone again. */
void server_listeners_shared(struct server *s, bool shared);

/* Before server_start: the listeners are systemd's (socket activation), which keeps them after
 * this process exits and passes them to the next start, so they leave it as they came: made
 * non-blocking by server_start and put back as they were before their close; at the stop no
 * SYN filter and no drain of their queues (what waits there is the next start's). */
void server_listeners_kept(struct server *s);

/* SIGHUP in Lua mode: checks and publishes a new generation of the script (workers switch
 * between requests). Logs the outcome. Returns 0, or -1 when the old script stays. */
int server_reload(struct server *s);

/* Frees everything. The server must be stopped (or never started). */
void server_free(struct server *s);

/* The TLS listeners: ltls[i] says whether the server's i-th listening socket (as given to
 * server_new) speaks TLS; their connections make their TLS state from tls (the caller's, freed
 * after server_free). Before server_start. */
void server_set_tls(struct server *s, struct tls_conf *tls, const bool *ltls);

#endif /* LFE_SERVER_H */
