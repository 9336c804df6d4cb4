/* frame: splitting a byte stream into the frames a Lua handler sees. */
#ifndef LFE_FRAME_H
#define LFE_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum frame_kind {
    FRAME_RAW,   /* whatever one read produced, at most max_frame bytes */
    FRAME_LINE,  /* up to a delimiter ("\n" by default, then a trailing '\r' is dropped too) */
    FRAME_LEN32, /* a 4-byte big-endian length, then that many bytes */
    FRAME_FIXED, /* exactly size bytes */
};

#define FRAME_DELIM_MAX 8

/* A connection's framing. Copied into the connection when it starts, so a reload that changes
 * the framing applies to new connections only. */
struct framing {
    uint8_t kind;                /* enum frame_kind */
    uint8_t dlen;                /* FRAME_LINE: delimiter length, 1..FRAME_DELIM_MAX */
    bool strip_cr;               /* FRAME_LINE with the default "\n": drop a '\r' before it */
    char delim[FRAME_DELIM_MAX]; /* FRAME_LINE: the delimiter */
    uint32_t max_frame;          /* largest frame payload accepted */
    uint32_t size;               /* FRAME_FIXED: bytes per frame */
};

/* Most bytes a connection may hold while waiting for the rest of a frame (header and delimiter
 * included). */
size_t frame_max_partial(const struct framing *f);

/* Looks for the next frame in p[0, n). Returns the bytes it takes (> 0) with the payload in
 * *frame and *flen; 0 when more bytes are needed; -1 when the frame is over max_frame (the
 * stream cannot be resynchronised: close the connection). FRAME_RAW takes min(n, max_frame).
 * *scanned (FRAME_LINE; ignored otherwise) is how many leading bytes of p are already known to
 * hold no delimiter: 0 for new bytes; frame_next updates it, and the caller keeps it with the
 * partial frame and resets it to 0 when p moves to the next frame. */
long frame_next(const struct framing *f, const char *p, size_t n, size_t *scanned,
                const char **frame, size_t *flen);

#endif /* LFE_FRAME_H */
