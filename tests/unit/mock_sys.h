/* mock_sys: read(2), send(2), getsockopt(SO_ERROR) and malloc faked through -Wl,--wrap for the
 * state-machine tests (test_conn, test_lconn). A test scripts each call's result; with
 * mock.on false every call goes to the real one (a test may mix fakes and real sockets). The
 * Makefile links mock_sys.o, and its --wrap flags, into every test that includes this header. */
#ifndef LFE_MOCK_SYS_H
#define LFE_MOCK_SYS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* A scripted syscall result: ret >= 0 is a byte count (read: bytes delivered from the peer's
 * stream; send: most bytes the socket takes), ret < 0 fails with err. */
struct mock_step {
    ssize_t ret;
    int err;
};

#define MOCK_STEPS 64

struct mock_sys {
    bool on; /* fake read/send/getsockopt */
    struct mock_step rsteps[MOCK_STEPS], wsteps[MOCK_STEPS];
    int nr, nw, ir, iw;                      /* scripted, and used so far */
    unsigned char in[1 << 20], out[1 << 20]; /* the peer's stream, and what came back */
    size_t in_off, out_len;
    size_t read_asks[MOCK_STEPS]; /* count argument of each read */
    int sockerr;                  /* SO_ERROR for getsockopt */
    bool fail_malloc;             /* the next malloc returns NULL */
};

extern struct mock_sys mock;

/* Resets every script and counter; fills the peer's stream with a pattern; turns the fakes on. */
void mock_reset(void);

/* The next read / send returns ret (or fails with err). Past the script a read says EAGAIN and
 * a send takes everything. */
void mock_read(ssize_t ret, int err);
void mock_send(ssize_t ret, int err);

#endif /* LFE_MOCK_SYS_H */
