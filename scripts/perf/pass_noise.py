#!/usr/bin/env python3
"""Pass-to-pass noise of a corpus timed in two or more passes, by size octave (log2 N x K).

For every development decode cell, over its eligible candidates timed in passes 0 and 1:
- the cell's shift: pass 1 / pass 0 of the median candidate's median (the whole cell moving
  between passes: other weight copies, warmer clocks; it cancels out of regret);
- each candidate's raw difference |pass 1 / pass 0 - 1| of its own medians;
- each candidate's relative difference: the same of its median over the cell's median
  candidate in each pass (what the learner's band is made of: p95 / sqrt 2 per domain and
  octave);
- for comparison, |first half / second half - 1| of pass 0's samples (noise inside one pass).
Baseline rows (no source format) are skipped. Prints a table and writes CSV.

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
    cells = collections.defaultdict(lambda: collections.defaultdict(lambda: collections.defaultdict(list)))
    for row in csv.DictReader(io.StringIO(text)):
        if row["warmup"] == "true" or row["source_format"] in ("", "-"):
            continue
        cell = (row["source_format"], int(row["n"]), int(row["k"]), row["mode"])
        cells[cell][row["candidate"]][int(row.get("pass", 0))].append(
            (int(row["round"]), float.fromhex(row["latency_us_hex"])))
    by_octave = collections.defaultdict(lambda: {"shift": [], "raw": [], "rel": [], "halves": []})
    for (_, n, k, _), candidates in cells.items():
        pairs = []
        o = by_octave[int(math.log2(n * k))]
        for passes in candidates.values():
            if 0 not in passes or 1 not in passes:
                continue
            pairs.append((statistics.median(v for _, v in passes[0]), statistics.median(v for _, v in passes[1])))
            first = [v for _, v in sorted(passes[0])]
            half = len(first) // 2
            if half:
                o["halves"].append(abs(statistics.median(first[:half]) / statistics.median(first[half:]) - 1))
        if len(pairs) < 3:
            continue
        r0, r1 = statistics.median(a for a, _ in pairs), statistics.median(b for _, b in pairs)
        o["shift"].append(r1 / r0)
        o["raw"].extend(abs(b / a - 1) for a, b in pairs)
        o["rel"].extend(abs((b / r1) / (a / r0) - 1) for a, b in pairs)
    rows = []
    for octave in sorted(by_octave):
        o = by_octave[octave]
        if not o["rel"]:
            continue
        rows.append({
            "octave": octave,
            "cells": len(o["shift"]),
            "candidates": len(o["rel"]),
            "cell_shift_median": f"{statistics.median(o['shift']):.4f}",
            "cell_shift_abs_p95_pct": f"{100 * nearest_rank([abs(s - 1) for s in o['shift']], 0.95):.2f}",
            "raw_diff_p95_pct": f"{100 * nearest_rank(o['raw'], 0.95):.2f}",
            "relative_diff_median_pct": f"{100 * statistics.median(o['rel']):.2f}",
            "relative_diff_p95_pct": f"{100 * nearest_rank(o['rel'], 0.95):.2f}",
            "band_pct": f"{100 * nearest_rank(o['rel'], 0.95) / math.sqrt(2):.2f}",
            "within_pass_halves_p95_pct": f"{100 * nearest_rank(o['halves'], 0.95):.2f}" if o["halves"] else "",
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
