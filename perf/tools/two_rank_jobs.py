"""Reading a `perf/workload_table.sh 2` job (two_ranks_<drafter>.json): each category's rows by
mode, with the job's summary as the category **all**. Shared by the two-rank summaries."""
import json
import statistics


def categories(job_dir, drafter):
    """{category: {mode: row}} of one job, **all** last."""
    job = json.load(open(f"{job_dir}/two_ranks_{drafter}.json"))
    cats = dict(job["categories"])
    cats["**all**"] = job["summary"]
    return {cat: {r["mode"]: r for r in rows} for cat, rows in cats.items()}


def cell(v):
    """A cell of the tables: median (min..max)."""
    return f"{statistics.median(v):.2f} ({min(v):.2f}..{max(v):.2f})"
