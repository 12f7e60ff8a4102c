#!/usr/bin/env python3
"""Replay a settling rule on the raw samples a corpus recorded (issue 17, item 2): a pass of a
(cell, mode) stops its sample rounds early once every candidate still running has settled,
i.e. after at least AFTER sample rounds of the pass the spread (max - min) / median of each
one's samples in this pass is at most TOL. Whole rounds stop, so every candidate keeps the
same interleaved rounds (no candidate is timed over a different stretch of the run).

Replayed on the candidates that ran every round (the recorded racing's survivors; the
others are stopped by racing before AFTER). Loss per (cell, mode): the all-samples median
of the candidate with the fastest median over the rounds kept, over the fastest all-samples
median, minus 1. Samples saved: of every sample the corpus recorded (warmups excluded).

    python3 scripts/perf/settle_replay.py SIDECAR... [--rules 5:0.01,6:0.005] [--by-m]

Sums over the sidecars: samples saved, sampling time saved (a sample weighs its latency, at
least 250 us), and the pass replicates (|median pass 1 / median pass 0 - 1| of each
candidate that ran every round) over every round and over the rounds kept.
"""
import argparse
import statistics
from collections import defaultdict

from race_replay import load, survivors  # the sidecar reader, the recorded survivors (same folder)

DEFAULT = "4:0.01,5:0.01,5:0.02,6:0.005,6:0.01"


def settled(values, tol):
    m = statistics.median(values)
    return (max(values) - min(values)) <= tol * m


def replay(cells, warm, after, tol, surface_of):
    out = defaultdict(lambda: {"cells": 0, "total": 0, "saved": 0, "losses": [], "stopped": 0, "time": 0.0,
                               "time_saved": 0.0, "rep_all": [], "rep_kept": []})
    for cell, cands in cells.items():
        w = warm.get(cell, 0)
        passes = 1 + max(p for v in cands.values() for p, _, _ in v)
        rounds = max(rd for v in cands.values() for p, rd, _ in v if p == 0) - w + 1
        kept = survivors(cands, passes)
        if not kept:
            continue
        truth = {c: statistics.median(x for _, _, x in cands[c]) for c in kept}
        best = min(truth.values())
        s = out[surface_of(cell)]
        s["cells"] += 1
        s["total"] += sum(len(v) for v in cands.values())
        s["time"] += sum(cost(x) for v in cands.values() for _, _, x in v)
        kept_samples = {c: [] for c in kept}
        by_pass = {c: [[] for _ in range(passes)] for c in kept}
        for p in range(passes):
            stop = rounds
            for j in range(after, rounds + 1):
                so_far = {c: [x for pp, rd, x in cands[c] if pp == p and rd - w < j] for c in kept}
                if all(settled(v, tol) for v in so_far.values()):
                    stop = j
                    break
            if stop < rounds:
                s["stopped"] += 1
            s["saved"] += (rounds - stop) * len(kept)
            s["time_saved"] += sum(cost(x) for c in kept for pp, rd, x in cands[c] if pp == p and rd - w >= stop)
            for c in kept:
                by_pass[c][p] = [x for pp, rd, x in cands[c] if pp == p and rd - w < stop]
                kept_samples[c] += by_pass[c][p]
        if passes == 2:
            for c in kept:
                full = [statistics.median(x for pp, _, x in cands[c] if pp == p) for p in (0, 1)]
                cut = [statistics.median(v) for v in by_pass[c]]
                s["rep_all"].append(abs(full[1] / full[0] - 1))
                s["rep_kept"].append(abs(cut[1] / cut[0] - 1))
        pick = min(kept, key=lambda c: (statistics.median(kept_samples[c]), c))
        s["losses"].append(truth[pick] / best - 1)
    return out


def cost(latency_us):
    """What a sample costs the GPU: its launches last at least a window (250 us)."""
    return max(latency_us, 250.0)


def merge(results):
    out = {}
    for res in results:
        for name, s in res.items():
            o = out.setdefault(name, {k: ([] if isinstance(v, list) else 0) for k, v in s.items()})
            for k, v in s.items():
                o[k] = o[k] + v
    return out


def pct(values, q):
    values = sorted(values)
    return 100 * values[int(q * (len(values) - 1))] if values else float("nan")


def surface(cell):
    m = int(cell[2])
    return "decode" if m == 1 else ("grouped" if m < 32 else "prefill")


def main():
    ap = argparse.ArgumentParser(description="Replay settling rules on recorded samples.")
    ap.add_argument("sidecars", nargs="+")
    ap.add_argument("--rules", default=DEFAULT, help="after:spread,... (e.g. 4:0.01)")
    ap.add_argument("--by-m", action="store_true", help="one row per surface and M")
    a = ap.parse_args()
    rules = [(int(x), float(t)) for x, t in (r.split(":") for r in a.rules.split(","))]
    loaded = [load(p) for p in a.sidecars]
    key = (lambda c: f"{surface(c)} M={c[2]}") if a.by_m else surface
    print("| rule (after, tol) | surface | cells x modes | passes stopped early | samples saved | sampling time saved | "
          "pick loss mean / p95 / max | losses > 0.5% | pass replicate p95, all rounds -> kept |")
    print("|---|---|---|---|---|---|---|---|---|")
    for after, tol in rules:
        res = merge(replay(cells, warm, after, tol, key) for cells, warm in loaded)
        res["all"] = merge([{"all": s} for s in res.values()])["all"]
        for name in sorted(res):
            s = res[name]
            ls = sorted(s["losses"])
            print(f"| {after}, {100 * tol:g}% | {name} | {s['cells']} | {s['stopped']} | "
                  f"{100 * s['saved'] / s['total']:.1f}% | {100 * s['time_saved'] / s['time']:.1f}% | "
                  f"{100 * statistics.mean(ls):.3f}% / {pct(ls, 0.95):.2f}% / {pct(ls, 1.0):.2f}% | "
                  f"{sum(x > 0.005 for x in ls)} | {pct(s['rep_all'], 0.95):.2f}% -> {pct(s['rep_kept'], 0.95):.2f}% |")


if __name__ == "__main__":
    main()
