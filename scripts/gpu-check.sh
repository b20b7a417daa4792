#!/usr/bin/env bash
# The one-shot GPU check: runs, on the lent GPU machine, what scripts/gpu-stage.sh built here. No build there.
#   bash scripts/gpu-check.sh [--dry-run] [DIR]       DIR: the staged folder (default .gpu-stage)
# Stages, each printing its summary as soon as it ends (a kill still returns what ran):
#   preflight  GPU, driver, CPU flags; the stage matches this tree; every binary's libraries resolve (CUDA's from
#              pip's nvidia-* wheels or /usr/local/cuda)
#   gate       one small CUDA test with EMBER_REQUIRE_CUDA=1; stops the run with the reason when CUDA is unusable
#   suites     the must-pass CUDA suites, each binary run directly under its own timeout
#   example    ember_mnist --device cuda --epochs 1 on the carried Fashion-MNIST slice
#   bench      the op benchmark (ember_bench_gpu_ops against bench/torch_gpu_ops.py), ember_bench_gpu and
#              PyTorch's torch_reference.py on the same configs, then the full-size models while the budget allows
#              (ember_bench_gpu_models against torch_gpu_ops.py --group models); ratio tables
#   extras     if time remains: compute-sanitizer memcheck on a kernels filter; on AVX-512 / AVX512-BF16 / AMX
#              hosts the CPU ISA and bf16 GEMM suites under each path
# --dry-run (a machine without a GPU): the same script against a fake pip layout of this machine's CUDA libraries;
# it passes when preflight resolves everything there and the gate stops with the "no CUDA device" reason.
# Logs: at most 6 files under $OUT (or ./gpu-out). EMBER_GPU_BUDGET_S (default 420): seconds after which the
# optional stages are skipped. EMBER_GPU_CHECK_PAST_GATE=1 goes on past a failed gate (to try the later stages'
# script on a machine without a GPU: every CUDA test then fails).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-lists.sh
dry=0
[ "${1:-}" = --dry-run ] && { dry=1; shift; }
dir=${1:-.gpu-stage}
out=${OUT:-gpu-out}
mkdir -p "$out"
budget=${EMBER_GPU_BUDGET_S:-420}
t0=$(date +%s)
summary=$out/summary.txt
: > "$summary"
elapsed() { echo $(( $(date +%s) - t0 )); }
say() { echo "$*" | tee -a "$summary"; }
finish() {  # finish RC: the summary file, printed again last (the reply shows the output's end)
  echo "== summary ($(elapsed)s)"; cat "$summary"; exit "$1"
}
say "== gpu-check $( ((dry)) && echo '(dry run) ')on $(hostname), $(date -u +%FT%TZ)"

# ---------------------------------------------------------------- preflight
pre=$out/preflight.log
: > "$pre"
logs_pre=$(mktemp -d)
for f in stage.tar.xz COMMIT SOURCES.sha256; do
  [ -f "$dir/$f" ] || { say "preflight: FAIL: $dir/$f missing (run scripts/gpu-stage.sh first)"; finish 2; }
done
# The stage must match this tree: every tracked build input byte for byte (SOURCES.sha256). The commit is only
# reported: the device's copy of .git may lag the files it was sent (seen: HEAD of the session's start), and a
# commit that changed only docs leaves the stage valid.
staged=$(cat "$dir/COMMIT")
head=$(git rev-parse HEAD 2>/dev/null || echo "")
if ! sha256sum -c --quiet "$dir/SOURCES.sha256" >> "$pre" 2>&1; then
  say "preflight: FAIL: sources changed since the stage was built ($staged; git HEAD here: ${head:-none}):" \
      "run scripts/gpu-stage.sh again"
  grep -v ': OK$' "$pre" | head -5 | tee -a "$summary"
  finish 2
fi
say "preflight: stage of $staged matches the sources${head:+ (git HEAD here: $head)}"
root=${TMPDIR:-/tmp}/ember-gpu-stage-$staged
if [ ! -f "$root/.unpacked" ]; then
  rm -rf "$root" && mkdir -p "$root" &&
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$dir/stage.tar.xz" "$root" &&
    touch "$root/.unpacked" || { say "preflight: FAIL: could not unpack $dir/stage.tar.xz"; finish 2; }
