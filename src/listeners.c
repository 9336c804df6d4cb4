/* listeners: where lfepolld's listening sockets come from at start, and their options. */
#include "listeners.h"

#include "log.h"
#include "net.h"
#include "sdnotify.h"
#include "takeover.h"
#include "tune.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int bind_shards(struct listeners *l, const struct opt *o, int i, int naccept, int *taken,
                       int ntaken, char *err, size_t errlen);

/* --listen i: the sockets handed over for it, else one bound afresh; then shards up to naccept;
 * each of them TLS when --listen i is a --listen-tls. Returns 0 or -1 with err. */
static int bind_address(struct listeners *l, const struct opt *o, int i, int naccept, int *taken,
                        int ntaken, char *err, size_t errlen)
{
    int first = l->n, rc;

    l->first[i] = l->n;
    rc = bind_shards(l, o, i, naccept, taken, ntaken, err, errlen);
    for (int k = first; k < l->n; k++)
        l->tls[k] = o->listen_tls[i];
    return rc;
}

/* bind_address's sockets for --listen i. Returns 0 or -1 with err. */
static int bind_shards(struct listeners *l, const struct opt *o, int i, int naccept, int *taken,
                       int ntaken, char *err, size_t errlen)
{
    int first = l->n, fd;

    /* every socket the running instance handed over bound where this --listen asks, all of its
     * shards, whatever our count: closing one would reset what waits in its queue */
    for (int k = 0; k < ntaken; k++)
        if (taken[k] >= 0 && takeover_match(taken[k], o->listen[i]) && l->n < OPT_MAX_LFDS) {
            l->taken[l->n] = true;
            l->fds[l->n++] = taken[k];
            taken[k] = -1;
            l->reused++;
        }
    if (l->n == first && l->n == OPT_MAX_LFDS) {
        /* the shards handed over (all kept: closing one resets its queue) filled fds */
        snprintf(err, errlen,
                 "--listen %s: no room for its listening socket: the %d sockets handed over by "
                 "--takeover fill the %d one instance holds; take over with fewer --listen "
                 "addresses, or restart the running instance with fewer --accept-threads",
                 o->listen[i], l->n, OPT_MAX_LFDS);
        return -1;
    }
    if (l->n == first && (naccept == 1 || o->reuseport)) {
        if ((fd = net_listen_reuseport(o->listen[i], o->backlog, o->reuseport, err, errlen)) < 0)
            return -1;
        l->fds[l->n++] = fd;
    } else if (l->n == first) {
        /* Shards: SO_REUSEPORT without --reuseport must not join a group another process of
         * our uid listens in; the claim says "port in use" first. */
        int claim = net_claim(o->listen[i], err, errlen);

        if (claim < 0)
            return -1;
        fd = net_listen_shard(claim, o->backlog, err, errlen);
        close(claim);
        if (fd < 0)
            return -1;
        l->fds[l->n++] = fd;
    } else if (naccept > l->n - first && !net_reuseport(l->fds[first])) {
        log_info("%s: handed over without SO_REUSEPORT, so no shard can join it: %d of %d accept "
                 "threads serve it (a restart without --takeover shards it)",
                 o->listen[i], l->n - first, naccept);
        return 0;
    }
    /* one socket per accept thread, the kernel spreading connections over them */
    while (l->n - first < naccept && l->n < OPT_MAX_LFDS) {
        if ((fd = net_listen_shard(l->fds[first], o->backlog, err, errlen)) < 0)
            return -1;
        l->fds[l->n++] = fd;
    }
    return 0;
}

/* The value of TCP option name on fd, or -1 where it cannot be read. */
static int tcp_option(int fd, int name)
{
    int v = 0;
    socklen_t sl = sizeof(v);

    return getsockopt(fd, IPPROTO_TCP, name, &v, &sl) == 0 ? v : -1;
}

/* --defer-accept and --fastopen on the listeners this instance bound (taken: false), or on
 * those a predecessor handed over (taken: true; called once it has let them go: until then a
 * start that fails must leave them as they came). A taken one follows this instance's options,
 * set or not: a restart without --defer-accept does not go on deferring. */
