/* script_int: what the Lua bridge's files share (script.c, lstate.c, script_env.c, lfelib.c,
 * ctx.c, ...); not for the rest of the daemon, which sees script.h only. */
#ifndef LFE_SCRIPT_INT_H
#define LFE_SCRIPT_INT_H

#include <lua.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "script.h"

#define CONN_MT "lfepoll.conn" /* the conn object's metatable, in the registry */
#define SCRIPT_CO_MAX 128      /* coroutines resuming one another at once (Lua's C stack: ~60) */

/* A loaded source, shared by the states built from it. */
struct src {
    int refs; /* under env->mu */
    long gen;
    size_t len;
    char *code;
    bool has_connect;
};

struct script_env {
    struct script_opts o;
    char *path;
    pthread_mutex_t mu; /* cur, refs, scripts[] */
    struct src *cur;
    long gen; /* atomic: cur->gen */
    struct shdict *dict;
    struct script **scripts; /* registered for the watchdog */
    int nscripts, capscripts;
    pthread_t wd;
    bool wd_started;
    pthread_cond_t wd_cv;
    bool wd_stop;
    long log_sec;          /* atomic: second of the current error-log window */
    int log_n;             /* atomic: errors logged in it */
    long log_quiet;        /* atomic: errors not logged */
    size_t ctx_used;       /* atomic: bytes of saved conn.ctx, all connections (--lua-ctx-mb) */
    int stopfd;            /* lio: eventfd made readable when a stop begins */
    long stop_deadline_ms; /* atomic: lio: the drain's deadline (mono ms), 0 until a stop */
};

/* One lua_State and what was loaded into it. */
struct lstate {
    lua_State *L;
    size_t used, cap; /* allocator accounting */
    int ref_data, ref_connect, ref_close, ref_mt;
    int ref_cache;      /* conn.ctx cache: [id] = the table, [-id] = its ctx_ver */
    size_t cache_bytes; /* ctx_cost() of each entry */
    struct framing fr;
    long gen;
    struct script_env *env;
    struct script *sc; /* NULL in a scratch state */
    char *sbuf;        /* lfe.shared get scratch */
    size_t sbufcap;
};

struct script {
    struct script_env *env;
    struct worker_stats *st;
    char name[24];
    struct lstate *ls;
    long gen, tried_gen;
    size_t mem; /* atomic: ls->used after the last call */
    /* The watchdog's view of the current call. */
    uint64_t seq;                    /* atomic: calls started */
    uint64_t kill_seq;               /* atomic: the call the watchdog wants stopped */
    uint64_t fired;                  /* watchdog only: last call signalled */
    long start_ms;                   /* atomic: coarse start time of the current call */
    int in_call;                     /* atomic */
    pthread_t tid;                   /* atomic (an integer on Linux): the thread running sc */
    volatile sig_atomic_t hooked;    /* set by the signal handler: the hook is armed */
    volatile sig_atomic_t timed_out; /* set with it */
    /* --lua-unsafe's coroutines (lfelib.c): the ones running now, each resumed by the one
     * before it, the innermost last. A count hook belongs to one Lua thread, so a timeout
     * hooks each of these too (script_hook_running). Written by the worker's thread, read by
     * its signal handler: the entry before the count. */
    lua_State *co[SCRIPT_CO_MAX];
    volatile sig_atomic_t nco;
    struct outbuf ser; /* conn.ctx serialization scratch */
    /* lio.c: the calls that wait. */
    int blocked;                    /* atomic: inside a wait: the CPU watchdog looks away */
    volatile sig_atomic_t wall_out; /* the callback waited past --lua-wall-timeout-ms */
    long wall_deadline_ms;          /* this callback's, mono ms; 0: none */
    bool in_close;                  /* running on_close: no waiting */
    struct lsock *socks;            /* sockets this callback opened, still open */
    int nsocks;                     /* how many: SCRIPT_SOCKS_MAX at most */
    struct lio_pooled *pool;        /* kept-alive sockets, oldest first */
    int npool;
    void (*wait_hook)(void *); /* before each wait: the worker's (script_set_wait_hook) */
    void *wait_arg;
};

