/* btune_ns: lfbench tune's network namespaces, and the processes it runs in them. */
#ifndef LFE_BTUNE_NS_H
#define LFE_BTUNE_NS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* A namespace of its own: a holder process made it (unshare(CLONE_NEWNET)), brought its
 * loopback up and applied the settings there; it lives until btune_ns_close, or until the
 * process that opened it dies (PR_SET_PDEATHSIG). No name under /run/netns: when its last
 * process ends, the kernel frees it, TIME_WAIT sockets and all. Owned by the caller's thread. */
struct btune_ns {
    pid_t holder; /* 0: not open */
    int ctl;      /* the pipe whose end tells the holder to go */
    int nsfd;     /* /proc/HOLDER/ns/net, close-on-exec: what the children setns() into */
    char id[64];  /* its link text, "net:[4026532...]": how a process in it is recognised */
};

/* A key to write (value) or to read back (value is filled). */
struct btune_kv {
    const char *key; /* dotted, as sysctl writes it: net.ipv4.tcp_tw_reuse */
    char value[128]; /* to write; after a read, what the namespace holds, blanks folded */
    char access;     /* after a read: 'w' writable, 'r' read-only, '-' absent in a namespace */
};

/* What the caller's own namespace (the host, for lfbench tune) has of key: 'w' writable, 'r'
 * read-only, '-' absent. */
char btune_ns_access(const char *key);

/* Opens ns: writes set[0..nset-1] in order from inside it, then reads get[0..nget-1] there.
 * Returns 0, or -1 with one line in err: the namespace could not be made (not root), or the
 * kernel refused a value (err names the key, the value and the kernel's reason); nothing is left
 * behind then. */
int btune_ns_open(struct btune_ns *ns, const struct btune_kv *set, int nset, struct btune_kv *get,
                  int nget, char *err, size_t errlen);

/* Starts argv (argv[0] searched in PATH) inside ns as the leader of a process group of its
 * own, stdin from /dev/null, stdout and stderr to logfd, killed when the caller dies. Returns
 * its pid, or -errno when it could not be started at all (the exec's errno). */
pid_t btune_ns_spawn(const struct btune_ns *ns, char *const argv[], int logfd);

/* Whether a TCP socket of ns listens on port (its /proc/HOLDER/net/tcp and tcp6). */
bool btune_ns_listening(const struct btune_ns *ns, int port);

/* The directory of ns's /proc/net ("/proc/HOLDER/net"), for kstat_read. */
void btune_ns_procnet(const struct btune_ns *ns, char *buf, size_t len);

/* The CPU seconds of the processes of group pgid, user and system, their reaped children's
 * included; -1 when none is left. */
double btune_ns_group_cpu(pid_t pgid);

/* Whether pid, a child of the caller, is still running; when it has ended, *status is its wait
 * status and it is reaped. */
bool btune_ns_alive(pid_t pid, int *status);

/* Stops the group pid leads: SIGTERM, then SIGKILL when it is not gone after grace_ms; reaps
 * it. Its wait status in *status when it was still to be reaped (else -1). */
void btune_ns_stop(pid_t pid, int grace_ms, int *status);

/* Kills what is left in ns (a server that left its group, as a daemon does), ends the holder and
 * reaps them all: the namespace is gone. Safe on a closed one. */
void btune_ns_close(struct btune_ns *ns);

#endif /* LFE_BTUNE_NS_H */
