/* ports: how many ephemeral ports a run can get from each source address, from /proc. */
#ifndef LFE_PORTS_H
#define LFE_PORTS_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* TIME_WAIT lasts TCP_TIMEWAIT_LEN (include/net/tcp.h), 60 s fixed; tcp_fin_timeout is the
 * FIN_WAIT2 timeout, not this. */
#define PORTS_TW_SECONDS 60

/* The kernel's settings that decide which ports connect() may take. */
struct ports_sys {
    int lo, hi;                  /* net.ipv4.ip_local_port_range, inclusive */
    uint8_t reserved[65536 / 8]; /* net.ipv4.ip_local_reserved_ports, one bit a port */
    int tw_reuse;                /* net.ipv4.tcp_tw_reuse: 0, 1 (always), 2 (loopback) */
    int tw_reuse_delay_ms;       /* net.ipv4.tcp_tw_reuse_delay (6.13+; 1000 before) */
    bool timestamps;             /* net.ipv4.tcp_timestamps: TIME_WAIT reuse needs them */
    long clk_tck;                /* USER_HZ: the unit of /proc/net/tcp's timers */
};

/* One source address's ports, for a connection to the report's target. */
struct ports_src {
    struct in6_addr addr; /* IPv4 as ::ffff:a.b.c.d */
    long range;           /* ports in the ephemeral range, reserved ones left out */
    long blocked;         /* of those, unusable for a new connection to the target now */
    long blocked_tw;      /* ... of which by TIME_WAIT to the target (they expire) */
    long free;            /* range - blocked */
    long tw;              /* TIME_WAIT sockets from addr with a port in range, any destination */
    long inuse;           /* other sockets from addr with a port in range, any destination */
    uint32_t tw_expiry[PORTS_TW_SECONDS + 1]; /* blocked_tw by whole seconds left, rounded up */
    uint8_t *why;                             /* per port of the range; internal */
};

/* What a run against one target can get. Owned by the caller; ports_free() releases src. One
 * thread. */
struct ports_report {
    struct ports_sys sys;
    struct in6_addr target; /* IPv4 as ::ffff:a.b.c.d */
    uint16_t target_port;
    bool target_v4;
    bool tw_reusable; /* TIME_WAIT to the target is taken over by connect() (tcp_tw_reuse) */
    int nsources;
    struct ports_src *src;     /* nsources entries */
    uint8_t listen[65536 / 8]; /* ports with a listener, any address and family */
    long listeners;            /* listening ports in the range: blocked for every source */
    long sockets;              /* socket lines parsed */
};

/* Parses ip_local_port_range text ("32768\t60999\n"). Returns 0 or -EINVAL. Pure. */
int ports_parse_range(const char *text, int *lo, int *hi);

/* Sets a bit per port of ip_local_reserved_ports text ("1000-1005,2000\n", or empty). Returns
 * how many ports, or -EINVAL (bits already set stay set). Pure. */
int ports_parse_reserved(const char *text, uint8_t reserved[65536 / 8]);

/* Defaults as a 6.x kernel ships them: 32768-60999, none reserved, tw_reuse 2, 1000 ms,
 * timestamps on, USER_HZ 100. */
void ports_sys_default(struct ports_sys *sys);

/* Starts a report for a connection to target from sources (IPv4 as ::ffff:a.b.c.d). Returns 0,
 * -EINVAL (no sources, a target that is neither AF_INET nor AF_INET6, lo > hi) or -ENOMEM. On
 * 0, ports_free() must follow. Pure. */
int ports_init(struct ports_report *r, const struct ports_sys *sys,
               const struct sockaddr_storage *target, const struct in6_addr *sources, int nsources);

/* Takes the socket lines of /proc/net/tcp or /proc/net/tcp6 text (the header line and lines it
 * cannot read are skipped; a text may end in the middle of no line: pass whole lines). The
 * address columns are as the kernel prints them, the words in this machine's byte order. Any
 * number of calls, then ports_finish(). Returns the lines taken. Pure. */
long ports_parse_tcp(struct ports_report *r, const char *text, size_t len);

/* Counts each source's ports from what was parsed. Pure. */
void ports_finish(struct ports_report *r);

/* Releases what ports_init() allocated; r may then be initialised again. */
void ports_free(struct ports_report *r);

/* The whole check from this machine: the sysctls under /proc/sys/net/ipv4, the kernel's own
 * source address when nsources is 0 (the one a UDP socket connect()ed to target gets: for a
 * target in 127/8 that is 127.0.0.1), /proc/net/tcp and tcp6. Returns 0 (ports_free() must
 * follow) or -errno (-EAFNOSUPPORT: IPv4 sources and an IPv6 target; /proc unreadable). */
int ports_read(struct ports_report *r, const struct sockaddr_storage *target,
               const struct in_addr *sources, int nsources);

/* What the run asks for. */
struct ports_need {
    int conns;        /* -c: connections (long) or connections in flight (short) */
    bool short_mode;  /* one connection a request; lfbench closes first: TIME_WAIT is ours */
    double rate;      /* -R requests (short: connections) a second; 0 = closed loop */
    bool have_source; /* --source given: the addresses are the user's to widen */
};

enum ports_verdict {
    PORTS_OK = 0,   /* nothing worth a line */
    PORTS_WARN = 1, /* the run can get its ports, but slowly or not for long */
    PORTS_SHORT = 2 /* a long-mode run cannot get its ports: an error */
};

/* Judges the report against need and writes one line (no "lfbench: " in front, no newline)
 * saying what is short, why, and the remedy: more source addresses (a --source range to use),
 * a wider net.ipv4.ip_local_port_range, tcp_tw_reuse, or the seconds to wait for TIME_WAIT.
 * line is "" with PORTS_OK. Pure. */
enum ports_verdict ports_advice(const struct ports_report *r, const struct ports_need *need,
                                char *line, size_t len);

#endif /* LFE_PORTS_H */
