#!/usr/bin/env python3
"""A learner experiment: a sealed M = 1 corpus with fresh family sets added as development rows.

    python3 scripts/perf/absorb_bench.py CORPUS OUT SET_DIR [SET_DIR ...] [--exclude SET_DIR]

Each SET_DIR is a fresh family set as committed under docs/perf/holdout-families-*: its
`families.txt` (lines `family: NxK ...`) and two independent bench runs of every decode
candidate (`run1.decode.csv.gz`, `run2.decode.csv.gz`, graph mode, M = 1) on the machine kind
the corpus was collected on, with the corpus's kernels (both runs are needed). A set scored once is spent as a holdout;
as data it is development shapes of real models where the policy extrapolates. OUT is CORPUS
plus, per shape of the sets that the corpus does not already plan (and that is not a point of
the regular grid, not already added from an earlier set and not a shape of the --exclude set,
the set scored with the result), one development shape named after its first family (no exact
overlay), its candidate rows from run 1 and, as the learner's passes, one sample per candidate
from each run (its median), as a collection has them: candidates racing dropped in run 1 have
pass 0 only, so the pass replicates (the noise bands) come from the candidates that ran on, and
one of those missing from run 2 is refused. OUT is written beside itself and renamed when
complete. Payloads and the manifest are digested again (`corpus_id` as the sealer
computes it), so `vnni-dispatch fit --development-only` reads OUT like any corpus; OUT is
never a collection and never installable (its plan still names the original profile; `seal`
would refuse it, since the inventory does not resolve to it).
"""
import csv
import gzip
import hashlib
import io
import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

# The regular grid's N and K, as the inventory defines them.
with open(Path(__file__).resolve().parents[2] / "corpus" / "inventory" / "grid.toml", "rb") as f:
    GRID = tomllib.load(f)["grid"]
GRID_N, GRID_K = set(GRID["n"]), set(GRID["k"])
PHASE = "decode_m1.development"


def families(path):
    out = {}
    for line in Path(path).read_text().splitlines():
        if line.startswith("#") or ":" not in line:
            continue
        fam, shapes = line.split(":", 1)
        for s in shapes.split():
            n, k = (int(v) for v in s.split("x"))
            out.setdefault((n, k), []).append(fam.strip())
    return out


def bench_rows(path):
    with gzip.open(path, "rt") as f:
        return [r for r in csv.DictReader(f) if r["candidate"].startswith("decode.") and r["m"] == "1"]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def main(corpus, final, sets, exclude):
    corpus, final = Path(corpus).resolve(), Path(final).resolve()
    if final == corpus or corpus in final.parents:
        sys.exit(f"{final} is, or is inside, the corpus {corpus}")
    out = final.with_name(final.name + ".inprogress")
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(corpus, out)
    excluded = set(families(Path(exclude) / "families.txt")) if exclude else set()
    plan = json.loads((out / "plan.json").read_text())
    planned = {(s["n"], s["k"]) for s in plan["inventory"]["shapes"]}
    header = (out / f"{PHASE}.csv").read_text().split("\n", 1)[0].split(",")
    new_rows, new_samples, added = [], [], {}
    for d in sets:
        d = Path(d)
        fam = families(d / "families.txt")
        run1 = bench_rows(d / "run1.decode.csv.gz")
        run2 = {(r["source_format"], r["n"], r["k"], r["candidate"]): r for r in bench_rows(d / "run2.decode.csv.gz")}
        for r in run1:
            key = (int(r["n"]), int(r["k"]))
            if key in planned or (key[0] in GRID_N and key[1] in GRID_K) or key not in fam or key in excluded:
                continue
            if key in added and added[key][2] != d:
                continue
            added.setdefault(key, (fam[key], set(), d))[1].add(r["source_format"])
            new_rows.append([r[h] for h in header])
            if r["eligible"] != "true":
                continue
            passes = [r]
            if r["dropped"] == "false":
                other = run2.get((r["source_format"], r["n"], r["k"], r["candidate"]))
                if other is None:
                    sys.exit(f"{d}: {r['source_format']} {r['n']}x{r['k']} {r['candidate']} ran on in run 1 "
                             "but has no row in run 2")
                passes.append(other)
            for p, row in enumerate(passes):
                new_samples.append([r["mode"], r["source_format"], r["codebook"], "1", r["n"], r["k"],
                                    r["candidate"], str(p), "0", "0", "false", float(row["median_us"]).hex()])
    for (n, k), (fams, formats, _) in sorted(added.items()):
        plan["inventory"]["shapes"].append({"n": n, "k": k, "partition": "development", "exact_overlay": False,
                                            "formats": sorted(formats),
                                            "names": [f"{f}.{n}x{k}" for f in fams]})
    plan["inventory"]["shapes"].sort(key=lambda s: (s["n"], s["k"]))
    (out / "plan.json").write_text(json.dumps(plan, indent=2) + "\n")
    with open(out / f"{PHASE}.csv", "a", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(new_rows)
    timing = out / f"{PHASE}.timing.csv.zst"
    text = subprocess.run(["zstd", "-dc", str(timing)], check=True, capture_output=True).stdout.decode()
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(new_samples)
    subprocess.run(["zstd", "-q", "-f", "-o", str(timing)], input=(text + buf.getvalue()).encode(), check=True)
    manifest = json.loads((out / "corpus.manifest.json").read_text())
    for p in manifest["payloads"]:
        path = out / p["path"]
        p["bytes"], p["sha256"] = path.stat().st_size, sha256(path)
    identity = {k: v for k, v in manifest.items() if k != "corpus_id"}
    manifest["corpus_id"] = hashlib.sha256(json.dumps(identity, separators=(",", ":"), ensure_ascii=False).encode()).hexdigest()
    (out / "corpus.manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    if final.exists():
        shutil.rmtree(final)
    out.rename(final)
    out = final
    print(f"{out}: {len(added)} shapes, {len(new_rows)} rows, {len(new_samples)} samples added; "
          f"corpus id {manifest['corpus_id'][:16]}")


if __name__ == "__main__":
    args = sys.argv[1:]
    exclude = None
    if "--exclude" in args:
        i = args.index("--exclude")
        exclude = args[i + 1] if i + 1 < len(args) else sys.exit(__doc__)
        del args[i:i + 2]
    if len(args) < 3:
        sys.exit(__doc__)
    main(args[0], args[1], args[2:], exclude)
