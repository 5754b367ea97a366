#!/usr/bin/env bash
# The layering check's own test: a copy of the tree passes; the same copy with one planted
# forbidden include per rule fails, and the failure names the planted file. Exits 1 if the check
# misses a plant or fails the clean copy.
set -euo pipefail
SRC=$1
CHECK="$SRC/tests/tools/check_layering.py"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
copy_tree() {
  rm -rf "$tmp/tree"
  mkdir -p "$tmp/tree"
  (cd "$SRC" && tar cf - kernels runtime actors topology launch) | (cd "$tmp/tree" && tar xf -)
}
copy_tree
python3 "$CHECK" "$tmp/tree" >/dev/null || { echo "FAIL: the clean tree fails the check"; exit 1; }
plant() {  # plant FILE INCLUDE: the check must fail naming FILE
  local file=$1 include=$2
  copy_tree
  mkdir -p "$(dirname "$tmp/tree/$file")"
  printf '#include "%s"\n' "$include" >> "$tmp/tree/$file"
  if out=$(python3 "$CHECK" "$tmp/tree" 2>&1); then
    echo "FAIL: planted $include in $file and the check passed"; exit 1
  fi
  grep -q "^$file:" <<<"$out" || { echo "FAIL: the check did not name $file: $out"; exit 1; }
  echo "ok: $file including $include is refused"
}
plant kernels/cpu/ops.h runtime/model/transformer.h
plant kernels/cuda/planted.cuh runtime/spec/verify.h
plant runtime/model/transformer.cpp actors/transport/protocol.h
plant runtime/spec/verify.cpp launch/cli/flags.h
plant runtime/generate/generation.cpp topology/topology.h
plant actors/roles/job.cpp launch/cli/flags.h
plant actors/transport/protocol.cpp launch/cli/run_report.h
plant runtime/backend/cpu/cpu_backend.cpp runtime/backend/cuda/cuda_backend.h
plant runtime/backend/cuda/planted.cpp runtime/backend/cpu/cpu_backend.h
echo "check_layering refuses every planted include"
