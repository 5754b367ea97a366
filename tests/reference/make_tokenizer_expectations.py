#!/usr/bin/env python3
"""Expected token ids from the Hugging Face `tokenizers` package, an independent BPE
implementation, for checking runtime/tokenizer.

Modes:
  (default)   print C++ expectation tables: SmolLM2 (vocab and merges read from the GGUF with the
              `gguf` package, configured as SmolLM2's tokenizer.json is) and a tiny Llama-2-style
              SentencePiece BPE vocabulary defined below (mirrored in
              tests/unit/tokenizer/spm_reference_test.cpp).
  --live TOOL compare TOOL (tests/tools/ssd_tokenize.cpp) against `tokenizers` over a few hundred
              generated strings, for the GGUF and for tokenizer.json variants of the same vocabulary
              with each supported pre-tokenizer, plus the tiny SentencePiece vocabulary. Exits 0 on
              agreement, 1 on any mismatch, 77 (ctest SKIP) if a package or the model is missing.

Model path: argv --model, else env SSD_MODEL.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

SKIP = 77

# Strings encoded for the recorded SmolLM2 expectations (tests/unit/tokenizer/smollm2_test.cpp).
SMOLLM2_CASES = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "I'm sure you're right, but DON'T do it; they'll see we've been there.",
    "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n",
    '{"name": "SmolLM2", "params": 135000000, "ok": true}',
    "3.14159 * 2 = 6.28318; 1234567890 + 42 = 1234567932",
    "x^2 + y^2 = z^2, \u2211_{i=1}^{n} i = n(n+1)/2",
    "multiple    spaces   here  ",
    "line one\nline two\n\n\nline five",
    "tabs\tand\t\ttabs",
    "windows\r\nline\r\nendings",
    "Caf\u00e9 na\u00efve r\u00e9sum\u00e9 fa\u00e7ade",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3068\u4e2d\u6587\u6587\u672c",
    "Emoji: \U0001F600\U0001F389\U0001F44D\U0001F3FD \U0001F468\u200d\U0001F469\u200d\U0001F467 \u2764\ufe0f",
    "Combining: e\u0301 a\u0308 n\u0303",
    "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! \u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac",
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
    "\u0939\u093f\u0928\u094d\u0926\u0940 \u092a\u093e\u0920",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user",
    "<|endoftext|>",
    "   leading spaces",
    "trailing spaces   ",
    "\n\n\n",
    "a",
    " ",
    "URL: https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct?x=1&y=2",
    "C++: std::vector<int32_t> v{1, 2, 3}; // comment",
    "Numbers: 1st 2nd 3rd \u2460\u2461\u2462 \u00bd \u00b2",
    "ALL CAPS SHOUTING AND lowercase whispering",
    "Non-breaking\u00a0space and\u3000ideographic space",
    "'s 'S 'll 'LL 've 're 'd 'm 't",
]

# ---- tiny Llama-2-style SentencePiece BPE vocabulary -------------------------------------------
# ids: 0 <unk>, 1 <s>, 2 </s>, 3..258 <0x00>..<0xFF>, then SPM_CHARS one per character, then
# SPM_PIECES in priority order (earlier = merged first). Every piece has a split into two earlier
# tokens. Merges follow the SentencePiece converter's rule: every split of a piece into two known
# tokens, ordered by the piece's id, then the left part's id.
SPM_CHARS = ["\u2581"] + list("etaoinshrdlucmfwypvbgkqjxzTIAHSW0123456789.,'!?-")
SPM_PIECES = [
    "\u2581t", "he", "\u2581a", "in", "er", "on", "re", "\u2581the", "at", "en", "\u2581s", "\u2581w",
    "or", "es", "\u2581o", "an", "is", "it", "ll", "ing", "\u2581in", "\u2581b", "ed", "\u2581c",
    "ou", "\u2581m", "ar", "\u2581to", "nd", "\u2581and", "\u2581of", "\u2581is", "\u2581h",
    "\u2581he", "llo", "\u2581hello", "\u2581wor", "ld", "\u2581world", "\u2581I", "\u2581It",
    "'s", "\u2581\u2581", "\u2581\u2581\u2581\u2581", "\u25811", "12", "\u2581T", "\u2581The",
    "\u2581H", "\u2581He", "\u2581Hello", "at\u2581", "\u2581cat", "\u2581on", "\u2581mat",
    "\u2581o'", "ck", "\u2581cl", "\u2581clo", "\u2581clock", "\u2581tw", "\u2581two",
    "\u2581sp", "ac", "ace", "\u2581space", "\u2581spaces", "\u2581n", "ew", "\u2581new",
    "\u2581l", "ine", "\u2581line", "\u2581ta", "\u2581tab", "\u2581her", "\u2581here",
    "\u2581e", "mo", "\u2581emo", "ji", "\u2581emoji",
]
SPM_CASES = [
    "Hello world",
    "the cat is on the mat",
    "It's 12 o'clock",
    "  two  spaces   here ",
    "new\nline",
    "tab\there",
    "\u65e5\u672c\u8a9e",
    "emoji \U0001F389!",
    "<s>hello</s> world",
    "\u00f1and\u00fc",
    "",
    " ",
    "hello world hello world, the end.",
    "ZZZ qqq",
]


def spm_tokenizer_json():
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + SPM_CHARS + SPM_PIECES
    assert len(set(tokens)) == len(tokens), "duplicate token"
    ids = {t: i for i, t in enumerate(tokens)}
    merges = []
    for piece in SPM_PIECES:
        splits = [(piece[:k], piece[k:]) for k in range(1, len(piece))
                  if piece[:k] in ids and piece[k:] in ids]
        assert splits, f"piece {piece!r} has no split into known tokens"
        merges += sorted(splits, key=lambda s: ids[s[0]])
    special = lambda i, t: {"id": i, "content": t, "single_word": False, "lstrip": False,
                            "rstrip": False, "normalized": False, "special": True}
    return {
        "version": "1.0",
        "added_tokens": [special(0, "<unk>"), special(1, "<s>"), special(2, "</s>")],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                    {"Sequence": {"id": "A", "type_id": 0}},
                                    {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>",
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": ids, "merges": [list(m) for m in merges]},
    }


# ---- SmolLM2 from the GGUF -----------------------------------------------------------------------
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_REGEX = LLAMA3_REGEX.replace(r"\p{N}{1,3}", r"\p{N}")


def read_gguf_vocab(path):
    import gguf
    r = gguf.GGUFReader(path)
    f = r.fields
    tokens = f["tokenizer.ggml.tokens"].contents()
    types = f["tokenizer.ggml.token_type"].contents()
    merges = [tuple(m.split(" ")) for m in f["tokenizer.ggml.merges"].contents()]
    return tokens, types, merges


def byte_level_tokenizer(vocab, pre="smollm"):
    """A tokenizers.Tokenizer over a byte-level vocabulary with the given pre-tokenizer; "smollm"
    is SmolLM2's own configuration (Digits(individual) then ByteLevel, no BOS added)."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers
    tokens, types, merges = vocab
    bpe = models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges,
                     ignore_merges=(pre == "llama3"))
    tk = Tokenizer(bpe)
    if pre == "smollm":
        tk.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    elif pre == "gpt2":
        tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        regex = {"llama3": LLAMA3_REGEX, "qwen2": QWEN2_REGEX}[pre]
        tk.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tk.decoder = decoders.ByteLevel()
    tk.add_special_tokens([AddedToken(t, special=True, normalized=False)
                           for t, ty in zip(tokens, types) if ty == 3])
    return tk


