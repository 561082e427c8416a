# The two commands a fresh machine needs (README): `make run` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
EXAMPLE := matcher/examples/engine-core-max-model-len.log

.PHONY: run test setup site lint verify-cpu clean

$(BIN)/kvkb: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	@touch $@

setup: $(BIN)/kvkb

# Main job: build the site strictly, then match a bundled docker-logs example.
run: setup
	$(BIN)/kvkb lint
	$(BIN)/mkdocs build --strict --site-dir site
	$(BIN)/kbmatch $(EXAMPLE)

test: setup
	$(BIN)/python -m pytest -q

# CPU reproductions against real vLLM (its own venv: its pins must not constrain ours).
verify-cpu: setup
	bash reproductions/setup-cpu-venv.sh .venv-vllm
	$(BIN)/kvkb verify --backend cpu --python .venv-vllm/bin/python

clean:
	rm -rf $(VENV) site .pytest_cache