fi
# Where CUDA's libraries are: pip's nvidia-* wheels (nvidia/cu13/lib, nvidia/cudnn/lib, nvidia/nccl/lib, ...)
# first, then /usr/local/cuda. The dry run points EMBER_NVIDIA_SITE at a fake layout of this machine's libraries.
if ((dry)) && [ -z "${EMBER_NVIDIA_SITE:-}" ]; then  # this machine's CUDA libraries, laid out as pip's wheels
  EMBER_NVIDIA_SITE=$(mktemp -d)
  mkdir -p "$EMBER_NVIDIA_SITE/nvidia/cu13/lib" "$EMBER_NVIDIA_SITE/nvidia/cudnn/lib" "$EMBER_NVIDIA_SITE/nvidia/nccl/lib"
  for lib in $(find /usr/local/cuda/lib64/ /usr/local/cuda/lib/ -maxdepth 1 -name 'lib*.so.*' 2>/dev/null); do
    case $(basename "$lib") in
      libcudnn*) ln -sf "$lib" "$EMBER_NVIDIA_SITE/nvidia/cudnn/lib/" ;;
      libnccl*) ln -sf "$lib" "$EMBER_NVIDIA_SITE/nvidia/nccl/lib/" ;;
      *) ln -sf "$lib" "$EMBER_NVIDIA_SITE/nvidia/cu13/lib/" ;;
    esac
  done
fi
site=${EMBER_NVIDIA_SITE:-$(python3 -c 'import nvidia, os; print(os.path.dirname(nvidia.__path__[0]))' 2>/dev/null)}
libdirs=()
for d in "$site"/nvidia/*/lib; do [ -d "$d" ] && libdirs+=("$d"); done
((dry)) || for d in /usr/local/cuda/lib64 /usr/local/cuda/lib; do [ -d "$d" ] && libdirs+=("$d"); done
export LD_LIBRARY_PATH=$(IFS=:; echo "$root/lib:$root/deps:${libdirs[*]}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{
  echo "-- nvidia-smi"; nvidia-smi 2>&1
  echo "-- CPU"; lscpu 2>&1 | grep -E 'Model name|^CPU\(s\)|Flags'
  echo "-- LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
} >> "$pre"
gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)
say "preflight: GPU: ${gpu:-none (nvidia-smi: $(nvidia-smi -L 2>&1 | head -1))}"
flags=$(grep -m1 '^flags' /proc/cpuinfo)
isa=""
for f in avx512f avx512_bf16 amx_tile amx_bf16; do [[ " $flags " == *" $f "* ]] && isa+=" $f"; done
say "preflight: CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) cores;" \
    "of avx512f avx512_bf16 amx_tile amx_bf16 it has:${isa:- none}"
missing=0
for b in "$root"/lib/* "$root"/tests/* "$root"/bench/* "$root"/examples/*; do
  echo "-- ldd ${b#$root/}" >> "$pre"
  ldd "$b" >> "$pre" 2>&1
  if ldd "$b" 2>&1 | grep -q 'not found'; then
    say "preflight: FAIL: ${b#$root/} lacks: $(ldd "$b" | grep 'not found' | awk '{print $1}' | tr '\n' ' ')"
    missing=1
  fi
done
# Where each CUDA library comes from (the dry run insists on the fake pip layout, so the lookup is what's tested).
for l in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcudnn.so.9 libnccl.so.2; do
  from=$(ldd "$root/lib/libember_cuda.so" "$root/lib/libember_dist_nccl.so" 2>/dev/null | awk -v l="$l" '$1 == l {print $3; exit}')
  say "preflight: $l -> ${from:-not linked}"
  if ((dry)) && [ -n "$from" ] && [[ "$from" != "$site"/* ]]; then
    say "preflight: FAIL: $l resolved outside the fake pip layout $site"; missing=1
  fi
done
((missing)) && finish 2
say "preflight: every binary's libraries resolve ($(elapsed)s)"
# The plugin's kernels that use local memory (spills, stack arrays): cuobjdump is on the device, not here.
if command -v cuobjdump > /dev/null; then
  cuobjdump --dump-resource-usage "$root/lib/libember_cuda.so" > "$logs_pre/resources.txt" 2>&1
  lmem=$(awk '/Function/ {f=$2} /STACK:[1-9]|LOCAL:[1-9]/ {print f}' "$logs_pre/resources.txt" | sed 's/:$//' |
         c++filt 2>/dev/null | sed 's/(anonymous namespace):://g; s/^void //; s/(.*//' | sort | uniq -c | sort -rn)
  say "preflight: kernels with local memory: $(echo "$lmem" | grep -c .) of $(grep -c 'Function' "$logs_pre/resources.txt")"
  echo "$lmem" | head -12 | tee -a "$summary"
  { echo "-- cuobjdump --dump-resource-usage"; cat "$logs_pre/resources.txt"; } >> "$pre"