def cpp_string(s):
    out = []
    for ch in s:
        o = ord(ch)
        if ch == "\\": out.append("\\\\")
        elif ch == '"': out.append('\\"')
        elif ch == "\n": out.append("\\n")
        elif ch == "\t": out.append("\\t")
        elif ch == "\r": out.append("\\r")
        elif o < 0x20 or o == 0x7F: out.append(f"\\{o:03o}")
        elif o in (0xA0, 0x3000, 0x200D, 0xFE0F) or 0x300 <= o < 0x370:
            # invisible or combining: write the UTF-8 bytes as octal escapes to keep them visible
            out.append("".join(f"\\{b:03o}" for b in ch.encode()))
        else: out.append(ch)
    return '"' + "".join(out) + '"'


def print_table(name, cases, encode):
    print(f"// {name}")
    for s in cases:
        ids = encode(s)
        print(f"    {{{cpp_string(s)},\n     {{{', '.join(map(str, ids))}}}}},")
    print()


# ---- live comparison ---------------------------------------------------------------------------
POOLS = {
    "word": ["the", "The", "hello", "World", "tokenizer", "don", "I", "can", "ALLCAPS", "caf\u00e9",
             "na\u00efve", "\u00fcber", "stra\u00dfe", "\u0437\u0434\u0440\u0430\u0432\u0441\u0442\u0432\u0443\u0439",
             "\u4f60\u597d", "\u3053\u3093\u306b\u3061\u306f", "\ud55c\uad6d\uc5b4",
             "\u0645\u0631\u062d\u0628\u0627", "\u0928\u092e\u0938\u094d\u0924\u0947", "x", "a"],
    "contraction": ["'s", "'S", "'t", "'T", "'re", "'RE", "'Re", "'ve", "'m", "'M", "'ll", "'LL",
                    "'lL", "'d", "'D", "'", "''", "'x", "'\u017f"],
    "digits": ["0", "7", "42", "123", "2024", "3.14", "1,000,000", "\u0661\u0662\u0663",
               "\u2460", "\u00bd", "\u00b2", "\u2167", "99999999"],
    "space": [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", " \n", "\n ", " \r\n ",
              "\u00a0", "\u3000", "\u2028", "\u0085", "\u000b", "\u000c", "    "],
    "punct": [".", ",", "!", "?", "...", "--", "()", "{}", "[]", "<>", "#", "@", "$", "%", "&",
              "*", "/", "\\", "_", "~", "`", "^", "|", ";", ":", "\"", "\u2014", "\u00bf",
              "\u3002", "\u00ab", "\u00bb", "\u2026",
              "\u0004", "\U00080000"],  # no byte token in SmolLM2 for 04 / F2: dropped
    "emoji": ["\U0001F600", "\U0001F389", "\U0001F44D\U0001F3FD",
              "\U0001F468\u200d\U0001F469\u200d\U0001F467", "\u2764\ufe0f", "\U0001F1EF\U0001F1F5",
              "\u2615"],
    "combining": ["e\u0301", "a\u0308", "\u0301", "n\u0303\u0323", "\u0915\u093f"],
    "special": ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|im_", "<|", "<s>", "</s>",
                "<|im_start|>user\n", "<repo_name>"],
    "code": ["def f(x):", "    return x", "if (a && b) {", "}", "std::string", "x += 1;",
             "#include <vector>", "// TODO", "0x1F", "a_b_c", "camelCase", "snake_case"],
}


