#!/usr/bin/env python3
"""What pruning by a policy's cost models would save and lose (issue 17, item 2), replayed on
a bench run that timed every decode candidate (shapes the policy never saw, e.g. the held-out
families of docs/perf/holdout-families-2).

Per (codebook, N, K) of the run, `vnni-dispatch explain --predictions` lists every cost
model's predicted latency for the decode domain; pruning at ratio R skips the candidates
predicted slower than R x the fastest prediction. Saved: the share of the timed candidates
skipped. Loss: the measured median of the fastest candidate kept over the fastest measured,
minus 1 (geomean over cells, p95, max). Candidates without a model are kept.

    python3 scripts/perf/prune_replay.py BIN POLICY RUN.decode.csv[.gz] [--mode graph] [--ratios 1.1,1.25,1.5,2,3]
"""
import csv
import gzip
import json
import math
import subprocess
import sys
from collections import defaultdict


def main():
    args = sys.argv[1:]
    opts = {"--mode": "graph", "--ratios": "1.1,1.25,1.5,2,3"}
    for flag in list(opts):
        if flag in args:
            i = args.index(flag)
            opts[flag] = args[i + 1]
            del args[i:i + 2]
    binary, policy, run = args
    ratios = [float(r) for r in opts["--ratios"].split(",")]
    formats = json.loads(subprocess.run([binary, "formats", "--json"], capture_output=True, check=True).stdout)
    format_of = {c["name"]: c["source_formats"][0] for c in formats["codebooks"]}
    opener = gzip.open if run.endswith(".gz") else open
    measured = defaultdict(dict)  # (codebook, n, k) -> candidate -> median
    with opener(run, "rt") as f:
        for r in csv.DictReader(f):
            if r["mode"] != opts["--mode"] or r["codebook"] == "-" or r["m"] != "1" or r["eligible"] != "true":
                continue
            measured[(r["codebook"], int(r["n"]), int(r["k"]))][r["candidate"]] = float(r["median_us"])
    if not measured:
        sys.exit(f"{run} has no eligible M = 1 rows in {opts['--mode']} mode")
    rows = {ratio: [] for ratio in ratios}
    for (cb, n, k), meds in sorted(measured.items()):
        out = subprocess.run([binary, "explain", "--policy", policy, "--format", format_of[cb], "--mode", opts["--mode"],
                              "--m", "1", "--n", str(n), "--k", str(k), "--predictions", "--root", "/nonexistent"],
                             capture_output=True, text=True, check=True).stdout
        predicted = {}
        for line in out.splitlines():
            if line.startswith("predicted"):
                _, us, _, cand = line.split()
                predicted[cand] = float(us)
        best = min(meds.values())
        fastest = min(predicted[c] for c in meds if c in predicted)
        for ratio in ratios:
            kept = [c for c in meds if c not in predicted or predicted[c] <= ratio * fastest]
            rows[ratio].append((1 - len(kept) / len(meds), min(meds[c] for c in kept) / best - 1))
    print(f"policy {policy}; run {run}; {opts['--mode']} mode; {len(measured)} cells\n")
    print("| prune above (x the fastest prediction) | candidates skipped | loss geomean / p95 / max | cells with a loss > 1% |")
    print("|---|---|---|---|")
    for ratio in ratios:
        v = rows[ratio]
        losses = sorted(x for _, x in v)
        geo = math.exp(sum(math.log1p(x) for x in losses) / len(losses)) - 1
        skipped = sum(s for s, _ in v) / len(v)
        print(f"| {ratio:g} | {100 * skipped:.1f}% | {100 * geo:.2f}% / {100 * losses[int(0.95 * (len(losses) - 1))]:.2f}% / "
              f"{100 * losses[-1]:.2f}% | {sum(x > 0.01 for x in losses)} of {len(losses)} |")


if __name__ == "__main__":
    main()