static void set_options(const struct listeners *l, const struct opt *o, bool taken)
{
    int secs = o->defer_accept ? 1 : 0; /* TCP_DEFER_ACCEPT: accept once the first bytes came
                                         * (1 s of SYN-ACK retries, then accepted without) */
    char v[32];

    for (int i = 0; i < l->n; i++) {
        if (l->taken[i] != taken)
            continue;
        if ((o->defer_accept || (taken && tcp_option(l->fds[i], TCP_DEFER_ACCEPT) > 0)) &&
            setsockopt(l->fds[i], IPPROTO_TCP, TCP_DEFER_ACCEPT, &secs, sizeof(secs)) < 0)
            log_warn("--defer-accept: setsockopt(TCP_DEFER_ACCEPT): %s; %s", strerror(errno),
                     o->defer_accept ? "accepting as usual" : "the socket handed over defers");
        if ((o->fastopen || (taken && tcp_option(l->fds[i], TCP_FASTOPEN) > 0)) &&
            setsockopt(l->fds[i], IPPROTO_TCP, TCP_FASTOPEN, &o->fastopen, sizeof(o->fastopen)) < 0)
            log_warn("--fastopen: setsockopt(TCP_FASTOPEN): %s; %s", strerror(errno),
                     o->fastopen ? "no data is taken from a SYN"
                                 : "the socket handed over takes it");
    }
    /* bit 2 (value 2) is the server side: without it the kernel ignores a SYN's data */
    if (!taken && o->fastopen &&
        tune_read("/proc/sys", "net.ipv4.tcp_fastopen", v, sizeof(v)) == 0 &&
        !(strtol(v, NULL, 0) & 2))
        log_warn("--fastopen %d: net.ipv4.tcp_fastopen is %s, without the server bit (2): the "
                 "kernel takes no data from a SYN; sysctl -w net.ipv4.tcp_fastopen=3",
                 o->fastopen, v);
}

/* Socket activation: which of the sockets systemd passed speak TLS: those bound where a
 * --listen-tls asks. Each --listen-tls must find one. Returns 0 or -1 with err. */
static int mark_tls(struct listeners *l, const struct opt *o, char *err, size_t errlen)
{
    for (int i = 0; i < o->nlisten; i++) {
        bool found = false;

        if (!o->listen_tls[i])
            continue;
        for (int k = 0; k < l->activated; k++)
            if (takeover_match(SD_LISTEN_FDS_START + k, o->listen[i]))
                found = l->tls[k] = true;
        if (!found) {
            snprintf(err, errlen,
                     "--listen-tls %s: none of the %d sockets from systemd ($LISTEN_FDS) is "
                     "bound there: name the address of a ListenStream= of the .socket unit",
                     o->listen[i], l->activated);
            return -1;
        }
    }
    return 0;
}

/* Socket activation: the sockets systemd passed, used as they are: systemd keeps them and
 * passes them to the next start, so nothing of theirs is changed here (server.c borrows
 * O_NONBLOCK while serving). One thing is undone: the SYN filter an older lfepolld's stop left
 * on them, under which no connection would ever come. Returns 0 or 2 with err. */
static int take_activated(struct listeners *l, const struct opt *o, char *err, size_t errlen)
{
    if (!o->listen_default && o->ntls < o->nlisten) {
        snprintf(err, errlen,
                 "%d socket%s handed over by systemd ($LISTEN_FDS) and --listen both given: "
                 "drop --listen (the .socket unit's ListenStream= decides)",
                 l->activated, l->activated == 1 ? "" : "s");
        return 2;
    }
    if (mark_tls(l, o, err, errlen) < 0)
        return 2;
    if (o->takeover) {
        snprintf(err, errlen,
                 "--takeover with sockets from systemd ($LISTEN_FDS): systemd keeps them across "
                 "restarts (systemctl restart loses nothing queued): drop --takeover");
        return 2;
    }
    for (int i = 0; i < l->activated; i++) {
        int fd = SD_LISTEN_FDS_START + i, rc;
        char name[128];

        l->fds[l->n++] = fd;
        if (!net_refuses_syns(fd))
            continue;
        net_local_name(fd, name, sizeof(name));
        if ((rc = net_accept_syns(fd)) < 0)
            log_warn("socket activation: fd %d (%s) drops every new connection (the SYN filter "
                     "of an older lfepolld's stop) and it cannot be taken off (%s): restart "
                     "the socket unit (systemctl restart lfepolld.socket)",
                     fd, name, strerror(-rc));
        else
            log_warn("socket activation: fd %d (%s) carried the SYN filter an older lfepolld's "
                     "stop left on it, which dropped every new connection: taken off",
                     fd, name);
    }
    if (o->defer_accept)
        log_warn("--defer-accept: not set on sockets from systemd, which are used as they are: "
                 "set DeferAcceptSec=1 in the .socket unit");
    if (o->fastopen)
        log_warn("--fastopen %d: not set on sockets from systemd, which are used as they are: "
                 "set FastOpen=true in the .socket unit",
                 o->fastopen);
    return 0;
}

