#!/usr/bin/env bash
# make models-ref: a venv with the reference implementations of the library's models — torch 2.15 (PyPI), timm 1.0
# (ResNet, ViT) and transformers 5 (GPT-2, BERT) — that tests/models/ref.py runs to write small randomly initialised
# models and their outputs for the parity tests. Kept outside the build tree (default ~/.cache/ember/models-ref) so
# a later build or CI run on the same machine reuses it. Idempotent: a venv that already imports them is kept.
# Usage: scripts/models-ref.sh [VENV]
set -euo pipefail
venv=${1:-$HOME/.cache/ember/models-ref}
want_torch=2.15.0
if "$venv/bin/python" -c "import torch, timm, transformers, safetensors; assert torch.__version__.startswith('$want_torch')" \
    2> /dev/null; then
  echo "models-ref: $venv is ready ($("$venv/bin/python" -c 'import torch, timm, transformers; print("torch", torch.__version__, "timm", timm.__version__, "transformers", transformers.__version__)'))"
  exit 0
fi
python=$(command -v python3)
mkdir -p "$(dirname "$venv")"
"$python" -m venv "$venv"
"$venv/bin/pip" install --quiet --upgrade pip
"$venv/bin/pip" install --quiet "torch==$want_torch" "timm>=1.0,<2" "transformers>=5,<6" safetensors numpy
"$venv/bin/python" -c 'import torch, timm, transformers; print("models-ref: torch", torch.__version__, "timm", timm.__version__, "transformers", transformers.__version__)'
