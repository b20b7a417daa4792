#!/usr/bin/env bash
# Builds Ember with CUDA on the lent GPU machine, runs the whole test suite, then the GPU benchmark against
# PyTorch; full logs go to $OUT (or ./gpu-out), a short summary is printed last. Run from the repository root
# on the device, with .devdeps carried (../shared/device/README.md):
#   bash scripts/gpu-check.sh            # build + all tests + benches
#   bash scripts/gpu-check.sh tests      # build + tests only
# cuDNN/cuBLAS outside /usr/local/cuda (e.g. pip's nvidia-* wheels) are found through CUDNN_ROOT, which this
# script sets from python3's nvidia package when /usr/local/cuda has no cudnn.h.
set -uo pipefail
out=${OUT:-gpu-out}
mkdir -p "$out"
deps=$PWD/.devdeps
export LD_LIBRARY_PATH=$deps/lib/x86_64-linux-gnu:$deps/lib:${LD_LIBRARY_PATH:-}
extra=()
if [ ! -f /usr/local/cuda/include/cudnn.h ]; then
  nv=$(python3 -c "import nvidia, os; print(os.path.dirname(nvidia.__path__[0]))" 2>/dev/null)/nvidia
  if [ -d "$nv/cudnn" ]; then
    extra+=("-DCUDNN_ROOT=$nv/cudnn")
    export LD_LIBRARY_PATH=$nv/cudnn/lib:$nv/cublas/lib:$LD_LIBRARY_PATH
  fi
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/gpu.txt" 2>&1
start=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBER_CUDA=ON -DEMBER_BUILD_BENCH=ON \
  -DCMAKE_PREFIX_PATH="$deps" -DZLIB_ROOT="$deps" "${extra[@]}" > "$out/configure.log" 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" > "$out/build.log" 2>&1
build_rc=$?
build_s=$(( $(date +%s) - start ))
tests="not run"
if [ $build_rc = 0 ]; then
  ctest --test-dir build-gpu -j4 --output-on-failure --timeout 300 > "$out/ctest.log" 2>&1
  tests=$(grep -E "tests passed|tests failed" "$out/ctest.log" | tail -1)
  ctest --test-dir build-gpu -L cuda > "$out/ctest-cuda.log" 2>&1
  cuda_tests=$(grep -E "tests passed|tests failed" "$out/ctest-cuda.log" | tail -1)
  if [ "${1:-all}" != tests ]; then
    ./build-gpu/bench/ember_bench_gpu > "$out/ember_gpu.jsonl" 2> "$out/ember_gpu.err"
    if [ -f "$deps/torch_reference.py" ]; then
      python3 "$deps/torch_reference.py" --json "$out/torch.jsonl" > "$out/torch.log" 2>&1
    fi
  fi
fi
echo "== summary"
cat "$out/gpu.txt"
echo "build: rc=$build_rc in ${build_s}s (log: build.log)"
[ $build_rc = 0 ] || tail -20 "$out/build.log"
echo "all tests: $tests"
echo "cuda-labelled tests: ${cuda_tests:-not run}"
grep -E "\(Failed\)|\(Timeout\)|Exception" "$out/ctest.log" 2>/dev/null | head -20
[ -s "$out/ember_gpu.jsonl" ] && { echo "-- ember"; tail -6 "$out/ember_gpu.jsonl"; }
[ -s "$out/ember_gpu.err" ] && { echo "-- ember stderr"; tail -5 "$out/ember_gpu.err"; }
[ -s "$out/torch.log" ] && { echo "-- pytorch"; tail -6 "$out/torch.log"; }
exit $build_rc
