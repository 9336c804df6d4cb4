/* obuf: output buffers. struct obuf: a connection's pending output, allocated only while bytes
 * wait for the socket. struct outbuf: a plain growable buffer a thread reuses (a worker's Lua
 * replies, conn.ctx serialization). */
#ifndef LFE_OBUF_H
#define LFE_OBUF_H

#include <stddef.h>
#include <stdint.h>

/* Bytes data[off, end) wait to be written. An empty obuf holds no memory (data == NULL), so an
 * idle connection costs only its struct. Owned by the connection; touched only by the thread
 * that owns the connection. */
struct obuf {
    char *data;    /* malloc'd storage of size bytes, NULL when empty */
    uint32_t off;  /* first unwritten byte */
    uint32_t end;  /* one past the last byte */
    uint32_t size; /* allocated bytes */
};

static inline size_t obuf_len(const struct obuf *b)
{
    return b->end - b->off;
}

/* Appends n bytes. The caller enforces the cap (len + n stays <= the connection's limit, at most
 * UINT32_MAX). Returns 0, or -ENOMEM with the buffer unchanged. */
int obuf_append(struct obuf *b, const void *p, size_t n);

/* Drops the first n (<= len) bytes; frees the storage once empty. */
void obuf_consume(struct obuf *b, size_t n);

/* Frees the storage. */
void obuf_free(struct obuf *b);

/* Growable output, reused across calls: len bytes at data, cap allocated. Owned by one thread. */
struct outbuf {
    char *data;
    size_t len, cap;
};

/* Appends n bytes. 0, or -ENOMEM with b unchanged. */
int outbuf_put(struct outbuf *b, const void *p, size_t n);

#endif /* LFE_OBUF_H */
