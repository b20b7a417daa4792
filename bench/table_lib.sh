# Shared by the benchmark table scripts (train_table.sh, charlm_table.sh); sourced, not run.
#   median            reads numbers, one a line, prints their median
#   pin               the command prefix that pins a one-thread run to this process's first allowed core
#   allocs            the allocator settings a reference framework is tried with (glibc, glibc with raised mmap/trim
#                     thresholds, PyTorch's transparent huge pages for blocks of 2 MB or more, as Ember's allocator
#                     asks for them; jemalloc and tcmalloc where installed)
#   machine_vars      sets cpu, isa, family, model from /proc/cpuinfo (isa: the vector/matrix flags that matter)
#   put_table DOC NAME TITLE TABLE   replaces DOC's <!-- NAME:begin --> ... <!-- NAME:end --> block with TABLE, or
#                     appends TABLE under a "## TITLE" heading when there is no such block yet

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

pin=()
command -v taskset > /dev/null && pin=(taskset -c "$(taskset -pc $$ | sed 's/.*: *//; s/[-,].*//')")

allocs=("" "GLIBC_TUNABLES=glibc.malloc.mmap_threshold=268435456:glibc.malloc.trim_threshold=268435456"
  "THP_MEM_ALLOC_ENABLE=1")
for lib in /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 /usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4; do
  [ -e "$lib" ] && allocs+=("LD_PRELOAD=$lib")
done

machine_vars() {
  cpu=$(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
  isa=$(grep -m1 "^flags" /proc/cpuinfo | tr ' ' '\n' |
        grep -E '^(avx2|fma|avx512f|avx512bw|avx512vl|avx512_bf16|amx_tile|amx_bf16|avx512_fp16)$' | xargs)
  family=$(grep -m1 "cpu family" /proc/cpuinfo | cut -d: -f2 | xargs)
  model=$(grep -m1 "^model\s" /proc/cpuinfo | cut -d: -f2 | xargs)
}

put_table() {
  local doc=$1 name=$2 title=$3 table=$4
  if grep -q "$name:begin" "$doc"; then
    python3 - "$doc" "$name" "$table" <<'PY'
import re, sys
p, name, table = sys.argv[1:4]
s = open(p).read()
s = re.sub(r"<!-- %s:begin -->.*?<!-- %s:end -->" % (name, name), lambda m: table, s, flags=re.S)
open(p, "w").write(s)
PY
  else
    printf '\n## %s\n\n%s\n' "$title" "$table" >> "$doc"
  fi
}
