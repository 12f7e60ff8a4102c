#!/usr/bin/env python3
"""Pass-to-pass noise of a corpus timed in two or more passes, by size octave (log2 N x K).

For every eligible candidate of every development decode cell: the ratio of its pass-1 to its
pass-0 median (signed: a systematic pass effect shows as a median away from 1), |ratio - 1|
(median and p95: the learner's band is that p95 / sqrt 2 per domain and octave), and, for
comparison, |ratio - 1| between the first and second half of pass 0's samples (noise inside
one pass). Prints a table and writes CSV.

usage: pass_noise.py CORPUS_DIR OUT.csv
"""
import collections
import csv
import io
import math
import statistics
import subprocess
import sys


def nearest_rank(values, q):
    v = sorted(values)
    return v[max(0, math.ceil(q * len(v)) - 1)]


def main(corpus, out):
    text = subprocess.run(["zstdcat", f"{corpus}/decode_m1.development.timing.csv.zst"],
                          capture_output=True, check=True).stdout.decode()
    samples = collections.defaultdict(lambda: collections.defaultdict(list))
    for row in csv.DictReader(io.StringIO(text)):
        if row["warmup"] == "true":
            continue
        key = (row["source_format"], int(row["n"]), int(row["k"]), row["mode"], row["candidate"])
        samples[key][int(row.get("pass", 0))].append((int(row["round"]), float.fromhex(row["latency_us_hex"])))
    by_octave = collections.defaultdict(lambda: ([], []))
    for (_, n, k, _, _), passes in samples.items():
        if 0 not in passes or 1 not in passes:
            continue
        m0 = statistics.median(v for _, v in passes[0])
        m1 = statistics.median(v for _, v in passes[1])
        first = [v for _, v in sorted(passes[0])]
        half = len(first) // 2
        ratios, halves = by_octave[int(math.log2(n * k))]
        ratios.append(m1 / m0)
        if half:
            halves.append(abs(statistics.median(first[:half]) / statistics.median(first[half:]) - 1))
    rows = []
    for octave in sorted(by_octave):
        ratios, halves = by_octave[octave]
        diffs = [abs(r - 1) for r in ratios]
        rows.append({
            "octave": octave,
            "candidates": len(ratios),
            "pass1_over_pass0_median": f"{statistics.median(ratios):.4f}",
            "abs_diff_median_pct": f"{100 * statistics.median(diffs):.2f}",
            "abs_diff_p95_pct": f"{100 * nearest_rank(diffs, 0.95):.2f}",
            "band_pct": f"{100 * nearest_rank(diffs, 0.95) / math.sqrt(2):.2f}",
            "within_pass_halves_p95_pct": f"{100 * nearest_rank(halves, 0.95):.2f}" if halves else "",
        })
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print("| " + " | ".join(rows[0]) + " |")
    print("|" + "---|" * len(rows[0]))
    for r in rows:
        print("| " + " | ".join(str(v) for v in r.values()) + " |")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
