#!/usr/bin/env python3
"""Leave-one-family-out picks of a fit, replayed from its report's family-cv.csv.zst (stdlib
and the zstd command only).

`vnni-dispatch fit --report R` writes R/family-cv.csv.zst: for every development cell scored
with its model family left out, every candidate's held-out cost-model prediction, its measured
and scored regret, and which candidate shipped. This prints the shipped picks' p95 / geomean /
max (what the report's "Leave one family out" table calls cost models, shipped) over all
cells, per mode and per family, the worst cells with the pick's and the best's prediction
error, and the same for the argmin over a subset of candidates (--only FILE, one id a line):
a selection rule is tried here without fitting again, then confirmed by a fit.

    python3 scripts/perf/family_cv.py R/family-cv.csv.zst [--only ids.txt] [--worst 10]
"""
import argparse
import csv
import io
import math
import subprocess
from collections import OrderedDict


def load(path):
    """Cells keyed by (family, codebook, mode, n, k) and their alias rows, in file order."""
    text = subprocess.run(["zstd", "-dc", path], check=True, capture_output=True, text=True).stdout
    cells = OrderedDict()
    for row in csv.DictReader(io.StringIO(text)):
        key = (row["family"], row["codebook"], row["mode"], int(row["n"]), int(row["k"]), row["source_format"])
        cands = cells.setdefault(key, OrderedDict())
        cands[row["candidate"]] = {
            "predicted": float(row["predicted_us"]) if row["predicted_us"] else None,
            "regret": float(row["regret"]),
            "scored": float(row["scored"]),
            "shipped": row["shipped"] == "true",
        }
    return cells


def stats(values):
    """Nearest-rank p95, geomean of (1 + r) - 1 and max, as percentages (the learner's)."""
    if not values:
        return (0.0, 0.0, 0.0)
    v = sorted(values)
    p95 = v[max(0, math.ceil(0.95 * len(v)) - 1)]
    geomean = math.expm1(sum(math.log1p(x) for x in v) / len(v))
    return (100 * p95, 100 * geomean, 100 * v[-1])


def choose(cands, only):
    """The shipped pick, or with `only` the least prediction among those candidates (first id
    on ties, as the policy's argmin), the shipped pick where none of them is predicted."""
    shipped = next(c for c, r in cands.items() if r["shipped"])
    if only is None:
        return shipped
    best = None
    for c in sorted(cands):
        p = cands[c]["predicted"]
        if c in only and p is not None and p > 0 and (best is None or p < best[1]):
            best = (c, p)
    return best[0] if best else shipped


def fmt(s):
    return "%.2f%% / %.2f%% / %.2f%%" % s


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path")
    ap.add_argument("--only", help="file of candidate ids the argmin may pick")
    ap.add_argument("--worst", type=int, default=10)
    a = ap.parse_args()
    only = None
    if a.only:
        only = {line.strip() for line in open(a.only) if line.strip() and not line.startswith("#")}
    cells = load(a.path)
    picks = [(key, cands, choose(cands, only)) for key, cands in cells.items()]
    groups = OrderedDict([("all", [])])
    for key, cands, c in picks:
        for g in ("all", "mode " + key[2], "family " + key[0]):
            groups.setdefault(g, []).append(cands[c]["scored"])
    print("| cells | n | shipped p95 / geomean / max |\n|---|---|---|")
    for g, r in sorted(groups.items(), key=lambda x: (x[0] != "all", not x[0].startswith("mode"), x[0])):
        print("| %s | %d | %s |" % (g, len(r), fmt(stats(r))))
    print("\nWorst cells (the pick and the cell's fastest candidate, each with its held-out prediction in us):")
    worst = sorted(picks, key=lambda p: -p[1][p[2]]["scored"])[: a.worst]
    for key, cands, c in worst:
        best = min(cands, key=lambda x: (cands[x]["regret"], x))
        pred = lambda x: "%.3f" % cands[x]["predicted"] if cands[x]["predicted"] else "-"
        print("  %s %s %s %dx%d: %s %.2f%% (predicted %s) against %s (predicted %s)"
              % (key[0], key[1], key[2], key[3], key[4], c, 100 * cands[c]["scored"], pred(c), best, pred(best)))

if __name__ == "__main__":
    main()