def random_string(rng):
    kinds = list(POOLS)
    weights = [6, 2, 2, 4, 3, 1, 1, 1, 2]
    parts = [rng.choice(POOLS[rng.choices(kinds, weights)[0]]) for _ in range(rng.randint(1, 24))]
    return "".join(parts)


def run_tool(tool, model, strings, workdir, tag):
    inp = os.path.join(workdir, f"{tag}.jsonl")
    with open(inp, "w", encoding="utf-8") as f:
        for s in strings:
            f.write(json.dumps(s) + "\n")
    res = subprocess.run([tool, model, "--input", inp], capture_output=True, text=True)
    if res.returncode != 0:
        print(f"[{tag}] tool failed ({res.returncode}): {res.stderr.strip()}")
        return None
    return [[int(x) for x in line.split()] for line in res.stdout.split("\n")[: len(strings)]]


def compare(tag, strings, expected, got):
    if got is None:
        return 1
    bad = [(s, e, g) for s, e, g in zip(strings, expected, got) if e != g]
    for s, e, g in bad[:5]:
        print(f"[{tag}] MISMATCH for {s!r}\n  tokenizers: {e}\n  ssd:        {g}")
    print(f"[{tag}] {len(strings) - len(bad)}/{len(strings)} strings agree")
    return 1 if bad else 0


