/* listeners: where lfepolld's listening sockets come from at start (systemd's socket activation,
 * a running instance's hand-over, or --listen with one SO_REUSEPORT shard per accept thread),
 * and the options each of them gets. */
#ifndef LFE_LISTENERS_H
#define LFE_LISTENERS_H

#include "opt.h"

#include <stdbool.h>
#include <stddef.h>

struct listeners {
    int fds[OPT_MAX_LFDS];     /* listening sockets, the shards of one address together */
    int n;                     /* how many */
    int first[OPT_MAX_LISTEN]; /* --listen i's first socket in fds (its shard 0) */
    int activated;             /* sockets from systemd ($LISTEN_FDS), used as they are */
    int admin_fd;              /* the --admin listener a predecessor handed over, or -1 */
    int tconn;                 /* --takeover: the predecessor to tell READY, or -1 */
    int reused;                /* sockets taken over... */
    int ntaken;                /* ...of those handed over */
    bool taken[OPT_MAX_LFDS];  /* fds[i] was handed over (its options set once it is ours) */
    bool tls[OPT_MAX_LFDS];    /* fds[i] speaks TLS: bound for a --listen-tls (or, from systemd,
                                * at the address of one) */
};

/* Fills l for o with naccept accept threads. Socket activation: the sockets systemd passed
 * (with --listen also given: an error). Otherwise, with --takeover, every socket the running
 * instance hands over that is bound where a --listen asks, all of its shards (closing one
 * would reset its queue); then each --listen address without one is bound afresh (a claim
 * first, so that shards never join another process's SO_REUSEPORT group), and shards are
 * added up to naccept beside sockets that carry SO_REUSEPORT. A handed socket bound where
 * --admin asks becomes admin_fd; the others are closed. Then --defer-accept and --fastopen on
 * each listener bound here (the handed ones are the predecessor's until it lets them go:
 * listeners_taken_over). Under socket activation nothing is set (a warning names the .socket
 * setting for each such option), --takeover and --listen are errors, and a socket is TLS when
 * a --listen-tls names its address (each --listen-tls must name one). Either way tls[i] says
 * which sockets speak TLS. Returns 0, or the exit status (1,
 * or 2 for a usage error) with one line in err; l then holds nothing open but tconn (the
 * caller closes it: the predecessor goes on). */
int listeners_acquire(struct listeners *l, const struct opt *o, int naccept, char *err,
                      size_t errlen);

/* Once the predecessor has been told READY (the handed sockets are this instance's alone):
 * --defer-accept and --fastopen on each of them as this instance's options say, set or not. */
void listeners_taken_over(const struct listeners *l, const struct opt *o);

/* Closes every socket of l (fds, admin_fd) and forgets them. */
void listeners_close(struct listeners *l);

/* One "listening on ADDR" line per address (its shards counted), the start's last word. */
void listeners_log(const struct listeners *l, const struct opt *o);

#endif /* LFE_LISTENERS_H */
