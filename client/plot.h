/* plot: `lfbench plot RUN.json... -o FILE.png`, one PNG of one or more --json runs drawn by
 * gnuplot: latency and throughput per second, the percentile spectrum and the rate sweep. */
#ifndef LFE_PLOT_H
#define LFE_PLOT_H

/* The `plot` subcommand: argv[0] is "plot", the rest its options and files. Writes the PNG (or
 * with --script the gnuplot script) and returns the exit status: 0, 1 when gnuplot is missing or
 * fails, 2 for bad usage or an input that cannot be read; the reason is one line on stderr.
 * Runs gnuplot ($GNUPLOT if set) as a child process; call it from a single-threaded process. */
int plot_main(int argc, char **argv);

#endif /* LFE_PLOT_H */
