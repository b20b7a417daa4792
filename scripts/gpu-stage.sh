#!/usr/bin/env bash
# Builds what the lent GPU machine runs, here, on a machine without a GPU (nvcc is enough), and packs it into one
# folder to carry there; scripts/gpu-check.sh runs it. Why: a build on the device would eat half a 15-minute lease
# (../shared/device/README.md). Only sm_90 code (H100 and H200).
#   scripts/gpu-stage.sh [DIR]               DIR: the folder to carry (default .gpu-stage, git-ignored)
#   scripts/gpu-stage.sh --quick BUILD DIR   no build: packs the libraries and the gate's suite from an existing
#                                            build tree (the dry-run test, tests/tools/gpu_dry_run_test.sh)
#   EMBER_STAGE_BUILD=build-stage            the build tree (default build-stage)
# DIR then holds: stage.tar.xz (lib/ tests/ bench/ examples/ deps/ data/ torch_reference.py, binaries stripped,
# RUNPATHs $ORIGIN-relative), COMMIT (the commit, "-dirty" when the tree had changes), SOURCES.sha256 (every
# tracked build input, which gpu-check.sh verifies against the tree it runs in) and MANIFEST (files and sizes).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
source scripts/gpu-lists.sh
quick=""
[ "${1:-}" = --quick ] && { quick=$2; shift 2; }
dir=${1:-.gpu-stage}
build=${quick:-${EMBER_STAGE_BUILD:-build-stage}}
limit_mib=56
t0=$(date +%s)

if [ -n "$quick" ]; then
  suites=$EMBER_GPU_GATE
  programs=""
  libs=$(for l in $EMBER_GPU_LIBS; do if [ -f "$build/lib/lib$l.so" ]; then echo "$l"; fi; done)
else
  # --- build: configure once, then only the targets the device runs.
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBER_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DEMBER_BUILD_TESTS=ON -DEMBER_BUILD_BENCH=ON -DEMBER_BUILD_EXAMPLES=ON -DCMAKE_BUILD_RPATH_USE_ORIGIN=ON >/dev/null
  suites=$(printf '%s\n' $EMBER_GPU_GATE $EMBER_GPU_SERIAL_SUITES $EMBER_GPU_SUITES $EMBER_CPU_ISA_SUITES \
    $EMBER_BF16_SUITES | sort -u)
  programs=$EMBER_GPU_PROGRAMS
  libs=$EMBER_GPU_LIBS
  cmake --build "$build" -j"$(nproc)" --target $libs $suites $(for p in $programs; do basename "$p"; done)
fi
build_s=$(( $(date +%s) - t0 ))

# --- pack: the build tree's layout (tests/, bench/, examples/ beside lib/), so $ORIGIN/../lib holds everywhere.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
s=$work/stage
mkdir -p "$s/lib" "$s/tests" "$s/bench" "$s/examples" "$s/deps" "$s/data"
for l in $libs; do
  f=$(ls "$build"/lib/lib"$l".so 2>/dev/null || true)
  [ -n "$f" ] || { echo "gpu-stage: $build/lib/lib$l.so was not built" >&2; exit 1; }
  cp "$f" "$s/lib/"
done
for t in $suites; do cp "$build/tests/$t" "$s/tests/"; done
for p in $programs; do cp "$build/$p" "$s/$p"; done
# Libraries the device may lack or hold in another version (CUDA's own come from the device: its driver and
# pip's nvidia-* wheels must match each other, not this machine).
for b in $(find "$s" -type f); do
  ldd "$b" | awk '$3 ~ /^\// {print $3}'
done | sort -u | { grep -E '/lib(z|gomp|benchmark)\.so' || true; } | while read -r f; do cp -L "$f" "$s/deps/"; done
# Stripped first (strip after patchelf can break what patchelf moved), then RUNPATHs with only folders inside the
# stage: the CUDA libraries are found through LD_LIBRARY_PATH there.
find "$s/lib" "$s/tests" "$s/bench" "$s/examples" "$s/deps" -type f -exec strip --strip-unneeded {} +
for b in $(find "$s/tests" "$s/bench" "$s/examples" -type f); do
  patchelf --set-rpath '$ORIGIN/../lib:$ORIGIN/../deps' "$b"
done
for b in "$s"/lib/*; do patchelf --set-rpath '$ORIGIN:$ORIGIN/../deps' "$b"; done
if [ -z "$quick" ]; then
  # The example's data: Fashion-MNIST's test set and the first 10,240 training images (the whole set is 30 MB;
  # the CPU training benchmark cycles through 10,240).
  python3 scripts/mnist_slice.py /usr/share/datasets/fashion-mnist "$s/data" 10240
  cp "$root/../shared/device/torch_reference.py" "$s/"  # the PyTorch side of the GPU comparison
  cp "$root/bench/torch_train.py" "$s/bench/"           # the PyTorch side of the CPU training benchmark
  cp "$root/bench/torch_gpu_ops.py" "$s/bench/"         # the PyTorch side of the GPU op and model benchmarks
fi

# --- the folder to carry: one archive, the commit, the sources' checksums, a manifest.
rm -rf "$dir"
mkdir -p "$dir"
(cd "$s" && find . -type f -printf '%s %p\n' | sort -k2) > "$dir/MANIFEST"
tar -C "$s" -cf - . | xz -T"$(nproc)" -6 > "$dir/stage.tar.xz"
commit=$(git rev-parse HEAD)
[ -z "$(git status --porcelain --untracked-files=no)" ] || commit="$commit-dirty"
echo "$commit" > "$dir/COMMIT"
git ls-files -z -- ':!docs' ':!*.md' | xargs -0 sha256sum > "$dir/SOURCES.sha256"
size=$(du -sm "$dir" | cut -f1)
echo "gpu-stage: $dir holds the build of $commit: ${size} MiB (unpacked $(du -sm "$s" | cut -f1) MiB);" \
     "build ${build_s}s, all $(( $(date +%s) - t0 ))s"
[ "$size" -le "$limit_mib" ] || { echo "gpu-stage: over the ${limit_mib} MiB carry budget" >&2; exit 1; }
