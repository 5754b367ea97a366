#!/usr/bin/env python3
"""Records llama.cpp's logits on the default model, as an independent reference for our engine.

llama.cpp (through the PyPI package llama-cpp-python) is an implementation no one on this team
wrote, so agreement with it checks the whole forward on a real model: GGUF reading, Q4_1/Q8_0
decoding, RoPE layout, GQA attention, norms, tied LM head. The C++ test
tests/unit/engine/llama_cpp_reference_test.cpp compares our logits with what this script writes.

Usage: record_llama_cpp_logits.py [--no-float64] MODEL.gguf OUT.json
Exit code 77 means "cannot run here" (llama_cpp not importable, or the model is missing), which
the live ctest check turns into a visible skip.

What is recorded, per prompt (token ids from llama.cpp's own tokenizer, no BOS: the model's GGUF
says tokenizer.ggml.add_bos_token = false):
  - at 3 positions (first, middle, last): the top-20 (id, logit) pairs and the logits of 50 fixed
    pseudo-random vocabulary ids, so the tail of the distribution is compared too;
  - the greedy continuation (argmax, i.e. temperature 0) of 32 tokens, decoded one token at a time
    through llama.cpp's KV cache, with the top-2 ids and logits at every step (the margin tells the
    test where a near-tie could legitimately flip the argmax). EOS does not stop it: both sides
    simply keep taking the argmax, which is still a well-defined comparison.
llama.cpp runs with a float32 KV cache so that its only approximation left is its own one: 8-bit
quantization of the activations that enter each quantized matmul (Q8_1 for Q4_1 weights, Q8_0 for
the Q8_0 embedding / LM head). On this model its logits end up ~1.4 from exact, so the same things
are also recorded from an exact float64 forward (numpy_llama_forward.py, weights decoded by the
PyPI gguf package) under "float64", which supports a tight tolerance. --no-float64 leaves it out
(the live ctest check uses it: that part needs no llama.cpp and the committed fixture has it).
"""
import hashlib
import json
import os
import sys

PROMPTS = [
    ("chat",
     "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
     "<|im_end|>\n<|im_start|>user\nWhat is the capital of France? Answer in one sentence."
     "<|im_end|>\n<|im_start|>assistant\n"),
    ("code",
     "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    if n < 2:\n"
     "        return n\n"),
    ("math",
     "Question: If 3x + 7 = 22, what is x?\nAnswer: Subtract 7 from both sides: 3x = 15. "
     "Divide both sides by 3: x ="),
    ("json",
     "{\"name\": \"Ada Lovelace\", \"born\": 1815, \"fields\": [\"mathematics\", \"computing\"], "
     "\"notes\": \""),
]
TOP_K = 20
N_TAIL = 50
N_GREEDY = 32
TAIL_SEED = 20240607


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def r(x):
    return round(float(x), 5)


def record_rows(rows, tail_ids):
    """rows: {position: logits [vocab]} -> the recorded form of each position."""
    import numpy as np
    out = []
    for p, row in rows.items():
        top = np.argsort(-row, kind="stable")[:TOP_K]
        out.append({
            "pos": p,
            "top": [[int(i), r(row[i])] for i in top],
            "tail": [r(row[i]) for i in tail_ids],
        })
    return out


def greedy_step(last):
    """[top1 id, top1 logit, top2 id, top2 logit] of one logits row."""
    import numpy as np
    top2 = np.argsort(-last, kind="stable")[:2]
    return [int(top2[0]), r(last[top2[0]]), int(top2[1]), r(last[top2[1]])]


def record_float64(model_path, sequences, tail_ids):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from numpy_llama_forward import Float64Llama
    ref = Float64Llama(model_path)
    for seq in sequences:
        ids = seq["tokens"]
        ref.reset()
        logits = ref.forward(ids)  # [n, vocab]
        positions = [p["pos"] for p in seq["positions"]]
        greedy = []
        last = logits[-1]
        for step in range(N_GREEDY):
            greedy.append(greedy_step(last))
            if step + 1 < N_GREEDY:
                last = ref.forward([greedy[-1][0]])[0]
        seq["float64"] = {
            "positions": record_rows({p: logits[p] for p in positions}, tail_ids),
            "greedy": greedy,
        }


def main():
    args = [a for a in sys.argv[1:] if a != "--no-float64"]
    with_float64 = len(args) == len(sys.argv) - 1
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    model_path, out_path = args
    if not os.path.isfile(model_path):
        print(f"model not found: {model_path}", file=sys.stderr)
        return 77
    try:
        import numpy as np
        import llama_cpp
    except ImportError as e:
        print(f"llama-cpp-python is not available: {e}", file=sys.stderr)
        return 77

    llm = llama_cpp.Llama(model_path=model_path, n_ctx=512, n_batch=512, n_threads=1,
                          n_threads_batch=1, seed=1234, logits_all=True, vocab_only=False,
                          type_k=llama_cpp.GGML_TYPE_F32, type_v=llama_cpp.GGML_TYPE_F32,
                          flash_attn=False, verbose=False)
    n_vocab = llm.n_vocab()
    tail_ids = sorted(np.random.RandomState(TAIL_SEED).choice(n_vocab, N_TAIL, replace=False)
                      .tolist())

    sequences = []
    for name, text in PROMPTS:
        ids = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        llm.reset()
        llm.eval(ids)
        n = len(ids)
        rows = np.array(llm.scores[:n], dtype=np.float32)  # [n, vocab]
        positions = record_rows({p: rows[p] for p in (0, n // 2, n - 1)}, tail_ids)

        # Greedy: the prompt is already in the cache; then one token at a time.
        greedy = []
        last = rows[n - 1]
        for step in range(N_GREEDY):
            greedy.append(greedy_step(last))
            if step + 1 < N_GREEDY:
                llm.eval([greedy[-1][0]])
                last = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
        sequences.append({
            "name": name,
            "text": text,
            "tokens": [int(t) for t in ids],
            "positions": positions,
            "greedy": greedy,
            "greedy_text": llm.detokenize([g[0] for g in greedy]).decode("utf-8", "replace"),
        })

    if with_float64:
        record_float64(model_path, sequences, tail_ids)

    fixture = {
        "generator": "tests/reference/record_llama_cpp_logits.py",
        "llama_cpp_python_version": llama_cpp.__version__,
        "model_file": os.path.basename(model_path),
        "model_bytes": os.path.getsize(model_path),
        "model_sha256": sha256_of(model_path),
        "settings": "n_ctx 512, n_threads 1, float32 KV cache, no flash attention, no BOS",
        "n_vocab": n_vocab,
        "top_k": TOP_K,
        "tail_ids": tail_ids,
        "greedy_format": "per step: [top1 id, top1 logit, top2 id, top2 logit]",
        "float64": "per sequence, the same from numpy_llama_forward.py (exact float64 forward)"
                   if with_float64 else "not recorded",
        "sequences": sequences,
    }
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(fixture, f, indent=1, ensure_ascii=False)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
