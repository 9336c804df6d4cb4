/* Unit tests of net: the accept4 wrapper's EINTR/ECONNABORTED/EAGAIN/EMFILE paths (accept4
 * faked through -Wl,--wrap), setsockopt failures in net_listen (setsockopt wrapped), real
 * listening sockets on loopback, and the local and peer names of a socket. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net.h"

static int script_ret[16], script_err[16], nsteps, istep;
static int last_flags;

int __real_accept4(int fd, struct sockaddr *a, socklen_t *l, int flags);
int __wrap_accept4(int fd, struct sockaddr *a, socklen_t *l, int flags);
int __wrap_accept4(int fd, struct sockaddr *a, socklen_t *l, int flags)
{
    if (nsteps == 0)
        return __real_accept4(fd, a, l, flags);
    last_flags = flags;
    assert_true(istep < nsteps);
    errno = script_err[istep];
    return script_ret[istep++];
}

/* setsockopt fails with fail_sockopt_err for the option fail_sockopt (0: none fails). */
static int fail_sockopt, fail_sockopt_err, sockopt_calls;

int __real_setsockopt(int fd, int level, int name, const void *v, socklen_t len);
int __wrap_setsockopt(int fd, int level, int name, const void *v, socklen_t len);
int __wrap_setsockopt(int fd, int level, int name, const void *v, socklen_t len)
{
    sockopt_calls++;
    if (fail_sockopt && name == fail_sockopt) {
        errno = fail_sockopt_err;
        return -1;
    }
    return __real_setsockopt(fd, level, name, v, len);
}

static void script(int ret, int err)
{
    script_ret[nsteps] = ret;
    script_err[nsteps++] = err;
}

static int reset(void **state)
{
    (void)state;
    nsteps = istep = 0;
    fail_sockopt = fail_sockopt_err = sockopt_calls = 0;
    return 0;
}

static void fd_ok_and_close(int fd, const char *err)
{
    if (fd < 0)
        fail_msg("net_listen failed: %s", err);
    close(fd);
}

