#!/usr/bin/env bash
# Installs what building, testing and running Ember needs, from Debian's packages, when it is missing.
# Usage: scripts/install-deps.sh [bench]   ("bench" adds OpenBLAS, the reference the benchmarks compare with)
set -euo pipefail
pkgs=(cmake g++ make ninja-build pkg-config libeigen3-dev libgtest-dev libgmock-dev libbenchmark-dev zlib1g-dev
      nlohmann-json3-dev dataset-fashion-mnist)
if [ "${1:-}" = bench ]; then pkgs+=(libopenblas-dev libtorch-dev); fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
