/* sysc: the hot path's system calls without glibc's cancellation bracket.
 *
 * In a process with more than one thread, glibc wraps every cancellation point (read, send,
 * epoll_wait, accept4, close) in two atomic compare-and-swaps on the calling thread's cancel
 * state (__pthread_enable_asynccancel / __pthread_disable_asynccancel). lfepolld never cancels a
 * thread, so that is pure cost, and it shows in the server's profile of long requests
 * (docs/bench.md, "Where the server's time goes", has how much). syscall(2) is a plain call into
 * the kernel, errno set as usual. Used only where a call is made per request or per connection;
 * everything else keeps the libc names. lfbench's engine threads use them the same way. */
#ifndef LFE_SYSC_H
#define LFE_SYSC_H

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#ifdef __has_feature
#define SYSC_HAS_FEATURE(x) __has_feature(x)
#else
#define SYSC_HAS_FEATURE(x) 0
#endif

/* The libc names where something must see the call: the unit tests' --wrap mocks
 * (-DLFE_SYSC_LIBC), and the sanitizers, whose interceptors check read's buffer (ASan) and
 * order threads by the file descriptors they use (TSan). */
#if defined(LFE_SYSC_LIBC) || defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) ||     \
    SYSC_HAS_FEATURE(address_sanitizer) || SYSC_HAS_FEATURE(thread_sanitizer)
#define sysc_read read
#define sysc_send send
#define sysc_write write
#define sysc_epoll_wait epoll_wait
#define sysc_accept4(fd, flags) accept4(fd, NULL, NULL, flags)
#define sysc_close close
#define sysc_connect connect
#else
static inline ssize_t sysc_read(int fd, void *buf, size_t n)
{
    return syscall(SYS_read, fd, buf, n);
}

static inline ssize_t sysc_send(int fd, const void *buf, size_t n, int flags)
{
    return syscall(SYS_sendto, fd, buf, n, flags, NULL, 0);
}

static inline ssize_t sysc_write(int fd, const void *buf, size_t n)
{
    return syscall(SYS_write, fd, buf, n);
}

static inline int sysc_epoll_wait(int epfd, struct epoll_event *evs, int max, int timeout)
{
    /* epoll_pwait with no mask: epoll_wait itself is missing on arm64 */
    return (int)syscall(SYS_epoll_pwait, epfd, evs, max, timeout, NULL, 0);
}

static inline int sysc_accept4(int fd, int flags)
{
    return (int)syscall(SYS_accept4, fd, NULL, NULL, flags);
}

static inline int sysc_close(int fd)
{
    return (int)syscall(SYS_close, fd);
}

static inline int sysc_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
    return (int)syscall(SYS_connect, fd, addr, len);
}

#endif

#endif