/* The conn object: a userdata made fresh for each callback (lfelib_push_conn), dead once it
 * returns. */
struct cud {
    struct script_conn *c; /* NULL once the callback returned */
    struct script *sc;
    struct outbuf *out;
    size_t mark; /* out->len when the callback started */
    int idx;     /* where the userdata sits on the stack of the protected call */
    bool close;
    bool ctx_loaded; /* uservalue 1 holds the table */
};

/* Coarse monotonic milliseconds (a few ms of resolution, no syscall on x86 vDSO). */
static inline long coarse_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
}

/* --- script_env.c: sources, generations, the watchdog --- */

/* A reference on the current source (release it with script_env_src_put). Any thread. */
struct src *script_env_src_get(struct script_env *e);
void script_env_src_put(struct script_env *e, struct src *s);

/* Registers sc with the watchdog (0, or -ENOMEM), and takes it off. Any thread. */
int script_env_register(struct script_env *e, struct script *sc);
void script_env_unregister(struct script_env *e, struct script *sc);

/* --- lstate.c: states --- */

/* Builds a state from s (sc NULL: a scratch state, to check a source). NULL with err. */
struct lstate *lstate_new(struct script_env *e, struct script *sc, const struct src *s, char *err,
                          size_t errlen);
void lstate_free(struct lstate *ls);

/* --- lfelib.c: the library scripts see --- */

/* Opens the libraries of the sandbox (or every one with --lua-unsafe), lfe and the conn
 * metatable in L, whose allocator's ud is its struct lstate. Pushes lfe. Raises on memory. */
int luaopen_lfe(lua_State *L);

/* Pushes a fresh conn object for one callback of c; its output goes to out. Raises on memory. */
struct cud *lfelib_push_conn(lua_State *L, struct script *sc, struct script_conn *c,
                             struct outbuf *out);

/* Appends a callback's output to u->out, within --max-pending for the callback (what names the
 * caller in the error). Raises past it or on memory. */
void lfelib_output(lua_State *L, struct cud *u, const char *s, size_t len, const char *what);

/* --- lio.c: the calls that wait --- */

/* Adds lfe.now, lfe.sleep and lfe.connect to the lfe table at the top of L's stack, and the
 * socket's metatable to the registry. Raises on memory. */
void lio_open(lua_State *L, struct lstate *ls);
/* Around each callback: its wall-clock deadline, whether it is on_close; at its end, the
 * sockets it left open are closed. */
void lio_call_begin(struct script *sc, bool in_close);
void lio_call_end(struct script *sc);
/* Closes sc's pooled sockets. */
void lio_free(struct script *sc);
/* The environment's stop eventfd: 0 or -errno; and its release. */
int lio_env_init(struct script_env *e);
void lio_env_free(struct script_env *e);

/* --- ctx.c: conn.ctx kept between callbacks --- */

/* Pushes c's table as this state cached it, if it still holds what c saved; false (nothing
 * pushed) otherwise. Raises nothing. */
bool ctx_cache_get(lua_State *L, struct script *sc, struct script_conn *c);

/* Serializes u's touched conn.ctx (uservalue 1) into its connection and caches the table.
 * Raises on what cannot be kept, past the limits, or on memory. */
void ctx_save(lua_State *L, struct cud *u);

/* Frees c's saved ctx and refunds it to --lua-ctx-mb. */
void ctx_release(struct script_conn *c);

/* Arms fn at every instruction on the script's main thread and on every coroutine running
 * inside it (sc->co): a loop inside coroutine.wrap never returns to the main thread, whose hook
 * it would otherwise never meet. On the worker's thread only; async-signal-safe (lua_sethook
 * is), so its timeout signal handler calls it. */
static inline void script_hook_running(struct script *sc, lua_Hook fn)
{
    int n = sc->nco;

    lua_sethook(sc->ls->L, fn, LUA_MASKCOUNT, 1);
    for (int i = 0; i < n && i < SCRIPT_CO_MAX; i++)
        lua_sethook(sc->co[i], fn, LUA_MASKCOUNT, 1);
}

#endif /* LFE_SCRIPT_INT_H */
