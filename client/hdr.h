/* hdr: HdrHistogram's compressed V2 encoding of a hist and its interval log (format 1.3), so
 * HdrHistogram's own tools (HistogramLogProcessor, hdrh, HdrHistogram_c) read lfbench's
 * latencies without a loss. */
#ifndef LFE_HDR_H
#define LFE_HDR_H

#include <stddef.h>

#include "hist.h"

/* The histogram's parameters as HdrHistogram names them: lowestDiscernibleValue 1 and 2
 * significant digits make its counts array hist's b[] index for index; this highest trackable
 * value makes that array HIST_BUCKETS long (values up to 2^41 ns). */
#define HDR_SIG_DIGITS 2
#define HDR_HIGHEST ((1ull << 41) - 1)

/* h's counts as HdrHistogram's compressed V2 encoding in base64 (standard alphabet, padded, no
 * newline): *b64 is a NUL-terminated string the caller frees, *len its length. Min, max and sum
 * are not part of the format (readers derive them from the counts). Returns 0, -ENOMEM, or
 * -EOVERFLOW when a count does not fit HdrHistogram's signed 64-bit counts. Reentrant. */
int hdr_encode(const struct hist *h, char **b64, size_t *len);

/* Decodes len bytes of base64 (no whitespace) written by hdr_encode or by any HdrHistogram V2
 * encoder of the same parameters (sig. digits 2, lowest 1, integer values) into h: counts, count;
 * min and max are the edges of the lowest and highest non-empty buckets, sum the count-weighted
 * bucket midpoints (what HdrHistogram's mean uses). Returns 0, -ENOMEM, or -EINVAL for anything
 * else (bad base64 or zlib, a wrong cookie, lengths that disagree, other parameters, a count past
 * HIST_BUCKETS, a total over 2^64); never reads outside b64. On error h is empty. Reentrant. */
int hdr_decode(const char *b64, size_t len, struct hist *h);

/* An interval log file: owned by the thread that opened it, which alone writes and closes it. */
struct hdrlog;

/* Creates (truncates) path and writes the log's header as HdrHistogram's HistogramLogWriter
 * does: format version 1.3, StartTime and BaseTime (both start_wall, CLOCK_REALTIME seconds;
 * interval timestamps are relative to it), the CSV legend. Returns the log, or NULL with a
 * one-line message in err ("cannot write --hdr-log FILE: reason"). */
struct hdrlog *hdrlog_open(const char *path, double start_wall, char *err, size_t errlen);

/* Appends one interval: "start,length,max,histogram" (seconds since start_wall, its length,
 * the highest value of h's max's bucket in ms as HistogramLogWriter's default
 * maxValueUnitRatio of 10^6 makes it, hdr_encode's text) and flushes it, so a killed run keeps
 * every interval written. An empty h is written too. Returns 0 or -errno (hdr_encode's, or the
 * write's: -ENOSPC on a full disk); a failure is reported again by hdrlog_close. */
int hdrlog_write(struct hdrlog *l, double start_rel_s, double len_s, const struct hist *h);

/* The same, as a tagged interval ("Tag=TAG,start,length,max,histogram", format 1.3): a second
 * histogram of the same interval, which HdrHistogram's readers tell apart by its tag. TAG is not
 * empty and holds no comma or blank: -EINVAL, nothing written, else hdrlog_write's results. */
int hdrlog_write_tagged(struct hdrlog *l, const char *tag, double start_rel_s, double len_s,
                        const struct hist *h);

/* Closes and frees l (NULL is a no-op). Returns 0, or -errno of the first write that failed
 * since open, or of the close itself: only 0 means the file holds every interval. */
int hdrlog_close(struct hdrlog *l);

#endif /* LFE_HDR_H */
