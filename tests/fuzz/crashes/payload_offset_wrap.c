/* Reproducer (found by fuzz_verify; client/payload.c, handed to lfbench's owner): for a
 * generated request, payload_bytes(off, len) is not bytes [off, off+len) of the whole request
 * when seq + stream * 7 + off passes 2^64 inside the request: the pattern position
 * (off + seq + stream * 7) % PATN is taken after the 64-bit sum wrapped, so a range that starts
 * past the wrap reads another part of the pattern than the whole request has there. The writer
 * (do_write, pieces at its own offsets) and the checker (verify_feed -> payload_equal, pieces at
 * the reader's offsets) then disagree and a right echo counts as a mismatch. lfbench's streams
 * are gen << 32 | gid and seq counts from 0, so the sum stays far below 2^64 today; the fuzz
 * target keeps to such values. A fix: reduce each term mod PATN before adding.
 *
 *   clang -g -D_GNU_SOURCE -Iinclude -Iclient tests/fuzz/crashes/payload_offset_wrap.c \
 *     client/payload.c -o /tmp/payload_offset_wrap && /tmp/payload_offset_wrap
 *
 * Expected once fixed: "ok" and exit 0; today: "range [100, +50) differs", exit 1. */
#include <stdio.h>
#include <string.h>

#include "payload.h"

int main(void)
{
    struct bopt o = {.expect = EXPECT_ECHO, .size = 200};
    static uint8_t whole[200], part[50];
    uint64_t seq = UINT64_MAX - 60, stream = 0; /* the sum wraps at off 61 */
    struct payloads p;
    char err[256];

    if (payload_load(&p, &o, err, sizeof(err)) < 0) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    payload_bytes(&p, 0, stream, seq, 0, whole, sizeof(whole));
    payload_bytes(&p, 0, stream, seq, 100, part, sizeof(part));
    if (memcmp(part, whole + 100, sizeof(part))) {
        puts("range [100, +50) differs");
        return 1;
    }
    puts("ok");
    return 0;
}
