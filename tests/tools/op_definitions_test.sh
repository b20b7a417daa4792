#!/usr/bin/env bash
# Every public differentiable op takes its name, memory scope and autocast rule from the op table
# (autograd/include/ember/autograd/op_def.h) through OpEntry: none is written out by hand in an op file.
# Usage: op_definitions_test.sh SOURCE_DIR
set -u
cd "$1" || exit 2
fail=0
check() {  # check WHAT REGEX [allowed file...]: no line of the op files matches REGEX outside the allowed files
  local what=$1 regex=$2
  shift 2
  local hits
  hits=$(grep -nE "$regex" autograd/src/*.cpp autograd/src/*.h nn/src/*.cpp | grep -vE "^[^:]+:[0-9]+:\s*//" || true)
  for allowed in "$@"; do hits=$(printf '%s\n' "$hits" | grep -v "^$allowed:" || true); done
  if [ -n "$hits" ]; then
    echo "FAIL: $what written by hand (use OpEntry and the op table):"
    printf '%s\n' "$hits"
    fail=1
  fi
}
check "a memory scope" 'memory::OpScope' autograd/src/engine.cpp
check "an autocast rule" 'amp::(fp32|lower|promote)\(' autograd/src/amp.cpp
check "an op name given to record()" 'record\("' nn/src/module_hooks.cpp
check "an op name given to SavedTensor::get()" '\.get\("'
[ "$fail" = 0 ] && echo "op definitions: every scope, autocast rule and recorded name comes from the table"
exit "$fail"