fi

# ---------------------------------------------------------------- gate
export EMBER_REQUIRE_CUDA=1 OMP_WAIT_POLICY=passive
gate_log=$(mktemp)
timeout -k 5 60 "$root/tests/$EMBER_GPU_GATE" --gtest_color=no \
  --gtest_filter='CudaRuntime.DeviceQueries:CudaRuntime.ComputeOpsRunOnTheDevice' > "$gate_log" 2>&1
gate_rc=$?
if [ $gate_rc -ne 0 ]; then
  reason=$(grep -m1 -o 'EMBER_REQUIRE_CUDA is set, but no CUDA device.*' "$gate_log")
  say "gate: FAIL (rc $gate_rc): ${reason:-$(tail -3 "$gate_log")}"
  cat "$gate_log" >> "$pre"
  if ((dry)) && [ -n "$reason" ] && [ -z "${EMBER_GPU_CHECK_PAST_GATE:-}" ]; then
    say "dry run: OK (the gate stopped with the reason, as it must here)"; finish 0
  fi
  [ -n "${EMBER_GPU_CHECK_PAST_GATE:-}" ] || finish 2
fi
say "gate: PASS: CUDA works ($(elapsed)s)"
((dry)) && [ -z "${EMBER_GPU_CHECK_PAST_GATE:-}" ] && { say "dry run: a GPU is present here: run without --dry-run"; finish 0; }

# ---------------------------------------------------------------- suites
logs=$(mktemp -d)
# run_suite NAME TIMEOUT [gtest args...]: runs one binary, prints one line: counts, failed tests, or the test
# that was running when the process died (an illegal address poisons the rest of a process).
run_suite() {
  local name=$1 limit=$2 log=$logs/${SUITE_LOG:-$1}.log; shift 2
  local s=$(date +%s)
  timeout -k 5 "$limit" "$root/tests/$name" --gtest_color=no "$@" > "$log" 2>&1
  local rc=$? took=$(( $(date +%s) - s ))
  # per-test result lines end with "(N ms)"; the final listing repeats the names without it
  local ok=$(grep -cE '^\[       OK \] .* \([0-9]+ ms\)$' "$log") bad=$(grep -cE '^\[  FAILED  \] .* \([0-9]+ ms\)$' "$log")
  local skip=$(grep -cE '^\[  SKIPPED \] .* \([0-9]+ ms\)$' "$log")
  local line="${SUITE_LOG:-$name}: $ok passed, $bad failed, $skip skipped (${took}s)"
  if [ $rc -eq 0 ]; then
    echo "suites: PASS $line"
    return 0
  fi
  local failed=$(grep -E '^\[  FAILED  \] .* \([0-9]+ ms\)$' "$log" | awk '{sub(/,$/, "", $4); print $4}' | head -8 | tr '\n' ' ')
  [ "$bad" -gt 8 ] && failed+="and $((bad - 8)) more"
  local running=$(awk '/^\[ RUN      \]/ {t=$4} /^\[       OK \]|^\[  FAILED  \]|^\[  SKIPPED \]/ {t=""} END {print t}' "$log")
  local why="rc $rc"
  [ $rc -eq 124 ] && why="timed out after ${limit}s"
  [ $rc -gt 128 ] && why="killed by signal $((rc - 128))"
  echo "suites: FAIL $line, $why${failed:+; failed: $failed}${running:+; died in $running}"
  return 1
}
for t in $EMBER_GPU_SERIAL_SUITES; do say "$(run_suite "$t" 120)"; done
jobs_max=4
for t in $EMBER_GPU_SUITES; do
  while [ "$(jobs -rp | wc -l)" -ge $jobs_max ]; do wait -n; done
  ( line=$(run_suite "$t" 150); r=$?; say "$line"; exit $r ) &
done
while [ "$(jobs -rp | wc -l)" -gt 0 ]; do wait -n; done
# The linear epilogues again with cuBLASLt required (EMBER_CUBLASLT=require): a case the rule gives cuBLASLt that it
# refuses fails instead of falling back to the composed steps, so a pass shows the epilogues really ran.
say "$(SUITE_LOG=cublaslt_required EMBER_CUBLASLT=require run_suite test_cuda_gemm_epilogue 60)"
# The 16-bit convolutions with cuDNN's graph API required (EMBER_CUDNN_CONV_GRAPH=require: a refused shape fails
# instead of falling back to the legacy calls, so a pass shows the graph path ran), then on the legacy calls alone.
say "$(SUITE_LOG=conv_graph_required EMBER_CUDNN_CONV_GRAPH=require run_suite test_cuda_kernels_vs_cpu 120 \
  --gtest_filter='CudaKernels.Conv2d*')"
