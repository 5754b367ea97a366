#!/usr/bin/env bash
# Installs what the project needs to build and test, from Debian's packages and PyPI only.
# Skips apt entirely when every package is already installed (the common case on a kept machine).
# Python packages (gguf, tokenizers, numpy) feed the optional independent-reference tests.
set -euo pipefail

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libopenmpi-dev openmpi-bin
  libboost-dev libcereal-dev libfmt-dev nlohmann-json3-dev libicu-dev
  libhwloc-dev hwloc
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenblas-dev
  unzip python3-pip
)
PY_PACKAGES=(numpy gguf tokenizers)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
else
  echo "install-deps: Debian packages present"
fi

PY=${PYTHON:-python3}
if ! "$PY" -c "import numpy, gguf, tokenizers" >/dev/null 2>&1; then
  echo "install-deps: installing Python reference packages (${PY_PACKAGES[*]})"
  "$PY" -m pip install -q "${PY_PACKAGES[@]}" 2>/dev/null ||
    "$PY" -m pip install -q --break-system-packages "${PY_PACKAGES[@]}" ||
    echo "install-deps: Python packages unavailable; the optional reference tests will skip"
else
  echo "install-deps: Python reference packages present"
fi
