#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 180) on a copy of its corpus; prints each target's executions
# and findings. A crash, leak, timeout or out-of-memory input is saved in build-fuzz/findings/<target>/; fix the
# reader, then copy the input into tests/fuzz/corpus/<target>/ so CI replays it from then on. To refresh the
# checked-in corpus: ember_fuzz_<t> -merge=1 NEW_DIR tests/fuzz/corpus/<t> BUILD_DIR/fuzz-corpus/<t>.
# Usage: tests/fuzz/run.sh BUILD_DIR [SECONDS]
set -uo pipefail
build=${1:?usage: run.sh BUILD_DIR [SECONDS]}
secs=${2:-180}
src=$(cd "$(dirname "$0")" && pwd)
status=0
for t in npy npz idx safetensors cifar checkpoint; do
  work=$build/fuzz-corpus/$t findings=$build/findings/$t
  mkdir -p "$work" "$findings"
  # -malloc_limit_mb: an allocation of a forged declared size is a finding, not a slow run.
  "$build/tests/fuzz/ember_fuzz_$t" "$work" "$src/corpus/$t" -max_total_time="$secs" -malloc_limit_mb=512 \
      -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 -artifact_prefix="$findings/" \
      > "$build/fuzz-$t.log" 2>&1
  rc=$?
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$build/fuzz-$t.log" | grep -o '[0-9]*$')
  cov=$(grep -o 'cov: [0-9]*' "$build/fuzz-$t.log" | tail -1)
  found=$(ls "$findings" | wc -l)
  printf '%-12s %12s executions  %-10s  corpus %5s  findings %s%s\n' "$t" "${runs:-?}" "$cov" \
      "$(ls "$work" | wc -l)" "$found" "$([ $rc -ne 0 ] && echo "  (exit $rc: see $build/fuzz-$t.log)")"
  [ "$found" -gt 0 ] && status=1
done
exit $status
