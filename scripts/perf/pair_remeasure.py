#!/usr/bin/env python3
"""Score a paired re-measurement of the cells a fit lists as failing cross-validation (stdlib only).

    python3 scripts/perf/pair_remeasure.py remeasure.csv run1.samples.csv[.gz] [run2.samples.csv[.gz]]

`remeasure.csv` is what `fit --report R` writes (each M = 1 cell's held-out pick against its
fastest candidate, its regret and upper confidence bound in the corpus, and which of the two
held it back: `regret` or `bound`); each run is the samples.csv of a `bench --pairs
remeasure.csv --out DIR` (gzipped or not).
Per cell, from the pair's own samples (every non-warmup sample of every pass): the pick's
regret against the best (median over median - 1) and its upper confidence bound, the
distribution-free one of the learner (`learner/src/ucb.rs`: order statistics of the binomial
tail, one comparison, so each bound at level 0.05 / 2). A cell then falls into one of three
classes at the gate's 5% threshold: `passes` (bound under 5%), `fails` (regret at or above 5%),
`open` (regret under, bound not). With a second run, the pair's own noise: how far the pick's
regret moves between the runs.
"""
import csv
import gzip
import math
import sys
from collections import defaultdict

ALPHA = 0.05
THRESHOLD = 0.05


def rank(n, a):
    """The largest l with P(Binomial(n, 1/2) <= l - 1) <= a (1-based; at least 1)."""
    cdf, l, pmf = 0.0, 1, 0.5 ** n
    for i in range(n // 2):
        cdf += pmf
        if cdf > a:
            break
        l = i + 1
        pmf *= (n - i) / (i + 1)
    return min(l, (n + 1) // 2)


def bounds(xs, a):
    s = sorted(xs)
    l = rank(len(s), a)
    return s[l - 1], s[len(s) - l]


def median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def samples(path):
    out = defaultdict(list)
    text = gzip.open(path, "rt") if path.endswith(".gz") else open(path)
    for r in csv.DictReader(text):
        if r["warmup"] == "true":
            continue
        key = (r["source_format"], r["mode"], r["m"], r["n"], r["k"], r["candidate"])
        out[key].append(float.fromhex(r["latency_us_hex"]))
    return out


def score(req, s):
    key = (req["source_format"], req["mode"], req["m"], req["n"], req["k"])
    pick, best = s.get(key + (req["pick"],)), s.get(key + (req["best"],))
    if not pick or not best:
        return None
    regret = median(pick) / median(best) - 1
    a = ALPHA / 2
    ucb = max(0.0, bounds(pick, a)[1] / bounds(best, a)[0] - 1)
    return regret, ucb, len(pick), len(best)


def cls(regret, ucb):
    if regret >= THRESHOLD:
        return "fails"
    return "passes" if ucb < THRESHOLD else "open"


def main():
    requests = [r for r in csv.DictReader(open(sys.argv[1])) if r["m"] == "1"]
    runs = [samples(d) for d in sys.argv[2:]]
    table = defaultdict(lambda: defaultdict(int))
    moved, n_samples = [], []
    for req in requests:
        first = score(req, runs[0])
        if first is None:
            table[req["limit"]]["unmeasured"] += 1
            continue
        n_samples.append(min(first[2], first[3]))
        table[req["limit"]][cls(first[0], first[1])] += 1
        table[req["limit"]]["cells"] += 1
        if len(runs) > 1:
            second = score(req, runs[1])
            if second is not None:
                moved.append(abs(second[0] - first[0]))
    print(f"{len(requests)} M = 1 pairs, at least {min(n_samples)} samples a candidate\n")
    print("| corpus limit | cells | passes (bound < 5%) | open | fails (regret >= 5%) |")
    print("|---|---|---|---|---|")
    for limit in ("bound", "regret", "stalled"):
        t = table[limit]
        c = t["cells"]
        if not c:
            continue
        pct = lambda k: f"{t[k]} ({t[k] / c:.0%})"
        print(f"| {limit} | {c} | {pct('passes')} | {pct('open')} | {pct('fails')} |")
    if moved:
        moved.sort()
        p95 = moved[max(0, math.ceil(0.95 * len(moved)) - 1)]
        print(f"\nthe pick's regret between the two runs: median {median(moved):.2%}, p95 {p95:.2%}, max {moved[-1]:.2%}")


if __name__ == "__main__":
    main()
