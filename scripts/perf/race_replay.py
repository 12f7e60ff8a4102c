#!/usr/bin/env python3
"""Replay a racing schedule on the raw samples a corpus recorded (issue 17, item 2): which
candidates it would have stopped, how many samples that saves, and what it loses.

A timing sidecar (`*.timing.csv.zst`) holds every sample of every candidate, including
those the recorded racing (median above 1.3 x the leader after four sample rounds) stopped.
The schedule is applied round by round in the first pass on the samples so far: after
`after` rounds a candidate whose fastest sample (`fastest`) or median (`median`) is slower
than `ratio` x the leader's median (the fastest median still running) is stopped; the
recorded rule then applies as it did, and stopped candidates sit out later passes. Loss per
cell: the median (all recorded samples) of the fastest surviving candidate over that of the
fastest candidate the recorded racing kept, minus 1. "Within 3%": recorded candidates
within 3% of that best which the schedule stopped.

On a corpus timed with settling (passes stop their rounds early, every candidate together) the
later passes are counted at the first pass's rounds.

    python3 scripts/perf/race_replay.py SIDECAR... [--schedule fastest:1:1.5,fastest:2:1.2,fastest:3:1.1]
"""
import csv
import io
import statistics
import subprocess
import sys
from collections import defaultdict

DEFAULT = "fastest:1:1.5,fastest:2:1.2,fastest:3:1.1"


def load(path):
    text = subprocess.run(["zstd", "-dc", path], capture_output=True, check=True).stdout.decode()
    cells = defaultdict(lambda: defaultdict(list))
    warm = {}
    for r in csv.DictReader(io.StringIO(text)):
        cell = (r["mode"], r["source_format"], r["m"], r["n"], r["k"])
        rnd = int(r["round"])
        if r["warmup"] == "true":
            warm[cell] = max(warm.get(cell, -1), rnd)
            continue
        cells[cell][r["candidate"]].append((int(r.get("pass") or 0), rnd, float.fromhex(r["latency_us_hex"])))
    return cells, {c: w + 1 for c, w in warm.items()}


def survivors(cands, passes):
    """The candidates the recorded racing kept: as many samples as any in every pass (passes
    that settled stop their rounds early, all candidates together)."""
    count = {c: [sum(1 for p, _, _ in v if p == q) for q in range(passes)] for c, v in cands.items()}
    most = [max(n[q] for n in count.values()) for q in range(passes)]
    return {c for c, n in count.items() if n == most}


def replay(cells, warm, schedule):
    saved = total = near = near_stopped = 0
    losses = []
    for cell, cands in cells.items():
        w = warm.get(cell, 0)
        rounds = max(rd for v in cands.values() for p, rd, _ in v if p == 0) - w + 1
        passes = 1 + max(p for v in cands.values() for p, _, _ in v)
        kept = survivors(cands, passes)
        truth = {c: statistics.median(x for _, _, x in cands[c]) for c in kept}
        best = min(truth.values())
        alive, spent = set(cands), 0
        for j in range(1, rounds + 1):
            so_far = {c: [x for p, rd, x in cands[c] if p == 0 and rd - w < j] for c in alive}
            spent += sum(1 for c in alive if len(so_far[c]) >= j)
            medians = {c: statistics.median(v) for c, v in so_far.items() if v}
            lead = min(medians.values())
            for bound, after, ratio in schedule:
                if after == j:
                    for c in list(alive):
                        value = min(so_far[c]) if bound == "fastest" else medians[c]
                        if value > ratio * lead:
                            alive.discard(c)
            if j == 4:
                alive &= kept  # the recorded rule, as it ran
        alive &= kept
        spent += len(alive) * rounds * (passes - 1)
        recorded = sum(len(v) for v in cands.values())
        total += recorded
        saved += recorded - spent
        losses.append(min(truth[c] for c in alive) / best - 1)
        close = [c for c in truth if truth[c] <= 1.03 * best]
        near += len(close)
        near_stopped += sum(c not in alive for c in close)
    losses.sort()
    return len(cells), saved / total, statistics.mean(losses), losses[int(0.95 * (len(losses) - 1))], losses[-1], \
        sum(x > 0 for x in losses), near_stopped, near


def main():
    args = sys.argv[1:]
    spec = DEFAULT
    if "--schedule" in args:
        i = args.index("--schedule")
        spec = args[i + 1]
        del args[i:i + 2]
    schedule = [(b, int(a), float(r)) for b, a, r in (s.split(":") for s in spec.split(","))]
    print(f"schedule {spec} (then the recorded median > 1.3 x after 4)\n")
    print("| samples | cells | samples saved | pick loss mean / p95 / max | cells with a loss | within 3% stopped |")
    print("|---|---|---|---|---|---|")
    for path in args:
        cells, warm = load(path)
        n, s, mean, p95, mx, lost, ns, nn = replay(cells, warm, schedule)
        print(f"| {path} | {n} | {100 * s:.1f}% | {100 * mean:.3f}% / {100 * p95:.2f}% / {100 * mx:.2f}% | {lost} | {ns} / {nn} |")


if __name__ == "__main__":
    main()
