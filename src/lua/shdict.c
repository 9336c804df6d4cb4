/* shdict: the dictionary every worker's Lua state shares (lfe.shared), in C. */
#include "shdict.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

struct shent {
    struct shent *hnext;       /* hash chain */
    struct shent *prev, *next; /* LRU list, most recent first */
    uint64_t hash;
    uint32_t klen, vlen; /* key bytes, string value bytes */
    uint8_t type;        /* enum shv_type */
    union {
        int64_t i;
        double d;
    } n;
    char data[]; /* key, then a string value */
};

struct shard {
    pthread_mutex_t mu;
    struct shent **tab; /* nbuckets chains, a power of two */
    size_t nbuckets, count, bytes, cap;
    uint64_t evictions;
    struct shent lru; /* sentinel: lru.next is the most recent */
} __attribute__((aligned(64)));

struct shdict {
    struct shard shards[SHDICT_SHARDS];
    uint64_t k0, k1; /* SipHash key: client-chosen keys cannot force long chains */
};

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                                   \
    do {                                                                                           \
        v0 += v1;                                                                                  \
        v1 = ROTL(v1, 13);                                                                         \
        v1 ^= v0;                                                                                  \
        v0 = ROTL(v0, 32);                                                                         \
        v2 += v3;                                                                                  \
        v3 = ROTL(v3, 16);                                                                         \
        v3 ^= v2;                                                                                  \
        v0 += v3;                                                                                  \
        v3 = ROTL(v3, 21);                                                                         \
        v3 ^= v0;                                                                                  \
        v2 += v1;                                                                                  \
        v1 = ROTL(v1, 17);                                                                         \
        v1 ^= v2;                                                                                  \
        v2 = ROTL(v2, 32);                                                                         \
    } while (0)

