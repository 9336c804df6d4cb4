/* kstat: the kernel counters that explain a load test's bottleneck, read before and after. */
#ifndef LFE_KSTAT_H
#define LFE_KSTAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum kstat_id {
    KS_LISTEN_OVERFLOWS, /* TcpExt: a full accept queue dropped a SYN or final ACK */
    KS_LISTEN_DROPS,     /* TcpExt: any drop at a listener, overflows included */
    KS_SYNCOOKIES_SENT,  /* TcpExt: a full SYN queue answered with a cookie */
    KS_TW_OVERFLOW,      /* TcpExt TCPTimeWaitOverflow: tcp_max_tw_buckets reached */
    KS_TW_RECYCLED,      /* TcpExt TWRecycled: connect() took over a TIME_WAIT port */
    KS_ABORT_ON_DATA,    /* TcpExt TCPAbortOnData: close with SO_LINGER {1,0}, or unread data */
    KS_ACTIVE_OPENS,     /* Tcp: connect()s */
    KS_PASSIVE_OPENS,    /* Tcp: connections accepted by the kernel */
    KS_RETRANS_SEGS,     /* Tcp: segments sent again */
    KS_ESTAB_RESETS,     /* Tcp: established connections reset */
    KS_SOFTNET_DROPPED,  /* softnet_stat column 2, all CPUs: netdev_max_backlog full */
    KS_SOFTNET_SQUEEZED, /* softnet_stat column 3: softirq out of budget with work left */
    KS_TCP_TW,           /* sockstat: TIME_WAIT sockets now (a level, not a counter) */
    KS_TCP_INUSE,        /* sockstat: TCP sockets in use now (a level) */
    KS_N
};

struct kstat {
    uint64_t v[KS_N];
    bool have[KS_N]; /* false: this kernel or namespace does not show it */
};

extern const char *const kstat_name[KS_N];

/* Takes the values of section ("TcpExt", "Tcp") from the name/value line pairs of
 * /proc/net/netstat or /proc/net/snmp text. Returns how many it found. Pure. */
int kstat_parse_pairs(const char *text, const char *section, struct kstat *k);

/* Sums the dropped and time_squeeze columns of /proc/net/softnet_stat text. Pure. */
int kstat_parse_softnet(const char *text, struct kstat *k);

/* Takes the TCP line of /proc/net/sockstat text. Pure. */
int kstat_parse_sockstat(const char *text, struct kstat *k);

/* Reads the four files under dir ("/proc/net"). Returns how many values it found. */
int kstat_read(const char *dir, struct kstat *k);

/* d = after - before for the counters; the levels are after's. */
void kstat_delta(const struct kstat *before, const struct kstat *after, struct kstat *d);

/* What the run's own errors add to the picture. */
struct kstat_run {
    uint64_t addrnotavail; /* connect() found no ephemeral port */
    bool linger0;          /* --linger0: resets are what was asked for */
    bool short_mode;
    int nsources;            /* --source addresses given: a hint does not offer what was done */
    const char *sysctl_root; /* "/proc/sys" of the machine that ran; NULL for a result read back
                                from a file, where the hints name the keys without a verdict */
    uint64_t connects;       /* connect() calls lfbench made over the run, refused ones too (0:
                              * unknown): what its own share of ActiveOpens can be */
    double wall_s;           /* the run's seconds, the span of the counters */
    bool loopback;           /* the target is a loopback address (tcp_tw_reuse 2 reuses there) */
    bool root;               /* the effective uid is 0: a command is given bare, not with sudo */
};

/* Writes one line per counter that moved and what it likely means ("hint         ..."), or a
 * line saying nothing overflowed. A hint that names a limit is given only when the counters show
 * it was reached (the port range: connect() found no port, or the connections came at half the
 * range's ceiling or more); one that names a sysctl gives lfepolld --check-sysctl's verdict on
 * it (tune_judge on the compiled-in sysctl.conf under r->sysctl_root), so the two never call one
 * value different things, and proposes no value already set (nothing wider than 1024-65535).
 * When the namespace's ActiveOpens or PassiveOpens moved far past lfbench's own connect()
 * calls, one line says other traffic moved the counters instead of the hints they would give.
 * Returns the number of hints. With json, writes them as a JSON array of strings instead. */
int kstat_hints(FILE *out, const struct kstat *d, const struct kstat_run *r, bool json);

#endif /* LFE_KSTAT_H */
