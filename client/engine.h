/* engine: lfbench's load threads: each one's loop, its timers and its steps. */
#ifndef LFE_ENGINE_H
#define LFE_ENGINE_H

#include "bthread.h"

/* Prepares thread t's connections [base, base+n) with the run's time points; sc: its script's
 * state (--script), or NULL. */
int engine_init(struct bthread *t, int idx, const struct bopt *o, const struct payloads *p,
                struct bscthread *sc, uint32_t base, int n, uint64_t t_start);

/* The thread body: runs the loop until the run is over. */
void *engine_main(void *arg);

/* From another thread: stop issuing at once (Ctrl-C); the thread finishes in-flight work, and
 * its step ends. */
void engine_stop(struct bthread *t);

/* From the main thread: start the next step, or finish (c->finish). */
void engine_command(struct bthread *t, const struct bcmd *c);

/* The last step whose results are in t->sres (acquire). */
int engine_step_done(struct bthread *t);

void engine_free(struct bthread *t);

#endif /* LFE_ENGINE_H */
