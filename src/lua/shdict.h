/* shdict: the dictionary every worker's Lua state shares (lfe.shared), in C. */
#ifndef LFE_SHDICT_H
#define LFE_SHDICT_H

#include <stddef.h>
#include <stdint.h>

/* Keys are byte strings; values are byte strings, integers or floats, always copied. The
 * dictionary is split into SHDICT_SHARDS shards by key hash (SipHash, random key), each with
 * its own mutex, hash table and LRU list, and capacity/SHDICT_SHARDS bytes: a set that does not
 * fit evicts the least recently used keys of its shard. Every operation is atomic per key. */
#define SHDICT_SHARDS 16

enum shv_type { SHV_NONE, SHV_STR, SHV_INT, SHV_NUM };

struct shval {
    int type;      /* enum shv_type */
    int64_t i;     /* SHV_INT */
    double d;      /* SHV_NUM */
    const char *s; /* SHV_STR: bytes (set: the caller's; get: in the caller's scratch buffer) */
    size_t len;    /* SHV_STR: length */
};

struct shdict;

/* A dictionary holding up to capacity bytes (entry overhead included). NULL when out of
 * memory. */
struct shdict *shdict_new(size_t capacity);
void shdict_free(struct shdict *d);

/* Copies the value of key into *v (SHV_NONE when absent); a string is copied into *buf (grown
 * with realloc, *cap its size), so no lock is held while the caller uses it. 0, or -ENOMEM. */
int shdict_get(struct shdict *d, const char *key, size_t klen, struct shval *v, char **buf,
               size_t *cap);

/* Stores a copy (v->type SHV_NONE deletes). Returns the number of other keys evicted to make
 * room (>= 0), -E2BIG when one entry cannot fit in a shard, -ENOMEM. */
int shdict_set(struct shdict *d, const char *key, size_t klen, const struct shval *v);

/* Adds delta (SHV_INT or SHV_NUM) to a number. An absent key starts from *init when init is
 * not NULL, else -ENOENT. Integer + integer wraps like Lua; any float makes a float. The new
 * value goes to *out. -EINVAL when the value is a string; -E2BIG/-ENOMEM as shdict_set. */
int shdict_incr(struct shdict *d, const char *key, size_t klen, const struct shval *delta,
                const struct shval *init, struct shval *out);

/* Removes key. 1 when it was there, else 0. */
int shdict_delete(struct shdict *d, const char *key, size_t klen);

/* Totals over all shards (each shard read under its lock). */
void shdict_usage(struct shdict *d, size_t *keys, size_t *bytes, size_t *capacity,
                  uint64_t *evictions);

#endif /* LFE_SHDICT_H */