say "$(SUITE_LOG=conv_legacy EMBER_CUDNN_CONV_GRAPH=0 run_suite test_cuda_kernels_vs_cpu 120 \
  --gtest_filter='CudaKernels.Conv2d*')"
# cuDNN's batch slicing, on small tensors (the limit lowered)
say "$(SUITE_LOG=cudnn_slices EMBER_CUDNN_MAX_ELEMENTS=300 run_suite test_cuda_kernels_vs_cpu 120 \
  --gtest_filter='CudaKernels.Conv2d*')"
fails=$(grep -c '^suites: FAIL' "$summary")
for f in "$logs"/*.log; do echo "======== $(basename "$f" .log)"; cat "$f"; done > "$out/suites.log"
say "suites: $(grep -c '^suites: PASS' "$summary") passed, $fails failed ($(elapsed)s; logs in suites.log)"

# ---------------------------------------------------------------- example
ex=$out/example.log
timeout -k 5 150 "$root/examples/ember_mnist" --device cuda --epochs 1 --data "$root/data" > "$ex" 2>&1
example_rc=$?
say "example: rc $example_rc: $(grep -iE 'accuracy' "$ex" | tail -1) ($(elapsed)s)"

# ---------------------------------------------------------------- bench
bl=$out/bench.log
# The op benchmark first (issue 57: the gaps at full-size shapes), both sides; report only (a case's error is a
# row of the table, not a failed run).
timeout -k 5 150 "$root/bench/ember_bench_gpu_ops" > "$logs/ember_ops.jsonl" 2> "$logs/ember_ops.err"
orc=$?
timeout -k 5 120 python3 "$root/bench/torch_gpu_ops.py" --group ops --json "$logs/torch_ops.jsonl" \
  > "$logs/torch_ops.log" 2>&1
otrc=$?
say "bench ops: ember rc $orc, pytorch rc $otrc ($(elapsed)s)"
python3 scripts/gpu_ops_ratio.py "$logs/ember_ops.jsonl" "$logs/torch_ops.jsonl" 2>&1 | tee -a "$summary"
[ $orc -ne 0 ] && tail -3 "$logs/ember_ops.err" | tee -a "$summary"
# Attention again on Ember's own kernels (EMBER_CUDNN_ATTENTION=0): cuDNN's fused path against them.
EMBER_CUDNN_ATTENTION=0 timeout -k 5 60 "$root/bench/ember_bench_gpu_ops" --only attn \
  > "$logs/ember_ops_own_attn.jsonl" 2> "$logs/ember_ops_own_attn.err"
say "bench ops, attention on Ember's own kernels: rc $? ($(elapsed)s); below, the Ember column is the own kernels, the PyTorch column the default (cuDNN) run"
python3 scripts/gpu_ops_ratio.py "$logs/ember_ops_own_attn.jsonl" "$logs/ember_ops.jsonl" 2>&1 | tee -a "$summary"
timeout -k 5 150 "$root/bench/ember_bench_gpu" > "$logs/ember.jsonl" 2> "$logs/ember.err"
erc=$?
timeout -k 5 150 python3 "$root/torch_reference.py" --json "$logs/torch.jsonl" > "$logs/torch.log" 2>&1
trc=$?
{
  echo "-- ember_bench_gpu (rc $erc)"; cat "$logs/ember.jsonl" "$logs/ember.err"
  echo "-- torch_reference.py (rc $trc)"; cat "$logs/torch.log"
  echo "-- ratio"; python3 scripts/gpu_ratio.py "$logs/ember.jsonl" "$logs/torch.jsonl"
} > "$bl" 2>&1
say "bench: ember rc $erc, pytorch rc $trc ($(elapsed)s)"
python3 scripts/gpu_ratio.py "$logs/ember.jsonl" "$logs/torch.jsonl" 2>&1 | tee -a "$summary"
[ $erc -ne 0 ] && tail -3 "$logs/ember.err" | tee -a "$summary"
# The library's models at full size (issue 57, item 8), while the budget allows: report only.
if [ $(( budget - $(elapsed) )) -gt 150 ]; then
  timeout -k 5 200 "$root/bench/ember_bench_gpu_models" > "$logs/ember_models.jsonl" 2> "$logs/ember_models.err"
  mrc=$?
  timeout -k 5 150 python3 "$root/bench/torch_gpu_ops.py" --group models --json "$logs/torch_models.jsonl" \
    > "$logs/torch_models.log" 2>&1
  mtrc=$?
  say "bench models: ember rc $mrc, pytorch rc $mtrc ($(elapsed)s)"
  python3 scripts/gpu_ops_ratio.py "$logs/ember_models.jsonl" "$logs/torch_models.jsonl" 2>&1 | tee -a "$summary"
  [ $mrc -ne 0 ] && tail -3 "$logs/ember_models.err" | tee -a "$summary"
else
  say "bench models: skipped, $(( budget - $(elapsed) ))s of the budget left"
fi
{
  for f in ember_ops.jsonl ember_ops.err torch_ops.log ember_models.jsonl ember_models.err torch_models.log; do
    [ -f "$logs/$f" ] && { echo "-- $f"; cat "$logs/$f"; }
  done
} >> "$bl" 2>&1

# ---------------------------------------------------------------- extras, while time remains
xl=$out/extras.log
: > "$xl"
left() { echo $(( budget - $(elapsed) )); }
if [ "$(left)" -gt 60 ] && command -v compute-sanitizer > /dev/null; then
  timeout -k 5 $(( $(left) - 30 )) compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$root/tests/test_cuda_kernels_vs_cpu" --gtest_color=no --gtest_filter="${EMBER_SANITIZE_FILTER:-*Softmax*:*Norm*:*Attention*:*Pool*}" >> "$xl" 2>&1
  say "extras: compute-sanitizer memcheck: rc $? ($(grep -m1 'ERROR SUMMARY' "$xl")) ($(elapsed)s)"
fi
if [[ "$isa" == *avx512f* ]] && [ "$(left)" -gt 40 ]; then
  for t in $EMBER_CPU_ISA_SUITES; do
    [ "$(left)" -gt 20 ] || break
    line=$(EMBER_CPU_ISA=avx512 run_suite "$t" "$(( $(left) - 10 ))" --gtest_filter='-*Cuda*:*LibemberHoldsNoAvx512*')
    say "extras: avx512 $line"; cat "$logs/$t.log" >> "$xl"
  done
fi
for path in avx512bf16:avx512_bf16 amx:amx_bf16; do
  [[ "$isa" == *"${path#*:}"* ]] || continue
  for t in $EMBER_BF16_SUITES; do
    [ "$(left)" -gt 20 ] || break
    line=$(EMBER_BF16_GEMM=${path%%:*} run_suite "$t" "$(( $(left) - 10 ))" --gtest_filter='-*Cuda*')
    say "extras: bf16 ${path%%:*} $line"; cat "$logs/$t.log" >> "$xl"
  done
done
if [[ "$isa" == *avx512_bf16* || "$isa" == *amx_bf16* ]] && [ "$(left)" -gt 30 ]; then
  timeout -k 5 $(( $(left) - 10 )) "$root/bench/ember_bench" --benchmark_filter='BM_matmul(_bf16)?/n:1024/' \
    --benchmark_min_time=0.2 >> "$xl" 2>&1
  say "extras: BM_matmul vs BM_matmul_bf16 at 1024: rc $?"; grep -E '^BM_matmul' "$xl" | tee -a "$summary"
fi
# CPU training on the host's CPU (AVX-512, AMX: no build machine has those), Ember against the host's PyTorch.
# Each line: config, threads, Ember's and PyTorch's samples/s (bench/train_table.sh's method, one run each).
if [[ "$isa" == *avx512f* ]] && [ -x "$root/bench/ember_bench_train" ]; then
  for cfg in $EMBER_HOST_TRAIN_CONFIGS; do
    for th in $EMBER_HOST_TRAIN_THREADS; do
      [ "$(left)" -gt 30 ] || break 2
      e=$(timeout -k 5 30 "$root/bench/ember_bench_train" --framework ember --config "$cfg" --threads "$th" \
          --data "$root/data" 2>> "$xl" | awk '{print $4}')
      t=$(timeout -k 5 40 python3 "$root/bench/torch_train.py" --config "$cfg" --threads "$th" --data "$root/data" \
          2>> "$xl" | awk '{print $4 " (" $1 ")"}')
      say "extras: cpu train $cfg threads $th: ember ${e:-failed} samples/s, pytorch ${t:-failed}"
    done
  done
fi
# The run fails when a must-pass suite, the example or Ember's benchmark did (the extras only report).
((fails || example_rc || erc)) && finish 1
finish 0
