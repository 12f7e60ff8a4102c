#!/usr/bin/env python3
"""What sampling windows of the weight-copy rotation change (issue 17): from the output of
scripts/device/throughput.sh (unpacked into DIR).

Bias: every candidate row of decode.csv (M = 1 and the grouped rows, both modes) timed by three bench runs, windows
(a), whole rotations, windows (b): per shape and codebook the median over candidates of
window / whole - 1 (a and b pooled), beside the same between the two window runs (the noise),
how often the fastest candidate agrees, and the largest regret of window a's pick scored on the
whole-rotation run and on window b (the noise floor). Throughput: the seconds each cell of the
two sweeps took (cells.csv).

    python3 scripts/perf/rotation.py DIR [OUT.csv]
"""
import csv
import json
import statistics
import sys
from pathlib import Path

KEY = ("mode", "codebook", "m", "n", "k", "candidate", "bpp")
CLASSES = [(4 << 20, "< 4 MiB"), (64 << 20, "4-64 MiB"), (512 << 20, "64-512 MiB"), (1 << 62, ">= 512 MiB")]


def rows(run):
    out = {}
    for name in ("decode.csv",):
        path = run / name
        if not path.exists():
            continue
        for r in csv.DictReader(open(path)):
            if r["codebook"] == "-" or r["eligible"] != "true" or r["dropped"] == "true":
                continue
            out[tuple(r[k] for k in KEY)] = r
    return out


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def best(rs, keys):
    """Fastest candidate per (mode, codebook, m, n, k) among `keys`."""
    out = {}
    for key in keys:
        cell, med = key[:5], float(rs[key]["median_us"])
        if cell not in out or med < out[cell][1]:
            out[cell] = (key[5], med)
    return out


def bias(d, out_csv):
    a, w, b = rows(d / "bench-window-a"), rows(d / "bench-whole"), rows(d / "bench-window-b")
    common = sorted(set(a) & set(w) & set(b))
    per = {}
    table = []
    for key in common:
        ma, mw, mb = (float(x[key]["median_us"]) for x in (a, w, b))
        shape = (int(key[3]), int(key[4]), key[1], key[2], key[0])
        per.setdefault(shape, []).append((ma / mw - 1, mb / mw - 1, mb / ma - 1))
        table.append(list(key) + [a[key]["weight_copies"], a[key]["replays"], w[key]["replays"], ma, mw, mb])
    if out_csv:
        with open(out_csv, "w", newline="") as f:
            wr = csv.writer(f)
            wr.writerow(list(KEY) + ["weight_copies", "replays_window", "replays_whole", "median_us_window_a",
                                     "median_us_whole", "median_us_window_b"])
            wr.writerows(table)
    ba, bw, bb = best(a, common), best(w, common), best(b, common)

    def regret(picks, rs, cells):
        """The picks' regrets in run `rs` (median over the cell's best there, minus 1)."""
        out = []
        for cell in cells:
            meds = {key[5]: float(rs[key]["median_us"]) for key in common if key[:5] == cell}
            out.append(meds[picks[cell][0]] / min(meds.values()) - 1)
        return out

    print("| N x K | M | mode | codebooks | copies | candidates | window / whole - 1, median (a; b) | same, p95 of abs | window b / a - 1, median; p95 of abs | fastest agrees (window a-whole; a-b) | window a's pick in whole, in b: regret max |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    groups = {}
    for (n, k, cb, m, mode), v in per.items():
        groups.setdefault((n * k, n, k, int(m), mode), []).append((cb, v))
    for (_, n, k, m, mode), items in sorted(groups.items()):
        va = [x[0] for _, v in items for x in v]
        vb = [x[1] for _, v in items for x in v]
        noise = [x[2] for _, v in items for x in v]
        cells = [(mode, cb, str(m), str(n), str(k)) for cb, _ in items]
        agree_w = sum(ba[c][0] == bw[c][0] for c in cells)
        agree_b = sum(ba[c][0] == bb[c][0] for c in cells)
        copies = {a[key]["weight_copies"] for key in common if key[3] == str(n) and key[4] == str(k)}
        in_whole, in_b = max(regret(ba, w, cells)), max(regret(ba, b, cells))
        print(f"| {n}x{k} | {m} | {mode} | {','.join(cb for cb, _ in items)} | {'/'.join(sorted(copies, key=int))} | {len(va)} | "
              f"{100 * statistics.median(va):+.2f}%; {100 * statistics.median(vb):+.2f}% | "
              f"{100 * pct([abs(x) for x in va + vb], 0.95):.2f}% | {100 * statistics.median(noise):+.2f}%; "
              f"{100 * pct([abs(x) for x in noise], 0.95):.2f}% | {agree_w}/{len(cells)}; {agree_b}/{len(cells)} | "
              f"{100 * in_whole:.2f}%; {100 * in_b:.2f}% |")


def cells(work):
    """Seconds each published cell took: cells/*.prov.json (`millis`)."""
    out = {}
    for f in sorted((work / "cells").glob("*.prov.json")):
        prov = json.load(open(f))
        if prov.get("millis") is not None:
            out[prov["cell"]] = prov["millis"]
    return out


def weight_bytes(work, stem):
    for f in sorted((work / "cells").glob(stem + ".csv*")):
        if f.suffix == ".csv":
            for r in csv.DictReader(open(f)):
                return int(r["weight_bytes"])
    return None


def throughput(d):
    whole, window = cells(d / "sweep-whole"), cells(d / "sweep-window")
    print("\n| cell | weight bytes | whole rotations (s) | windows (s) | speed-up |")
    print("|---|---|---|---|---|")
    for stem in sorted(window, key=lambda c: weight_bytes(d / "sweep-window", c) or 0):
        b = weight_bytes(d / "sweep-window", stem)
        w = whole.get(stem)
        print(f"| {stem} | {b} | {w / 1000 if w else float('nan'):.1f} | {window[stem] / 1000:.1f} | "
              + (f"{w / window[stem]:.1f}x |" if w else "not reached |"))
    print(f"\ncells published: whole rotations {len(whole)} ({sum(whole.values()) / 1000:.1f} s), "
          f"windows {len(window)} ({sum(window.values()) / 1000:.1f} s)")


if __name__ == "__main__":
    d = Path(sys.argv[1])
    if (d / "bench-whole").exists():
        bias(d, sys.argv[2] if len(sys.argv) > 2 else None)
    if (d / "sweep-whole").exists():
        throughput(d)
