# Entry points for a fresh clone (see README):
#   make demo   set up .venv, install podsim, run the demo end to end
#   make test   set up .venv with test extras, run every test tier (what CI runs)
#   make check  the quick tier for the inner loop: no slow, browser, Dask or golden tests
# Both are safe to run again: the venv is reused and reinstalled only when pyproject.toml changes.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
OUT    ?= out/demo

SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# The quick tier: every test not marked slow, e2e, dask or golden (markers in pyproject.toml).
QUICK  := not (slow or e2e or dask or golden)

.PHONY: demo test check lint bench clean browser

$(BIN)/python:
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "podsim needs Python >= 3.11, found " + sys.version.split()[0]'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev,dask]'
	@touch $@

demo: $(VENV)/.installed
	$(BIN)/podsim demo --out $(OUT)

# Browser tests (marked e2e) drive Debian's Chromium; browser downloads do not work here.
browser:
	@command -v chromium >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium chromium-driver >/dev/null; }
	@chromium --version

# Every tier. The engine matrix and the validation table's slow rows (pure CPU, most of the slow
# tier) run on two cores.
test: $(VENV)/.installed browser
	$(BIN)/python -m pytest -q --durations=15 --ignore=tests/test_engine_matrix.py --deselect tests/test_validation.py::test_every_row_holds_its_fidelity
	$(BIN)/python -m pytest -q --durations=5 -n 2 tests/test_engine_matrix.py tests/test_validation.py::test_every_row_holds_its_fidelity

check: $(VENV)/.installed
	$(BIN)/python -m pytest -q -m "$(QUICK)"

lint: $(VENV)/.installed
	$(BIN)/ruff check podsim tests benchmarks

bench: $(VENV)/.installed
	@for f in benchmarks/bench_*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) out .pytest_cache
