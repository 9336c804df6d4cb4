/* mock_sys: scripted read(2), send(2), getsockopt(SO_ERROR) and malloc for the state-machine
 * tests (mock_sys.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "mock_sys.h"

struct mock_sys mock;

void mock_reset(void)
{
    memset(&mock, 0, sizeof(mock));
    for (size_t i = 0; i < sizeof(mock.in); i++)
        mock.in[i] = (unsigned char)(i * 131 + (i >> 8));
    mock.on = true;
}

void mock_read(ssize_t ret, int err)
{
    assert_true(mock.nr < MOCK_STEPS);
    mock.rsteps[mock.nr++] = (struct mock_step){ret, err};
}

void mock_send(ssize_t ret, int err)
{
    assert_true(mock.nw < MOCK_STEPS);
    mock.wsteps[mock.nw++] = (struct mock_step){ret, err};
}

ssize_t __real_read(int fd, void *buf, size_t count);
ssize_t __wrap_read(int fd, void *buf, size_t count);
ssize_t __wrap_read(int fd, void *buf, size_t count)
{
    struct mock_step s;

    if (!mock.on)
        return __real_read(fd, buf, count);
    if (mock.ir < MOCK_STEPS)
        mock.read_asks[mock.ir] = count;
    if (mock.ir >= mock.nr) { /* script exhausted: the socket is empty */
        mock.ir++;
        errno = EAGAIN;
        return -1;
    }
    s = mock.rsteps[mock.ir++];
    if (s.ret < 0) {
        errno = s.err;
        return -1;
    }
    if ((size_t)s.ret > count)
        s.ret = (ssize_t)count;
    memcpy(buf, mock.in + mock.in_off, (size_t)s.ret);
    mock.in_off += (size_t)s.ret;
    return s.ret;
}

ssize_t __real_send(int fd, const void *buf, size_t len, int flags);
ssize_t __wrap_send(int fd, const void *buf, size_t len, int flags);
ssize_t __wrap_send(int fd, const void *buf, size_t len, int flags)
{
    struct mock_step s = {(ssize_t)len, 0};

    if (!mock.on)
        return __real_send(fd, buf, len, flags);
    assert_true(flags & MSG_NOSIGNAL);
    if (mock.iw < mock.nw)
        s = mock.wsteps[mock.iw++];
    if (s.ret < 0) {
        errno = s.err;
        return -1;
    }
    if ((size_t)s.ret > len)
        s.ret = (ssize_t)len;
    assert_true(mock.out_len + (size_t)s.ret <= sizeof(mock.out));
    memcpy(mock.out + mock.out_len, buf, (size_t)s.ret);
    mock.out_len += (size_t)s.ret;
    return s.ret;
}

int __real_getsockopt(int fd, int level, int name, void *val, socklen_t *len);
int __wrap_getsockopt(int fd, int level, int name, void *val, socklen_t *len);
int __wrap_getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
    if (!mock.on)
        return __real_getsockopt(fd, level, name, val, len);
    assert_int_equal(level, SOL_SOCKET);
    assert_int_equal(name, SO_ERROR);
    *(int *)val = mock.sockerr;
    *len = sizeof(int);
    return 0;
}

void *__real_malloc(size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_malloc(size_t n)
{
    if (mock.fail_malloc) {
        mock.fail_malloc = false;
        return NULL;
    }
    return __real_malloc(n);
}