int listeners_acquire(struct listeners *l, const struct opt *o, int naccept, char *err,
                      size_t errlen)
{
    int taken[TAKEOVER_MAX_FDS], ntaken = 0;

    memset(l, 0, sizeof(*l));
    l->admin_fd = l->tconn = -1;
    if ((l->activated = sdnotify_listen_fds(OPT_MAX_LISTEN, err, errlen)) < 0)
        return 2;
    if (l->activated)
        return take_activated(l, o, err, errlen);
    if (o->nlisten * naccept > OPT_MAX_LFDS) {
        snprintf(err, errlen,
                 "%d --listen addresses with %d accept threads need %d listening sockets; at "
                 "most %d: fewer addresses or a lower --accept-threads",
                 o->nlisten, naccept, o->nlisten * naccept, OPT_MAX_LFDS);
        return 2;
    }
    if (o->takeover && (ntaken = takeover_receive(o->takeover, taken, TAKEOVER_MAX_FDS, &l->tconn,
                                                  err, errlen)) < 0)
        return 1;
    l->ntaken = ntaken;
    for (int i = 0; i < o->nlisten; i++)
        if (bind_address(l, o, i, naccept, taken, ntaken, err, errlen) < 0) {
            for (int k = 0; k < ntaken; k++)
                if (taken[k] >= 0)
                    close(taken[k]);
            listeners_close(l);
            return 1;
        }
    for (int k = 0; k < ntaken && o->admin && l->admin_fd < 0; k++)
        if (taken[k] >= 0 && takeover_match(taken[k], o->admin)) { /* its --admin listener */
            l->admin_fd = taken[k];
            taken[k] = -1;
        }
    for (int k = 0; k < ntaken; k++)
        if (taken[k] >= 0)
            close(taken[k]); /* bound where no --listen of ours asks: the old one's alone */
    set_options(l, o, false);
    return 0;
}

void listeners_taken_over(const struct listeners *l, const struct opt *o)
{
    set_options(l, o, true);
}

void listeners_close(struct listeners *l)
{
    for (int i = 0; i < l->n; i++)
        close(l->fds[i]);
    l->n = 0;
    if (l->admin_fd >= 0)
        close(l->admin_fd);
    l->admin_fd = -1;
}

void listeners_log(const struct listeners *l, const struct opt *o)
{
    long somaxconn = net_somaxconn();
    char cut[64] = "";

    /* the queue the kernel gives, where it is not the backlog asked for */
    if (somaxconn > 0 && o->backlog > somaxconn)
        snprintf(cut, sizeof(cut), ", cut to %ld by somaxconn", somaxconn);
    for (int i = 0; i < l->n; i++) {
        char name[128], other[128];
        int shards = 1, seen = 0;

        net_local_name(l->fds[i], name, sizeof(name));
        for (int k = 0; k < l->n; k++) {
            if (k == i)
                continue;
            net_local_name(l->fds[k], other, sizeof(other));
            if (!strcmp(name, other)) {
                shards++;
                seen += k < i;
            }
        }
        if (seen)
            continue; /* said with its first shard */
        if (l->tls[i])
            strncat(name, " with TLS", sizeof(name) - strlen(name) - 1);
        if (l->activated)
            log_info("listening on %s (fd %d from systemd's socket activation)", name, l->fds[i]);
        else if (shards > 1)
            log_info("listening on %s (backlog %d%s, %d SO_REUSEPORT shards)", name, o->backlog,
                     cut, shards);
        else
            log_info("listening on %s (backlog %d%s)", name, o->backlog, cut);
    }
}
