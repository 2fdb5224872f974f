# cbdt: two commands do all set-up on a fresh machine.
#   make book   create .venv (first use), install -e .[book,scale], build the HTML book into _build/html
#   make test   create/update .venv with .[book,test,scale], run every test (unit, property, nbval,
#               every chapter in class mode, portability on generic kernels, book -W, browser,
#               student edition)
#   make pdf    print the whole book to _build/pdf/cbdt-book.pdf (Chromium, offline)
#   make downloads  the book with every download the intro page links: the notebooks as zips
#               (student and instructor editions; every book build writes them) and the PDF
#   make student  the student edition (no solutions): _build/student/notebooks and _build/student/html
#   make lab    open the notebooks in JupyterLab
#   make bench  run the speed benchmarks
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CONSTRAINTS := requirements/constraints.txt
# notebooks re-run by nbval at once, each in its own worker (pytest-xdist, one notebook per
# worker: --dist loadfile keeps a notebook's cells in order); 8 min instead of 11 on 2 cores
NBVAL_WORKERS ?= 2
# The kernel matrix: `make test` runs the unit tests and the notebook check natively and again on
# the generic leg (scripts/kernel_env.py: torch's ATen without vectorisation, OpenBLAS's oldest
# core, numpy's SIMD dispatch off, MKL_CBWR=COMPATIBLE), the stand-in for a CPU with other vector
# units (AVX-512, AVX2, SSE, NEON add in other orders); each run prints the kernels it used
# (TESTING.md). The generic leg re-runs every notebook but the four long ones (ch. 07-10, 8-10
# minutes of the 2-core budget); their networks are retrained on the generic leg, one seed each,
# by tests/test_portability.py.
GENERIC_KERNELS = env $$($(BIN)/python scripts/kernel_env.py generic)
PORTABLE_NOTEBOOKS := $(filter-out notebooks/07_% notebooks/08_% notebooks/09_% notebooks/10_%, \
  $(wildcard notebooks/[0-9][0-9]_*.ipynb))
# unit tests that compute nothing with the kernels (packaging, the house, the student edition's
# text): run once, natively
NATIVE_ONLY_TESTS := --ignore=tests/test_wheel.py --ignore=tests/test_house.py \
  --ignore=tests/test_student_edition.py --ignore=tests/test_publishing.py
# explorer cells carry the nbval-ignore-output tag, so nbval never compares their static twins
# (tests/test_widgets.py and the browser test check those): CBDT_STATIC_TWIN=0 skips rendering
# them (about 40 s of ch. 01 alone)
# tests/nbcheck.py: nbval's runner with a comparison rounding cannot break (printed floats within
# one unit of their last digit, words and integers exactly), figures compared by RMS, and every
# exercise's and solution's code run after its chapter (TESTING.md)
NBVAL = CBDT_STATIC_TWIN=0 PYTHONPATH=tests $(BIN)/pytest -p nbcheck --nbcheck \
  --nbval-sanitize-with tests/nbval_sanitize.cfg \
  --nbval-cell-timeout=600 -p no:randomly -q -n $(NBVAL_WORKERS) --dist loadfile
TORCH_PIN := $(shell grep -E '^torch==' $(CONSTRAINTS))
# where pip finds that torch: empty = pip's own configuration (here a CPU build on local
# disk); elsewhere on Linux, PyPI's torch is a CUDA build of several GB, so pass
# TORCH_INDEX=https://download.pytorch.org/whl/cpu for the CPU build
TORCH_INDEX ?=
TORCH_INSTALL = $(BIN)/pip install --quiet $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) "$(TORCH_PIN)"
# stamps record what was installed; they are rebuilt when pyproject.toml or the pins change
BOOK_STAMP := $(VENV)/.installed-book
TEST_STAMP := $(VENV)/.installed-test
JB := $(BIN)/jupyter-book
export PYTHONHASHSEED := 0

.PHONY: book test unit doctest nbval class-test nbval-generic exercises portability portability-reference book-strict browser lab-browser lint \
  lab bench \
  student student-test \
  vendor pdf downloads clean help

help:
	@echo "make book   build the HTML book (creates .venv on first use)"
	@echo "make test   run every test: unit + property, nbval, portability, strict book build, browser,"
	@echo "            student edition"
	@echo "make pdf    print the whole book to one PDF, _build/pdf/cbdt-book.pdf"
	@echo "make downloads  the book with the downloads its intro links: notebook zips and the PDF"
	@echo "make student  the student edition, every exercise and no solution: _build/student/notebooks"
	@echo "             (open with .venv/bin/jupyter lab _build/student/notebooks) and _build/student/html"
	@echo "make lab    open JupyterLab on notebooks/"
	@echo "make bench  run benchmarks/"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(BOOK_STAMP): pyproject.toml $(CONSTRAINTS) | $(BIN)/python
	$(TORCH_INSTALL)
	$(BIN)/pip install --quiet -c $(CONSTRAINTS) -e ".[book,scale]"
	touch $@

