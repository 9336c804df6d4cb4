/* Unit tests of cphase: which connections are timed (a measured window's, long mode's opening;
 * not the warm-up's, nor those between a sweep's steps), each phase recorded once per
 * connection in the run's and the second's histograms, the first byte only after the first
 * request was written whole, the handshakes counted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "bthread.h"
#include "cphase.h"

static struct bopt opt;

static struct bthread *new_thread(enum bmode m)
{
    struct bthread *t = calloc(1, sizeof(*t));

    assert_non_null(t);
    memset(&opt, 0, sizeof(opt));
    opt.mode = m;
    t->o = &opt;
    for (int p = 0; p < CP_N; p++) {
        hist_init(&t->ph[p]);
        hist_init(&t->cur_ph[p]);
    }
    return t;
}

/* A connection established at now: whether it was timed, and its connect recorded so. */
static bool connect_at(struct bthread *t, struct cphase_conn *c, uint64_t now)
{
    uint64_t before = t->ph[CP_CONNECT].count;

    cphase_connected(t, c, 1000, now);
    assert_int_equal(t->ph[CP_CONNECT].count - before, c->timed ? 1 : 0);
    return c->timed;
}

static void test_timed_windows(void **state)
{
    struct bthread *t = new_thread(MODE_LONG);
    struct cphase_conn c;

    (void)state;
    t->phase = PH_IDLE; /* long mode's opening: no step yet */
    assert_true(connect_at(t, &c, 5));
    t->step = 1;
    t->phase = PH_RUN;
    t->t_warm = 100;
    assert_false(connect_at(t, &c, 99)); /* the warm-up */
    assert_true(connect_at(t, &c, 100));
    t->phase = PH_DRAIN; /* a reconnect while the step drains: as the connects count it */
    assert_true(connect_at(t, &c, 200));
    t->phase = PH_IDLE; /* between a sweep's steps */
    assert_false(connect_at(t, &c, 300));
    free(t);
    t = new_thread(MODE_SHORT);
    t->phase = PH_IDLE; /* short mode has no opening */
    assert_false(connect_at(t, &c, 5));
    t->phase = PH_RUN;
    t->step = 1;
    t->t_warm = 100;
    assert_false(connect_at(t, &c, 50));
    assert_true(connect_at(t, &c, 150));
    assert_int_equal(t->ph[CP_CONNECT].count, 1);
    assert_int_equal(t->cur_ph[CP_CONNECT].count, 1); /* this second's too */
    assert_int_equal(t->ph[CP_CONNECT].max, 1000);
    free(t);
}

static void test_first_byte_once(void **state)
{
    struct bthread *t = new_thread(MODE_LONG);
    struct cphase_conn c;
    uint64_t sent;

    (void)state;
    cphase_connected(t, &c, 1000, 1);
    cphase_read(t, &c, now_ns()); /* bytes before the first request is written: not its answer */
    assert_int_equal(t->ph[CP_FIRST_BYTE].count, 0);
    sent = now_ns();
    cphase_sent(&c);
    cphase_sent(&c); /* the next write does not move the start */
    assert_true(c.first_sent >= sent);
    cphase_read(t, &c, c.first_sent + 7000);
    cphase_read(t, &c, c.first_sent + 9000); /* later reads are not first bytes */
    assert_int_equal(t->ph[CP_FIRST_BYTE].count, 1);
    assert_int_equal(t->ph[CP_FIRST_BYTE].max, 7000);
    assert_int_equal(t->cur_ph[CP_FIRST_BYTE].count, 1);
    /* a connection that is not timed records nothing */
    t->step = 1;
    t->phase = PH_RUN;
    t->t_warm = UINT64_MAX;
    cphase_connected(t, &c, 1000, 2);
    cphase_sent(&c);
    cphase_read(t, &c, now_ns());
    assert_int_equal(t->ph[CP_FIRST_BYTE].count, 1);
    assert_int_equal(t->ph[CP_CONNECT].count, 1);
    free(t);
}

static void test_handshakes_counted(void **state)
{
    struct bthread *t = new_thread(MODE_SHORT);
    struct cphase_conn warm, timed;

    (void)state;
    t->step = 1;
    t->phase = PH_RUN;
    t->t_warm = 100;
    cphase_connected(t, &warm, 1000, 50);
    cphase_handshake(t, &warm, 400000, true); /* the warm-up's: not recorded */
    cphase_connected(t, &timed, 1000, 150);
    cphase_handshake(t, &timed, 300000, true);
    cphase_connected(t, &timed, 1000, 160);
    cphase_handshake(t, &timed, 500000, false);
    assert_int_equal(t->ph[CP_HANDSHAKE].count, 2);
    assert_int_equal(t->resumed, 1);
    assert_int_equal(t->ph[CP_HANDSHAKE].min, 300000);
    assert_int_equal(t->ph[CP_HANDSHAKE].max, 500000);
    assert_string_equal(cphase_json[CP_HANDSHAKE], "handshake_latency");
    assert_string_equal(cphase_tag[CP_FIRST_BYTE], "first_byte");
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timed_windows),
        cmocka_unit_test(test_first_byte_once),
        cmocka_unit_test(test_handshakes_counted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
