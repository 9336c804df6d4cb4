/* Unit tests of idle: the words' transitions (OWNED, ARMED, CLAIMED, EXPIRED) through idle_arm,
 * idle_take, idle_rearm and idle_sweep, on real Unix socket pairs, with the sweep's clock given
 * (idle_sweep takes now): dates far from the machine's own, each step exactly where it falls. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../../src/idle.h"
#include "../../src/pool.h"

#define LIMIT_MS 1000 /* --idle-timeout 1s: the sweep runs every 125 ms (a half tick) */
#define T0 50000000L  /* the fake clock's start, in CLOCK_MONOTONIC ms */
#define TABLE 4096

/* A server that is only what the idle sweep reads, and one connection on a socket pair: fd is
 * the daemon's side (in the fd table), peer the client's. */
struct rig {
    struct opt o;
    struct server s;
    struct conn *c;
    int fd, peer;
};

static int setup(void **state)
{
    struct rig *r = calloc(1, sizeof(*r));
    int sv[2];

    if (!r || socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) < 0 || sv[0] >= TABLE)
        return -1;
    r->fd = sv[0];
    r->peer = sv[1];
    r->o.idle_ms = LIMIT_MS;
    r->s.opt = &r->o;
    r->s.idle_limit_ms = LIMIT_MS;
    r->s.table_size = TABLE;
    r->s.table = calloc(TABLE, sizeof(*r->s.table));
    r->s.idle = calloc(TABLE, sizeof(*r->s.idle));
    r->s.fd_hi = r->fd;
    r->c = conn_new(r->fd, CONN_ECHO);
    if (!r->s.table || !r->s.idle || !r->c)
        return -1;
    r->s.table[r->fd] = r->c;
    *state = r;
    return 0;
}

static int teardown(void **state)
{
    struct rig *r = *state;

    close(r->fd);
    close(r->peer);
    free(r->c);
    free(r->s.table);
    free(r->s.idle);
    free(r->s.idle_outq);
    free(r);
    return 0;
}

static uint64_t word(const struct rig *r)
{
    return __atomic_load_n(&r->s.idle[r->fd], __ATOMIC_ACQUIRE);
}

/* Whether the sweep shut the daemon's side down: the peer reads the end of the stream. */
static bool peer_sees_eof(const struct rig *r)
{
    char b[64];
    ssize_t n;

    while ((n = recv(r->peer, b, sizeof(b), MSG_DONTWAIT)) > 0)
        ;
    return n == 0;
}

/* The sweep as main's loop runs it: at most every half tick, so a step past the last one. */
static long sweep_at(struct rig *r, long now)
{
    r->s.next_sweep_ms = 0;
    return idle_sweep(&r->s, now);
}

/* idle_arm publishes ARMED with the date; a take makes it OWNED and keeps the date, which
 * idle_rearm publishes again (a PROXY header's deadline runs from the accept, not the events). */
static void test_arm_take_rearm(void **state)
{
    struct rig *r = *state;

    assert_int_equal(word(r), 0); /* OWNED, dated -IDLE_BIAS: never armed */
    idle_arm(&r->s, r->fd, T0);
    assert_int_equal(word(r), idle_word(T0, IDLE_ARMED));
    assert_false(idle_take(&r->s, r->fd));
    assert_int_equal(word(r), idle_word(T0, IDLE_OWNED));
    idle_rearm(&r->s, r->fd);
    assert_int_equal(word(r), idle_word(T0, IDLE_ARMED));
    idle_arm(&r->s, r->fd, T0 + 7); /* an event re-dates it */
    assert_int_equal(word(r), idle_word(T0 + 7, IDLE_ARMED));
}

/* ARMED stays ARMED until --idle-timeout has passed since its date, then the sweep claims it,
 * shuts it down and hands it back EXPIRED, the date kept; the worker's take says so (true) and
 * owns it. */
static void test_armed_expires_at_its_limit(void **state)
{
    struct rig *r = *state;

    idle_arm(&r->s, r->fd, T0);
    assert_int_equal(sweep_at(r, T0 + LIMIT_MS - 1), 0);
    assert_int_equal(word(r), idle_word(T0, IDLE_ARMED));
    assert_false(peer_sees_eof(r));
    assert_int_equal(sweep_at(r, T0 + LIMIT_MS), 1);
    assert_int_equal(word(r), idle_word(T0, IDLE_EXPIRED));
    assert_true(peer_sees_eof(r));
    assert_true(idle_take(&r->s, r->fd));
    assert_int_equal(word(r), idle_word(T0, IDLE_OWNED));
    assert_int_equal(sweep_at(r, T0 + 10 * LIMIT_MS), 0); /* owned: never the sweep's */
}