$(TEST_STAMP): pyproject.toml $(CONSTRAINTS) | $(BIN)/python
	$(TORCH_INSTALL)
	$(BIN)/pip install --quiet -c $(CONSTRAINTS) -e ".[book,test,scale]"
	touch $@ $(BOOK_STAMP)

# MathJax, require.js and the widget manager, served from the book so it works offline
vendor: _vendor/.complete
_vendor/.complete: scripts/vendor_assets.sh
	bash scripts/vendor_assets.sh _vendor

# The repository URL lives in pyproject.toml ([project.urls] Repository). Unset: the book is built
# from _config.yml and links to no external service. Set: scripts/book_config.py writes
# _build/_config.publish.yml with the repository, issue and launch (Binder, Colab) buttons.
BOOK_CONFIG = $(BIN)/python scripts/book_config.py

book: $(BOOK_STAMP) _vendor/.complete
	cfg="$$($(BOOK_CONFIG))"; $(JB) build . --keep-going --config "$$cfg"
	@echo "Book built: file://$(CURDIR)/_build/html/index.html"

lint: $(TEST_STAMP)
	$(BIN)/ruff check cbdt tests benchmarks scripts
	$(BIN)/python scripts/lab_markup.py --check notebooks/[0-9][0-9]_*.ipynb
	$(BIN)/actionlint -shellcheck $(BIN)/shellcheck .github/workflows/*.yml

# one test file per worker (some files share module-level fixtures); about 2:25 instead of
# 3:20 on 2 cores
UNIT = $(BIN)/pytest tests -m "not browser and not portability and not classmode" --ignore=tests/test_browser.py -q \
  -n $(NBVAL_WORKERS) --dist loadfile
unit: $(TEST_STAMP)
	$(UNIT)

# the examples in the library's docstrings (the API reference, book/api.md, shows them)
doctest: $(TEST_STAMP)
	$(BIN)/pytest --doctest-modules cbdt -q -p no:randomly -n 0

nbval: $(TEST_STAMP)
	$(NBVAL) notebooks/

# the generic leg of the kernel matrix: the unit tests, every network the book trains (one seed
# each) against tests/portability_reference.json, and the notebook check of every chapter but
# ch. 07-10, all on generic kernels
portability: $(TEST_STAMP)
	$(GENERIC_KERNELS) $(UNIT) $(NATIVE_ONLY_TESTS)
	$(GENERIC_KERNELS) $(BIN)/pytest tests/test_portability.py -m portability -p no:randomly \
	  -q -rA -n $(NBVAL_WORKERS)
	$(GENERIC_KERNELS) $(NBVAL) $(PORTABLE_NOTEBOOKS)

# the whole notebook check on the generic leg (12-15 minutes on 2 cores; not in make test)
nbval-generic: $(TEST_STAMP)
	$(GENERIC_KERNELS) $(NBVAL) notebooks/

# every chapter as a student runs it in class: CLASS_MODE = True in its first cell, a fresh
# kernel, Run All (scripts/class_run.py); the budget must be met and the verdicts must be the
# full run's (tests/test_class_mode.py). One chapter at a time, as on a student's laptop.
class-test: $(TEST_STAMP)
	$(BIN)/pytest tests/test_class_mode.py -m classmode -q -p no:randomly -rP -n 0

# rewrite book/_exercises/*.json from what the exercises' and solutions' code prints now (after an
# intended change; read the diff)
exercises: $(TEST_STAMP)
	$(NBVAL) --nbcheck-write-exercises notebooks/

# rewrite tests/portability_reference.json on this machine's native kernels (after an intended
# change of a trained result, together with re-executing the notebooks)
portability-reference: $(TEST_STAMP)
	CBDT_WRITE_PORTABILITY=1 $(BIN)/pytest tests/test_portability.py -m portability \
	  -p no:randomly -q -n 0 -k trained_results

book-strict: $(TEST_STAMP) _vendor/.complete
	rm -rf _build/html _build/.doctrees
	cfg="$$($(BOOK_CONFIG))"; $(JB) build . -W -n --keep-going --config "$$cfg"
	CBDT_BUILT_HTML=_build/html $(BIN)/pytest tests/test_downloads.py -q -p no:randomly \
	  -p no:xdist -p no:nbval
	@echo "Book built: file://$(CURDIR)/_build/html/index.html"

# two Chromium workers (pytest-xdist; each serves the book and caches its page loads): the axe,
# phone and weight checks of every page in two themes take about 7 minutes in one
# the instructor edition; the student edition's accessibility, phone and weight checks run in
# student-test, after its HTML is written
browser: $(TEST_STAMP) book-strict
	@if [ -x /usr/bin/chromium ]; then \
	  $(BIN)/pytest tests/test_browser.py -m browser -q -k "not student" -n $(NBVAL_WORKERS) --dist load; \
	else \
	  echo "SKIPPED the browser test: /usr/bin/chromium is not installed (apt-get install -y chromium)."; \
	fi

# JupyterLab (jupyterlab-myst) in headless Chromium: ch. 01 and 04 run, their MyST renders, the
# solutions are folded and an explorer moves (tests/test_lab_browser.py)
lab-browser: $(TEST_STAMP)
	@if [ -x /usr/bin/chromium ]; then \
	  $(BIN)/pytest tests/test_lab_browser.py -m browser -q -p no:randomly -p no:xdist -p no:nbval; \
	else \
	  echo "SKIPPED the JupyterLab test: /usr/bin/chromium is not installed (apt-get install -y chromium)."; \
	fi

# The student edition: every exercise, no solution (scripts/student_edition.py). The HTML shares
# the instructor build's environment (_build/.doctrees): after make book it only writes pages.
STUDENT := _build/student
STUDENT_HTML = $(BIN)/python scripts/student_edition.py html --config "$$cfg" --out $(STUDENT)/html

student: $(BOOK_STAMP) _vendor/.complete
	$(BIN)/python scripts/student_edition.py notebooks --out $(STUDENT)/notebooks
	cfg="$$($(BOOK_CONFIG))"; $(STUDENT_HTML)
	@echo "Student notebooks: $(STUDENT)/notebooks (.venv/bin/jupyter lab $(STUDENT)/notebooks)"
	@echo "Student book: file://$(CURDIR)/$(STUDENT)/html/index.html"

# make test: the student HTML written strictly (-W -n) from book-strict's environment, then
# checked against _build/html (the stripping itself is tested by `make unit`)
student-test: $(TEST_STAMP) book-strict
	cfg="$$($(BOOK_CONFIG))"; $(STUDENT_HTML) --strict
	CBDT_STUDENT_HTML=$(STUDENT)/html $(BIN)/pytest tests/test_student_edition.py::TestStudentHTML \
	  tests/test_downloads.py -q -p no:randomly -p no:xdist -p no:nbval
	@if [ -x /usr/bin/chromium ]; then \
	  CBDT_STUDENT_HTML=$(STUDENT)/html $(BIN)/pytest tests/test_browser.py -m browser -q -k student \
	    -p no:randomly -p no:nbval -n $(NBVAL_WORKERS) --dist load; \
	else \
	  echo "SKIPPED the student edition's browser checks: /usr/bin/chromium is not installed."; \
	fi

# one HTML page (singlehtml, the vendored MathJax) printed by playwright's Chromium
pdf: $(TEST_STAMP) _vendor/.complete
	@if [ ! -x /usr/bin/chromium ]; then \
	  echo "make pdf needs /usr/bin/chromium (apt-get install -y chromium)"; exit 1; fi
	$(BIN)/python scripts/print_pdf.py

# the book with every download of its intro page: make pdf (about 6 minutes on 2 busy cores:
# too slow for make book), then the HTML book, which copies the PDF beside the notebook zips
# (book/_ext/downloads.py); then the links are checked
downloads: pdf book
	CBDT_BUILT_HTML=_build/html CBDT_REQUIRE_PDF=1 $(BIN)/pytest tests/test_downloads.py -q \
	  -p no:randomly -p no:xdist -p no:nbval

test: lint unit doctest nbval class-test portability book-strict browser student-test lab-browser
	@echo "make test: all checks passed"

# JupyterLab on the checkout, opened at notebooks/ (so the chapters' links to book/ pages open);
# as root (a container) it needs --allow-root
lab: $(BOOK_STAMP)
	$(BIN)/jupyter lab --ServerApp.root_dir="$(CURDIR)" --LabApp.default_url=/lab/tree/notebooks \
	  $(if $(filter 0,$(shell id -u)),--allow-root)

bench: $(BOOK_STAMP)
	@for f in benchmarks/bench_*.py; do echo "== $$f"; $(BIN)/python $$f; done

clean:
	rm -rf _build _vendor
