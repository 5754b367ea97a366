#!/usr/bin/env python3
"""Closed-loop load on `ssd serve` over loopback, standard library only.

For each mode (ar, sd, ssd) it starts a server (ssd under mpirun: target rank + drafter rank),
then for each concurrency C runs C clients that each send streamed chat requests back to back
(prompts from a prompt file, cycled), a bounded number of requests per level, and reports:
throughput (generated tokens / wall time of the level), TTFT and TPOT p50/p90/p99, and failed
requests. Modes run one after the other (one server at a time: an idle drafter rank polls);
--reps R repeats the whole sweep R times, alternating the modes, and the table gives the median
of the repetitions' values (with their spread as min..max). --ssd may name several binaries
(LABEL=PATH,LABEL=PATH: e.g. a commit before and after a change; "LABEL=PATH FLAGS" adds flags to
that server's command line): every mode then runs with each,
alternated the same way, and the table's rows say which (`ssd (main)`). After each server of a
speculative mode it prints the spec-decode counters of its /metrics (the cache's hits and misses,
the hits taken from pushes, the misses the leader drafted, the target's wait).

--soak SECONDS instead runs one mode at one concurrency for that long, sampling the resident set
size of every server process each --rss-every seconds, and reports failed requests and RSS.

Every figure it prints was measured in that run; it says on what (model, mode, threads, machine
load) in its header. Examples:
  perf/serve_bench.py --ssd build/bin/ssd -m MODEL --modes ar,sd,ssd --concurrency 1,2,4,8
  perf/serve_bench.py --ssd build/bin/ssd -m MODEL --modes ar --concurrency 8 --soak 300
  perf/serve_bench.py --ssd main=OLD/ssd,new=build/bin/ssd -m MODEL --modes ssd --reps 3
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request


def read_prompts(path):
    out = []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line and not line.startswith("#"):
                out.append(line.replace("\\n", "\n"))
    return out


def percentile(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


class Server:
    """`ssd serve` on an ephemeral loopback port; stopped with SIGTERM to rank 0."""

    def __init__(self, args, mode, binary=None, flags=()):
        self.dir = tempfile.mkdtemp(prefix="serve_bench_")
        port_file = os.path.join(self.dir, "port")
        cmd = [binary or args.ssd, "serve", *flags, "-m", args.model, "--mode", mode, "--threads", str(args.threads),
               "--max-batch", str(args.max_batch), "--port", "0", "--port-file", port_file]
        if mode != "ar":
            cmd += ["--drafter", args.drafter, "--k", str(args.k)]
        if mode == "ssd":
            cmd = [args.mpirun, "--oversubscribe", "--bind-to", "none", "-n", "2"] + cmd
            if os.getuid() == 0:
                cmd.insert(1, "--allow-run-as-root")
        self.err = open(os.path.join(self.dir, "stderr"), "w+")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self.err)
        deadline = time.time() + 180
        self.leader = None
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("ssd serve exited at start-up:\n" + self.log())
            log = self.log()
            if os.path.exists(port_file) and "listening on" in log:
                self.port = int(open(port_file).read())
                self.leader = int(log.split("pid ")[1].split(")")[0])
                return
            time.sleep(0.1)
        raise RuntimeError("ssd serve did not listen within 180 s:\n" + self.log())

    def log(self):
        self.err.flush()
        with open(self.err.name) as f:
            return f.read()

    def pids(self):
        """The server's processes: rank 0 and, under mpirun, the other ssd ranks."""
        pids = [self.leader]
        for p in os.listdir("/proc"):
            if p.isdigit() and int(p) != self.leader:
                try:
                    with open(f"/proc/{p}/stat") as f:
                        ppid = int(f.read().split(") ")[1].split()[1])
                    if ppid == self.proc.pid and open(f"/proc/{p}/comm").read().strip() == "ssd":
                        pids.append(int(p))
                except (OSError, IndexError, ValueError):
                    pass
        return pids

    def stop(self):
        os.kill(self.leader, signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=300)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = -1
        if rc != 0:
            print(f"warning: server exited {rc}:\n{self.log()}", file=sys.stderr)
        return rc


