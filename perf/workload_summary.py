#!/usr/bin/env python3
"""Medians over several `ssd bench --workloads` jobs (perf/workload_table.sh run REPS times):
per category and configuration, the decode speed relative to AR inside each job, as
median (min..max) over the jobs, and the mean acceptance length.

    python3 perf/workload_summary.py perf/out/workloads_rep*/one_process.json [--markdown OUT]
"""
import argparse
import json
import statistics


def config_name(row):
    if row["mode"] == "ar":
        return "ar"
    k = "auto" if row.get("k_auto") else str(row["k"])
    return f"{row['mode']} {row['drafter']} k={k}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("jobs", nargs="+", help="bench --out-json files, one per job")
    ap.add_argument("--markdown", help="write the table here too")
    args = ap.parse_args()
    ratios, mal = {}, {}
    commits = set()
    for path in args.jobs:
        with open(path) as f:
            job = json.load(f)
        commits.add(job.get("commit", "?"))
        tables = dict(job["categories"])
        tables["all categories"] = job["summary"]
        for cat, rows in tables.items():
            for row in rows:
                if row["mode"] == "ar":
                    continue
                key = (cat, config_name(row))
                ratios.setdefault(key, []).append(row["speedup_vs_ar"])
                mal.setdefault(key, []).append(row["mean_acceptance_length"])
    configs = sorted({c for _, c in ratios})
    cats = sorted({c for c, _ in ratios if c != "all categories"}) + ["all categories"]
    head = "| category | " + " | ".join(f"{c}: vs AR, MAL" for c in configs) + " |"
    lines = [f"{len(args.jobs)} jobs, commit(s) {', '.join(sorted(commits))}; "
             "each cell: decode speed / AR's in the same job, median (min..max), and the mean "
             "acceptance length (median)", "", head,
             "|" + "---|" * (len(configs) + 1)]
    for cat in cats:
        cells = []
        for c in configs:
            r, m = ratios.get((cat, c)), mal.get((cat, c))
            if not r:
                cells.append("-")
                continue
            cells.append(f"{statistics.median(r):.2f}x ({min(r):.2f}..{max(r):.2f}), "
                         f"{statistics.median(m):.2f}")
        name = f"**{cat}**" if cat == "all categories" else cat
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
