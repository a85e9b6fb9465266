#!/usr/bin/env bash
# Installs what fetch-stack.sh downloaded into a private folder (default .alst/site) without
# touching the host's torch/transformers. DeepSpeed's ops are not prebuilt (DS_BUILD_OPS=0): CPU
# Adam JIT-builds on first use (about 60 s; TORCH_EXTENSIONS_DIR keeps the build).
# The ulysses CLI puts .alst/site on PYTHONPATH itself (or $ULYSSES_DEEPSPEED_SITE).
# Usage: install-stack.sh [WHEELS=.alst/wheels] [TARGET=.alst/site]
set -euo pipefail
w=${1:-.alst/wheels}; t=${2:-.alst/site}
[ -d "$w" ] || { echo "install-stack.sh: no wheels folder '$w' (run runtime/deepspeed/fetch-stack.sh where PyPI is reachable)" >&2; exit 1; }
w=$(cd "$w" && pwd); mkdir -p "$t"; t=$(cd "$t" && pwd)
python3 -m pip install -q --no-index --no-deps --target "$t" "$w"/*.whl
DS_BUILD_OPS=0 python3 -m pip install -q --no-index --no-build-isolation --no-deps --target "$t" "$w"/deepspeed-*.tar.gz
PYTHONPATH="$t:${PYTHONPATH:-}" python3 -c "import deepspeed, transformers, torch, accelerate; print('deepspeed', deepspeed.__version__, 'accelerate', accelerate.__version__, 'transformers', transformers.__version__, 'torch', torch.__version__)"
