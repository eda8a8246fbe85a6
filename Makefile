# Entry points for a fresh clone (see README):
#   make demo   set up .venv with podsim's runtime dependencies only, run the demo end to end
#   make test   add the test tools (pytest, Hypothesis, Dask, MLCommons' Chakra reader, Chromium for the
#               browser tests) and run every test tier (what CI runs)
#   make check  the quick tier for the inner loop, on two cores: no slow, browser, Dask or golden tests
# All are safe to run again: the venv is reused and reinstalled only when pyproject.toml changes.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
OUT    ?= out/demo

# MLCommons' Chakra package, for the test that reads podsim's Chakra export with Chakra's own
# decoder (tests/test_chakra_mlcommons.py). Installed without its dependencies: they are for
# Chakra's trace linker (HolisticTraceAnalysis, which pulls in JupyterLab), not the decoder,
# which needs protobuf only (a podsim dependency).
CHAKRA := mlc-chakra==1.0.0

# The quick tier: every test not marked slow, e2e, dask or golden (markers in pyproject.toml).
QUICK  := not (slow or e2e or dask or golden)

.PHONY: demo test check lint bench clean browser

$(BIN)/python:
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "podsim needs Python >= 3.11, found " + sys.version.split()[0]'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Runtime dependencies only (what `make demo` and a user need).
$(VENV)/.runtime: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	@touch $@

# The test tools on top.
$(VENV)/.installed: $(VENV)/.runtime
	$(BIN)/python -m pip install --quiet -e '.[dev,dask]'
	$(BIN)/python -m pip install --quiet --no-deps '$(CHAKRA)'
	@touch $@

demo: $(VENV)/.runtime
	$(BIN)/podsim demo --out $(OUT)

# Browser tests (marked e2e) drive Debian's Chromium; browser downloads do not work here. Installed
# with apt-get when this is root on a machine that has it (only the two packages and what they
# need, nothing upgraded); elsewhere one line says what to install.
browser:
	@if command -v chromium >/dev/null 2>&1; then chromium --version; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-upgrade \
			--no-install-recommends chromium chromium-driver >/dev/null && chromium --version; \
	else \
		echo "make test: the browser tests need Chromium as 'chromium' on PATH; install it (Debian/Ubuntu: sudo apt-get install chromium chromium-driver; Fedora: sudo dnf install chromium chromedriver; macOS: brew install --cask chromium), then run make test again" >&2; \
		exit 1; \
	fi

# Every tier, on two cores; the browser and Dask tests (they start servers and clusters of their
# own) after, one at a time.
test: $(VENV)/.installed browser
	$(BIN)/python -m pytest -q --durations=15 -n 2 -m "not (e2e or dask)"
	$(BIN)/python -m pytest -q --durations=5 -m "e2e or dask"

check: $(VENV)/.installed
	$(BIN)/python -m pytest -q -n 2 -m "$(QUICK)"

lint: $(VENV)/.installed
	$(BIN)/ruff check podsim tests benchmarks

bench: $(VENV)/.installed
	@for f in benchmarks/bench_*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) out .pytest_cache
