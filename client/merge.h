/* merge: `lfbench merge`, one result from the --json files of runs made at the same time. */
#ifndef LFE_MERGE_H
#define LFE_MERGE_H

struct bresult;

/* dst += src: counts summed, histograms merged bucket by bucket, series aligned by wall clock.
 * Returns 0; -EINVAL (nothing changed) when the two cannot be merged: a different --mode,
 * --expect, --ok-status, classes or sweep; -EEXIST (nothing changed) when src holds a run dst
 * holds already (a run id of both); -EOVERFLOW when connections, threads or agents pass 2^31;
 * -ENOMEM. */
int merge_result(struct bresult *dst, const struct bresult *src);

/* lfbench merge [--json OUT] [-q] [--allow-disjoint] A.json B.json ...: argv[0] is "merge".
 * Prints the merged summary (unless -q) and writes OUT. Runs whose measured windows have no
 * instant in common are refused unless --allow-disjoint (then a warning on stderr), and runs
 * that share less than half of their span are warned of. Returns the exit status: 0, 1 when
 * OUT cannot be written, 2 on bad usage, a file that cannot be read or merged, or disjoint
 * runs (one line on stderr). */
int merge_main(int argc, char **argv);

#endif /* LFE_MERGE_H */
