/* cphase: a connection's phases timed (connect, TLS handshake, first byte), each recorded in its
 * thread's histogram of that phase. */
#include "cphase.h"

#include "bthread.h"

const char *const cphase_label[CP_N] = {"connect", "handshake", "first byte"};
const char *const cphase_json[CP_N] = {"connect_latency", "handshake_latency",
                                       "first_byte_latency"};
const char *const cphase_tag[CP_N] = {"connect", "handshake", "first_byte"};

void cphase_record(struct bthread *t, enum cphase p, uint64_t ns)
{
    hist_record(&t->ph[p], ns);
    hist_record(&t->cur_ph[p], ns);
}

/* Whether a connection established at now is one whose phases are the run's: established in a
 * measured window, or in long mode's opening (no step commanded yet). Short mode has no opening:
 * its connections are made by the steps. The warm-up's, and those between a sweep's steps, are
 * not. */
static bool timed_at(const struct bthread *t, uint64_t now)
{
    if (t->phase == PH_IDLE)
        return t->step == 0 && t->o->mode == MODE_LONG;
    return now >= t->t_warm;
}

void cphase_connected(struct bthread *t, struct cphase_conn *c, uint64_t conn_ns, uint64_t now)
{
    c->timed = timed_at(t, now);
    c->wait = c->timed ? CPW_SEND : CPW_OFF;
    if (c->timed)
        cphase_record(t, CP_CONNECT, conn_ns);
}

void cphase_handshake(struct bthread *t, struct cphase_conn *c, uint64_t ns, bool resumed)
{
    if (!c->timed)
        return;
    cphase_record(t, CP_HANDSHAKE, ns);
    t->resumed += resumed;
}

void cphase_sent(struct cphase_conn *c)
{
    if (c->wait != CPW_SEND)
        return;
    c->wait = CPW_BYTE;
    c->first_sent = now_ns();
}

void cphase_read(struct bthread *t, struct cphase_conn *c, uint64_t now)
{
    if (c->wait != CPW_BYTE)
        return;
    c->wait = CPW_OFF;
    cphase_record(t, CP_FIRST_BYTE, now > c->first_sent ? now - c->first_sent : 0);
}