/* The sweep runs at most every half tick (a quarter of the limit, 50 ms to 1 s): a call before
 * then does nothing, even for a connection past its time. */
static void test_sweep_waits_half_a_tick(void **state)
{
    struct rig *r = *state;
    long tick = LIMIT_MS / 4;

    idle_arm(&r->s, r->fd, T0 + 1);
    r->s.next_sweep_ms = 0;
    assert_int_equal(idle_sweep(&r->s, T0 + LIMIT_MS), 0); /* not yet: 1 ms early */
    assert_int_equal(r->s.next_sweep_ms, T0 + LIMIT_MS + tick / 2);
    assert_int_equal(idle_sweep(&r->s, T0 + LIMIT_MS + tick / 2 - 1), 0);
    assert_int_equal(word(r), idle_word(T0 + 1, IDLE_ARMED));
    assert_int_equal(idle_sweep(&r->s, T0 + LIMIT_MS + tick / 2), 1);
    assert_int_equal(word(r), idle_word(T0 + 1, IDLE_EXPIRED));
}

/* Only ARMED words are the sweep's: OWNED, CLAIMED, EXPIRED and a date still to come (a
 * lingering close's, set ahead) are left as they are, however old. */
static void test_sweep_takes_only_armed(void **state)
{
    struct rig *r = *state;
    int states[] = {IDLE_OWNED, IDLE_CLAIMED, IDLE_EXPIRED};

    for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++) {
        r->s.idle[r->fd] = idle_word(T0, states[i]);
        assert_int_equal(sweep_at(r, T0 + 100 * LIMIT_MS), 0);
        assert_int_equal(word(r), idle_word(T0, states[i]));
    }
    idle_arm(&r->s, r->fd, T0 + 5 * LIMIT_MS);
    assert_int_equal(sweep_at(r, T0 + LIMIT_MS), 0);
    assert_int_equal(word(r), idle_word(T0 + 5 * LIMIT_MS, IDLE_ARMED));
    assert_false(peer_sees_eof(r));
}

/* An event waiting for a worker is no idleness: the claim is handed back ARMED, dated now. Input
 * it is not reading (CONN_NOREAD: at --max-pending, or after its end) is no event of its. */
static void test_waiting_event_is_handed_back(void **state)
{
    struct rig *r = *state;
    long now = T0 + LIMIT_MS;

    assert_int_equal(send(r->peer, "x", 1, 0), 1);
    idle_arm(&r->s, r->fd, T0);
    assert_int_equal(sweep_at(r, now), 0);
    assert_int_equal(word(r), idle_word(now, IDLE_ARMED));
    r->c->flags |= CONN_NOREAD;
    assert_int_equal(sweep_at(r, now + LIMIT_MS), 1);
    assert_int_equal(word(r), idle_word(now, IDLE_EXPIRED));
    assert_true(peer_sees_eof(r));
}

/* The peer taking what the kernel holds for it is progress the sweep sees only in the send
 * queue: a first look at a queue that is not empty gives one more period (ARMED, dated now), a
 * shorter queue at the next look another, the same queue at the same date is idleness. */
static void test_send_queue_falling_is_progress(void **state)
{
    struct rig *r = *state;
    char big[4096] = {0}, b[sizeof(big)];
    long now = T0 + LIMIT_MS;

    r->s.idle_outq = calloc(TABLE, sizeof(*r->s.idle_outq));
    assert_non_null(r->s.idle_outq);
    assert_int_equal(send(r->fd, big, sizeof(big), 0), sizeof(big));
    assert_int_equal(send(r->fd, big, sizeof(big), 0), sizeof(big));
    idle_arm(&r->s, r->fd, T0);
    assert_int_equal(sweep_at(r, now), 0); /* a first look */
    assert_int_equal(word(r), idle_word(now, IDLE_ARMED));
    assert_int_equal(recv(r->peer, b, sizeof(b), 0), sizeof(b)); /* it took one of the two */
    assert_int_equal(sweep_at(r, now + LIMIT_MS), 0);
    assert_int_equal(word(r), idle_word(now + LIMIT_MS, IDLE_ARMED));
    assert_int_equal(sweep_at(r, now + 2 * LIMIT_MS), 1); /* nothing taken since */
    assert_int_equal(word(r), idle_word(now + LIMIT_MS, IDLE_EXPIRED));
}