static void test_accept_retries_eintr_and_aborted(void **state)
{
    (void)state;
    script(-1, EINTR);
    script(-1, ECONNABORTED);
    script(42, 0);
    assert_int_equal(net_accept(3), 42);
    assert_int_equal(istep, 3);
    assert_int_equal(last_flags, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

static void test_accept_errors(void **state)
{
    (void)state;
    script(-1, EAGAIN);
    script(-1, EMFILE);
    script(-1, ENFILE);
    script(-1, ENOBUFS);
    script(-1, EPERM);
    assert_int_equal(net_accept(3), -EAGAIN);
    assert_int_equal(net_accept(3), -EMFILE);
    assert_int_equal(net_accept(3), -ENFILE);
    assert_int_equal(net_accept(3), -ENOBUFS);
    assert_int_equal(net_accept(3), -EPERM);
}

static void test_listen_and_port_in_use(void **state)
{
    char err[256], name[64], addr[80];
    int a, b;

    (void)state;
    a = net_listen("127.0.0.1:0", 128, err, sizeof(err));
    assert_true(a >= 0);
    net_local_name(a, name, sizeof(name));
    assert_true(strncmp(name, "127.0.0.1:", 10) == 0);
    assert_int_equal(net_accept(a), -EAGAIN); /* real accept4: non-blocking, empty queue */
    snprintf(addr, sizeof(addr), "%s", name);
    b = net_listen(addr, 128, err, sizeof(err));
    assert_int_equal(b, -EADDRINUSE);
    if (!strstr(err, "port in use") || !strstr(err, addr) || strchr(err, '\n'))
        fail_msg("bad message: %s", err);
    close(a);
}

static void test_listen_ipv6_and_bad_host(void **state)
{
    char err[256], name[64];
    int fd;

    (void)state;
    fd = net_listen("[::1]:0", 16, err, sizeof(err));
    if (fd >= 0) {
        net_local_name(fd, name, sizeof(name));
        assert_true(strncmp(name, "[::1]:", 6) == 0);
        close(fd);
    } else {
        /* a kernel without IPv6 on loopback: the error must still be one clear line */
        assert_null(strchr(err, '\n'));
    }
    assert_true(net_listen("no-such-host.invalid:1", 16, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "cannot resolve"));
    assert_true(net_listen("192.0.2.1:0", 16, err, sizeof(err)) < 0); /* not ours */
    assert_non_null(strstr(err, "no such local address"));
}

/* The peer's and the local address are one format: the client's local name is the server
 * side's peer name. "?" without a connection or for a family other than IPv4/IPv6. */
static void peer_is_local_of_client(const char *listen)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    char err[256], srv_name[80], peer[80], local[80];
    int lfd, cfd, afd;

    lfd = net_listen(listen, 16, err, sizeof(err));
    if (lfd < 0) {
        assert_null(strchr(err, '\n')); /* a kernel without IPv6 on loopback */
        return;
    }
    assert_int_equal(getsockname(lfd, (struct sockaddr *)&ss, &sl), 0);
    cfd = socket(ss.ss_family, SOCK_STREAM, 0);
    assert_true(cfd >= 0);
    assert_int_equal(connect(cfd, (struct sockaddr *)&ss, sl), 0);
    while ((afd = net_accept(lfd)) == -EAGAIN)
        usleep(1000);
    assert_true(afd >= 0);
    net_peer_name(afd, peer, sizeof(peer));
    net_local_name(cfd, local, sizeof(local));
    assert_string_equal(peer, local);
    net_peer_name(cfd, peer, sizeof(peer));
    net_local_name(lfd, srv_name, sizeof(srv_name));
    assert_string_equal(peer, srv_name);
    assert_true(strncmp(peer, listen, strlen(listen) - 1) == 0); /* "127.0.0.1:", "[::1]:" */
    close(afd);
    close(cfd);
    close(lfd);
}

static void test_peer_name(void **state)
{
    char name[80];
    int sv[2];

    (void)state;
    peer_is_local_of_client("127.0.0.1:0");
    peer_is_local_of_client("[::1]:0");
    net_peer_name(-1, name, sizeof(name));
    assert_string_equal(name, "?");
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    net_peer_name(sv[0], name, sizeof(name));
    assert_string_equal(name, "?");
    net_local_name(sv[0], name, sizeof(name));
    assert_string_equal(name, "?");
    close(sv[0]);
    close(sv[1]);
}

/* Defect 16: net_listen ignored setsockopt's result. A failed IPV6_V6ONLY bound [::]:P
 * dual-stack (it also took IPv4 connections and claimed 0.0.0.0:P) without a word. Now no
 * listener exists, and the one-line error names the option and the errno. */
static void test_defect16_ipv6_v6only_failure_is_fatal(void **state)
{
    char err[256] = "";
    int fd;

    (void)state;
    fail_sockopt = IPV6_V6ONLY;
    fail_sockopt_err = ENOPROTOOPT;
    fd = net_listen("[::1]:0", 16, err, sizeof(err));
    if (fd >= 0) {
        close(fd);
        fail_msg("net_listen([::1]:0) returned a listener although IPV6_V6ONLY failed");
    }
    if (fd == -EAFNOSUPPORT && sockopt_calls == 0)
        skip(); /* no IPv6 in this kernel: the option is never reached */
    assert_int_equal(fd, -ENOPROTOOPT);
    if (!strstr(err, "IPV6_V6ONLY") || !strstr(err, strerror(ENOPROTOOPT)) ||
        !strstr(err, "[::1]:0") || strchr(err, '\n'))
        fail_msg("want one line naming [::1]:0, IPV6_V6ONLY and the error, got: %s", err);
}

/* Defect 16, the other options: SO_REUSEADDR and TCP_NODELAY failing are reported the same way
 * (and an IPv4 listener never asks for IPV6_V6ONLY). */
static void test_defect16_setsockopt_failure_is_fatal(void **state)
{
    static const struct {
        int name, err;
        const char *what;
    } cases[] = {{SO_REUSEADDR, ENOMEM, "SO_REUSEADDR"}, {TCP_NODELAY, EINVAL, "TCP_NODELAY"}};
    char err[256];

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int fd;

        fail_sockopt = cases[i].name;
        fail_sockopt_err = cases[i].err;
        err[0] = '\0';
        fd = net_listen("127.0.0.1:0", 16, err, sizeof(err));
        if (fd >= 0) {
            close(fd);
            fail_msg("net_listen returned a listener although %s failed", cases[i].what);
        }
        assert_int_equal(fd, -cases[i].err);
        if (!strstr(err, cases[i].what) || !strstr(err, strerror(cases[i].err)) ||
            strchr(err, '\n'))
            fail_msg("want one line naming %s, got: %s", cases[i].what, err);
    }
    fail_sockopt = IPV6_V6ONLY; /* not asked for on IPv4 */
    fail_sockopt_err = ENOPROTOOPT;
    fd_ok_and_close(net_listen("127.0.0.1:0", 16, err, sizeof(err)), err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_accept_retries_eintr_and_aborted, reset),
        cmocka_unit_test_setup(test_accept_errors, reset),
        cmocka_unit_test_setup(test_listen_and_port_in_use, reset),
        cmocka_unit_test_setup(test_listen_ipv6_and_bad_host, reset),
        cmocka_unit_test_setup(test_peer_name, reset),
        cmocka_unit_test_setup(test_defect16_ipv6_v6only_failure_is_fatal, reset),
        cmocka_unit_test_setup(test_defect16_setsockopt_failure_is_fatal, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
