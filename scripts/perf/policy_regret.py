#!/usr/bin/env python3
"""Regret of committed policies' M = 1 picks on shapes timed by `vnni-dispatch bench` (stdlib only).

For every (codebook, N, K) of the bench CSV (graph mode, M = 1), each policy's pick comes from
`vnni-dispatch explain --shapes` (the policy evaluator: overlays, then the cost models, then the tree),
and its regret is its median over the fastest eligible candidate's median. Prints one summary
row per policy (all cells, then the cells each way of deciding answered: cost models, trees)
and writes the per-shape picks as CSV.

    python3 scripts/perf/policy_regret.py BIN bench-decode.csv out.csv NAME=policy.json [...]
        [--replicate other-bench-decode.csv] [--families families.txt]

With --replicate (a second, independent bench of the same shapes), it also prints the noise
floor: the first run's fastest candidate per cell scored in the second run. A policy's regret
below that row is inside the measurement noise. With --families (lines `family: NxK NxK ...`),
it also prints one row per policy and family.
"""
import csv
import math
import io
import subprocess
import sys


def picks(binary, policy, fmt, shapes):
    """(n, k) -> (pick, via) for every shape, from one `explain --shapes` run."""
    out = subprocess.run(
        [binary, "explain", "--policy", policy, "--format", fmt, "--mode", "graph", "--m", "1",
         "--shapes", ",".join(f"{n}x{k}" for n, k in shapes)],
        check=True, capture_output=True, text=True).stdout
    got = {(int(r["n"]), int(r["k"])): (r["candidate"], r["via"]) for r in csv.DictReader(io.StringIO(out))}
    missing = [s for s in shapes if s not in got]
    if missing:
        raise SystemExit(f"no selection for {fmt} {missing} in {policy}:\n{out}")
    return got


def p95(xs):
    s = sorted(xs)
    return s[max(0, math.ceil(0.95 * len(s)) - 1)]


def medians(bench):
    cells = {}
    for r in csv.DictReader(open(bench)):
        if r["m"] != "1" or r["mode"] != "graph" or not r["candidate"].startswith("decode."):
            continue
        if r["eligible"] != "true":
            continue
        key = (r["codebook"], r["source_format"], int(r["n"]), int(r["k"]))
        cells.setdefault(key, {})[r["candidate"]] = float(r["median_us"])
    return cells


def summary(name, r):
    bad = [x for x in r if math.isnan(x)]
    r = [x for x in r if not math.isnan(x)]
    if not r:
        return
    geo = math.exp(sum(math.log1p(x) for x in r) / len(r)) - 1
    over = sum(1 for x in r if x > 0.03) / len(r)
    print(f"| {name} | {len(r)}{f' ({len(bad)} unmeasured picks)' if bad else ''} | {geo:.2%} | "
          f"{p95(r):.2%} | {max(r):.2%} | {over:.0%} |")


def read_families(path):
    out = {}
    for line in open(path):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        family, shapes = line.split(":", 1)
        for s in shapes.split():
            n, k = s.split("x")
            out[(int(n), int(k))] = family.strip()
    return out


def main(binary, bench, out_csv, policies, replicate=None, families=None):
    cells = medians(bench)
    rows = []
    chosen = {}
    for name, path in policies:
        for fmt in sorted({key[1] for key in cells}):
            shapes = [(n, k) for (_, f, n, k) in sorted(cells) if f == fmt]
            for shape, p in picks(binary, path, fmt, shapes).items():
                chosen[(name, fmt, shape)] = p
    for (cb, fmt, n, k), med in sorted(cells.items()):
        best = min(med.values())
        for name, path in policies:
            c, via = chosen[(name, fmt, (n, k))]
            regret = med[c] / best - 1 if c in med else float("nan")
            rows.append({"policy": name, "codebook": cb, "format": fmt, "n": n, "k": k, "pick": c,
                         "pick_us": med.get(c, float("nan")), "best": min(med, key=med.get),
                         "best_us": best, "regret": regret, "via": via})
    with open(out_csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print("| policy | cells | geomean | p95 | max | > 3% |")
    print("|---|---|---|---|---|---|")
    ways = (("", lambda x: True), (", cost models only", lambda x: x["via"] == "Model"),
            (", trees only", lambda x: x["via"] == "Tree"))
    for label, keep in ways:
        for name, _ in policies:
            summary(name + label, [x["regret"] for x in rows if x["policy"] == name and keep(x)])
    if families:
        fam = read_families(families)
        for name, _ in policies:
            for f in sorted(set(fam.values())):
                summary(f"{name}, {f}", [x["regret"] for x in rows
                                         if x["policy"] == name and fam.get((x["n"], x["k"])) == f])
    if replicate:
        other = medians(replicate)
        r = []
        for key, med in sorted(cells.items()):
            fastest = min(med, key=lambda c: (med[c], c))
            again = other.get(key, {})
            r.append(again[fastest] / min(again.values()) - 1 if fastest in again else float("nan"))
        summary("noise floor (this run's fastest, timed again)", r)


if __name__ == "__main__":
    args = sys.argv[1:]
    flags = {}
    for flag in ("--replicate", "--families"):
        if flag in args:
            i = args.index(flag)
            flags[flag] = args[i + 1]
            del args[i:i + 2]
    if len(args) < 4:
        raise SystemExit(__doc__)
    main(args[0], args[1], args[2], [tuple(a.split("=", 1)) for a in args[3:]], flags.get("--replicate"),
         flags.get("--families"))
