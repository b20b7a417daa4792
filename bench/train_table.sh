#!/usr/bin/env bash
# The training table: Ember (bench/bench_train.cpp) against libtorch at its best (bench/torch_train.cpp, a process
# with nothing of Ember in it) on mlp-b64, mlp-b256, mlp-big, cnn-b64 and cnn-bn-b64, at 1 thread and at all the
# threads this process may use; medians of REPS alternating runs; written into docs/benchmarks.md between the
# train-table markers, with the CPU it ran on.
#
# libtorch's best setting is found per config and thread count first: every combination of the allocator (glibc's
# default, glibc with its mmap/trim thresholds raised, jemalloc, tcmalloc: libtorch frees and reallocates its
# activations every step, and glibc's default then maps and unmaps pages each time, ~25% slower here), OpenBLAS
# threads (1 or all) and OpenMP waiting (active, passive) is run once, and the fastest is used for the table.
# ember_torch_minimal, the smallest libtorch MLP program (libtorch's own MNIST reader), cross-checks the MLP rows.
# Usage: bench/train_table.sh BUILD_DIR [REPS]
set -euo pipefail
build=${1:-build}
reps=${2:-3}
bin=$build/bench/ember_bench_train
tbin=$build/bench/ember_torch_train   # built only when libtorch is installed
mbin=$build/bench/ember_torch_minimal
doc=docs/benchmarks.md
data=/usr/share/datasets/fashion-mnist
[ -x "$bin" ] || { echo "train_table: $bin not built" >&2; exit 1; }
have_torch=1
[ -x "$tbin" ] || have_torch=0

source "$(dirname "$0")/table_lib.sh"  # median, pin, allocs, machine_vars, put_table
all=$(nproc)  # the cores this process may use (its affinity mask)
# One-thread runs of both frameworks are pinned to the same core: on a shared VM the cores need not be equally
# fast, and an unpinned pair may land on different ones.

# run BINARY THREADS ENV... -- ARGS...: prints "rate rss"
run() {
  local b=$1 th=$2; shift 2
  local envs=()
  while [ "$1" != -- ]; do [ -n "$1" ] && envs+=("$1"); shift; done
  shift
  local p=()
  [ "$th" = 1 ] && p=("${pin[@]}")
  env "${envs[@]}" "${p[@]}" "$b" "$@" --threads "$th" | awk '{print $4, $5}'
}

# libtorch's fastest environment for a config and thread count (one probe run each).
best_env() {
  local cfg=$1 th=$2 best="" best_rate=0
  local blas=(1) waits=("")
  [ "$th" != 1 ] && blas=(1 "$th") && waits=("" "OMP_WAIT_POLICY=PASSIVE")
  for a in "${allocs[@]}"; do
    for ob in "${blas[@]}"; do
      for w in "${waits[@]}"; do
        local e="OMP_NUM_THREADS=$th OPENBLAS_NUM_THREADS=$ob $w $a"
        local rate
        # shellcheck disable=SC2086
        read -r rate _ < <(run "$tbin" "$th" $e -- --config "$cfg")
        if awk "BEGIN {exit !($rate > $best_rate)}"; then best_rate=$rate; best=$e; fi
      done
    done
  done
  echo "$best"
}

minimal_dir=""
if [ $have_torch = 1 ] && [ -x "$mbin" ]; then
  minimal_dir=$(mktemp -d)
  trap 'rm -rf "$minimal_dir"' EXIT
  for f in train-images-idx3-ubyte train-labels-idx1-ubyte; do gunzip -c "$data/$f.gz" > "$minimal_dir/$f"; done
fi

rows=""
settings=""
for cfg in mlp-b64 mlp-b256 mlp-big cnn-b64 cnn-bn-b64; do
  for th in 1 "$all"; do
    [ "$th" = 1 ] || [ "$all" != 1 ] || continue
    env_best=""
    [ $have_torch = 1 ] && env_best=$(best_env "$cfg" "$th")
    er=(); es=(); tr=(); ts=()
    for ((r = 0; r < reps; ++r)); do
      read -r rate rss < <(run "$bin" "$th" -- --framework ember --config "$cfg")  # no settings, as a user gets it
      er+=("$rate"); es+=("$rss")
      if [ $have_torch = 1 ]; then
        # shellcheck disable=SC2086
        read -r rate rss < <(run "$tbin" "$th" $env_best -- --config "$cfg")
        tr+=("$rate"); ts+=("$rss")
      fi
    done
    e=$(printf '%s\n' "${er[@]}" | median); erss=$(printf '%s\n' "${es[@]}" | median)
    t="-"; trss="-"; ratio="-"; mini="-"
    if [ $have_torch = 1 ]; then
      t=$(printf '%s\n' "${tr[@]}" | median); trss=$(printf '%s\n' "${ts[@]}" | median)
      ratio=$(awk "BEGIN {printf \"%.2f\", $e / $t}")
      settings+="- $cfg, $th thread(s): \`$(echo "$env_best" | xargs)\`"$'\n'
      if [ -n "$minimal_dir" ] && [ "${cfg#mlp}" != "$cfg" ]; then
        batch=64; hidden=128
        [ "$cfg" = mlp-b256 ] && batch=256
        [ "$cfg" = mlp-big ] && batch=256 && hidden=1024
        p=()
        [ "$th" = 1 ] && p=("${pin[@]}")
        # shellcheck disable=SC2086
        mini=$(env $env_best "${p[@]}" "$mbin" --data "$minimal_dir" --batch $batch --hidden $hidden \
                 --threads "$th" | awk '{print $5}')
      fi
    fi
    # the ratio against the faster of the two libtorch programs
    if [ "$mini" != "-" ] && awk "BEGIN {exit !($mini > $t)}"; then ratio=$(awk "BEGIN {printf \"%.2f\", $e / $mini}"); fi
    rows+="| $cfg | $th | $e | $t | $mini | $ratio | $erss | $trss |"$'\n'
    echo "$cfg threads=$th ember=$e torch=$t minimal-torch=$mini ratio=$ratio rss ember=$erss torch=$trss"
  done
done

machine_vars
torch_v=$(dpkg-query -W -f='${Version}' libtorch-dev 2>/dev/null || echo "not installed")
ember_isa=$("$bin" --isa 2>/dev/null || echo "?")
table="<!-- train-table:begin -->
Measured $(date -u +%Y-%m-%d) on $cpu (family $family, model $model; $all cores for this process; ISA flags: $isa),
Ember $(git rev-parse --short HEAD 2>/dev/null || echo ?) (CPU kernels: $ember_isa), libtorch $torch_v at its best
setting per row (below); samples/s are medians of $reps alternating runs (one-thread runs of both pinned to the
same core); \"minimal\" is ember_torch_minimal (libtorch's own data reader and the smallest MLP program) with the
same setting, a cross-check of the libtorch column, and the ratio is taken against the faster of the two; peak RSS
in MiB of the whole process.

| config | threads | Ember samples/s | libtorch samples/s | minimal libtorch | Ember / best libtorch | Ember RSS | libtorch RSS |
| --- | --- | --- | --- | --- | --- | --- | --- |
${rows}
libtorch's settings (the fastest of the allocator x OpenBLAS threads x OpenMP waiting combinations, per row):
${settings}<!-- train-table:end -->"
put_table "$doc" train-table "Training throughput against libtorch (bench/bench_train.cpp, bench/train_table.sh)" "$table"
echo "train_table: wrote the table into $doc"
