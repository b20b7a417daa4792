#!/usr/bin/env bash
# Installs what building, testing and running Ember needs, from Debian's packages, when it is missing.
# Usage: scripts/install-deps.sh [bench|fuzz]   ("bench" adds OpenBLAS and libtorch, the references the benchmarks
# compare with, and jemalloc / tcmalloc, which libtorch runs faster with; "fuzz" adds clang and its libFuzzer)
set -euo pipefail
pkgs=(cmake g++ make ninja-build pkg-config patchelf xz-utils libeigen3-dev libgtest-dev libgmock-dev libbenchmark-dev zlib1g-dev
      nlohmann-json3-dev dataset-fashion-mnist fortunes python3-numpy libopenmpi-dev openmpi-bin)
if [ "${1:-}" = bench ]; then pkgs+=(libopenblas-dev libtorch-dev libjemalloc2 libtcmalloc-minimal4); fi
if [ "${1:-}" = fuzz ]; then pkgs+=(clang libclang-rt-dev); fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# Python's safetensors (PyPI only) lets the tests check that Python reads Ember's files; optional.
if ! /usr/bin/python3 -c 'import safetensors' 2>/dev/null; then
  $SUDO /usr/bin/python3 -m pip install --quiet --break-system-packages safetensors 2>/dev/null ||
    echo "install-deps: could not install Python safetensors; the Python interop test will be skipped"
fi
# NVIDIA's cuDNN frontend (header-only C++, MIT; PyPI's nvidia-cudnn-frontend wheel carries the headers) for the
# CUDA backend's fused attention through cuDNN's graph API; optional: without it attention runs on Ember's own
# CUDA kernels. Only the headers are used, from ~/.cache/ember/cudnn-frontend/include (cmake/FindCudnnFrontend.cmake).
fe_dir="${XDG_CACHE_HOME:-$HOME/.cache}/ember/cudnn-frontend"
if [ ! -f "$fe_dir/include/cudnn_frontend.h" ]; then
  /usr/bin/python3 -m pip install --quiet --no-deps --target "$fe_dir" "nvidia-cudnn-frontend==1.32.0" 2>/dev/null ||
    echo "install-deps: could not install the cuDNN frontend headers; CUDA attention will use Ember's own kernels"
fi
