#!/usr/bin/env bash
# Data-parallel throughput over MPI on this machine: mlp-big and the CNN at 1 and 2 ranks (one thread each), with
# and without overlapping the all-reduces with backward, medians of N runs (default 3). Prints a markdown table.
# Usage: bash bench/dist_table.sh [build-dir] [runs]
set -euo pipefail
build=${1:-build}
runs=${2:-3}
bin=$build/bench/ember_bench_dist
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; flags: $(grep -o -w 'avx2\|fma\|avx512f\|avx512_bf16\|amx_tile' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo
echo "| config | ranks | buckets | overlap | samples/s | speed-up | all-reduce ms/step | exposed ms/step | hidden |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for cfg in "mlp-big 128 30" "cnn 64 12"; do
  set -- $cfg
  base=""
  for case in "1 25 on" "2 25 on" "2 1 on" "2 1 off"; do
    set -- $cfg $case
    name=$1 batch=$2 steps=$3 np=$4 mib=$5 ov=$6
    flag=""; [ "$ov" = off ] && flag=--no-overlap
    lines=$(for r in $(seq "$runs"); do
      mpirun --oversubscribe -np "$np" "$bin" --config "$name" --batch "$batch" --steps "$steps" --bucket-mib "$mib" $flag
    done)
    sps=$(echo "$lines" | awk '{print $4}' | median)
    comm=$(echo "$lines" | awk '{print $5}' | median)
    exposed=$(echo "$lines" | awk '{print $6}' | median)
    hidden=$(echo "$lines" | awk '{print $7}' | median)
    [ -z "$base" ] && base=$sps
    speed=$(awk -v a="$sps" -v b="$base" 'BEGIN {printf "%.2f", a / b}')
    if [ "$np" = 1 ]; then comm="-"; exposed="-"; hidden="-"; ov="-"; fi
    echo "| $name b$batch/rank | $np | $mib MiB | $ov | $sps | $speed | $comm | $exposed | $hidden |"
  done
done
