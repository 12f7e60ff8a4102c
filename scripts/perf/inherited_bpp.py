#!/usr/bin/env python3
"""How often two corpora of one plan time their grouped rows at a different M = 1 identity.

Usage: inherited_bpp.py CORPUS_A CORPUS_B

Per (format, N, K, mode) of the grouped phases, compares the M = 1 candidate the rows inherit
and its bpp: e.g. a one-stage corpus (the sweep's fastest decode candidate) against a staged
corpus of the same profile (the frozen policy's pick). Prints one line of counts.
"""
import csv
import sys


def inherited(corpus):
    out = {}
    for part in ("development", "sealed"):
        with open(f"{corpus}/grouped.{part}.csv", newline="") as f:
            for r in csv.DictReader(f):
                out[(r["source_format"], r["n"], r["k"], r["mode"])] = (r["m1_candidate"], r["bpp"])
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    a, b = inherited(sys.argv[1]), inherited(sys.argv[2])
    if a.keys() != b.keys():
        sys.exit(f"the corpora plan different grouped points ({len(a)} vs {len(b)})")
    identity = sum(a[k][0] != b[k][0] for k in a)
    bpp = sum(a[k][1] != b[k][1] for k in a)
    print(f"{len(a)} (format, N, K, mode) points: M = 1 identity differs in {identity}, bpp in {bpp}")


if __name__ == "__main__":
    main()
