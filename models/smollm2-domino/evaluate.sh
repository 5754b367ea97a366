#!/usr/bin/env bash
# Measures a Domino checkpoint for the default model on the HELD-OUT prompts (never seen in
# training), greedy, and writes the figures the model card reports:
#   1. mean acceptance length (MAL) at block 8 (k = 7) and block 16 (k = 15): Domino with its head,
#      the same backbone with --domino-head off, the n-gram drafter and early exit (its LoRA head
#      as initialised, and trained online with DVI during the run);
#   2. decode tok/s of AR, SD (one process, 2 threads) and SSD (2 ranks: target on core 0, drafter
#      on core 1) with this drafter, each comparison inside one bench run;
#   3. offline acceptance (ssd eval-domino) on the held-out prompts distilled once (the target's
#      greedy answers, 160 tokens each): per-position accuracy and MAL for blocks with 1 known
#      token (SD's shape) and 2 and 3 (SSD's pre-speculated shapes).
# MAL is deterministic (greedy); tok/s is compared only within a run (this machine is noisy).
#
#   models/smollm2-domino/evaluate.sh [CHECKPOINT] [OUT_DIR]
# Env: SSD_BIN (default build/bin/ssd), SSD_MODEL (default .cache/models/SmolLM2-135M-Instruct.Q4_1.gguf),
#      EVAL_PROMPTS (default all held-out prompts), EVAL_N (tokens per prompt, default 64),
#      EARLY_EXIT (layers of the early-exit drafter, default 10).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CK=${1:-$ROOT/models/smollm2-domino/domino.safetensors}
OUT=${2:-$ROOT/.cache/eval/smollm2-domino}
BIN=${SSD_BIN:-$ROOT/build/bin/ssd}
MODEL=${SSD_MODEL:-$ROOT/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf}
PROMPTS=$ROOT/perf/prompts/distill-heldout.txt
N=${EVAL_N:-64}
MAXP=${EVAL_PROMPTS:-0}
EE=${EARLY_EXIT:-10}
mkdir -p "$OUT"
for f in "$CK" "$MODEL" "$BIN" "$PROMPTS"; do
  [[ -e $f ]] || { echo "evaluate: missing $f" >&2; exit 1; }
done
common=(-m "$MODEL" --prompt-file "$PROMPTS" -n "$N" --max-prompts "$MAXP")

echo "== MAL, one process, 2 threads: Domino (head on), n-gram, early exit; AR for tok/s"
"$BIN" bench "${common[@]}" -t 2 --modes ar,sd --drafters "domino:$CK,ngram,early-exit:$EE" \
  --k 7,15 --out-json "$OUT/mal_head_on.json" --out-md "$OUT/mal_head_on.md"
echo "== MAL: the same backbone with --domino-head off"
"$BIN" bench "${common[@]}" -t 2 --modes sd --drafters "domino:$CK" --domino-head off \
  --k 7,15 --out-json "$OUT/mal_head_off.json" --out-md "$OUT/mal_head_off.md"
echo "== MAL: early exit with DVI online learning (--online-learning)"
"$BIN" bench "${common[@]}" -t 2 --modes sd --drafters "early-exit:$EE" --online-learning \
  --k 7,15 --out-json "$OUT/mal_early_exit_dvi.json" --out-md "$OUT/mal_early_exit_dvi.md"
echo "== AR, SD and SSD on 2 ranks (target core 0, drafter core 1), k = 7"
SSD_BIN=$BIN "$ROOT/launch/ssd-launch" --target-ranks 1 --drafter-ranks 1 -- bench "${common[@]}" \
  --modes ar,sd,ssd --drafters "domino:$CK" --k 7 \
  --out-json "$OUT/ssd.json" --out-md "$OUT/ssd.md"
echo "== offline acceptance on the distilled held-out set (1, 2, 3 known tokens), block 8"
HELD=${HELDOUT_DATA:-$ROOT/.cache/distill/smollm2-heldout.bin}
[[ -e $HELD ]] || "$BIN" distill -m "$MODEL" --prompts "$PROMPTS" -n 160 --batch 16 -o "$HELD"
for kn in 1 2 3; do
  "$BIN" eval-domino -m "$MODEL" --data "$HELD" --drafter "$CK" --rows 8 --known $kn \
    | tee "$OUT/offline_known$kn.txt"
done
echo "evaluate: figures in $OUT"
