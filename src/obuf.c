/* obuf: output buffers: a connection's pending output (struct obuf) and a reusable growable
 * buffer (struct outbuf). */
#include "obuf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int obuf_append(struct obuf *b, const void *p, size_t n)
{
    size_t len = obuf_len(b);

    if (n == 0)
        return 0;
    if (b->end + n > b->size) {
        if (b->off && len + n <= b->size) {
            memmove(b->data, b->data + b->off, len); /* room at the front: slide down */
        } else {
            size_t size = b->size ? b->size : 4096;
            char *d;

            while (size < len + n)
                size *= 2;
            if (size > UINT32_MAX)
                size = UINT32_MAX;
            if (size < len + n)
                return -ENOMEM;
            /* The live bytes go to the front of the new block: realloc would copy the dead
             * prefix too, and a fresh block lets an unchanged buffer survive failure. */
            d = malloc(size);
            if (!d)
                return -ENOMEM;
            if (len)
                memcpy(d, b->data + b->off, len);
            free(b->data);
            b->data = d;
            b->size = (uint32_t)size;
        }
        b->off = 0;
        b->end = (uint32_t)len;
    }
    memcpy(b->data + b->end, p, n);
    b->end += (uint32_t)n;
    return 0;
}

void obuf_consume(struct obuf *b, size_t n)
{
    b->off += (uint32_t)n;
    if (b->off == b->end)
        obuf_free(b);
}

void obuf_free(struct obuf *b)
{
    free(b->data);
    b->data = NULL;
    b->off = b->end = b->size = 0;
}

int outbuf_put(struct outbuf *b, const void *p, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        char *d;

        while (cap < b->len + n)
            cap *= 2;
        d = realloc(b->data, cap);
        if (!d)
            return -ENOMEM;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}
