#!/usr/bin/env bash
# The GPU check's cheap part, on a machine without a GPU (ctest: gpu_dry_run), so the one-shot device script
# cannot rot between the rare sessions that are lent a GPU:
#   1. both scripts parse (bash -n);
#   2. scripts/gpu-stage.sh --quick packs the libraries and the gate's suite from this build tree;
#   3. scripts/gpu-check.sh --dry-run against it, with a fake pip layout of this machine's CUDA libraries
#      (nvidia/cu13/lib, nvidia/cudnn/lib, nvidia/nccl/lib): preflight resolves every library there, the gate
#      stops with the "no CUDA device" reason, the summary is printed;
#   4. a stage whose sources no longer match the tree is refused;
#   5. EMBER_REQUIRE_CUDA: a CUDA test fails with the reason when it is set, and skips when it is not.
#   usage: gpu_dry_run_test.sh SOURCE_DIR BUILD_DIR      (exit 77: skipped, no CUDA plugin in this build)
set -uo pipefail
src=$1
build=$(cd "$2" && pwd)
fail() { echo "FAIL: $*"; exit 1; }
[ -f "$build/lib/libember_cuda.so" ] || { echo "SKIP: this build has no CUDA plugin"; exit 77; }
if "$build/tests/test_cuda_runtime" --gtest_filter=CudaRuntime.IsAvailableNeverThrows --gtest_brief=1 2>&1 |
  grep -q '^\[  FAILED'; then fail "test_cuda_runtime does not run"; fi
if EMBER_REQUIRE_CUDA=0 "$build/tests/test_cuda_runtime" --gtest_filter=CudaRuntime.DeviceQueries 2>&1 |
  grep -q '^\[       OK \]'; then echo "SKIP: a CUDA device is present"; exit 77; fi
cd "$src" || fail "no $src"

# 1. syntax
for s in scripts/gpu-stage.sh scripts/gpu-check.sh tests/tools/gpu_dry_run_test.sh; do
  bash -n "$s" || fail "$s does not parse"
done

# 5. EMBER_REQUIRE_CUDA turns a CUDA test's skip into a failure that gives the reason
out=$("$build/tests/test_cuda_runtime" --gtest_filter=CudaRuntime.DeviceQueries 2>&1)
grep -q '^\[  SKIPPED \] CudaRuntime.DeviceQueries' <<< "$out" || fail "without EMBER_REQUIRE_CUDA the test must skip: $out"
out=$(EMBER_REQUIRE_CUDA=1 "$build/tests/test_cuda_runtime" --gtest_filter=CudaRuntime.DeviceQueries 2>&1)
rc=$?
[ $rc -ne 0 ] || fail "with EMBER_REQUIRE_CUDA=1 the test must fail: $out"
grep -q 'EMBER_REQUIRE_CUDA is set, but no CUDA device: .' <<< "$out" || fail "the failure must give the reason: $out"
grep -q '^\[  FAILED  \] CudaRuntime.DeviceQueries' <<< "$out" || fail "the test must be reported failed: $out"

# 2. a quick stage from this build tree
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
stage=$work/stage
bash scripts/gpu-stage.sh --quick "$build" "$stage" > "$work/stage.log" 2>&1 || { cat "$work/stage.log"; fail "staging"; }
for f in stage.tar.xz COMMIT SOURCES.sha256 MANIFEST; do [ -s "$stage/$f" ] || fail "the stage lacks $f"; done
grep -q ' ./tests/test_cuda_runtime$' "$stage/MANIFEST" || fail "the manifest lacks the gate's suite"
grep -q ' ./lib/libember_cuda.so$' "$stage/MANIFEST" || fail "the manifest lacks the CUDA plugin"
[ "$(cut -c1-40 "$stage/COMMIT")" = "$(git rev-parse HEAD)" ] || fail "COMMIT is not HEAD: $(cat "$stage/COMMIT")"

# 3. the dry run (gpu-check.sh lays this machine's CUDA libraries out as pip's wheels in a folder of its own)
export TMPDIR=$work OUT=$work/out
bash scripts/gpu-check.sh --dry-run "$stage" > "$work/dry.log" 2>&1
rc=$?
cat "$work/dry.log"
[ $rc -eq 0 ] || fail "the dry run exited $rc"
grep -q '^dry run: OK' "$work/dry.log" || fail "the dry run did not end at the gate"
grep -q '^gate: FAIL (rc [0-9]*): EMBER_REQUIRE_CUDA is set, but no CUDA device: .' "$work/dry.log" ||
  fail "the gate must stop with the reason"
grep -q "^preflight: libcublas.so.13 -> $work/tmp.*/nvidia/cu13/lib/" "$work/dry.log" || fail "cuBLAS not from the pip layout"
grep -q '^== summary' "$work/dry.log" || fail "no summary"
[ -s "$OUT/summary.txt" ] && [ -s "$OUT/preflight.log" ] || fail "summary.txt and preflight.log under \$OUT"
[ "$(find "$OUT" -type f | wc -l)" -le 6 ] || fail "more than 6 files under \$OUT"

# 4. a stage whose sources differ from the tree is refused before anything runs
sed -i '1s/^[0-9a-f]\{8\}/00000000/' "$stage/SOURCES.sha256"
bash scripts/gpu-check.sh --dry-run "$stage" > "$work/stale.log" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q 'sources changed since the stage was built' "$work/stale.log" ||
  { cat "$work/stale.log"; fail "a stale stage must be refused (rc $rc)"; }
echo "PASS"
