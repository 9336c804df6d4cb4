/* script_env: what the workers' Lua states share: the script's source generations (load,
 * reload), lfe.shared, the limits, and the timeout watchdog thread.
 *
 * DESIGN
 *
 * Reload. SIGHUP compiles the file in a scratch state on the main thread; if that fails the
 * old script stays. Otherwise the new source becomes generation N+1 and every worker, between
 * two batches of events, builds a state from it and drops its old one. Connections and their
 * conn.ctx survive; a connection keeps the framing it started with. A source is shared by the
 * states built from it, counted under mu; script_env_src_get is the one way to take it.
 *
 * Time. Nothing on a callback's fast path but two stores and a coarse clock read. The watchdog
 * thread sees a call running past --lua-timeout-ms and sends its worker a signal; the handler
 * (on that thread, as lua.c does for Ctrl-C) arms a count hook that raises an error at every
 * instruction, so a pcall inside the script cannot swallow it, and sets the flag that the
 * pattern functions (lpattern.c) look at. C clears both when the call returns. Code inside
 * another C function (a huge string.rep) is not interruptible; the memory cap bounds it.
 */
#include "script_int.h"

#include "metrics.h"

#include "file.h"
#include "log.h"
#include "shdict.h"

#include <errno.h>
#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>

static __thread struct script *tls_sc; /* the script this thread runs, for the signal handler */
static int timeout_signal;             /* SIGRTMIN, set at start */

struct src *script_env_src_get(struct script_env *e)
{
    struct src *s;

    pthread_mutex_lock(&e->mu);
    s = e->cur;
    s->refs++;
    pthread_mutex_unlock(&e->mu);
    return s;
}

static struct src *src_read(const char *path, long gen, char *err, size_t errlen)
{
    struct src *s = calloc(1, sizeof(*s));

    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->code = file_read(path, FILE_ANY_SIZE, &s->len, err, errlen);
    if (!s->code) {
        free(s);
        return NULL;
    }
    s->gen = gen;
    s->refs = 1;
    return s;
}

void script_env_src_put(struct script_env *e, struct src *s)
{
    bool last;

    if (!s)
        return;
    pthread_mutex_lock(&e->mu);
    last = --s->refs == 0;
    pthread_mutex_unlock(&e->mu);
    if (last) {
        free(s->code);
        free(s);
    }
}

/* Loads s in a scratch state: the check before a source is used. */
static int src_check(struct script_env *e, struct src *s, char *err, size_t errlen)
{
    struct lstate *ls = lstate_new(e, NULL, s, err, errlen);

    if (!ls)
        return -1;
    s->has_connect = ls->ref_connect != LUA_NOREF;
    lstate_free(ls);
    return 0;
}

struct script_env *script_env_new(const struct script_opts *o, char *err, size_t errlen)
{
    struct script_env *e = calloc(1, sizeof(*e));

    if (!e) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    e->o = *o;
    e->stopfd = -1;
    e->path = strdup(o->path);
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->wd_cv, NULL);
    e->dict = shdict_new(o->shared_bytes);
    if (lio_env_init(e) < 0) {
        snprintf(err, errlen, "eventfd: %s", strerror(errno));
        goto fail;
    }
    if (!e->path || !e->dict) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    e->cur = src_read(e->path, 1, err, errlen);
    if (!e->cur || src_check(e, e->cur, err, errlen) < 0)
        goto fail;
    e->gen = 1;
    return e;

fail:
    script_env_free(e);
    return NULL;
}

long script_env_reload(struct script_env *e, char *err, size_t errlen)
{
    long gen = __atomic_load_n(&e->gen, __ATOMIC_RELAXED) + 1;
    struct src *s = src_read(e->path, gen, err, errlen), *old;

    if (!s)
        return -1;
    if (src_check(e, s, err, errlen) < 0) {
        script_env_src_put(e, s);
        return -1;
    }
    pthread_mutex_lock(&e->mu);
    old = e->cur;
    e->cur = s;
    pthread_mutex_unlock(&e->mu);
    __atomic_store_n(&e->gen, gen, __ATOMIC_RELEASE);
    script_env_src_put(e, old);
    return gen;
}

bool script_env_connect_first(struct script_env *e)
{
    bool has;

    pthread_mutex_lock(&e->mu);
    has = e->cur->has_connect;
    pthread_mutex_unlock(&e->mu);
    return has;
}

void script_env_print(struct script_env *e, FILE *f)
{
    size_t keys, bytes, cap;
    uint64_t ev;

    shdict_usage(e->dict, &keys, &bytes, &cap, &ev);
    fprintf(f,
            "stats: lua: generation=%ld shared_keys=%zu shared_bytes=%zu shared_capacity=%zu "
            "shared_evictions=%llu\n",
            __atomic_load_n(&e->gen, __ATOMIC_RELAXED), keys, bytes, cap, (unsigned long long)ev);
}

void script_env_metrics(struct script_env *e, FILE *f)
{
    size_t keys, bytes, cap;
    uint64_t ev;

    shdict_usage(e->dict, &keys, &bytes, &cap, &ev);
    metrics_family(f, "lfepolld_lua_generation", "gauge",
                   "The script generation serving (1 at start, +1 per successful SIGHUP reload).");
    metrics_u64(f, "lfepolld_lua_generation", NULL,
                (uint64_t)__atomic_load_n(&e->gen, __ATOMIC_RELAXED));
    metrics_family(f, "lfepolld_lua_shared_keys", "gauge", "Keys in lfe.shared.");
    metrics_u64(f, "lfepolld_lua_shared_keys", NULL, keys);
    metrics_family(f, "lfepolld_lua_shared_bytes", "gauge", "Bytes lfe.shared holds.");
    metrics_u64(f, "lfepolld_lua_shared_bytes", NULL, bytes);
    metrics_family(f, "lfepolld_lua_shared_capacity_bytes", "gauge",
                   "Capacity of lfe.shared (--lua-shared-mb).");
    metrics_u64(f, "lfepolld_lua_shared_capacity_bytes", NULL, cap);
    metrics_family(f, "lfepolld_lua_shared_evictions_total", "counter",
                   "Keys lfe.shared evicted to make room.");
    metrics_u64(f, "lfepolld_lua_shared_evictions_total", NULL, ev);
}

