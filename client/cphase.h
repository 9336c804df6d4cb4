/* cphase: the phases of a connection's start that lfbench times, each in a histogram of its own
 * (as k6 times http_req_connecting, http_req_tls_handshaking and http_req_waiting): the TCP
 * connect, the TLS handshake, and the wait for the first response byte. */
#ifndef LFE_CPHASE_H
#define LFE_CPHASE_H

#include <stdbool.h>
#include <stdint.h>

/* A phase: an index of each array of phase histograms (struct bthread's, struct bresult's). */
enum cphase {
    CP_CONNECT,    /* connect() until the socket is writable: the TCP handshake */
    CP_HANDSHAKE,  /* the TLS handshake, from the TCP connect's end to its completion */
    CP_FIRST_BYTE, /* the first request written whole, until the first read that returns bytes */
    CP_N
};

/* Their words, which must not change: the summary's row labels ("first byte"), --json's keys
 * ("first_byte_latency") and --json-stream's ("first_byte"), --hdr-log's tags ("first_byte"). */
extern const char *const cphase_label[CP_N];
extern const char *const cphase_json[CP_N];
extern const char *const cphase_tag[CP_N];

/* A connection's part: where it is in the phases that it times.
 *
 *   cphase_connected: timed --> SEND, not timed --> OFF
 *   SEND --cphase_sent (its first request written whole)--> BYTE
 *   BYTE --cphase_read (the first read with bytes: recorded)--> OFF
 *
 * The handshake, between connected and the first request, is recorded when it ends
 * (cphase_handshake) without a wait of its own: its start is the connect's end. */
enum cphase_wait {
    CPW_OFF,  /* nothing to time: not a timed connection, or its first byte came */
    CPW_SEND, /* timed: its first request is not written whole yet */
    CPW_BYTE, /* ... written whole at first_sent: the first byte is awaited */
};

/* One connection's timing of its phases, a member of struct bconn (touched by its thread). A
 * connection is timed when it is established in a measured window (after the warm-up), or in
 * long mode's opening (before the first step: the connections a long run is made of). */
struct cphase_conn {
    bool timed;
    enum cphase_wait wait;
    uint64_t first_sent; /* CLOCK_MONOTONIC ns */
};

struct bthread;

/* Records ns of phase p in t's histograms: the run's (t->ph) and this second's (t->cur_ph,
 * which --json-stream and --hdr-log take each second). Its thread only. */
void cphase_record(struct bthread *t, enum cphase p, uint64_t ns);

/* c's TCP connect ended at now (conn_ns after it began): c is timed or not from here on, and a
 * timed one records its connect. */
void cphase_connected(struct bthread *t, struct cphase_conn *c, uint64_t conn_ns, uint64_t now);

/* c's TLS handshake is complete, after ns; resumed says whether the library reports that it
 * resumed a session (bconn_handshake_done's word). When c is timed it is recorded, and
 * t->resumed counts the timed ones that resumed (t->tls_full and tls_resumed, bconn.c's, count
 * every handshake of the run). */
void cphase_handshake(struct bthread *t, struct cphase_conn *c, uint64_t ns, bool resumed);

/* A write completed requests on c (at least its first): the first-byte wait starts now. */
void cphase_sent(struct cphase_conn *c);

/* Bytes of a response were read at now: a first byte awaited is recorded. */
void cphase_read(struct bthread *t, struct cphase_conn *c, uint64_t now);

#endif /* LFE_CPHASE_H */
