#!/usr/bin/env python3
"""AR decode and prefill speed of `ssd generate` against llama.cpp on the same GGUF file and
thread count, in one job.

llama.cpp runs through its Python binding (PyPI `llama-cpp-python`, which builds the llama.cpp
sources it ships; `perf/llamacpp_compare.py --install VENV` makes such a virtualenv). Each sample
is a fresh process of either engine on the same text prompt: a prefill of the whole prompt, then
N greedy tokens decoded one at a time past any end-of-generation token. The two engines alternate
(their order flips every repeat), so drift on the machine hits both alike, and the figures are
medians with min..max over the repeats.

Whose clock: ssd's own figures (`--stats-json`: prefill_tokens_per_s, decode_tokens_per_s; its
decode time includes sampling); for llama.cpp, the wall time of the binding's eval()
calls alone (the prompt's one call; each decoded token's call), without the Python argmax between
them, which favours llama.cpp.

  perf/llamacpp_compare.py [--venv DIR] [--model GGUF] [--threads 2] [--tokens 256]
      [--prompt-tokens 512] [--repeats 5] [--json OUT]
  perf/llamacpp_compare.py --install DIR      # python3 -m venv DIR; pip install llama-cpp-python
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
LLAMA_CPP_PYTHON = "llama-cpp-python==0.3.36"

# Runs in the virtualenv's interpreter: one sample of llama.cpp, printed as JSON.
LLAMA_SAMPLE = r"""
import json, sys, time
import numpy as np
import llama_cpp
model, prompt_path, threads, n_new = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
text = open(prompt_path, encoding="utf-8").read()
probe = llama_cpp.Llama(model_path=model, vocab_only=True, verbose=False)
n_prompt = len(probe.tokenize(text.encode("utf-8"), add_bos=True))
del probe
llm = llama_cpp.Llama(model_path=model, n_threads=threads, n_threads_batch=threads,
                      n_ctx=n_prompt + n_new + 16, n_batch=max(512, n_prompt),
                      n_ubatch=max(512, n_prompt), verbose=False)
tokens = llm.tokenize(text.encode("utf-8"), add_bos=True)
t0 = time.perf_counter()
llm.eval(tokens)
t_prefill = time.perf_counter() - t0
out, t_decode, n_vocab = [], 0.0, llm.n_vocab()
for _ in range(n_new):
    # the last forward's logits (the binding keeps its own copy only with logits_all)
    tok = int(np.argmax(np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(n_vocab,))))
    out.append(tok)
    t0 = time.perf_counter()
    llm.eval([tok])
    t_decode += time.perf_counter() - t0
print(json.dumps({
    "prompt_tokens": len(tokens), "new_tokens": len(out),
    "prefill_tokens_per_s": len(tokens) / t_prefill,
    "decode_tokens_per_s": len(out) / t_decode,
    "text": llm.detokenize(out).decode("utf-8", "replace"),
}))
"""


def die(msg):
    print(f"llamacpp_compare: {msg}", file=sys.stderr)
    sys.exit(2)


def install(venv):
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    env = dict(os.environ, CMAKE_BUILD_PARALLEL_LEVEL=str(os.cpu_count() or 2))
    subprocess.run([os.path.join(venv, "bin", "pip"), "install", "--no-cache-dir",
                    LLAMA_CPP_PYTHON, "numpy"], check=True, env=env)
    print(f"installed {LLAMA_CPP_PYTHON} into {venv}")


def prompt_text(n_tokens):
    """About n_tokens of English: the workload suite's passages, in order, until long enough."""
    words = []
    for f in sorted((ROOT / "perf" / "workloads").glob("*.txt")):
        words += f.read_text(encoding="utf-8").split()
        if len(words) > n_tokens:  # SmolLM2's BPE: about 1.3 tokens per word of this text
            break
    return " ".join(words[: int(n_tokens / 1.3)])


def ssd_sample(args, prompt_path):
    with tempfile.NamedTemporaryFile(suffix=".json") as stats:
        cmd = [args.ssd_bin, "generate", "-m", args.model, "--prompt-file", prompt_path,
               "-n", str(args.tokens), "--ignore-eos", "--threads", str(args.threads),
               "--mode", "ar", "--quiet", "--stats-json", stats.name]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            die(f"ssd failed ({r.returncode}): {r.stderr.strip()[-400:]}")
        d = json.load(open(stats.name))
    return {"prompt_tokens": d["prompt_tokens"], "new_tokens": d["tokens_generated"],
            "prefill_tokens_per_s": d["prefill_tokens_per_s"],
            "decode_tokens_per_s": d["decode_tokens_per_s"], "text": d["output_text"]}