/* A drain looks at every armed connection, idle or not: one that is not past its time is
 * claimed and handed back as it was, and stays open. */
static void test_drain_hands_back_what_is_not_idle(void **state)
{
    struct rig *r = *state;

    r->s.draining = 1;
    idle_arm(&r->s, r->fd, T0);
    assert_int_equal(sweep_at(r, T0 + LIMIT_MS / 2), 0);
    assert_int_equal(word(r), idle_word(T0, IDLE_ARMED));
    assert_int_equal(r->s.next_sweep_ms, T0 + LIMIT_MS / 2 + 25); /* a stop looks every 25 ms */
    assert_false(peer_sees_eof(r));
}

/* A lingering close (Lua's conn:close() with the peer still sending) whose peer has every byte
 * of the reply ends during a stop as soon as the sweep looks, before its time; outside a stop it
 * waits for its time. */
static void test_drain_ends_a_delivered_linger(void **state)
{
    struct rig *r = *state;
    struct conn *lc = conn_new(r->fd, CONN_LUA);

    assert_non_null(lc);
    free(r->c);
    r->s.table[r->fd] = r->c = lc;
    lc->phase = CONN_PH_LINGER;
    idle_arm(&r->s, r->fd, T0);
    assert_int_equal(sweep_at(r, T0 + LIMIT_MS / 2), 0);
    assert_int_equal(word(r), idle_word(T0, IDLE_ARMED));
    r->s.draining = 1;
    assert_int_equal(sweep_at(r, T0 + LIMIT_MS / 2), 1);
    assert_int_equal(word(r), idle_word(T0, IDLE_EXPIRED));
    assert_true(peer_sees_eof(r));
}

/* Without --idle-timeout, --proxy-protocol or a connection that was sent a FIN, the sweep does
 * nothing (Lua's lingering close counts in nwrclosed). */
static void test_sweep_off_without_its_options(void **state)
{
    struct rig *r = *state;

    r->o.idle_ms = 0;
    idle_arm(&r->s, r->fd, T0);
    assert_int_equal(sweep_at(r, T0 + 100 * LIMIT_MS), 0);
    assert_int_equal(word(r), idle_word(T0, IDLE_ARMED));
    r->s.nwrclosed = 1;
    assert_int_equal(sweep_at(r, T0 + 100 * LIMIT_MS), 1);
}

struct taker {
    struct rig *r;
    bool expired;
    int done; /* atomic */
};

static void *take_main(void *arg)
{
    struct taker *t = arg;

    t->expired = idle_take(&t->r->s, t->r->fd);
    __atomic_store_n(&t->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* A worker handed a CLAIMED connection waits until the sweeper hands it back, and then takes
 * what it was handed: here EXPIRED. (Were it to take the claim, it would be done at once.) */
static void test_take_waits_out_a_claim(void **state)
{
    struct rig *r = *state;
    struct taker t = {.r = r};
    struct timespec pause = {0, 50 * 1000000L};
    pthread_t tid;

    r->s.idle[r->fd] = idle_word(T0, IDLE_CLAIMED);
    assert_int_equal(pthread_create(&tid, NULL, take_main, &t), 0);
    nanosleep(&pause, NULL);
    assert_int_equal(__atomic_load_n(&t.done, __ATOMIC_ACQUIRE), 0);
    __atomic_store_n(&r->s.idle[r->fd], idle_word(T0, IDLE_EXPIRED), __ATOMIC_RELEASE);
    assert_int_equal(pthread_join(tid, NULL), 0);
    assert_true(t.expired);
    assert_int_equal(word(r), idle_word(T0, IDLE_OWNED));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_arm_take_rearm, setup, teardown),
        cmocka_unit_test_setup_teardown(test_armed_expires_at_its_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sweep_waits_half_a_tick, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sweep_takes_only_armed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_waiting_event_is_handed_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_send_queue_falling_is_progress, setup, teardown),
        cmocka_unit_test_setup_teardown(test_drain_hands_back_what_is_not_idle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_drain_ends_a_delivered_linger, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sweep_off_without_its_options, setup, teardown),
        cmocka_unit_test_setup_teardown(test_take_waits_out_a_claim, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
