#!/usr/bin/env bash
# The whole test suite on a fresh machine: dependencies, the default model (for the real-model
# tests), the build, then every test through ctest. Exits non-zero if anything fails.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$ROOT/launch/install-deps.sh"
SSD_MODEL=$(bash "$ROOT/launch/fetch-model.sh" | tail -n 1)
export SSD_MODEL
bash "$ROOT/launch/build.sh"
cd "${SSD_BUILD_DIR:-$ROOT/build}"
ctest --output-on-failure --timeout 600 -j "${SSD_TEST_JOBS:-2}"
