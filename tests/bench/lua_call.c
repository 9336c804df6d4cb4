/* lua_call: what one Lua callback costs, without sockets. Loads a script into one state and
 * times script_on_data on a 64-byte frame: the per-call overhead the README quotes. With
 * STATES 2, calls alternate between two worker states, as when a connection's events go to
 * different workers: conn.ctx is then rebuilt on every call instead of found in the cache.
 *   build/bench/lua_call SCRIPT [CALLS] [STATES] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "script.h"

static double now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
    struct script_opts o = {.mem_cap = 64 << 20, .timeout_ms = 1000, .shared_bytes = 1 << 20};
    struct worker_stats st = {0};
    struct script_conn c = {.id = 1, .fd = -1};
    struct outbuf out = {0};
    struct script_env *e;
    struct script *sc, *sc2 = NULL;
    int states = argc > 3 ? atoi(argv[3]) : 1;
    char err[512], frame[64];
    long calls = argc > 2 ? atol(argv[2]) : 2000000;
    double best = 1e300;

    if (argc < 2) {
        fprintf(stderr, "usage: lua_call SCRIPT [CALLS [STATES]]\n");
        return 2;
    }
    log_threshold = LOG_ERR;
    o.path = argv[1];
    memset(frame, 'x', sizeof(frame));
    if (!(e = script_env_new(&o, err, sizeof(err))) ||
        !(sc = script_new(e, "0.0", &st, err, sizeof(err)))) {
        fprintf(stderr, "lua_call: %s\n", err);
        return 1;
    }
    if (states == 2 && !(sc2 = script_new(e, "0.1", &st, err, sizeof(err)))) {
        fprintf(stderr, "lua_call: %s\n", err);
        return 1;
    }
    if (script_env_start(e) < 0)
        return 1;
    script_env_bind(sc);
    for (int round = 0; round < 5; round++) { /* best of 5: the machine is shared */
        double t0 = now_ns(), ns;

        for (long i = 0; i < calls; i++) {
            if (script_on_data(sc2 && (i & 1) ? sc2 : sc, &c, frame, sizeof(frame), &out) !=
                SCRIPT_OK) {
                fprintf(stderr, "lua_call: the callback failed\n");
                return 1;
            }
            out.len = 0;
        }
        ns = (now_ns() - t0) / (double)calls;
        if (ns < best)
            best = ns;
    }
    printf("%s: %.0f ns per on_data call (64-byte frame, best of 5 x %ld calls, %s; state %zu "
           "KiB)\n",
           argv[1], best, calls, sc2 ? "alternating 2 states" : "one state", script_mem(sc) >> 10);
    script_conn_release(&c);
    script_free(sc);
    if (sc2)
        script_free(sc2);
    script_env_free(e);
    free(out.data);
    return 0;
}
