#!/usr/bin/env bash
# Runs a command as a test: it passes only if the command exits 0 *and* prints a line matching REGEX (ERE). ctest's
# PASS_REGULAR_EXPRESSION alone ignores the exit code, so a crash after the line it looks for would pass.
#   usage: expect_output.sh REGEX -- COMMAND [ARGS...]
regex=$1
shift
[ "${1:-}" = -- ] && shift
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
[ $rc -eq 0 ] || { echo "expect_output: '$1' exited with status $rc"; exit 1; }
grep -Eq -- "$regex" <<< "$out" || { echo "expect_output: no line of the output matches: $regex"; exit 1; }
