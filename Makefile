# `make demo` and `make test` create the virtual environment when it is missing.
# The demo needs tilefx and its runtime dependencies only; the tests add the
# `test` extra (pytest, lit, onnxruntime, transformers, ...) on top.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
DEMO_STAMP := $(VENV)/.installed-demo
STAMP := $(VENV)/.installed

.PHONY: demo test lit pytest bench bench-speed bench-hf-speed fuzz opinfo clean

$(DEMO_STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	touch $(DEMO_STAMP)

$(STAMP): $(DEMO_STAMP)
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

demo: $(DEMO_STAMP)
	$(PY) examples/mnist_pipeline.py

test: pytest lit

pytest: $(STAMP)
	$(PY) -m pytest -q -n 2 --durations=25 tests

lit: $(STAMP)
	PATH=$(abspath $(VENV))/bin:$$PATH $(VENV)/bin/lit -q tests/lit

# FUZZ_ARGS="--ir 1000 --options 200" for a shorter campaign
fuzz: $(STAMP)
	$(PY) tests/fuzz/campaign.py $(FUZZ_ARGS)

# PyTorch's OpInfo database through tilefx (docs/robustness.md);
# OPINFO_ARGS="--ops 'linalg.*' --samples 1" for a part of it
OPINFO_STAMP := $(VENV)/.opinfo-installed
$(OPINFO_STAMP): $(STAMP)
	$(PY) -m pip install -q -e '.[opinfo]'
	touch $(OPINFO_STAMP)

opinfo: $(OPINFO_STAMP)
	$(PY) tests/fuzz/opinfo_sweep.py $(OPINFO_ARGS)

bench: $(STAMP)
	$(PY) benchmarks/bench_cnn.py

bench-speed: $(STAMP)
	$(PY) benchmarks/bench_speed.py

bench-hf-speed: $(STAMP)
	$(PY) benchmarks/bench_hf_speed.py

clean:
	rm -rf $(VENV)
