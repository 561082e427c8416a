# The two commands a fresh machine needs (README): `make run` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
EXAMPLE := matcher/examples/engine-core-max-model-len.log

.PHONY: run test setup node site-deps lint verify-cpu lock lock-check clean

# uv itself is pinned here and installed into build/uv (a bootstrap venv), so the lock is always
# read by the same resolver; uv.lock pins every package of .venv, and `--locked` refuses a lock
# that no longer matches pyproject.toml instead of quietly re-resolving it.
UV_VERSION := 0.13.9
UV := build/uv/bin/uv
export UV_PYTHON_DOWNLOADS := never

$(UV):
	$(PY) -m venv build/uv
	build/uv/bin/python -m pip install -q 'uv==$(UV_VERSION)'

$(BIN)/kvkb: pyproject.toml uv.lock | $(UV)
	$(UV) sync --locked --all-extras --python $(PY)
	@touch $@

setup: $(BIN)/kvkb

# node + npm (installed when missing): the site build runs `npm ci` for the pinned Pyodide runtime
# that the diagnose page and the calculator serve (site_src/package.json, package-lock.json).
node:
	sh site_src/install-node.sh

# Pyodide from npm into build/npm (gitignored); the mkdocs hook does the same when it is stale.
site-deps: setup node
	$(BIN)/python -c "from kvkb.site_src.webbuild import ensure_pyodide; print(ensure_pyodide())"

# Main job: build the site strictly (with the in-browser diagnose page), then match a bundled log.
run: site-deps
	$(BIN)/kvkb lint
	$(BIN)/mkdocs build --strict --site-dir site
	$(BIN)/kbmatch $(EXAMPLE)

test: site-deps
	$(BIN)/python -m pytest -q

# CPU reproductions against real vLLM (its own venv: its pins must not constrain ours).
verify-cpu: setup
	bash reproductions/setup-cpu-venv.sh .venv-vllm
	$(BIN)/kvkb verify --backend cpu --python .venv-vllm/bin/python

# After changing a dependency range in pyproject.toml: re-resolve and commit uv.lock.
lock: | $(UV)
	$(UV) lock

# CI: the committed lock still matches pyproject.toml (fails, naming the difference, when it does not)
lock-check: | $(UV)
	$(UV) lock --check

clean:
	rm -rf $(VENV) site .pytest_cache build/npm build/uv
