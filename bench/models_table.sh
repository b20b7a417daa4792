#!/usr/bin/env bash
# The full-size model table: the library's models (bench/bench_models.cpp) against timm / transformers on PyTorch 2.15
# (bench/torch_models.py in the venv of make models-ref), eager and torch.compile, each in its own process, at one
# thread (pinned to one core) and at all the threads this process may use. Rows: ResNet-50 training (224², batch 32,
# float32 and bf16 autocast), ViT-B/16 training (batch 16), GPT-2 124M training (batch 4, T 256); ResNet-50 inference
# (latency at batch 1, throughput at 32); GPT-2 greedy generation (batch 1, 16-token prompt, 64 new tokens). Each
# cell is the median of REPS runs (a warm-up step, then STEPS timed). Written into docs/benchmarks.md between the
# models-table markers, with the CPU it ran on.
# Usage: bench/models_table.sh BUILD_DIR [REPS] [STEPS]   (VENV: default ~/.cache/ember/models-ref; ROWS to pick rows)
set -euo pipefail
build=${1:-build}
reps=${2:-1}
steps=${3:-2}
venv=${VENV:-$HOME/.cache/ember/models-ref}
bin=$build/bench/ember_bench_models
py=bench/torch_models.py
doc=${DOC:-docs/benchmarks.md}
[ -x "$bin" ] || { echo "models_table: build $bin first (cmake --build $build --target ember_bench_models)" >&2; exit 1; }
have_py=0; "$venv/bin/python" -c 'import torch, timm, transformers' 2>/dev/null && have_py=1
source "$(dirname "$0")/table_lib.sh"  # median, pin, machine_vars, put_table
all=$(nproc)
rows=${ROWS:-"resnet50-train resnet50-train-bf16 vit-train gpt2-train resnet50-latency resnet50-infer gpt2-generate"}

# args ROW: the flags both programs take for a row
args() {
  case $1 in
    resnet50-train) echo "--model resnet50 --mode train --batch 32" ;;
    resnet50-train-bf16) echo "--model resnet50 --mode train --batch 32 --amp bf16" ;;
    vit-train) echo "--model vit_b16 --mode train --batch 16" ;;
    gpt2-train) echo "--model gpt2 --mode train --batch 4 --seq 256" ;;
    resnet50-latency) echo "--model resnet50 --mode infer --batch 1" ;;
    resnet50-infer) echo "--model resnet50 --mode infer --batch 32" ;;
    gpt2-generate) echo "--model gpt2 --mode generate --batch 1 --seq 16 --new 64" ;;
  esac
}

# cell PEER ROW THREADS: "rate rss" (median rate over REPS; the last run's peak RSS in MiB), or "- -"
cell() {
  local peer=$1 row=$2 th=$3 p=() cmd rates=() out rss=-
  [ "$th" = 1 ] && p=("${pin[@]}")
  # shellcheck disable=SC2207
  local a=($(args "$row"))
  case $peer in
    ember) cmd=("$bin" "${a[@]}" --threads "$th" --steps "$steps") ;;
    eager) cmd=("$venv/bin/python" "$py" "${a[@]}" --threads "$th" --steps "$steps") ;;
    compile) cmd=("$venv/bin/python" "$py" "${a[@]}" --threads "$th" --steps "$steps" --compile) ;;
  esac
  for _ in $(seq "$reps"); do
    out=$("${p[@]}" "${cmd[@]}" 2> /dev/null | grep '^rate ') || { echo "- -"; return; }
    rates+=("$(echo "$out" | awk '{print $2}')")
    rss=$(echo "$out" | awk '{print $6}')
  done
  echo "$(printf '%s\n' "${rates[@]}" | median) $rss"
}

machine_vars
table="<!-- models-table:begin -->
Measured $(date +%Y-%m-%d) on \"$cpu\" (family $family, model $model; $isa), $all cores; PyTorch $(
  [ $have_py = 1 ] && "$venv/bin/python" -c 'import torch, timm, transformers; print(torch.__version__.split("+")[0], "with timm", timm.__version__, "and transformers", transformers.__version__)' || echo "not installed").
Rates: images/s or tokens/s (higher is better), latency in ms (lower is better); peak RSS in MiB; the ratio is
Ember against the best peer (> 1: Ember faster). Median of $reps run(s), $steps timed steps after a warm-up each.

| row | threads | Ember | PyTorch eager | torch.compile | Ember / best | RSS Ember / eager / compile |
| --- | --- | --- | --- | --- | --- | --- |"
for row in $rows; do
  for th in 1 "$all"; do
    read -r er em <<< "$(cell ember "$row" "$th")"
    pr=- pm=- cr=- cm=-
    if [ $have_py = 1 ]; then
      read -r pr pm <<< "$(cell eager "$row" "$th")"
      [ "$row" != gpt2-generate ] && read -r cr cm <<< "$(cell compile "$row" "$th")"
    fi
    ratio=$(python3 - "$row" "$er" "$pr" "$cr" <<'PY'
import sys
row, e, *peers = sys.argv[1:]
vals = [float(v) for v in peers if v != "-"]
if e == "-" or not vals:
    print("-")
elif row.endswith("latency"):  # milliseconds: lower is better
    print(f"{min(vals) / float(e):.2f}")
else:
    print(f"{float(e) / max(vals):.2f}")
PY
)
    echo "models_table: $row at $th threads: ember $er, eager $pr, compile $cr -> $ratio" >&2
    table+="
| $row | $th | $er | $pr | $cr | **$ratio** | $em / $pm / $cm |"
  done
done
table+="
<!-- models-table:end -->"
put_table "$doc" models-table "Full-size models on the CPU" "$table"
echo "$table"
