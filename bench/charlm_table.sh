#!/usr/bin/env bash
# The charlm table: training tokens/s and peak RSS of examples/charlm's GPT (4 blocks, d 128, 4 heads, context 128,
# batch 32, vocabulary 96) in Ember (bench/bench_charlm.cpp), PyTorch (bench/torch_charlm.py) and libtorch
# (bench/torch_charlm.cpp) — the PyPI wheel's 2.x from the venv of `make bench-peers` (VENV, default
# BUILD_DIR/venv-torch) when it is there, else Debian's 1.13 — each in its own process, at 1 thread and at all the threads
# this process may use. PyTorch and libtorch first get their fastest environment per thread count (allocator:
# glibc / glibc with raised mmap+trim thresholds / jemalloc / tcmalloc, x OpenMP waiting active / passive); the
# table takes medians of REPS alternating runs and goes into docs/benchmarks.md between the charlm-table markers.
# Usage: bench/charlm_table.sh BUILD_DIR [REPS] [STEPS]
set -euo pipefail
build=${1:-build}
reps=${2:-3}
steps=${3:-8}
ebin=$build/bench/ember_bench_charlm
venv=${VENV:-$build/venv-torch}
tbin=$build/bench/ember_torch_charlm
python=/usr/bin/python3
# Today's PyTorch when the venv of `make bench-peers` is there: its python, and libtorch from the same wheel.
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import torch' 2>/dev/null; then
  python=$venv/bin/python
  bash bench/build_libtorch_peer.sh "$venv" "$build/libtorch-peer" > /dev/null
  tbin=$build/libtorch-peer/ember_torch_charlm
fi
py=bench/torch_charlm.py
doc=docs/benchmarks.md
[ -x "$ebin" ] || { echo "charlm_table: $ebin not built" >&2; exit 1; }
have_lt=0; [ -x "$tbin" ] && have_lt=1
have_py=0; "$python" -c 'import torch' 2>/dev/null && have_py=1

source "$(dirname "$0")/table_lib.sh"  # median, pin, allocs, machine_vars, put_table
all=$(nproc)

# one run: "tokens/s rss" of framework $1 (ember | pytorch | libtorch) at $2 threads under the env words after it.
# The word NOPIN runs a one-thread reference unpinned: PyTorch's helper threads can then use the other core (its
# one-thread runs were ~20% faster so here), so pinning is one of the settings a reference may pick.
run() {
  local fw=$1 th=$2; shift 2
  local p=() e=() w
  [ "$th" = 1 ] && p=("${pin[@]}")
  for w in "$@"; do if [ "$w" = NOPIN ]; then p=(); else e+=("$w"); fi; done
  set -- "${e[@]}"
  case $fw in
    ember) env "$@" "${p[@]}" "$ebin" --threads "$th" --steps "$steps" ;;
    pytorch) env "$@" "${p[@]}" "$python" "$py" "$th" "$steps" ;;
    libtorch) env "$@" "${p[@]}" "$tbin" "$th" "$steps" ;;
  esac 2>/dev/null | awk '/tokens/ {print $3, $5}'
}
best_env() {
  local fw=$1 th=$2 best="" best_rate=0 waits=("")
  [ "$th" != 1 ] && waits=("" "OMP_WAIT_POLICY=PASSIVE")
  [ "$th" = 1 ] && waits=("" "NOPIN")
  for a in "${allocs[@]}"; do
    for w in "${waits[@]}"; do
      local e="OMP_NUM_THREADS=$th $w $a" rate
      # shellcheck disable=SC2086
      read -r rate _ < <(run "$fw" "$th" $e)
      if awk "BEGIN {exit !($rate > $best_rate)}"; then best_rate=$rate; best=$e; fi
    done
  done
  echo "$best"
}

fws=(ember)
[ $have_py = 1 ] && fws+=(pytorch)
[ $have_lt = 1 ] && fws+=(libtorch)
rows=""; settings=""
for th in 1 "$all"; do
  [ "$th" = 1 ] || [ "$all" != 1 ] || continue
  declare -A envs=() rate=() rss=()
  for fw in "${fws[@]}"; do
    envs[$fw]=""
    [ "$fw" != ember ] && envs[$fw]=$(best_env "$fw" "$th") && settings+="- $fw, $th thread(s): \`$(echo "${envs[$fw]}" | xargs)\`"$'\n'
  done
  declare -A rs=() ms=()
  for ((r = 0; r < reps; ++r)); do
    for fw in "${fws[@]}"; do
      # shellcheck disable=SC2086
      read -r a b < <(run "$fw" "$th" ${envs[$fw]})
      rs[$fw]+="$a "; ms[$fw]+="$b "
    done
  done
  line="| $th |"
  for fw in ember pytorch libtorch; do
    if [ -n "${rs[$fw]:-}" ]; then
      rate[$fw]=$(echo "${rs[$fw]}" | tr ' ' '\n' | grep . | median)
      rss[$fw]=$(echo "${ms[$fw]}" | tr ' ' '\n' | grep . | median)
    else
      rate[$fw]="-"; rss[$fw]="-"
    fi
  done
  best_ref=0
  for fw in pytorch libtorch; do
    [ "${rate[$fw]}" != "-" ] && awk "BEGIN {exit !(${rate[$fw]} > $best_ref)}" && best_ref=${rate[$fw]}
  done
  ratio="-"; [ "$best_ref" != 0 ] && ratio=$(awk "BEGIN {printf \"%.2f\", ${rate[ember]} / $best_ref}")
  rows+="| $th | ${rate[ember]} | ${rate[pytorch]} | ${rate[libtorch]} | $ratio | ${rss[ember]} | ${rss[pytorch]} | ${rss[libtorch]} |"$'\n'
  echo "threads=$th ember=${rate[ember]} pytorch=${rate[pytorch]} libtorch=${rate[libtorch]} ratio=$ratio rss ember=${rss[ember]} pytorch=${rss[pytorch]} libtorch=${rss[libtorch]}"
  unset envs rate rss rs ms
done

machine_vars
torch_v=$("$python" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null || echo "-")
table="<!-- charlm-table:begin -->
Measured $(date -u +%Y-%m-%d) on $cpu (family $family, model $model; $all cores for this process; ISA flags: $isa),
Ember $(git rev-parse --short HEAD 2>/dev/null || echo ?), PyTorch $torch_v and libtorch $torch_v (the same wheel's; Debian's
1.13 for both when no venv is there) at their best setting per row (below). Training tokens/s of the GPT of
examples/charlm (4 blocks, d 128, 4 heads, context 128, batch 32, AdamW; attention in PyTorch/libtorch 2.x through
scaled_dot_product_attention, in 1.13 as the usual composite), medians of $reps
alternating runs of $steps steps after 3 warm-up steps (Ember's one-thread runs pinned to one core, the references' pinned
or not (NOPIN), whichever was faster); the ratio is Ember
against the faster reference; peak RSS in MiB of the whole process.

| threads | Ember tokens/s | PyTorch tokens/s | libtorch tokens/s | Ember / best | Ember RSS | PyTorch RSS | libtorch RSS |
| --- | --- | --- | --- | --- | --- | --- | --- |
${rows}
Reference settings (the fastest allocator x OpenMP waiting combination, per row):
${settings}<!-- charlm-table:end -->"
put_table "$doc" charlm-table "charlm: a small GPT, Ember vs PyTorch and libtorch" "$table"
