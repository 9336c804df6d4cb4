/* bscript: lfbench --script, requests and checks written in Lua 5.4 with wrk's scripting API
 * (the wrk table, setup, init, delay, request, response, done), over any --expect framing.
 *
 * DESIGN. As in wrk, each load thread has a Lua state of its own, touched by that thread only
 * while the run goes, and one more state, main's, runs setup() before the threads start and
 * done() after they are joined; thread:get() and thread:set() reach a thread's state from main's
 * only then. The engine asks its thread's state for the next request (bscript_request), hands it
 * each response (bscript_response) and, in the closed loop, the delay before a request
 * (bscript_delay); each call runs against a deadline, enforced by an instruction-count hook (a Lua
 * loop is stopped with an error) and by main's watchdog (a C call that never returns ends lfbench:
 * bscript_stuck). An error is a script error (file:line), which stops the run, except in
 * response(): there an error, like returning false, is a failed check, counted as a mismatch with
 * its message.
 *
 * Each state holds at most 512 MiB. Any allocation in a state may run a collection step, and
 * with it the script's finalizers (__gc, run by Lua with hooks off), so once a state's file has
 * run, everything the glue does in it that allocates is part of a call: the arguments it
 * pushes (a response, done()'s figures), a copy from another state (thread:get/set, which
 * reach a state that is in none of its calls), closing it at exit. There the cap holds, and on
 * a load thread the watchdog sees the time. What the glue does outside a call (registry
 * references) runs no collection step. */
#ifndef LFE_BSCRIPT_H
#define LFE_BSCRIPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "bcount.h"
#include "bopt.h"
#include "hist.h"

#define SCRIPT_MAX_BATCH 256                  /* requests in one string that request() returns */
#define SCRIPT_MAX_RESPONSE (64u << 20)       /* bytes of one response handed to response() */
#define SCRIPT_CALL_BUDGET_NS 1000000000ull   /* one call of request, response or delay */
#define SCRIPT_PHASE_BUDGET_NS 10000000000ull /* the file's top level, setup, init, done */

struct bscript;   /* main's: the file, main's state, every thread's */
struct bscthread; /* one load thread's state */

/* One request of the strings request() returns, split (--expect http: a string may hold several
 * pipelined requests, as wrk's pipeline.lua sends). */
struct scpiece {
    size_t off, len;
    bool head;  /* HTTP: HEAD, whose response has no body */
    bool close; /* HTTP: the request asks the server to close after it */
};

/* What a thread's script wants, known once init() ran. */
struct scwants {
    bool request;  /* it makes each request (request(), or wrk.format() with --expect http);
                    * false: lfbench's own payloads go out (echo, line, len32, bytes) */
    bool response; /* response() is defined: the engine collects each response for it */
    bool delay;    /* delay() is defined */
    bool fixed;    /* the requests are one string, made once (no request() function) */
    int batch;     /* requests in the first string request() returned */
};

/* Loads FILE into main's state and checks the options against it (delay() with -R, --request
 * with a script). Returns the script, or NULL with one line in err (the file's error with its
 * line, an option it cannot go with). */
struct bscript *bscript_load(const struct bopt *o, char *err, size_t errlen);

/* Thread idx's state: the file run in it, setup(thread) in main's state, then init(args), and
 * the first request checked (what it holds, how many requests). Called by main, in order, before
 * any thread starts. Returns the thread's script, or NULL with one line in err. */
struct bscthread *bscript_thread(struct bscript *s, int idx, char *err, size_t errlen);

/* What the thread's script wants, and where its thread connects (thread.addr). */
const struct scwants *bscript_wants(const struct bscthread *t);
const struct sockaddr *bscript_addr(const struct bscthread *t, socklen_t *len);

/* The next string to send, split into requests: *data (the string itself, valid until the
 * next call) and its pieces (at most max). Returns the number of pieces (1 or more), or -1: a
 * script error, said by bscript_error(); -2: the string holds more than max requests (also said).
 * *tag: request()'s second value, when it gave one and response() is defined (lfbench's addition
 * to wrk's API: response() gets it with the answer, so it knows what it answers), kept in the
 * state until bscript_response() or bscript_untag() (the request failed); else LUA_NOREF. */
int bscript_request(struct bscthread *t, const uint8_t **data, struct scpiece *pieces, int max,
                    int *tag);

/* The engine's own reason to stop the thread's script (out of memory), kept as its error. */
void bscript_fail(struct bscthread *t, const char *msg);

/* Drops a tag whose request will never be answered. */
void bscript_untag(struct bscthread *t, int tag);

/* Hands one whole response to response() (with its request's tag, consumed): status, headers and
 * body (--expect http, the body de-chunked), or the bytes as they came (other framings). Returns 0
 * if it passed, 1 if it failed (false returned, or an error raised: the message kept for
 * bscript_thread_failure), -1 on a script error the run cannot go on after (it overran its budget).
 * refused: the engine did not keep the response (over SCRIPT_MAX_RESPONSE, or past
 * --script-buffers-mb), and says why: a failed check with that message, without a call. */
int bscript_response(struct bscthread *t, int status, const uint8_t *resp, size_t len,
                     size_t head_len, bool chunked, const char *refused, int tag);

/* delay()'s answer in nanoseconds (0 to 60 s), or -1 on a script error. */
int64_t bscript_delay(struct bscthread *t);

/* wrk.thread:stop() was called in this thread: it issues nothing more. */
bool bscript_stop_asked(const struct bscthread *t);

/* The thread's script error, NULL if none (set once; main reads it after the thread said so). */
const char *bscript_error(const struct bscthread *t);

/* The first failed check's message, and how many checks failed. */
const char *bscript_thread_failure(const struct bscthread *t);

/* A whole second of the measured window completed n requests in this thread: a sample of
 * done()'s per-thread request rate. */
void bscript_rate_sample(struct bscthread *t, uint64_t n);

/* From main, while the thread runs: a call into its script has lasted over its budget plus
 * grace (a C function that never returns, out of the hook's reach). Returns the hook's name
 * ("request", ...) or NULL. */
const char *bscript_stuck(const struct bscthread *t, uint64_t now, uint64_t grace);

/* What done() is told about the run (the summary's figures). */
struct scsummary {
    double duration_s; /* the measured window */
    struct bcount c;   /* the run's totals */
    const struct hist *lat;
};

/* done(summary, latency, requests) in main's state, once, after the threads are joined and the
 * summary is final; nothing if the script has none. Returns 0, or -1 with one line in err. */
int bscript_done(struct bscript *s, const struct scsummary *sum, char *err, size_t errlen);

/* The script's first failed-check message over all threads (NULL if none). */
const char *bscript_failure(const struct bscript *s);

void bscript_free(struct bscript *s);

#endif /* LFE_BSCRIPT_H */
