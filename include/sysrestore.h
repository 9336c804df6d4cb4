/* sysrestore: kernel parameters changed with a durable record of what they were before. */
#ifndef LFE_SYSRESTORE_H
#define LFE_SYSRESTORE_H

#include <stdbool.h>
#include <stddef.h>

/* The record of a run that changes host sysctls for a while (lfbench tune --host). /run is a
 * tmpfs: the record survives a crash of the process but not a reboot, and a reboot resets every
 * sysctl to what the kernel and /etc/sysctl.d say, so there is then nothing left to put back. */
#define SYSRESTORE_RUN_PATH "/run/lfepoll/sysctl-restore"
/* The record lfepolld --apply-sysctl keeps for --undo-sysctl: it outlives the process. */
#define SYSRESTORE_UNDO_PATH "/var/lib/lfepoll/sysctl-undo"

#define SYSRESTORE_MAX_KEYS 64    /* keys one session may change */
#define SYSRESTORE_KEY_MAX 128    /* a dotted name, with its NUL */
#define SYSRESTORE_VALUE_MAX 1024 /* a value as /proc/sys holds it, with its NUL */

/* The record is a text file, one line per key changed, written and fsync'd BEFORE the key is:
 *   # lfepoll sysctl record v1 KIND pid PID boot BOOT_ID netns NETNS
 *   KEY=VALUE            (VALUE as /proc/sys held it, \\ \t \n and bytes below ' ' escaped)
 * KIND is "restore" (a session's: whoever begins next on that path puts it back) or "undo"
 * (lfepolld --apply-sysctl's, kept until --undo-sysctl). Only the first value of a key is kept:
 * it is what was there before the session. A last line without its newline is a write that
 * never reached the disk, so the key was never changed: it is ignored. One process holds a
 * record at a time (flock): a second one is refused while the first lives. The lock's
 * descriptor is O_CLOEXEC: a child forked to exec a server drops it at its exec, but one that
 * never execs holds it as long as it lives. A record another user owns, or that others may
 * write, is refused unread: root would write back values someone else chose.
 *
 * State: one session per process, owned by the thread that began it (the main thread); the
 * signal path reads only what was written before the count that covers it was raised. */

/* Starts a session of changes to the host's /proc/sys recorded at path (SYSRESTORE_RUN_PATH
 * normally; its directory is made, 0700). If a run that did not finish left a "restore" record
 * there, every key of it is put back first (newest first). Returns the number of keys put back
 * (0: none), or -1 when it cannot start. Print err whenever it is not empty: after N > 0 it
 * holds one line for people ("sysctl: a run that did not finish (pid 123) left 2 keys changed;
 * put back from PATH: net.core.rmem_max = 212992, ..."), after 0 it may say that a record from
 * before a reboot was dropped (the reboot reset its keys). -1, one line in err: another live
 * process holds path, the record is an "undo" one or from another network namespace, a key
 * could not be put back (the record is then kept), or path cannot be made. err is "" when
 * there is nothing to say. Main thread. */
int sysrestore_begin(const char *path, char *err, size_t errlen);

/* The same with /proc/sys at root (a fixture tree in unit tests) and the kind of record:
 * keep = true opens an "undo" record for appending (lfepolld --apply-sysctl): what it holds
 * already stays (the values from before the first apply) and nothing is put back. Returns as
 * sysrestore_begin; with keep, the number of keys the record held already. */
int sysrestore_open(const char *path, const char *root, bool keep, char *err, size_t errlen);

/* Sets key (dotted: net.core.rmem_max; '/' in a name stands for '.', as sysctl(8) writes
 * net.ipv4.conf.eth0/100.rp_filter) to value, exactly as given (tabs and spaces kept). First
 * reads what it holds now and, unless this session changed the key already, appends that to the
 * record and fsyncs it; only then writes value. Returns 0, or -1 with one line in err: no
 * session, a name that is not a key ("no such key", "is a directory of keys"), a read-only key,
 * a value too long or empty, SYSRESTORE_MAX_KEYS reached, the record not written (the key is then
 * left as it was), or the kernel refusing value (the key keeps its old value; the record still
 * names it, harmlessly). Main thread. */
int sysrestore_set(const char *key, const char *value, char *err, size_t errlen);

/* Reads key's current value under the session's root (or /proc/sys with no session) into buf,
 * exactly as the kernel gives it less its final newline. Returns 0, or -1 with one line in err
 * ("no such key", ...). */
int sysrestore_get(const char *key, char *buf, size_t len, char *err, size_t errlen);

/* Writes back every value the session saved, newest first, and ends the session: the record is
 * fsync'd, removed, and unlocked. Returns 0, or -1 with one line in err naming the keys that
 * could not be put back; the record is then kept (the next begin tries again) and the session
 * ended all the same. Without a session, 0. Main thread. */
int sysrestore_undo(char *err, size_t errlen);

/* Writes back every value the session saved, newest first, and empties the record, keeping the
 * session (and its lock) open for the next changes: lfbench tune --host between rounds. Returns
 * 0, or -1 with one line in err naming the keys not put back (the record and the session then
 * keep every key, for a later undo or the next begin). Without a session, 0. Main thread. */
int sysrestore_rewind(char *err, size_t errlen);

/* Ends the session leaving the record on disk, closed and unlocked (lfepolld --apply-sysctl: the
 * undo record for --undo-sysctl). A record that holds no key is removed instead. Returns 0, or -1
 * with one line in err (the fsync failed). */
int sysrestore_keep(char *err, size_t errlen);

/* How many keys the session has saved; 0 without one. */
int sysrestore_count(void);

/* The i-th key the session saved (0: the oldest) and the value it held before: strings owned by
 * the session, valid until it ends. Returns 0, or -1 when there is no such entry. */
int sysrestore_saved(int i, const char **key, const char **value);

/* For a caller's own SIGINT/SIGTERM handler: puts back every saved value (newest first) and
 * removes the record, with async-signal-safe calls only (open, write, fsync, unlink). Nothing in
 * a process that did not begin the session (a forked child: a server lfbench tune runs), and
 * nothing twice. The caller then exits or re-raises. */
void sysrestore_undo_signal_safe(void);

/* Installs handlers for SIGINT, SIGTERM and SIGHUP that call sysrestore_undo_signal_safe and
 * then die of the signal (its default action re-raised): for a caller with no handler of its
 * own. Returns 0, or -1 with one line in err. */
int sysrestore_catch_signals(char *err, size_t errlen);

/* The record's value escaping, pure (unit-tested): encode writes src into dst as the record
 * holds it; decode the reverse. Each returns the length written, or -1 when dst is too small
 * (decode: or src holds a malformed escape). */
int sysrestore_encode(const char *src, char *dst, size_t len);
int sysrestore_decode(const char *src, char *dst, size_t len);

#endif /* LFE_SYSRESTORE_H */
