/* merge: `lfbench merge`, one result from the --json files of runs made at the same time. */
#ifndef LFE_MERGE_H
#define LFE_MERGE_H

/* lfbench merge [--json OUT] [-q] A.json B.json ...: argv[0] is "merge". Prints the merged
 * summary (unless -q) and writes OUT. Returns the exit status: 0, 1 when OUT cannot be
 * written, 2 on bad usage or a file that cannot be read or merged (one line on stderr). */
int merge_main(int argc, char **argv);

#endif /* LFE_MERGE_H */
