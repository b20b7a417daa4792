#!/usr/bin/env bash
# Runs bench/bench_train.cpp for Ember and libtorch alternately (REPS rounds, medians) on mlp-b64, mlp-b256,
# mlp-big and cnn-b64 at 1 and 2 threads, and writes the table into docs/benchmarks.md between the
# train-table markers. libtorch gets its best setting per thread count: OpenBLAS on one thread, or two
# OpenBLAS threads with passive OpenMP waiting (otherwise its threads spin against each other on 2 cores).
# Usage: bench/train_table.sh BUILD_DIR [REPS]
set -euo pipefail
build=${1:-build}
reps=${2:-3}
bin=$build/bench/ember_bench_train
tbin=$build/bench/ember_bench_train_torch   # built only when libtorch is installed
doc=docs/benchmarks.md
[ -x "$bin" ] || { echo "train_table: $bin not built" >&2; exit 1; }
have_torch=1
[ -x "$tbin" ] || have_torch=0

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
# One-thread runs of both frameworks are pinned to the same core: on a shared VM the cores need not be equally
# fast (here one vCPU ran ~10% slower than the other for long stretches), and an unpinned pair may land on
# different ones.
pin=()
command -v taskset > /dev/null && pin=(taskset -c "$(taskset -pc $$ | sed 's/.*: *//; s/[-,].*//')")
run() {  # framework config threads [env...] -> "rate rss"
  local fw=$1 cfg=$2 th=$3; shift 3
  local b=$bin
  [ "$fw" = torch ] && b=$tbin
  local p=()
  [ "$th" = 1 ] && p=("${pin[@]}")
  env "$@" "${p[@]}" "$b" --framework "$fw" --config "$cfg" --threads "$th" | awk '{print $4, $5}'
}

rows=""
for cfg in mlp-b64 mlp-b256 mlp-big cnn-b64; do
  for th in 1 2; do
    er=(); es=(); tr=(); ts=()
    for ((r = 0; r < reps; ++r)); do
      read -r rate rss < <(run ember "$cfg" "$th")  # no settings, as a user gets it
      er+=("$rate"); es+=("$rss")
      if [ $have_torch = 1 ]; then
        if [ "$th" = 1 ]; then
          read -r rate rss < <(run torch "$cfg" 1 OPENBLAS_NUM_THREADS=1)
        else
          read -r r1 s1 < <(run torch "$cfg" 2 OPENBLAS_NUM_THREADS=1)
          read -r r2 s2 < <(run torch "$cfg" 2 OPENBLAS_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE)
          if awk "BEGIN {exit !($r1 >= $r2)}"; then rate=$r1; rss=$s1; else rate=$r2; rss=$s2; fi
        fi
        tr+=("$rate"); ts+=("$rss")
      fi
    done
    e=$(printf '%s\n' "${er[@]}" | median); erss=$(printf '%s\n' "${es[@]}" | median)
    if [ $have_torch = 1 ]; then
      t=$(printf '%s\n' "${tr[@]}" | median); trss=$(printf '%s\n' "${ts[@]}" | median)
      ratio=$(awk "BEGIN {printf \"%.2f\", $e / $t}")
    else
      t="-"; trss="-"; ratio="-"
    fi
    rows+="| $cfg | $th | $e | $t | $ratio | $erss | $trss |"$'\n'
    echo "$cfg threads=$th ember=$e torch=$t ratio=$ratio rss ember=$erss torch=$trss"
  done
done

# The same at 2 threads while another process keeps one core busy (a compile, a data job): OpenMP's
# end-of-region barrier waits for a descheduled thread, Ember's pool does not (core/cpu/thread_pool.cpp).
load_rows=""
if [ $have_torch = 1 ]; then
  for cfg in mlp-b64 cnn-b64; do
    bash -c 'while :; do :; done' &
    hog=$!
    trap 'kill $hog 2>/dev/null || true' EXIT
    er=(); tr=()
    for ((r = 0; r < reps; ++r)); do
      read -r rate _ < <(run ember "$cfg" 2); er+=("$rate")
      read -r r1 _ < <(run torch "$cfg" 2 OPENBLAS_NUM_THREADS=1)
      read -r r2 _ < <(run torch "$cfg" 2 OPENBLAS_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE)
      tr+=("$(awk "BEGIN {print ($r1 >= $r2) ? $r1 : $r2}")")
    done
    kill $hog; wait $hog 2>/dev/null || true
    e=$(printf '%s\n' "${er[@]}" | median); t=$(printf '%s\n' "${tr[@]}" | median)
    ratio=$(awk "BEGIN {printf \"%.2f\", $e / $t}")
    load_rows+="| $cfg | 2, one core busy | $e | $t | $ratio |"$'\n'
    echo "$cfg threads=2 under load: ember=$e torch=$t ratio=$ratio"
  done
fi

cpu=$(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
torch_v=$(dpkg-query -W -f='${Version}' libtorch-dev 2>/dev/null || echo "not installed")
table="<!-- train-table:begin -->
Measured $(date -u +%Y-%m-%d) on $cpu ($(nproc) cores), Ember $(git rev-parse --short HEAD 2>/dev/null || echo ?),
libtorch $torch_v; samples/s are medians of $reps alternating runs (one-thread runs of both pinned to the same
core); peak RSS in MiB of the whole process.

| config | threads | Ember samples/s | libtorch samples/s | Ember/libtorch | Ember RSS | libtorch RSS |
| --- | --- | --- | --- | --- | --- | --- |
${rows}
With another process keeping one of the cores busy (a shell busy loop), same medians:

| config | threads | Ember samples/s | libtorch samples/s | Ember/libtorch |
| --- | --- | --- | --- | --- |
${load_rows}<!-- train-table:end -->"
if grep -q "train-table:begin" "$doc"; then
  python3 - "$doc" "$table" <<'PY'
import re, sys
p, table = sys.argv[1], sys.argv[2]
s = open(p).read()
s = re.sub(r"<!-- train-table:begin -->.*?<!-- train-table:end -->", lambda m: table, s, flags=re.S)
open(p, "w").write(s)
PY
else
  printf '\n## Training throughput against libtorch (bench/bench_train.cpp, bench/train_table.sh)\n\n%s\n' "$table" >> "$doc"
fi
echo "train_table: wrote the table into $doc"
