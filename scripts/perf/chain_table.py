#!/usr/bin/env python3
"""Markdown tables for docs/PERF.md from scripts/device/chain.sh's two benches (stdlib only):
per mode, the best decode candidate's % of copy bandwidth per shape and codebook launched
plainly and programmatically, and the chain of one decoder layer.

    python3 scripts/perf/chain_table.py DIR    (DIR holds plain/ and programmatic/)
"""
import csv
import os
import sys

CODEBOOKS = ["s4", "nl4", "u4", "s5", "u5", "s6d", "s8"]


def best(path):
    return {
        (r["mode"], int(r["n"]), int(r["k"]), r["codebook"]): r
        for r in csv.DictReader(open(path))
        if r["codebook"] != "-" and r["m"] == "1"
    }


def main(root):
    plain = best(os.path.join(root, "plain", "best.csv"))
    prog = best(os.path.join(root, "programmatic", "best.csv"))
    modes = sorted({k[0] for k in plain}, key=lambda m: m != "graph")
    shapes = sorted({(k[1], k[2]) for k in plain}, key=lambda s: -int(next(
        r["weight_bytes"] for k, r in plain.items() if (k[1], k[2]) == s)))
    cbs = [c for c in CODEBOOKS if any(k[3] == c for k in plain)]
    for mode in modes:
        print(f"\n{mode} mode, % of copy bandwidth, plain -> programmatic:\n")
        print("| shape | " + " | ".join(cbs) + " | least (prog.) |")
        print("|---|" + "---|" * (len(cbs) + 1))
        for n, k in shapes:
            cells, least = [], 999.0
            for cb in cbs:
                a, b = plain.get((mode, n, k, cb)), prog.get((mode, n, k, cb))
                if a is None or b is None:
                    cells.append("-")
                    continue
                pa, pb = float(a["pct_copy_bw"]), float(b["pct_copy_bw"])
                least = min(least, pb)
                cells.append(f"{pa:.0f} -> {pb:.0f}")
            print(f"| {n}x{k} | " + " | ".join(cells) + f" | {least:.0f}% |")
    chain = os.path.join(root, "plain", "chain.csv")
    if os.path.exists(chain):
        rows = list(csv.DictReader(open(chain)))
        print(f"\nChain {rows[0]['layers']}, median us (x the weight bytes at the copy bandwidth):\n")
        print("| mode | codebook | MB | layers alone | plain | programmatic |")
        print("|---|---|---|---|---|---|")
        for mode in modes:
            for cb in cbs:
                two = {r["launch"]: r for r in rows if r["mode"] == mode and r["codebook"] == cb}
                if len(two) != 2:
                    continue
                p, q = two["plain"], two["programmatic"]
                print(f"| {mode} | {cb} | {int(p['weight_bytes']) / 1e6:.1f} | {float(p['alone_us']):.1f} | "
                      f"{float(p['median_us']):.1f} ({float(p['x_copy']):.2f}x) | "
                      f"{float(q['median_us']):.1f} ({float(q['x_copy']):.2f}x) |")


if __name__ == "__main__":
    main(sys.argv[1])
