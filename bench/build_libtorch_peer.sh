#!/usr/bin/env bash
# Builds libtorch 2.x's side of the training and charlm tables (bench/torch_train.cpp, bench/torch_charlm.cpp) against
# the libtorch inside a PyTorch wheel (VENV/lib/python3*/site-packages/torch: its headers and libtorch_cpu, the same
# C++ library PyTorch itself runs), into OUT/ember_torch_train and OUT/ember_torch_charlm. Links libtorch_cpu and
# libc10 only: libtorch_cuda is never loaded (libtorch_cpu itself maps cudart and CUPTI, for its profiler).
#   bench/build_libtorch_peer.sh VENV OUT
set -euo pipefail
venv=$1 out=$2
torch=$("$venv/bin/python" -c 'import os, torch; print(os.path.dirname(torch.__file__))')
abi=$("$venv/bin/python" -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
for prog in torch_train torch_charlm; do
  [ "$out/ember_$prog" -nt "$here/$prog.cpp" ] && continue
  g++ -std=c++20 -O3 -DNDEBUG -Wno-deprecated-declarations -D_GLIBCXX_USE_CXX11_ABI="$abi" -I"$torch/include" \
    -I"$torch/include/torch/csrc/api/include" "$here/$prog.cpp" -o "$out/ember_$prog" \
    -L"$torch/lib" -Wl,--no-as-needed -ltorch_cpu -lc10 -Wl,--as-needed -Wl,-rpath,"$torch/lib" -lz -lpthread
done
echo "$out/ember_torch_train $out/ember_torch_charlm (libtorch $("$venv/bin/python" -c 'import torch; print(torch.__version__)'))"
