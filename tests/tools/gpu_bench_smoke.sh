#!/usr/bin/env bash
# The GPU op and model benchmarks at toy sizes on the CPU (ctest: gpu_bench_smoke), so that the programs a lease
# runs first (issue 57) cannot rot between leases: every case of ember_bench_gpu_ops and ember_bench_gpu_models gives
# a timed row or its stated skip, no error; with the models-ref venv (make models-ref), PyTorch's side
# (bench/torch_gpu_ops.py) gives the same cases and scripts/gpu_ops_ratio.py pairs every one of them.
#   usage: gpu_bench_smoke.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
src=$1
build=$2
fail() { echo "FAIL: $*"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$build/bench/ember_bench_gpu_ops" --device cpu --small --reps 1 --iters 1 > "$work/ember.jsonl" ||
  { cat "$work/ember.jsonl"; fail "ember_bench_gpu_ops exited $?"; }
"$build/bench/ember_bench_gpu_models" --device cpu --small --steps 1 >> "$work/ember.jsonl" ||
  { cat "$work/ember.jsonl"; fail "ember_bench_gpu_models exited $?"; }
cat "$work/ember.jsonl"
grep -q '"error"' "$work/ember.jsonl" && fail "a case failed"
[ "$(grep -c '"ms": [0-9]' "$work/ember.jsonl")" -eq 11 ] || fail "expected 11 timed op cases"
[ "$(grep -c '"step_ms": [0-9]' "$work/ember.jsonl")" -eq 5 ] || fail "expected 5 timed model cases"
grep '"planned_peak_bytes"' "$work/ember.jsonl" | grep -q '"planned_peak_bytes": 0[,}]' && fail "a model case has no plan"
grep -q '"skipped"' "$work/ember.jsonl" && fail "a case was skipped"

py=${EMBER_MODELS_REF_PYTHON:-${HOME:-/root}/.cache/ember/models-ref/bin/python}
if [ ! -x "$py" ]; then
  echo "PASS (Ember's side only; PyTorch's side skipped: no $py — run make models-ref)"
  exit 0
fi
"$py" "$src/bench/torch_gpu_ops.py" --group ops --device cpu --small --reps 1 --iters 1 --json "$work/torch.jsonl" \
  > /dev/null || fail "torch_gpu_ops.py --group ops exited $?"
"$py" "$src/bench/torch_gpu_ops.py" --group models --device cpu --small --steps 1 >> "$work/torch.jsonl" ||
  fail "torch_gpu_ops.py --group models exited $?"
python3 "$src/scripts/gpu_ops_ratio.py" "$work/ember.jsonl" "$work/torch.jsonl" | tee "$work/table.txt"
grep -q 'missing' "$work/table.txt" && fail "a case of one side is missing on the other"
grep -q '^    ember: ' "$work/table.txt" && fail "an Ember case is shown skipped"
echo "PASS"
