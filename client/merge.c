/* merge: `lfbench merge`, one result from the --json files of runs made at the same time (agents
 * on several hosts, or several processes on one), exact: histograms are merged bucket by
 * bucket, so the merged percentiles are those of all the samples together. */
#include "merge.h"

#include "result.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static const char usage[] = "usage: lfbench merge [--json OUT] [-q] A.json B.json ...";

int merge_main(int argc, char **argv)
{
    struct bresult all, one;
    const char *out = NULL;
    bool quiet = false;
    char err[512];
    int nfiles = 0, rc = 2;
    FILE *f;

    /* the file names are gathered at the front of argv[1..] as the options are read */
    for (int i = 1, dashes = 0; i < argc; i++) {
        if (dashes || argv[i][0] != '-' || !argv[i][1]) {
            argv[1 + nfiles++] = argv[i];
        } else if (!strcmp(argv[i], "--")) {
            dashes = 1;
        } else if (!strcmp(argv[i], "--json")) {
            if (++i == argc) {
                fprintf(stderr, "lfbench merge: --json needs a file name; %s\n", usage);
                return 2;
            }
            out = argv[i];
        } else if (!strcmp(argv[i], "-q") || !strcmp(argv[i], "--quiet")) {
            quiet = true;
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("%s\n  Merges the --json files of lfbench runs made at the same time into one "
                   "result:\n  counts summed, latency histograms merged bucket by bucket (exact "
                   "percentiles),\n  per-second series aligned by wall clock. Writes the merged "
                   "--json to OUT (it can be merged again).\n",
                   usage);
            return 0;
        } else {
            fprintf(stderr, "lfbench merge: unknown option '%.60s'; %s\n", argv[i], usage);
            return 2;
        }
    }
    if (nfiles < 1) {
        fprintf(stderr, "lfbench merge: no file to merge; %s\n", usage);
        return 2;
    }
    if (nfiles > 1024) { /* each count read is at most 2^53: 1,024 of them cannot wrap 2^64 */
        fprintf(stderr,
                "lfbench merge: %d files; at most 1024 at once (merge the merged files "
                "again)\n",
                nfiles);
        return 2;
    }
    result_init(&all);
    for (int n = 0; n < nfiles; n++) {
        const char *path = argv[1 + n];

        if (result_read_json(path, n ? &one : &all, err, sizeof(err)) < 0) {
            fprintf(stderr, "lfbench merge: %s\n", err);
            goto out;
        }
        if (n == 0)
            continue;
        rc = result_merge(&all, &one);
        result_free(&one);
        if (rc < 0) {
            fprintf(stderr, "lfbench merge: %s: %s\n", path,
                    rc == -ENOMEM      ? "out of memory"
                    : rc == -EOVERFLOW ? "too many connections, threads or agents in all (over "
                                         "2^31)"
                                       : "cannot be merged with the files before it: a different "
                                         "--mode, --expect, --ok-status, request classes or "
                                         "--rate-sweep steps");
            rc = 2;
            goto out;
        }
        rc = 2;
    }
    if (!quiet)
        result_print(stdout, &all);
    rc = 0;
    if (out) {
        if (!(f = fopen(out, "we"))) {
            fprintf(stderr, "lfbench merge: cannot write --json %s: %s\n", out, strerror(errno));
            rc = 1;
            goto out;
        }
        rc = result_write_json(f, &all);
        if (fclose(f) != 0 && rc == 0)
            rc = -errno;
        if (rc < 0) {
            fprintf(stderr, "lfbench merge: cannot write --json %s: %s\n", out, strerror(-rc));
            rc = 1;
        }
    }
out:
    result_free(&all);
    return rc;
}
