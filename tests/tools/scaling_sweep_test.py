#!/usr/bin/env python3
"""perf/scaling/sweep.py and plot_sweep.py without a model or mpirun: the commands the sweep would
run (--dry-run) on the batch axis and off it, the reduction of a bench run's JSON to one line's
figures, bad usage, and the plot script's SSD/SD pairing and figures on a planted JSONL.
Usage: scaling_sweep_test.py REPO_ROOT
"""
import contextlib
import importlib.util
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = sys.argv.pop(1) if len(sys.argv) > 1 else os.getcwd()
SCALING = os.path.join(ROOT, "perf", "scaling")


def load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(SCALING, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


sweep = load("sweep")
plot = load("plot_sweep")


def dry_run(*args):
    """The JSON lines sweep.py --dry-run prints for `args`."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert sweep.main(["--out", "unused.jsonl", "--dry-run", "--model", "m.gguf",
                           "--drafter", "ngram", *args]) == 0
    return [json.loads(l) for l in out.getvalue().splitlines()]


def flag(cmd, name):
    return cmd[cmd.index(name) + 1]


def split(line):
    """(mpirun's arguments, the ssd command) of a dry-run line."""
    cmd = line["command"]
    at = next(i for i, x in enumerate(cmd) if x.endswith("ssd") and i > 0)
    return cmd[:at], cmd[at:]


class SweepCommands(unittest.TestCase):
    def test_without_batch_each_run_is_one_generate(self):
        lines = dry_run("--modes", "ssd,sd", "--k", "2,7", "--link-latency-us", "0,1000")
        self.assertEqual(len(lines), 2 * 2 * 2 * 2)  # 2 prompts x k x latency x mode
        for l in lines:
            launch, cmd = split(l)
            self.assertEqual(flag(launch, "-n"), "2")  # ranks: target + 1 drafter
            self.assertEqual(l["runner"], "generate")
            self.assertEqual(cmd[1], "generate")
            self.assertEqual(l["axes"]["batch"], 1)
            self.assertEqual(flag(cmd, "--mode"), l["axes"]["mode"])
            self.assertEqual(flag(cmd, "--k"), l["axes"]["k"])
            self.assertIn("--ignore-eos", cmd)
            self.assertEqual(flag(cmd, "-n"), "32")
            self.assertEqual(flag(cmd, "-p"), l["prompt_lines"][0])
            if l["axes"]["link_latency_us"] > 0:
                self.assertEqual(flag(cmd, "--link-emulate"), "1000")
            else:
                self.assertNotIn("--link-emulate", cmd)
        # the modes alternate within a prompt (not one block per setting)
        self.assertEqual([l["axes"]["mode"] for l in lines[:4]], ["ssd", "sd", "ssd", "sd"])

    def test_batch_axis_runs_bench_for_every_point(self):
        lines = dry_run("--modes", "ssd,sd", "--batch", "1,4", "--drafter-ranks", "2")
        self.assertEqual(len(lines), 2 * 2 * 2)  # 2 prompts x batch x mode
        for l in lines:
            launch, cmd = split(l)
            b = l["axes"]["batch"]
            self.assertEqual(l["runner"], "bench", "batch 1 too: every point measured alike")
            self.assertEqual(cmd[1], "bench")
            self.assertEqual(flag(cmd, "--batch"), str(b))
            self.assertEqual(flag(cmd, "--modes"), l["axes"]["mode"])
            self.assertEqual(flag(cmd, "--drafters"), "ngram")
            self.assertEqual(flag(launch, "-n"), "3")  # ranks: target + 2 drafters
            self.assertEqual(flag(cmd, "-n"), "32")
            self.assertIn("--ignore-eos", cmd)
            self.assertIn("--out-json", cmd)
            self.assertEqual(len(l["prompts"]), b)
        # batch 4 from prompt 1 of 2 cycles the list
        b4 = [l for l in lines if l["axes"]["batch"] == 4]
        self.assertEqual(b4[0]["prompts"], [0, 1, 0, 1])
        self.assertEqual(b4[-1]["prompts"], [1, 0, 1, 0])

    def test_prompt_file_comments_and_newlines(self):
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write("# a comment\nfirst prompt\n\nline one\\nline two\n")
        try:
            lines = dry_run("--modes", "sd", "--prompts", f.name)
            self.assertEqual([l["prompt_lines"] for l in lines],
                             [["first prompt"], ["line one\nline two"]])
            self.assertEqual(flag(split(lines[1])[1], "-p"), "line one\nline two")
        finally:
            os.unlink(f.name)

    def test_batch_prompts_cycle(self):
        self.assertEqual(sweep.batch_prompts(3, 2, 5), [2, 0, 1, 2, 0])
        self.assertEqual(sweep.batch_prompts(5, 1, 2), [1, 2])

    def test_bad_usage_exits_2(self):
        for args in (["--batch", "0"], ["--batch", ""], ["--modes", "ar"],
                     ["--runner", "generate", "--batch", "1,2"], ["--fan-out-budget", "0"]):
            r = subprocess.run([sys.executable, os.path.join(SCALING, "sweep.py"), "--out", "x",
                                "--dry-run", *args], capture_output=True, text=True)
            self.assertEqual(r.returncode, 2, f"{args}: {r.stderr}")
            self.assertIn("error", r.stderr)

    def test_stats_from_bench_takes_the_mode_row_and_requests(self):
        j = {"commit": "abc", "context": "2 prompts",
             "summary": [{"mode": "ssd", "decode_tokens_per_s": 90.0, "decode_s": 0.2,
                          "target_wait_s": 0.05, "cache_hit_rate": 0.5}],
             "runs": [{"mode": "ssd", "prompt_index": 0, "tokens_generated": 8,
                       "decode_tokens_per_s": 40.0},
                      {"mode": "ssd", "prompt_index": 1, "tokens_generated": 8,
                       "decode_tokens_per_s": 41.0}]}
        s = sweep.stats_from_bench(j, "ssd")
        self.assertEqual(s["decode_tokens_per_s"], 90.0)
        self.assertEqual(s["decode_s"], 0.2)
        self.assertEqual(s["cache_hit_rate"], 0.5)
        self.assertEqual([r["prompt_index"] for r in s["requests"]], [0, 1])
        self.assertEqual(s["commit"], "abc")
        with self.assertRaises(ValueError):
            sweep.stats_from_bench(j, "sd")


def run_line(mode, batch, prompt, tps, k="4"):
    return {"axes": {"mode": mode, "drafter_ranks": 1, "fan_out_budget": 8, "k": k,
                     "prespec_chunk": "auto", "link_latency_us": 0.0, "batch": batch},
            "runner": "bench", "prompt": prompt, "prompts": [prompt] * batch, "repeat": 0,
            "ranks": 2, "oversubscribed": False, "cores": 2, "load_avg": 3.0, "label": "",
            "command": "ssd bench", "stats": {"decode_tokens_per_s": tps, "decode_s": 1.0,
                                              "target_wait_s": 0.25, "cache_hit_rate": 0.5}}


class PlotSweep(unittest.TestCase):
    RUNS = [run_line("ssd", 1, 0, 30), run_line("sd", 1, 0, 20),
            run_line("ssd", 1, 1, 40), run_line("sd", 1, 1, 40),
            run_line("ssd", 4, 0, 90), run_line("sd", 4, 0, 60),
            run_line("ssd", 4, 1, 80)]  # no sd partner: left out of SSD/SD

    def test_speedup_pairs_runs_that_differ_only_in_mode(self):
        r = plot.speedup_points(self.RUNS, "batch")
        self.assertEqual(sorted(r), ["SSD/SD k=4"])
        self.assertEqual(sorted(r["SSD/SD k=4"][1.0]), [1.0, 1.5])
        self.assertEqual(r["SSD/SD k=4"][4.0], [1.5])

    def test_tok_s_points_per_mode(self):
        p = plot.tok_s_points(self.RUNS, "batch")
        self.assertEqual(sorted(p["ssd k=4"][4.0]), [80, 90])
        self.assertEqual(p["sd k=4"][1.0], [20, 40])

    def test_plots_against_batch(self):
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            self.skipTest("matplotlib is not installed")
        with tempfile.TemporaryDirectory() as tmp:
            runs = os.path.join(tmp, "runs.jsonl")
            with open(runs, "w") as f:
                f.write("".join(json.dumps(r) + "\n" for r in self.RUNS))
            out = os.path.join(tmp, "plots")
            r = subprocess.run([sys.executable, os.path.join(SCALING, "plot_sweep.py"), runs, out],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(sorted(os.listdir(out)), ["speedup_vs_batch.png", "tok_s_vs_batch.png"])


if __name__ == "__main__":
    unittest.main()
