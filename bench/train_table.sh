#!/usr/bin/env bash
# The training table: Ember (bench/bench_train.cpp) against today's peers, each in its own process at its best:
#   PyTorch eager      bench/torch_train.py in the venv (PyPI's torch), the fastest Adam (fused, foreach, for-loop)
#   torch.compile      the same program with the model compiled, or the whole step (forward, backward, Adam)
#   libtorch 2.x       bench/torch_train.cpp built against the wheel's own libtorch (bench/build_libtorch_peer.sh)
#   libtorch 1.13      the same program against Debian's libtorch (built by CMake when it is installed)
# on CONFIGS (default mlp-b64 mlp-big cnn-b64; bench_train.cpp has mlp-b256 and cnn-bn-b64 too), at 1 thread and at
# all the threads this process may use. Each peer's best setting is found per row first (one probe run of each: the
# allocator, glibc's default or with raised mmap/trim thresholds, jemalloc, tcmalloc where installed; OpenMP
# waiting; OpenBLAS threads for libtorch 1.13; the Adam variant or compile mode for PyTorch); then REPS rounds run
# every framework in turn (one-thread runs pinned to the same core) and the table takes medians. Each row also gets
# the fraction of the FMA limit its FLOP rate reaches (bench/fma_peak.cpp, measured in the same run, times the
# threads; the FLOPs of a step counted from the layers: forward, weight gradient and input gradient but the first
# layer's). Written into docs/benchmarks.md between the train-table markers, with the CPU it ran on.
# Usage: bench/train_table.sh BUILD_DIR [REPS]     (VENV: the PyTorch venv, default BUILD_DIR/venv-torch)
set -euo pipefail
build=${1:-build}
reps=${2:-3}
configs=${CONFIGS:-"mlp-b64 mlp-big cnn-b64"}
venv=${VENV:-$build/venv-torch}
bin=$build/bench/ember_bench_train
lt113=$build/bench/ember_torch_train   # built only when Debian's libtorch is installed
lt2=$build/libtorch-peer/ember_torch_train
peak_bin=$build/bench/ember_fma_peak
py=bench/torch_train.py
doc=docs/benchmarks.md
[ -x "$bin" ] && [ -x "$peak_bin" ] || { echo "train_table: build $bin and $peak_bin first" >&2; exit 1; }
have_py=0; [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import torch' 2>/dev/null && have_py=1
if [ $have_py = 1 ]; then bash bench/build_libtorch_peer.sh "$venv" "$build/libtorch-peer" > /dev/null; fi
torch_v=$([ $have_py = 1 ] && "$venv/bin/python" -c 'import torch; print(torch.__version__.split("+")[0])' || echo -)
lt113_v=$(dpkg-query -W -f='${Version}' libtorch-dev 2>/dev/null | sed 's/+.*//' || echo -)

source "$(dirname "$0")/table_lib.sh"  # median, pin, allocs, machine_vars, put_table
all=$(nproc)

# A step's FLOPs per sample: 2 x MACs forward, 2 x MACs for the weight gradients, 2 x MACs for the input gradients
# of every layer but the first (the images need none).
flops_per_sample() {
  case $1 in
    mlp-b64 | mlp-b256) echo $((4 * (784 * 128 + 128 * 10) + 2 * 128 * 10)) ;;
    mlp-big) echo $((4 * (784 * 1024 + 1024 * 1024 + 1024 * 10) + 2 * (1024 * 1024 + 1024 * 10))) ;;
    cnn-b64 | cnn-bn-b64)
      local c1=$((28 * 28 * 32 * 25)) c2=$((14 * 14 * 64 * 32 * 25)) f1=$((3136 * 128)) f2=$((128 * 10))
      echo $((4 * (c1 + c2 + f1 + f2) + 2 * (c2 + f1 + f2))) ;;
  esac
}

# run PEER CONFIG THREADS ENV...: prints "rate rss". PEER: ember, eager-<adam>, compile-model, compile-step, lt2,
# lt113. The env word NOPIN leaves a one-thread run unpinned.
run() {
  local peer=$1 cfg=$2 th=$3; shift 3
  local p=() e=() w cmd
  [ "$th" = 1 ] && p=("${pin[@]}")
  for w in "$@"; do if [ "$w" = NOPIN ]; then p=(); else e+=("$w"); fi; done
  case $peer in
    ember) cmd=("$bin" --framework ember --config "$cfg" --threads "$th") ;;
    eager-*) cmd=("$venv/bin/python" "$py" --config "$cfg" --threads "$th" --mode eager --adam "${peer#eager-}") ;;
    compile-model) cmd=("$venv/bin/python" "$py" --config "$cfg" --threads "$th" --mode compile-model --adam fused) ;;
    compile-step) cmd=("$venv/bin/python" "$py" --config "$cfg" --threads "$th" --mode compile-step --adam foreach) ;;
    lt2) cmd=("$lt2" --config "$cfg" --threads "$th") ;;
    lt113) cmd=("$lt113" --config "$cfg" --threads "$th")
           # Debian's libtorch calls OpenBLAS, which starts a thread per core unless told: as many as the run has
           e=("OPENBLAS_NUM_THREADS=$th" ${e[@]+"${e[@]}"}) ;;
  esac
  env ${e[@]+"${e[@]}"} ${p[@]+"${p[@]}"} "${cmd[@]}" 2>/dev/null | awk 'NF >= 5 {print $4, $5}' | tail -1
}

