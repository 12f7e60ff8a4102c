#!/usr/bin/env python3
"""Markdown tables for docs/PERF.md from `vnni-dispatch bench` CSVs (stdlib only).

    python3 scripts/perf/decode_table.py docs/perf/decode-h200.csv [docs/perf/grouped-h200.csv]
"""
import csv
import sys

TARGETS = {(151936, 4096): 90, (248320, 5120): 90, (24576, 4096): 75, (4096, 12288): 60}
CODEBOOKS = ["s4", "nl4", "u4", "s5", "u5", "s6d", "s8"]


def main(path):
    rows = [r for r in csv.DictReader(open(path)) if r["m"] == "1"]
    copy = next(r for r in rows if r["candidate"] == "copy")
    print(f"Copy bandwidth (device to device, read + write): **{float(copy['gbps']):.0f} GB/s**.\n")
    shapes = []
    for r in rows:
        key = (int(r["n"]), int(r["k"]))
        if key != (0, 0) and key not in shapes:
            shapes.append(key)
    best = {}
    for r in rows:
        if r["eligible"] != "true" or r["dropped"] == "true" or r["median_us"] == "NaN":
            continue
        key = (r["mode"], int(r["n"]), int(r["k"]), r["codebook"])
        if key not in best or float(r["median_us"]) < float(best[key]["median_us"]):
            best[key] = r
    for mode in ["graph", "eager"]:
        print(f"### {mode} mode: best candidate per codebook (% of copy bandwidth, median us)\n")
        print("| shape | target | cuBLAS fp16 | " + " | ".join(CODEBOOKS) + " |")
        print("|---|---|---|" + "---|" * len(CODEBOOKS))
        for n, k in shapes:
            cub = best.get((mode, n, k, "-"))
            target = TARGETS.get((n, k))
            cells = []
            for cb in CODEBOOKS:
                r = best.get((mode, n, k, cb))
                if r is None:
                    cells.append("-")
                    continue
                pct = float(r["pct_copy_bw"])
                mark = "" if target is None else (" ✓" if pct >= target else " ✗")
                cells.append(f"{pct:.1f}%{mark} ({float(r['median_us']):.1f})")
            cub_txt = f"{float(cub['pct_copy_bw']):.1f}% ({float(cub['median_us']):.1f})" if cub else "-"
            print(f"| {n}x{k} | {'>= %d%%' % target if target else '-'} | {cub_txt} | " + " | ".join(cells) + " |")
        print()
    print("### Winning candidates (graph mode)\n")
    print("| shape | " + " | ".join(CODEBOOKS) + " |")
    print("|---|" + "---|" * len(CODEBOOKS))
    for n, k in shapes:
        print(f"| {n}x{k} | " + " | ".join(best[("graph", n, k, cb)]["candidate"].replace("decode.", "") if ("graph", n, k, cb) in best else "-" for cb in CODEBOOKS) + " |")
    checked = [r for r in rows if r["candidate"] not in ("copy", "cublas.f16.gemv")]
    bad = [r for r in checked if r["mismatches"] != "0"]
    print(f"\n{len(checked)} candidate rows (candidate x codebook x shape x mode), {len(bad)} with any output bit different from the CPU reference.")


# llama.cpp M = 8 times on the same H200 (us), for the grouped comparison.
LLAMA_M8 = {("s4", 151936, 4096): 318.9, ("s8", 151936, 4096): 416.0, ("u4", 151936, 4096): 698.5, ("u4", 24576, 4096): 119.1}


def grouped(path):
    rows = [r for r in csv.DictReader(open(path)) if r["mode"] == "graph"]
    shapes = []
    for r in rows:
        key = (int(r["n"]), int(r["k"]))
        if key not in shapes:
            shapes.append(key)
    ms = sorted({int(r["m"]) for r in rows})
    print("### Grouped (graph mode): time(M) / time(M=1), best grouped candidate at the best M=1 candidate's bpp\n")
    print("| shape | codebook | M=1 (us) | " + " | ".join(f"M={m}" for m in ms) + " |")
    print("|---|---|---|" + "---|" * len(ms))
    for n, k in shapes:
        for cb in CODEBOOKS:
            sel = {int(r["m"]): r for r in rows if int(r["n"]) == n and int(r["k"]) == k and r["codebook"] == cb}
            if not sel:
                continue
            m1 = float(next(iter(sel.values()))["m1_median_us"])
            cells = [f"{float(sel[m]['ratio_to_m1']):.2f} ({float(sel[m]['median_us']):.0f})" if m in sel else "-" for m in ms]
            print(f"| {n}x{k} | {cb} | {m1:.1f} | " + " | ".join(cells) + " |")
    print("\n### M = 8 against llama.cpp on the same H200\n")
    print("| codebook (source) | shape | llama.cpp M=8 (us) | ours M=8 (us) | speed-up |")
    print("|---|---|---|---|---|")
    names = {"s4": "s4 (Q4_0)", "s8": "s8 (Q8_0)", "u4": "u4 (Q4_K)"}
    for (cb, n, k), theirs in LLAMA_M8.items():
        r = next((r for r in rows if r["codebook"] == cb and int(r["n"]) == n and int(r["k"]) == k and r["m"] == "8"), None)
        if r:
            ours = float(r["median_us"])
            print(f"| {names[cb]} | {n}x{k} | {theirs} | {ours:.1f} | {theirs / ours:.2f}x |")


if __name__ == "__main__":
    main(sys.argv[1])
    if len(sys.argv) > 2:
        print()
        grouped(sys.argv[2])