/* SipHash-1-3 (the variant Rust's and Python's hash tables use). */
static uint64_t siphash13(uint64_t k0, uint64_t k1, const char *p, size_t n)
{
    uint64_t v0 = k0 ^ 0x736f6d6570736575ull, v1 = k1 ^ 0x646f72616e646f6dull;
    uint64_t v2 = k0 ^ 0x6c7967656e657261ull, v3 = k1 ^ 0x7465646279746573ull;
    uint64_t b = (uint64_t)n << 56, m;
    size_t i = 0;

    for (; i + 8 <= n; i += 8) {
        memcpy(&m, p + i, 8);
        v3 ^= m;
        SIPROUND;
        v0 ^= m;
    }
    for (size_t j = 0; i + j < n; j++)
        b |= (uint64_t)(unsigned char)p[i + j] << (8 * j);
    v3 ^= b;
    SIPROUND;
    v0 ^= b;
    v2 ^= 0xff;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

struct shdict *shdict_new(size_t capacity)
{
    struct shdict *d = aligned_alloc(64, sizeof(*d));

    if (!d)
        return NULL;
    memset(d, 0, sizeof(*d));
    if (getrandom(&d->k0, sizeof(d->k0), 0) != sizeof(d->k0) ||
        getrandom(&d->k1, sizeof(d->k1), 0) != sizeof(d->k1)) {
        d->k0 = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull;
        d->k1 = (uint64_t)(uintptr_t)d ^ 0xbf58476d1ce4e5b9ull;
    }
    for (int i = 0; i < SHDICT_SHARDS; i++) {
        struct shard *s = &d->shards[i];

        pthread_mutex_init(&s->mu, NULL);
        s->cap = capacity / SHDICT_SHARDS;
        s->lru.next = s->lru.prev = &s->lru;
    }
    return d;
}

void shdict_free(struct shdict *d)
{
    if (!d)
        return;
    for (int i = 0; i < SHDICT_SHARDS; i++) {
        struct shard *s = &d->shards[i];

        for (struct shent *e = s->lru.next, *nx; e != &s->lru; e = nx) {
            nx = e->next;
            free(e);
        }
        free(s->tab);
        pthread_mutex_destroy(&s->mu);
    }
    free(d);
}

static size_t ent_bytes(size_t klen, size_t vlen)
{
    return sizeof(struct shent) + klen + vlen;
}

static struct shard *shard_of(struct shdict *d, uint64_t h)
{
    return &d->shards[h >> 60 & (SHDICT_SHARDS - 1)];
}

/* The chain slot holding key (or the NULL at the end of its chain). Lock held. */
static struct shent **find(struct shard *s, uint64_t h, const char *key, size_t klen)
{
    struct shent **pp;

    if (!s->tab)
        return NULL;
    for (pp = &s->tab[h & (s->nbuckets - 1)]; *pp; pp = &(*pp)->hnext) {
        struct shent *e = *pp;

        if (e->hash == h && e->klen == klen && memcmp(e->data, key, klen) == 0)
            break;
    }
    return pp;
}

static void lru_unlink(struct shent *e)
{
    e->prev->next = e->next;
    e->next->prev = e->prev;
}

static void lru_push(struct shard *s, struct shent *e)
{
    e->next = s->lru.next;
    e->prev = &s->lru;
    s->lru.next->prev = e;
    s->lru.next = e;
}

/* Unlinks and frees e. Lock held. */
static void drop(struct shard *s, struct shent *e)
{
    struct shent **pp = find(s, e->hash, e->data, e->klen);

    *pp = e->hnext;
    lru_unlink(e);
    s->count--;
    s->bytes -= ent_bytes(e->klen, e->vlen);
    free(e);
}

/* Doubles the table when chains would average more than one entry. Lock held. A failed
 * allocation keeps the old table: longer chains, still correct. */
static void grow(struct shard *s)
{
    size_t n = s->nbuckets ? s->nbuckets * 2 : 64;
    struct shent **tab;

    if (s->tab && s->count < s->nbuckets)
        return;
    tab = calloc(n, sizeof(*tab));
    if (!tab)
        return;
    for (size_t i = 0; i < s->nbuckets; i++)
        for (struct shent *e = s->tab[i], *nx; e; e = nx) {
            nx = e->hnext;
            e->hnext = tab[e->hash & (n - 1)];
            tab[e->hash & (n - 1)] = e;
        }
    free(s->tab);
    s->tab = tab;
    s->nbuckets = n;
}

int shdict_get(struct shdict *d, const char *key, size_t klen, struct shval *v, char **buf,
               size_t *cap)
{
    uint64_t h = siphash13(d->k0, d->k1, key, klen);
    struct shard *s = shard_of(d, h);
    struct shent **pp, *e;
    int rc = 0;

    v->type = SHV_NONE;
    pthread_mutex_lock(&s->mu);
    pp = find(s, h, key, klen);
    e = pp ? *pp : NULL;
    if (e) {
        lru_unlink(e);
        lru_push(s, e);
        v->type = e->type;
        if (e->type == SHV_INT) {
            v->i = e->n.i;
        } else if (e->type == SHV_NUM) {
            v->d = e->n.d;
        } else {
            if (*cap < e->vlen + 1) {
                char *nb = realloc(*buf, e->vlen + 1);

                if (!nb) {
                    rc = -ENOMEM;
                    v->type = SHV_NONE;
                    goto out;
                }
                *buf = nb;
                *cap = e->vlen + 1;
            }
            memcpy(*buf, e->data + e->klen, e->vlen);
            v->s = *buf;
            v->len = e->vlen;
        }
    }
out:
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* Stores v under key in s. Lock held. Returns evictions or -errno. */
static int store(struct shard *s, uint64_t h, const char *key, size_t klen, const struct shval *v)
{
    size_t vlen = v->type == SHV_STR ? v->len : 0, need = ent_bytes(klen, vlen);
    struct shent **pp, *old, *e;
    int evicted = 0;

    if (klen > UINT32_MAX || vlen > UINT32_MAX || need > s->cap)
        return -E2BIG;
    pp = find(s, h, key, klen);
    old = pp ? *pp : NULL;
    e = malloc(need);
    if (!e)
        return -ENOMEM;
    if (old)
        drop(s, old);
    /* Least recently used first, until the new entry fits. */
    while (s->bytes + need > s->cap && s->lru.prev != &s->lru) {
        drop(s, s->lru.prev);
        s->evictions++;
        evicted++;
    }
    e->hash = h;
    e->klen = (uint32_t)klen;
    e->vlen = (uint32_t)vlen;
    e->type = (uint8_t)v->type;
    if (v->type == SHV_INT)
        e->n.i = v->i;
    else
        e->n.d = v->d;
    memcpy(e->data, key, klen);
    if (vlen)
        memcpy(e->data + klen, v->s, vlen);
    grow(s);
    pp = &s->tab[h & (s->nbuckets - 1)];
    e->hnext = *pp;
    *pp = e;
    lru_push(s, e);
    s->count++;
    s->bytes += need;
    return evicted;
}

int shdict_set(struct shdict *d, const char *key, size_t klen, const struct shval *v)
{
    uint64_t h = siphash13(d->k0, d->k1, key, klen);
    struct shard *s = shard_of(d, h);
    int rc = 0;

    pthread_mutex_lock(&s->mu);
    if (v->type == SHV_NONE) {
        struct shent **pp = find(s, h, key, klen);

        if (pp && *pp)
            drop(s, *pp);
    } else {
        rc = store(s, h, key, klen, v);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

static void add_num(const struct shval *a, const struct shval *b, struct shval *out)
{
    if (a->type == SHV_INT && b->type == SHV_INT) {
        out->type = SHV_INT;
        out->i = (int64_t)((uint64_t)a->i + (uint64_t)b->i); /* wraps, as Lua integers do */
    } else {
        out->type = SHV_NUM;
        out->d =
            (a->type == SHV_INT ? (double)a->i : a->d) + (b->type == SHV_INT ? (double)b->i : b->d);
    }
}

int shdict_incr(struct shdict *d, const char *key, size_t klen, const struct shval *delta,
                const struct shval *init, struct shval *out)
{
    uint64_t h = siphash13(d->k0, d->k1, key, klen);
    struct shard *s = shard_of(d, h);
    struct shent **pp, *e;
    int rc = 0;

    pthread_mutex_lock(&s->mu);
    pp = find(s, h, key, klen);
    e = pp ? *pp : NULL;
    if (e) {
        struct shval cur = {.type = e->type, .i = e->n.i, .d = e->n.d};

        if (e->type == SHV_STR) {
            rc = -EINVAL;
        } else {
            add_num(&cur, delta, out);
            /* Same size: update in place (an integer may turn into a float). */
            e->type = (uint8_t)out->type;
            if (out->type == SHV_INT)
                e->n.i = out->i;
            else
                e->n.d = out->d;
            lru_unlink(e);
            lru_push(s, e);
        }
    } else if (!init) {
        rc = -ENOENT;
    } else {
        add_num(init, delta, out);
        rc = store(s, h, key, klen, out);
        if (rc > 0)
            rc = 0;
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int shdict_delete(struct shdict *d, const char *key, size_t klen)
{
    uint64_t h = siphash13(d->k0, d->k1, key, klen);
    struct shard *s = shard_of(d, h);
    struct shent **pp;
    int found = 0;

    pthread_mutex_lock(&s->mu);
    pp = find(s, h, key, klen);
    if (pp && *pp) {
        drop(s, *pp);
        found = 1;
    }
    pthread_mutex_unlock(&s->mu);
    return found;
}

void shdict_usage(struct shdict *d, size_t *keys, size_t *bytes, size_t *capacity,
                  uint64_t *evictions)
{
    *keys = *bytes = *capacity = 0;
    *evictions = 0;
    for (int i = 0; i < SHDICT_SHARDS; i++) {
        struct shard *s = &d->shards[i];

        pthread_mutex_lock(&s->mu);
        *keys += s->count;
        *bytes += s->bytes;
        *capacity += s->cap;
        *evictions += s->evictions;
        pthread_mutex_unlock(&s->mu);
    }
}
