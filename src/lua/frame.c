/* frame: splitting a byte stream into the frames a Lua handler sees. */
#include "frame.h"

#include <string.h>

size_t frame_max_partial(const struct framing *f)
{
    switch (f->kind) {
    case FRAME_LINE:
        return (size_t)f->max_frame + f->dlen + (f->strip_cr ? 1 : 0);
    case FRAME_LEN32:
        return (size_t)f->max_frame + 4;
    case FRAME_FIXED:
        return f->size;
    default:
        return f->max_frame;
    }
}

long frame_next(const struct framing *f, const char *p, size_t n, size_t *scanned,
                const char **frame, size_t *flen)
{
    switch (f->kind) {
    case FRAME_LINE: {
        size_t limit = frame_max_partial(f), scan = n < limit ? n : limit;
        /* Resume where the last look stopped: a delimiter may straddle it by dlen - 1 bytes. A
         * partial line is then scanned once in all, not once per read. */
        size_t from = *scanned > scan ? scan : *scanned;
        const char *d;
        size_t len;

        from = from >= f->dlen ? from - (f->dlen - 1u) : 0;
        d = f->dlen == 1 ? memchr(p + from, f->delim[0], scan - from)
                         : memmem(p + from, scan - from, f->delim, f->dlen);
        if (!d) {
            *scanned = scan;
            return n >= limit ? -1 : 0;
        }
        *scanned = 0;
        len = (size_t)(d - p);
        if (f->strip_cr && len && p[len - 1] == '\r')
            len--;
        if (len > f->max_frame)
            return -1;
        *frame = p;
        *flen = len;
        return (long)((size_t)(d - p) + f->dlen);
    }
    case FRAME_LEN32: {
        uint32_t len;

        if (n < 4)
            return 0;
        len = (uint32_t)(unsigned char)p[0] << 24 | (uint32_t)(unsigned char)p[1] << 16 |
              (uint32_t)(unsigned char)p[2] << 8 | (uint32_t)(unsigned char)p[3];
        if (len > f->max_frame)
            return -1;
        if (n - 4 < len)
            return 0;
        *frame = p + 4;
        *flen = len;
        return (long)len + 4;
    }
    case FRAME_FIXED:
        if (n < f->size)
            return 0;
        *frame = p;
        *flen = f->size;
        return (long)f->size;
    default:
        if (n == 0)
            return 0;
        *frame = p;
        *flen = n < f->max_frame ? n : f->max_frame;
        return (long)*flen;
    }
}
