/* Reproducer (found writing fuzz_verify; client/payload.c, handed to lfbench's owner): with
 * --expect line and generated requests, payload_bytes() and payload_equal() asked for 0 bytes at
 * the end of a request (off == len) touch the byte before the buffer: payload_bytes writes '\n'
 * to out[-1], payload_equal reads buf[-1]. Today's callers never ask for 0 bytes (verify_feed and
 * do_write pass n > 0), so lfbench is not hit; the functions' contract allows it.
 *
 *   clang -fsanitize=address -D_GNU_SOURCE -Iinclude -Iclient tests/fuzz/crashes/payload_len0.c \
 *     client/payload.c -o /tmp/payload_len0 && /tmp/payload_len0
 *
 * Expected once fixed: "ok" and exit 0; today: an AddressSanitizer heap-buffer-overflow. */
#include <stdio.h>
#include <stdlib.h>

#include "payload.h"

int main(void)
{
    struct bopt o = {.expect = EXPECT_LINE, .size = 32};
    struct payloads p;
    char err[256];
    uint8_t *buf = malloc(1);

    if (payload_load(&p, &o, err, sizeof(err)) < 0) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    if (!payload_equal(&p, 0, 1, 1, 32, buf, 0)) /* reads buf[-1] */
        return 1;
    payload_bytes(&p, 0, 1, 1, 32, buf, 0); /* writes buf[-1] */
    free(buf);
    payload_free(&p);
    puts("ok");
    return 0;
}
