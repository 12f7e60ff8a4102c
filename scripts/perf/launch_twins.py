#!/usr/bin/env python3
"""How many decode records `fit --twins pooled` reads as a launch twin's (stdlib only).

Launch twins: candidates whose ids differ only in the partition rule suffix (`.capN`,
`.wavesN`, `.kbN`) at the same bpp in one cell (the learner's rule is
`Candidate::same_launch_as` at the same bpp). A record with fewer samples than its fullest twin
is read as that twin's. Prints, per corpus, the records, those read as a fuller twin's, and how
many of those were more than 5% slower than that twin; and the spread of twin medians
(max / min - 1 over each twin group).

    python3 scripts/perf/launch_twins.py CORPUS_DIR [...]
"""
import collections
import csv
import os
import re
import sys


def base(candidate):
    return re.sub(r"\.(cap\d+|waves\d+|kb\d+)$", "", candidate)


def main(dirs):
    for d in dirs:
        cells = collections.defaultdict(list)
        with open(os.path.join(d, "decode_m1.development.csv")) as f:
            for r in csv.DictReader(f):
                if r["eligible"] == "true":
                    cells[(r["mode"], r["source_format"], r["n"], r["k"])].append(r)
        records = read_as_twin = slower = 0
        spreads = []
        for rows in cells.values():
            groups = collections.defaultdict(list)
            for r in rows:
                groups[(base(r["candidate"]), r["bpp"])].append(r)
            for members in groups.values():
                medians = sorted(float(m["median_us"]) for m in members)
                if len(members) > 1:
                    spreads.append(medians[-1] / medians[0] - 1)
                fullest = max(members, key=lambda m: int(m["samples"]))
                for m in members:
                    records += 1
                    if int(m["samples"]) < int(fullest["samples"]):
                        read_as_twin += 1
                        slower += float(m["median_us"]) > 1.05 * float(fullest["median_us"])
        spreads.sort()
        q = lambda p: spreads[int(p * (len(spreads) - 1))] * 100 if spreads else float("nan")
        print(f"{d}: {records} records, {read_as_twin} read as a fuller twin's "
              f"({100 * read_as_twin / max(records, 1):.1f}%), {slower} of them > 5% slower than it; "
              f"twin spread median {q(0.5):.2f}% p95 {q(0.95):.2f}% max {q(1.0):.1f}% over {len(spreads)} groups")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    main(sys.argv[1:])
