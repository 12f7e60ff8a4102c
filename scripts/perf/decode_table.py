#!/usr/bin/env python3
"""Markdown tables for docs/PERF.md from a `vnni-dispatch bench` decode.csv (stdlib only).

    python3 scripts/perf/decode_table.py docs/perf/decode-h200.csv
"""
import csv
import sys

TARGETS = {(151936, 4096): 90, (248320, 5120): 90, (24576, 4096): 75, (4096, 12288): 60}
CODEBOOKS = ["s4", "nl4", "u4", "s5", "u5", "s6d", "s8"]


def main(path):
    rows = list(csv.DictReader(open(path)))
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


if __name__ == "__main__":
    main(sys.argv[1])