int script_env_register(struct script_env *e, struct script *sc)
{
    int rc = 0;

    pthread_mutex_lock(&e->mu);
    if (e->nscripts == e->capscripts) {
        int cap = e->capscripts ? e->capscripts * 2 : 8;
        struct script **a = realloc(e->scripts, (size_t)cap * sizeof(*a));

        if (!a) {
            rc = -ENOMEM;
            goto out;
        }
        e->scripts = a;
        e->capscripts = cap;
    }
    e->scripts[e->nscripts++] = sc;
out:
    pthread_mutex_unlock(&e->mu);
    return rc;
}

void script_env_unregister(struct script_env *e, struct script *sc)
{
    pthread_mutex_lock(&e->mu);
    for (int i = 0; i < e->nscripts; i++)
        if (e->scripts[i] == sc) {
            e->scripts[i] = e->scripts[--e->nscripts];
            break;
        }
    pthread_mutex_unlock(&e->mu);
}

/* --- the timeout watchdog ----------------------------------------------------------------- */

static void timeout_hook(lua_State *L, lua_Debug *ar)
{
    struct script *sc = tls_sc;

    (void)ar;
    /* A coroutine hooked as it yielded (the signal came inside coroutine.yield) outlives the
     * call that timed out: the next call that resumes it must not inherit the timeout. */
    if (!sc || !sc->timed_out) {
        lua_sethook(L, NULL, 0, 0);
        return;
    }
    luaL_error(L, "handler timed out");
}

/* On the worker's own thread, like lua.c's SIGINT handler: lua_sethook is safe here. */
static void on_timeout_signal(int sig)
{
    struct script *sc = tls_sc;

    (void)sig;
    if (!sc || !__atomic_load_n(&sc->in_call, __ATOMIC_ACQUIRE) ||
        __atomic_load_n(&sc->kill_seq, __ATOMIC_RELAXED) !=
            __atomic_load_n(&sc->seq, __ATOMIC_RELAXED))
        return;
    sc->timed_out = 1;
    sc->hooked = 1;
    /* Count only: a call hook would also fire for the C message handler. */
    script_hook_running(sc, timeout_hook);
}

static void *watchdog_main(void *arg)
{
    struct script_env *e = arg;
    long tick = e->o.timeout_ms / 4;
    struct timespec ts;

    tick = tick < 1 ? 1 : tick > 100 ? 100 : tick;
    pthread_mutex_lock(&e->mu);
    while (!e->wd_stop) {
        long now = coarse_ms();

        for (int i = 0; i < e->nscripts; i++) {
            struct script *sc = e->scripts[i];
            uint64_t seq = __atomic_load_n(&sc->seq, __ATOMIC_RELAXED);

            if (__atomic_load_n(&sc->in_call, __ATOMIC_ACQUIRE) && seq != sc->fired &&
                !__atomic_load_n(&sc->blocked, __ATOMIC_ACQUIRE) &&
                now - __atomic_load_n(&sc->start_ms, __ATOMIC_RELAXED) >= e->o.timeout_ms) {
                sc->fired = seq;
                __atomic_store_n(&sc->kill_seq, seq, __ATOMIC_RELEASE);
                pthread_kill(__atomic_load_n(&sc->tid, __ATOMIC_RELAXED), timeout_signal);
            }
        }
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += tick * 1000000L;
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&e->wd_cv, &e->mu, &ts);
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

int script_env_start(struct script_env *e)
{
    struct sigaction sa;
    int rc;

    if (e->o.timeout_ms <= 0 || e->wd_started)
        return 0;
    timeout_signal = SIGRTMIN;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_timeout_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(timeout_signal, &sa, NULL) < 0)
        return -errno;
    rc = pthread_create(&e->wd, NULL, watchdog_main, e);
    if (rc)
        return -rc;
    pthread_setname_np(e->wd, "lfe-lua-watch");
    e->wd_started = true;
    return 0;
}

void script_env_free(struct script_env *e)
{
    if (!e)
        return;
    if (e->wd_started) {
        pthread_mutex_lock(&e->mu);
        e->wd_stop = true;
        pthread_cond_signal(&e->wd_cv);
        pthread_mutex_unlock(&e->mu);
        pthread_join(e->wd, NULL);
    }
    if (e->cur)
        script_env_src_put(e, e->cur);
    shdict_free(e->dict);
    lio_env_free(e);
    free(e->scripts);
    free(e->path);
    pthread_cond_destroy(&e->wd_cv);
    pthread_mutex_destroy(&e->mu);
    free(e);
}

void script_env_stop(struct script_env *e, long deadline_ms)
{
    if (!e)
        return;
    __atomic_store_n(&e->stop_deadline_ms, deadline_ms > 0 ? deadline_ms : 1, __ATOMIC_RELEASE);
    if (e->stopfd >= 0)
        eventfd_write(e->stopfd, 1);
}

void script_env_bind(struct script *sc)
{
    __atomic_store_n(&sc->tid, pthread_self(), __ATOMIC_RELAXED);
    tls_sc = sc;
}