# best PEERS CONFIG THREADS: the fastest "peer env..." — first the fastest of the peer variants given (one run each,
# default environment), then that variant's fastest environment (one probe run each).
best() {
  local peers=$1 cfg=$2 th=$3 peer="" best="" best_rate=0 rate waits=("" NOPIN) blas=("")
  for p in $peers; do
    read -r rate _ < <(run "$p" "$cfg" "$th" "OMP_NUM_THREADS=$th") || rate=0
    if awk "BEGIN {exit !(${rate:-0} > $best_rate)}"; then best_rate=$rate; peer=$p; fi
  done
  [ -n "$peer" ] || return 0
  best="$peer OMP_NUM_THREADS=$th"
  [ "$th" != 1 ] && waits=("" "OMP_WAIT_POLICY=PASSIVE")
  [ "$peer" = lt113 ] && [ "$th" != 1 ] && blas=("OPENBLAS_NUM_THREADS=1" "OPENBLAS_NUM_THREADS=$th")
  for a in "${allocs[@]}"; do
    for w in "${waits[@]}"; do
      for b in "${blas[@]}"; do
        [ -z "$a$w$b" ] && continue  # the default environment: measured above
        local e="OMP_NUM_THREADS=$th $w $a $b"
        # shellcheck disable=SC2086
        read -r rate _ < <(run "$peer" "$cfg" "$th" $e) || rate=0
        if awk "BEGIN {exit !(${rate:-0} > $best_rate)}"; then best_rate=$rate; best="$peer $e"; fi
      done
    done
  done
  echo "$best"
}

read -r _ peak2 _ peak512 < <(env "${pin[@]}" "$peak_bin")
peak=$peak2; peak_isa=avx2
[ "$peak512" != "-" ] && peak=$peak512 && peak_isa=avx512
echo "train_table: one core's FMA limit: avx2 $peak2, avx512 $peak512 GFLOP/s"

names=(pytorch compile lt2 lt113)
declare -A label=([pytorch]="PyTorch $torch_v eager" [compile]="torch.compile $torch_v" [lt2]="libtorch $torch_v"
                  [lt113]="libtorch $lt113_v")
pct() { awk "BEGIN {printf \"%.0f%%\", 100 * $1 * $2 / ($3 * 1e9 * $4)}"; }
rows=""; settings=""
for cfg in $configs; do
  flops=$(flops_per_sample "$cfg")
  for th in 1 "$all"; do
    [ "$th" = 1 ] || [ "$all" != 1 ] || continue
    declare -A setting=() rates=()
    if [ $have_py = 1 ]; then
      setting[pytorch]=$(best "eager-fused eager-foreach eager-forloop" "$cfg" "$th")
      setting[compile]=$(best "compile-model compile-step" "$cfg" "$th")
      setting[lt2]=$(best lt2 "$cfg" "$th")
    fi
    [ -x "$lt113" ] && setting[lt113]=$(best lt113 "$cfg" "$th")
    er=()
    for ((r = 0; r < reps; ++r)); do
      read -r rate _ < <(run ember "$cfg" "$th"); er+=("$rate")  # no settings, as a user gets it
      for n in "${names[@]}"; do
        [ -n "${setting[$n]:-}" ] || continue
        read -r -a words <<< "${setting[$n]}"
        read -r rate _ < <(run "${words[0]}" "$cfg" "$th" "${words[@]:1}") || rate=0
        rates[$n]+="${rate:-0} "
      done
    done
    e=$(printf '%s\n' "${er[@]}" | median)
    row="| $cfg | $th | $e"; best_n=""; best_r=0
    for n in "${names[@]}"; do
      if [ -z "${setting[$n]:-}" ]; then row+=" | -"; continue; fi
      m=$(printf '%s\n' ${rates[$n]} | median)
      row+=" | $m"
      if awk "BEGIN {exit !($m > $best_r)}"; then best_r=$m; best_n=$n; fi
      settings+="- $cfg, $th thread(s), ${label[$n]}: \`$(echo "${setting[$n]}" | xargs)\`"$'\n'
    done
    if [ -n "$best_n" ]; then
      row+=" | ${label[$best_n]} | **$(awk "BEGIN {printf \"%.2f\", $e / $best_r}")**"
      row+=" | $(pct "$e" "$flops" "$peak" "$th") | $(pct "$best_r" "$flops" "$peak" "$th") |"
    else
      row+=" | - | - | $(pct "$e" "$flops" "$peak" "$th") | - |"
    fi
    rows+="$row"$'\n'
    echo "$row"
    unset setting rates
  done
done

machine_vars
ember_isa=$("$bin" --isa 2>/dev/null || echo "?")
table="<!-- train-table:begin -->
Measured $(date -u +%Y-%m-%d) on $cpu (family $family, model $model; $all cores for this process; ISA flags: $isa),
Ember $(git rev-parse --short HEAD 2>/dev/null || echo ?) (CPU kernels: $ember_isa). Samples/s, medians of $reps
rounds that run every framework in turn (one-thread runs pinned to the same core), each peer at its best setting
for the row (below). Peak: one core's float32 FMA limit measured in the same run, $peak GFLOP/s ($peak_isa;
AVX2 $peak2), times the threads; a step's FLOPs are counted from the layers (forward, weight and input gradients).

| config | threads | Ember | ${label[pytorch]} | ${label[compile]} | ${label[lt2]} | ${label[lt113]} | best peer | Ember / best peer | Ember % of peak | best peer % of peak |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
${rows}
Each peer's setting per row (the fastest of its probe runs):
${settings}<!-- train-table:end -->"
put_table "$doc" train-table "Training throughput against PyTorch and libtorch (bench/bench_train.cpp, bench/train_table.sh)" "$table"
echo "train_table: wrote the table into $doc"
