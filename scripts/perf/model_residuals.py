#!/usr/bin/env python3
"""Where a policy's decode cost models err: every timed M = 1 candidate of a bench run (graph)
beside the latency the policy predicts for it (`vnni-dispatch explain --predictions`, residual
correction included, as the policy answers), grouped by the launch's column tiles (ceil(N / tn),
kpar candidates) and its blocks per partition. Prints the error (measured over predicted) per
group and the cells where the model's fastest candidate is more than 5% behind the measured best.

    model_residuals.py BIN POLICY RUN.decode.csv[.gz] OUT.csv
OUT.csv keeps every (cell, candidate) row with both latencies; an existing OUT.csv is resumed
(cells already in it are not asked again).
"""
import collections
import csv
import gzip
import math
import os
import re
import subprocess
import sys

def measured(path):
    """(codebook, source format, n, k) -> candidate -> (median us, bpp): eligible decode rows,
    graph, M = 1 (explain is asked by the row's own source format, as policy_regret.py does)."""
    cells = collections.defaultdict(dict)
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        for r in csv.DictReader(f):
            if r["mode"] == "graph" and r["eligible"] == "true" and r["m"] == "1" and r["candidate"].startswith("decode."):
                key = (r["codebook"], r["source_format"], int(r["n"]), int(r["k"]))
                cells[key][r["candidate"]] = (float(r["median_us"]), int(r["bpp"]))
    return cells


def predicted(binary, policy, fmt, n, k):
    """Candidate -> predicted us, as `explain --predictions` lists them."""
    args = [binary, "explain", "--policy", policy, "--format", fmt, "--mode", "graph", "--m", "1"]
    out = subprocess.run(args + ["--n", str(n), "--k", str(k), "--predictions"], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"explain failed for {fmt} {n}x{k}:\n{out.stderr}")
    return {m.group(2): float(m.group(1)) for m in re.finditer(r"^predicted\s+([\d.]+) us\s+(\S+)", out.stdout, re.M)}


def column_tiles(candidate, n):
    tn = next((int(p[2:]) for p in candidate.split(".") if p.startswith("tn")), None)
    return math.ceil(n / tn) if tn and ".kpar." in candidate else None


def main():
    binary, policy, run, out_path = sys.argv[1:5]
    header = ["codebook", "n", "k", "candidate", "bpp", "measured_us", "predicted_us"]
    done = set()
    if os.path.exists(out_path):
        with open(out_path) as f:
            done = {(r["codebook"], int(r["n"]), int(r["k"])) for r in csv.DictReader(f)}
    with open(out_path, "a", newline="") as f:
        w = csv.writer(f)
        if not done:
            w.writerow(header)
        for (cb, fmt, n, k), cands in sorted(measured(run).items()):
            if (cb, n, k) in done:
                continue
            pred = predicted(binary, policy, fmt, n, k)
            for c, (us, bpp) in sorted(cands.items()):
                if c in pred:
                    w.writerow([cb, n, k, c, bpp, us, pred[c]])
    with open(out_path) as f:
        rows = list(csv.DictReader(f))
    groups = collections.defaultdict(list)
    cells = collections.defaultdict(list)
    for r in rows:
        n, bpp = int(r["n"]), int(r["bpp"])
        err = float(r["measured_us"]) / float(r["predicted_us"])
        cells[(r["codebook"], n, int(r["k"]))].append((float(r["predicted_us"]), r["candidate"], float(r["measured_us"]), bpp, err))
        tiles = column_tiles(r["candidate"], n)
        if tiles is not None:
            t = "<= 4" if tiles <= 4 else "5-16" if tiles <= 16 else "> 16"
            b = "<= 4" if bpp <= 4 else "5-8" if bpp <= 8 else "> 8"
            groups[(t, b)].append(err)
    print("| kpar column tiles | blocks per partition | rows | median | p90 | max |")
    print("|---|---|---|---|---|---|")
    order = {"<= 4": 0, "5-8": 1, "5-16": 1, "> 8": 2, "> 16": 2}
    for (t, b), errs in sorted(groups.items(), key=lambda g: (order[g[0][0]], order[g[0][1]])):
        errs.sort()
        q = lambda p: f"{100 * (errs[min(len(errs) - 1, int(p * len(errs)))] - 1):+.1f}%"
        print(f"| {t} | {b} | {len(errs)} | {q(0.5)} | {q(0.9)} | {100 * (errs[-1] - 1):+.1f}% |")
    print("\ncells whose predicted fastest is > 5% behind the measured best:")
    for key, cs in sorted(cells.items()):
        pick = min(cs)
        best = min(cs, key=lambda c: (c[2], c[1]))
        regret = pick[2] / best[2] - 1
        if regret > 0.05:
            print(f"  {key[0]} {key[1]}x{key[2]}: {100 * regret:.1f}%, pick {pick[1]} (bpp {pick[3]}, measured "
                  f"{100 * (pick[4] - 1):+.1f}% over predicted), best {best[1]} (bpp {best[3]})")
    print(f"  of {len(cells)} cells")


if __name__ == "__main__":
    main()
