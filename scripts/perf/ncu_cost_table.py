#!/usr/bin/env python3
"""What each ncu configuration of scripts/device/ncu_cost.sh cost (stdlib only): per variant the
requests and kernel records profiled, the step's seconds (from table.txt), and, where the
variant asked for it, ncu's replay passes per record, whether it reused its profiling session,
and the device memory it backed up per record. CSV on stdout.

    python3 scripts/perf/ncu_cost_table.py ARCHIVE.tar.gz ...
"""
import csv
import io
import re
import sys
import tarfile
from collections import Counter


def ncu_rows(text):
    lines = [l for l in text.splitlines() if not l.startswith("==")]
    rows = list(csv.reader(lines))
    return rows[0], rows[2:]  # header, (units row skipped) records


def column(header, rows, name):
    if name not in header:
        return ""
    counts = Counter(r[header.index(name)].replace(",", "") for r in rows)
    return ";".join(f"{v}x{n}" if len(counts) > 1 else v for v, n in counts.most_common())


def main(paths):
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(["archive", "variant", "requests", "records", "seconds", "rc", "passes", "session_reuse", "bytes_backed_up"])
    for path in paths:
        with tarfile.open(path) as tar:
            files = {m.name.lstrip("./"): m for m in tar.getmembers() if m.isfile()}
            read = lambda name: tar.extractfile(files[name]).read().decode()
            for line in read("table.txt").splitlines():
                m = re.match(r"ncu-(\S+)\s+rc=(\d+) (\d+)s\s+(.*)", line)
                if not m:
                    continue
                variant, rc, seconds, last = m.groups()
                planned = re.search(r"(\d+) requests, (\d+) kernel records", last)
                done = re.search(r"(\d+) records.*?, (\d+) requests", last)
                requests, records = planned.groups() if planned else done.groups()[::-1] if done else ("", "")
                # one file per ncu process: `000000.csv` before the pass split, then one per pass
                cols = {"passes": "profiler__replayer_passes", "reuse": "profiler__perfworks_session_reuse",
                        "backed": "profiler__replayer_bytes_mem_backed_up.avg"}
                found = {k: [] for k in cols}
                for name in ("000000.csv", "000000.hw.csv", "000000.sass.csv"):
                    chunk = f"ev-{variant}/ncu/{name}"
                    if chunk in files:
                        header, rows = ncu_rows(read(chunk))
                        tag = name.split(".")[1] + ":" if name.count(".") == 2 else ""
                        for k, c in cols.items():
                            v = column(header, rows, c)
                            if v:
                                found[k].append(tag + v)
                passes, reuse, backed = (" ".join(found[k]) for k in ("passes", "reuse", "backed"))
                out.writerow([path.rsplit("/", 1)[-1], variant, requests, records, seconds, rc, passes, reuse, backed])


if __name__ == "__main__":
    main(sys.argv[1:])
