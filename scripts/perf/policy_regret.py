#!/usr/bin/env python3
"""Regret of committed policies' M = 1 picks on shapes timed by `vnni-dispatch bench` (stdlib only).

For every (codebook, N, K) of the bench CSV (graph mode, M = 1), each policy's pick comes from
`vnni-dispatch explain` (the policy evaluator: overlays, then the tree), and its regret is its
median over the fastest eligible candidate's median. Prints one summary row per policy and
writes the per-shape picks as CSV.

    python3 scripts/perf/policy_regret.py BIN bench-decode.csv out.csv NAME=policy.json [...]
"""
import csv
import math
import subprocess
import sys
import tempfile


def pick(binary, policy, fmt, n, k, root):
    out = subprocess.run(
        [binary, "explain", "--policy", policy, "--format", fmt, "--mode", "graph", "--m", "1",
         "--n", str(n), "--k", str(k), "--root", root],
        check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith("selection"):
            return line.split()[1]
    raise SystemExit(f"no selection for {fmt} {n}x{k} in {policy}:\n{out}")


def p95(xs):
    s = sorted(xs)
    return s[max(0, math.ceil(0.95 * len(s)) - 1)]


def main(binary, bench, out_csv, policies):
    cells = {}
    for r in csv.DictReader(open(bench)):
        if r["m"] != "1" or r["mode"] != "graph" or not r["candidate"].startswith("decode."):
            continue
        if r["eligible"] != "true":
            continue
        key = (r["codebook"], r["source_format"], int(r["n"]), int(r["k"]))
        cells.setdefault(key, {})[r["candidate"]] = float(r["median_us"])
    rows = []
    with tempfile.TemporaryDirectory() as root:
        for (cb, fmt, n, k), med in sorted(cells.items()):
            best = min(med.values())
            for name, path in policies:
                c = pick(binary, path, fmt, n, k, root)
                regret = med[c] / best - 1 if c in med else float("nan")
                rows.append({"policy": name, "codebook": cb, "format": fmt, "n": n, "k": k, "pick": c,
                             "pick_us": med.get(c, float("nan")), "best": min(med, key=med.get),
                             "best_us": best, "regret": regret})
    with open(out_csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print("| policy | cells | geomean | p95 | max | > 3% |")
    print("|---|---|---|---|---|---|")
    for name, _ in policies:
        r = [x["regret"] for x in rows if x["policy"] == name]
        bad = [x for x in r if math.isnan(x)]
        r = [x for x in r if not math.isnan(x)]
        geo = math.exp(sum(math.log1p(x) for x in r) / len(r)) - 1
        over = sum(1 for x in r if x > 0.03) / len(r)
        print(f"| {name} | {len(r)}{f' ({len(bad)} unmeasured picks)' if bad else ''} | {geo:.2%} | "
              f"{p95(r):.2%} | {max(r):.2%} | {over:.0%} |")


if __name__ == "__main__":
    if len(sys.argv) < 5:
        raise SystemExit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3], [tuple(a.split("=", 1)) for a in sys.argv[4:]])