def llama_sample(args, prompt_path):
    py = os.path.join(args.venv, "bin", "python")
    r = subprocess.run([py, "-c", LLAMA_SAMPLE, args.model, prompt_path, str(args.threads),
                        str(args.tokens)], capture_output=True, text=True)
    if r.returncode != 0:
        die(f"llama.cpp failed ({r.returncode}): {r.stderr.strip()[-400:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def summary(samples, key):
    v = [s[key] for s in samples]
    return {"median": statistics.median(v), "min": min(v), "max": max(v)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--install", metavar="DIR", help="make a virtualenv with llama-cpp-python")
    ap.add_argument("--venv", default=os.environ.get("LLAMA_VENV", str(ROOT / ".cache" / "llama-venv")))
    ap.add_argument("--model", default=os.environ.get(
        "SSD_MODEL", str(ROOT / ".cache" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf")))
    ap.add_argument("--ssd-bin", default=os.environ.get("SSD_BIN", str(ROOT / "build" / "bin" / "ssd")))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", help="write every sample and the medians here")
    args = ap.parse_args()
    if args.install:
        return install(args.install)
    for v in ("threads", "tokens", "prompt_tokens", "repeats"):
        if getattr(args, v) < 1:
            die(f"--{v.replace('_', '-')} must be >= 1")
    for path, what in ((args.model, "model"), (args.ssd_bin, "ssd binary"),
                       (os.path.join(args.venv, "bin", "python"), "llama.cpp virtualenv (--install)")):
        if not os.path.exists(path):
            die(f"no {what} at {path}")
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(prompt_text(args.prompt_tokens))
        prompt_path = f.name
    runs = {"ssd": [], "llama.cpp": []}
    try:
        for rep in range(args.repeats):
            order = ["ssd", "llama.cpp"] if rep % 2 == 0 else ["llama.cpp", "ssd"]
            for engine in order:
                s = (ssd_sample if engine == "ssd" else llama_sample)(args, prompt_path)
                runs[engine].append(s)
                print(f"rep {rep + 1} {engine:9s}: prefill {s['prompt_tokens']} tokens "
                      f"{s['prefill_tokens_per_s']:7.1f} tok/s, decode {s['new_tokens']} tokens "
                      f"{s['decode_tokens_per_s']:6.1f} tok/s", flush=True)
    finally:
        os.unlink(prompt_path)
    res = {e: {k: summary(v, k) for k in ("prefill_tokens_per_s", "decode_tokens_per_s")}
           for e, v in runs.items()}
    ratio = {k: statistics.median(a[k] / b[k] for a, b in zip(runs["ssd"], runs["llama.cpp"]))
             for k in ("prefill_tokens_per_s", "decode_tokens_per_s")}
    same = runs["ssd"][0]["text"] == runs["llama.cpp"][0]["text"]
    print(f"\n{args.threads} threads, {runs['ssd'][0]['prompt_tokens']}-token prompt, "
          f"{args.tokens} decoded tokens, {args.repeats} repeats (median, min..max):")
    print("| engine | prefill tok/s | decode tok/s |\n|---|---|---|")
    for e, r in res.items():
        cells = [f"{r[k]['median']:.1f} ({r[k]['min']:.1f}..{r[k]['max']:.1f})"
                 for k in ("prefill_tokens_per_s", "decode_tokens_per_s")]
        print(f"| {e} | {cells[0]} | {cells[1]} |")
    print(f"| ssd / llama.cpp (median of paired ratios) | {ratio['prefill_tokens_per_s']:.2f}x | "
          f"{ratio['decode_tokens_per_s']:.2f}x |")
    print(f"greedy texts identical: {'yes' if same else 'no (a near-tie argmax flipped: ssd rounds activations to 8 bits as llama.cpp does, not always alike)'}")
    if args.json:
        json.dump({"args": vars(args), "samples": runs, "summary": res, "ratio": ratio,
                   "same_text": same}, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