def live(args, model):
    import tokenizers
    from tokenizers import Tokenizer
    rng = random.Random(args.seed)
    strings = [random_string(rng) for _ in range(args.count)] + SMOLLM2_CASES
    failures = 0
    vocab = read_gguf_vocab(model)
    with tempfile.TemporaryDirectory() as tmp:
        smol = byte_level_tokenizer(vocab, "smollm")
        expected = [smol.encode(s, add_special_tokens=False).ids for s in strings]
        failures += compare("gguf smollm", strings, expected,
                            run_tool(args.live, model, strings, tmp, "gguf"))
        for pre in ["smollm", "gpt2", "llama3", "qwen2"]:
            tk = byte_level_tokenizer(vocab, pre)
            path = os.path.join(tmp, f"{pre}", "tokenizer.json")
            os.makedirs(os.path.dirname(path))
            tk.save(path)
            expected = [tk.encode(s, add_special_tokens=False).ids for s in strings]
            failures += compare(f"tokenizer.json {pre}", strings, expected,
                                run_tool(args.live, path, strings, tmp, pre))
        spm = Tokenizer.from_str(json.dumps(spm_tokenizer_json()))
        path = os.path.join(tmp, "spm", "tokenizer.json")
        os.makedirs(os.path.dirname(path))
        with open(path, "w", encoding="utf-8") as f:
            json.dump(spm_tokenizer_json(), f)
        # The tool adds no BOS (encode(add_bos=false)); the post-processor would.
        expected = [spm.encode(s, add_special_tokens=False).ids for s in strings]
        failures += compare("tokenizer.json spm", strings, expected,
                            run_tool(args.live, path, strings, tmp, "spm"))
    print(f"tokenizers {tokenizers.__version__}: {'FAILED' if failures else 'all agree'}")
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--model", default=os.environ.get("SSD_MODEL", ""))
    ap.add_argument("--live", metavar="TOOL", help="path of the ssd_tokenize tool to compare")
    ap.add_argument("--count", type=int, default=400)
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    try:
        import gguf  # noqa: F401
        import tokenizers
    except ImportError as e:
        print(f"SKIP: {e}")
        return SKIP
    if not args.model or not os.path.exists(args.model):
        print(f"SKIP: model not found (--model or SSD_MODEL; got {args.model!r})")
        return SKIP
    if args.live:
        return live(args, args.model)

    from tokenizers import Tokenizer
    print(f"// Generated by tests/reference/make_tokenizer_expectations.py with tokenizers "
          f"{tokenizers.__version__} from {os.path.basename(args.model)}")
    smol = byte_level_tokenizer(read_gguf_vocab(args.model), "smollm")
    print_table("SmolLM2 (add_special_tokens=False)", SMOLLM2_CASES,
                lambda s: smol.encode(s, add_special_tokens=False).ids)
    spm = Tokenizer.from_str(json.dumps(spm_tokenizer_json()))
    print_table("tiny SentencePiece BPE (add_special_tokens=True: BOS from the post-processor)",
                SPM_CASES, lambda s: spm.encode(s, add_special_tokens=True).ids)
    return 0


if __name__ == "__main__":
    sys.exit(main())
