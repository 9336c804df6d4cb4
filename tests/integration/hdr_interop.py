#!/usr/bin/env python3
"""hdr_interop: reads an lfbench --hdr-log with HdrHistogram's Python port (hdrh, a reader
nobody here wrote), sums its intervals, and checks them against lfbench's own figures.

    hdr_interop.py LOG JSON [KEY [TAG]]

JSON is lfbench's --json output (or any file with the same "latency" object; KEY names another
object, default "latency"): samples, and where present min_us, p50_us, p90_us, p99_us, p999_us,
p9999_us, max_us, mean_us. The intervals summed are the untagged ones, or with TAG those tagged
TAG (lfbench's phases: connect, handshake, first_byte, compared with KEY connect_latency, ...). Exit 0 when every check passes, 1 when one fails (each failure is
printed), 77 when hdrh is not installed (python3 -m pip install hdrhistogram), 2 on bad usage.

What is compared, and why exactly so:
- the count: equal.
- min, max, each percentile: lfbench prints a bucket's midpoint clamped to the exact min and
  max, hdrh a bucket's highest (lowest for min) equivalent value, so the check is that
  lfbench's figure lies inside the bucket hdrh names: the histogram's precision, 1/128 of the
  value (0.8%) at most, +-1 ns for the JSON's 3 decimals of a microsecond.
- percentiles at lfbench's rank: lfbench takes the ceil(p% of n)-th value, hdrh the
  round(p% of n)-th; both are asked for the same rank (hdrh with the percentile that rounds to
  it), otherwise two neighbouring samples far apart in a sparse tail would differ by more than
  a bucket for no fault of either. hdrh's answer at p itself is printed beside it.
- the mean: within 0.5% (hdrh's mean uses bucket midpoints, lfbench's the exact values).
- the log's own shape: format version 1.3, StartTime, the legend, every interval line read
  (hdrh's reader stops silently at a line it cannot parse), timestamps not going back, each
  line's Interval_Max as HistogramLogWriter writes it (the highest value of the max's bucket,
  in ms, 3 decimals).
"""
import json
import sys

HIGHEST = 2**41 - 1


def main(argv):
    if len(argv) not in (3, 4, 5):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    try:
        from hdrh.histogram import HdrHistogram
        from hdrh.log import HistogramLogReader
    except ImportError:
        print("hdr_interop: the hdrh module is missing: python3 -m pip install hdrhistogram",
              file=sys.stderr)
        return 77
    log_path, json_path = argv[1], argv[2]
    key = argv[3] if len(argv) >= 4 else "latency"
    tag = argv[4] if len(argv) == 5 else None
    failures = []

    def check(ok, what):
        if not ok:
            failures.append(what)

    with open(log_path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    check(lines[0] == "#[Histogram log format version 1.3]", "first line: " + lines[0])
    check(any(l.startswith("#[StartTime: ") for l in lines[:4]), "no #[StartTime: ...] line")
    check('"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"'
          in lines[:5], "no legend line")
    check(lines[-1] == "", "the last line is not complete")
    intervals = [l for l in lines if l and not l.startswith("#") and not l.startswith('"')]
    check(len(intervals) > 0, "no interval in the log")

    reader = HistogramLogReader(log_path, HdrHistogram(1, HIGHEST, 2))
    total = HdrHistogram(1, HIGHEST, 2)
    read = tagged = 0
    last_start = {}
    while True:
        h = reader.get_next_interval_histogram()
        if h is None:
            break
        fields = intervals[read].split(",")
        check(fields[0].startswith("Tag=") == (h.get_tag() is not None),
              "interval %d: hdrh read its tag as %r" % (read, h.get_tag()))
        if fields[0].startswith("Tag="):
            fields = fields[1:]
        start = float(fields[0])
        check(start >= last_start.get(h.get_tag(), -1.0),
              "interval %d starts at %s, before the one above of its tag" % (read, fields[0]))
        last_start[h.get_tag()] = start
        want_max = "%.3f" % (h.get_max_value() / 1e6)
        check(fields[2] == want_max, "interval %d: Interval_Max %s, its histogram says %s" %
              (read, fields[2], want_max))
        if h.get_tag() == tag:
            total.add(h)
            tagged += 1
        read += 1
    reader.close()
    check(read == len(intervals), "hdrh read %d of the %d interval lines" %
          (read, len(intervals)))

    with open(json_path, encoding="utf-8") as f:
        lat = json.load(f)[key]
    n = total.get_total_count()
    check(tag is None or tagged > 0, "no interval tagged %s" % tag)
    print("hdr_interop: %d intervals, %d samples (lfbench: %d)" % (tagged, n, lat["samples"]))
    check(n == lat["samples"], "count: hdrh %d, lfbench %d" % (n, lat["samples"]))

    def in_bucket(name, ns, hv):
        lo = total.get_lowest_equivalent_value(hv)
        hi = total.get_highest_equivalent_value(hv)
        ok = lo - 1 <= ns <= hi + 1
        print("  %-6s lfbench %14.3f us  hdrh bucket [%.3f, %.3f] us  %s" %
              (name, ns / 1e3, lo / 1e3, hi / 1e3, "ok" if ok else "OUTSIDE"))
        check(ok, "%s: lfbench %.3f us is not in hdrh's bucket [%.3f, %.3f] us" %
              (name, ns / 1e3, lo / 1e3, hi / 1e3))

    if n and n == lat["samples"]:
        if "min_us" in lat:
            # not get_min_value(): hdrh's add() leaves the sum's min at 0
            first = next(i for i in range(total.counts_len) if total.get_count_at_index(i))
            in_bucket("min", lat["min_us"] * 1e3, total.get_value_from_index(first))
        if "max_us" in lat:
            in_bucket("max", min(lat["max_us"] * 1e3, HIGHEST), total.get_max_value())
        for name, p in (("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("p999", 99.9),
                        ("p9999", 99.99)):
            if name + "_us" not in lat:
                continue
            rank = min(max(int(p / 100.0 * n + 0.9999999), 1), n)  # hist_percentile's
            at_rank = total.get_value_at_percentile(rank * 100.0 / n)
            in_bucket(name, lat[name + "_us"] * 1e3, at_rank)
            print("         (hdrh's own p%g: %.3f us)" % (p, total.get_value_at_percentile(p) / 1e3))
        if "mean_us" in lat:
            m, want = total.get_mean_value(), lat["mean_us"] * 1e3
            print("  mean   lfbench %14.3f us  hdrh %.3f us" % (want / 1e3, m / 1e3))
            check(abs(m - want) <= 0.005 * want + 1, "mean: hdrh %.3f us, lfbench %.3f us" %
                  (m / 1e3, want / 1e3))

    for f in failures:
        print("hdr_interop: FAILED: " + f, file=sys.stderr)
    if not failures:
        print("hdr_interop: ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