def stream_request(port, prompt, max_tokens):
    """One streamed chat request: (ttft_s, tpot_s or None, completion tokens, e2e_s)."""
    body = json.dumps({"messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
                       "temperature": 0, "ignore_eos": True, "stream": True,
                       "stream_options": {"include_usage": True}}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", body,
                                 {"Content-Type": "application/json"})
    t0 = time.perf_counter()
    first = None
    tokens = 0
    with urllib.request.urlopen(req, timeout=600) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if "error" in chunk:
                raise RuntimeError(chunk["error"]["message"])
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
            elif first is None and chunk["choices"] and chunk["choices"][0]["delta"].get("content"):
                first = time.perf_counter()
    end = time.perf_counter()
    if first is None:
        first = end
    tpot = (end - first) / (tokens - 1) if tokens > 1 else None
    return first - t0, tpot, tokens, end - t0


def run_level(port, prompts, concurrency, requests, max_tokens, deadline=None):
    """`concurrency` clients, back to back, until `requests` are done (or the deadline)."""
    lock = threading.Lock()
    results, failures = [], []
    next_i = [0]

    def client():
        while True:
            with lock:
                i = next_i[0]
                if (deadline is None and i >= requests) or (deadline and time.time() >= deadline):
                    return
                next_i[0] += 1
            try:
                res = stream_request(port, prompts[i % len(prompts)], max_tokens)
                with lock:
                    results.append(res)
            except Exception as e:  # counted, reported
                with lock:
                    failures.append(str(e))

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    tokens = sum(r[2] for r in results)
    return {
        "requests": len(results), "failed": len(failures), "errors": failures[:3],
        "tok_s": tokens / wall if wall > 0 else 0.0,
        "ttft": [r[0] for r in results], "tpot": [r[1] for r in results if r[1] is not None],
    }


def machine_state():
    load = os.getloadavg()
    return (f"{os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
            f"at start")


def binaries(spec):
    """--ssd PATH, or LABEL=PATH [FLAGS],...: [(label or "", path, [flags])]."""
    out = []
    for item in spec.split(","):
        label, _, rest = item.partition("=") if "=" in item.split(" ")[0] else ("", "", item)
        path, *flags = rest.split()
        out.append((label, path, flags))
    return out


SPEC_COUNTERS = ["ssd:spec_decode_cache_hits_total", "ssd:spec_decode_cache_misses_total",
                 "ssd:spec_decode_pushed_hits_total", "ssd:spec_decode_leader_drafted_misses_total",
                 "ssd:spec_decode_target_wait_seconds_total"]


def spec_counters(port):
    """The spec-decode counters of the server's /metrics (those it exports)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60).read().decode()
    values = {l.split("{")[0]: l.split()[-1] for l in text.splitlines()
              if l and not l.startswith("#")}
    return ", ".join(f"{n.split(':')[1].replace('spec_decode_', '')} {values[n]}"
                     for n in SPEC_COUNTERS if n in values)


def sweep(args, prompts):
    bins = binaries(args.ssd)
    modes = [(m, label, path, flags) for m in args.modes.split(",") for label, path, flags in bins]
    name = lambda m, label: f"{m} ({label})" if label else m
    levels = [int(c) for c in args.concurrency.split(",")]
    cells = {}  # (mode, C) -> list of per-rep dicts
    for rep in range(args.reps):
        order = modes if rep % 2 == 0 else list(reversed(modes))  # alternate across repetitions
        for mode, label, path, flags in order:
            server = Server(args, mode, path, flags)
            try:
                # A warm-up request (not measured): first-use costs stay out of the table.
                stream_request(server.port, prompts[0], 8)
                for c in levels:
                    r = run_level(server.port, prompts, c, args.requests_per_client * c,
                                  args.max_tokens)
                    cells.setdefault((name(mode, label), c), []).append(r)
                    print(f"rep {rep + 1} {name(mode, label)} C={c}: {r['requests']} ok, "
                          f"{r['failed']} failed, {r['tok_s']:.1f} tok/s", file=sys.stderr)
                if mode != "ar":
                    print(f"rep {rep + 1} {name(mode, label)} /metrics: {spec_counters(server.port)}",
                          file=sys.stderr)
            finally:
                server.stop()
    modes = [name(m, label) for m, label, _, _ in modes]
    print(f"\n| mode | C | requests (failed) | tok/s | TTFT p50 / p90 / p99 (ms) | "
          f"TPOT p50 / p90 / p99 (ms) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for mode in modes:
        for c in levels:
            reps = cells[(mode, c)]
            tok = [r["tok_s"] for r in reps]
            ttft = [x for r in reps for x in r["ttft"]]
            tpot = [x for r in reps for x in r["tpot"]]
            spread = f" ({min(tok):.1f}..{max(tok):.1f})" if len(tok) > 1 else ""
            print(f"| {mode} | {c} | {sum(r['requests'] for r in reps)} "
                  f"({sum(r['failed'] for r in reps)}) | {statistics.median(tok):.1f}{spread} | "
                  + " / ".join(f"{1000 * percentile(ttft, p):.0f}" for p in (50, 90, 99)) + " | "
                  + " / ".join(f"{1000 * percentile(tpot, p):.1f}" for p in (50, 90, 99)) + " |")
            for r in reps:
                for e in r["errors"]:
                    print(f"  error: {e}", file=sys.stderr)


def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def soak(args, prompts):
    mode = args.modes.split(",")[0]
    c = int(args.concurrency.split(",")[0])
    server = Server(args, mode)
    samples = []  # (t, total RSS in MiB)
    stop = threading.Event()

    def sampler():
        t0 = time.time()
        while not stop.is_set():
            samples.append((time.time() - t0, sum(rss_kb(p) for p in server.pids()) / 1024))
            stop.wait(args.rss_every)

    th = threading.Thread(target=sampler)
    th.start()
    try:
        r = run_level(server.port, prompts, c, 0, args.max_tokens,
                      deadline=time.time() + args.soak)
    finally:
        stop.set()
        th.join()
        rc = server.stop()
    rss = [s[1] for s in samples]
    tpot = r["tpot"]
    print(f"\nsoak: {mode}, C={c}, {args.soak:.0f} s: {r['requests']} requests, {r['failed']} failed, "
          f"{r['tok_s']:.1f} tok/s, TTFT p50 {1000 * percentile(r['ttft'], 50):.0f} ms, "
          f"TPOT p50 {1000 * percentile(tpot, 50):.1f} ms; server RSS (all ranks) first "
          f"{rss[0]:.1f} MiB, last {rss[-1]:.1f} MiB, max {max(rss):.1f} MiB over {len(rss)} samples; "
          f"server exit {rc}")
    for t, m in samples[:: max(1, len(samples) // 10)]:
        print(f"  t={t:6.0f} s  RSS {m:.1f} MiB")
    for e in r["errors"]:
        print(f"  error: {e}", file=sys.stderr)
    return 1 if r["failed"] or rc != 0 else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ssd", default="build/bin/ssd",
                    help="the ssd binary, or LABEL=PATH[ FLAGS],... to alternate several")
    ap.add_argument("-m", "--model", required=True, help="GGUF file or checkpoint directory")
    ap.add_argument("--modes", default="ar,sd,ssd", help="comma-separated: ar, sd, ssd")
    ap.add_argument("--drafter", default="ngram",
                    help="the servers' --drafter (sd, ssd); 'self' drafts with the target model")
    ap.add_argument("--k", default="auto", help="the servers' --k: auto (their default) or a length")
    ap.add_argument("--threads", type=int, default=1, help="--threads of each server rank")
    ap.add_argument("--max-batch", type=int, default=8, help="the servers' --max-batch")
    ap.add_argument("--concurrency", default="1,2,4,8", help="comma-separated client counts")
    ap.add_argument("--requests-per-client", type=int, default=3,
                    help="requests each client sends per concurrency level")
    ap.add_argument("--max-tokens", type=int, default=64, help="max_tokens of every request")
    ap.add_argument("--prompts", default=os.path.join(os.path.dirname(__file__), "prompts/mixed.txt"),
                    help="prompt file (one per line, cycled)")
    ap.add_argument("--reps", type=int, default=1, help="repetitions of the sweep, modes alternated")
    ap.add_argument("--mpirun", default="mpirun", help="the mpirun of the ssd mode's 2-rank server")
    ap.add_argument("--soak", type=float, default=0, help="seconds of soak (0: the sweep)")
    ap.add_argument("--rss-every", type=float, default=10, help="soak: seconds between RSS samples")
    args = ap.parse_args()
    prompts = read_prompts(args.prompts)
    if args.drafter == "self":
        args.drafter = "model:" + args.model
    print(f"# serve_bench: model {os.path.basename(args.model)}, drafter {args.drafter}, k {args.k}, "
          f"threads {args.threads}, max batch {args.max_batch}, max_tokens {args.max_tokens}, "
          f"prompts {os.path.basename(args.prompts)}; {machine_state()}")
    if args.soak > 0:
        return soak(args, prompts)
    sweep(args, prompts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
