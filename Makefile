# Every target creates or updates .venv first, so a fresh clone needs only python3 (>= 3.11),
# make, and (for the offline MathJax) npm.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
MATHJAX := book/_mathjax/_static/mathjax/tex-chtml.js

.PHONY: setup book book-clean serve test check toc exercises grade lab browser clean help

help:
	@echo "make book       set up .venv and build the book into book/_build/html"
	@echo "make serve      serve the built book on http://127.0.0.1:8000 (search with excerpts)"
	@echo "make test       set up .venv and run the whole test suite (CH=07: one chapter's tests)"
	@echo "make check      lint and the fast tests: no book build, no grading (2-3 minutes)"
	@echo "make toc        write book/_toc.yml and the intro's chapter table from book/chapters.yml"
	@echo "make exercises  regenerate exercises/ from solutions/ with nbgrader (FORCE=1: over local edits)"
	@echo "make grade ASSIGNMENT=ch01_bigrams   autograde submitted/ (instructors)"
	@echo "make lab        JupyterLab on 127.0.0.1 for learners and instructors (formgrader)"
	@echo "make clean      remove build output (keeps .venv)"

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[book,grading,dev]"
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 --display-name "Python 3" >/dev/null
	touch $(STAMP)

setup: $(STAMP) $(MATHJAX)

# MathJax 3 from the npm registry, served by the book itself so pages typeset math offline.
$(MATHJAX):
	bash book/fetch_mathjax.sh book/_mathjax/_static/mathjax

book: setup
	$(BIN)/jupyter-book build book --builder html

book-clean:
	rm -rf book/_build

# The built book over HTTP on 127.0.0.1: opened as a file, its search finds titles only.
PORT ?= 8000
serve:
	@test -f book/_build/html/index.html || { echo "no built book: run make book first"; exit 1; }
	$(PYTHON) -m http.server $(PORT) --bind 127.0.0.1 --directory book/_build/html

# Two workers (units of work in tests/conftest.py): the book build with its page tests on one,
# the grading runs and the rest on the other. JOBS=0 runs everything in one process.
JOBS ?= 2
test: setup browser
	$(BIN)/python -m pytest $(if $(filter-out 0,$(JOBS)),-n $(JOBS)) $(if $(CH),--chapter $(CH)) --durations=25

# The fast loop, on the same two workers as `make test` (JOBS=0: one process). Order-only on
# the stamp: an existing .venv is used as it is (`make setup` updates it).
check: | $(STAMP)
	$(BIN)/ruff check --no-cache .
	$(BIN)/ruff format --no-cache --check .
	$(BIN)/python -m pytest -m "not slow" -q $(if $(filter-out 0,$(JOBS)),-n $(JOBS))

toc: | $(STAMP)
	$(BIN)/python book/_ext/manifest.py

# One nbgrader assignment per folder of solutions/. nbgrader records each in gradebook.db
# (gitignored) and runs `alembic`, which it finds on PATH (mini_llm.grading.release puts the
# venv's bin first). It refuses while exercises/ holds changes git does not hold (a learner's
# answers?); FORCE=1 regenerates anyway, after copying them into .release-backup/.
exercises: $(STAMP)
	$(BIN)/python -m mini_llm.grading.release $(if $(filter 1,$(FORCE)),--force)

grade: setup
	$(BIN)/mini-llm grade $(ASSIGNMENT)

# JupyterLab for learners and instructors, on 127.0.0.1: the venv's bin first on PATH (nbgrader
# runs `alembic` from it, or formgrader hangs on "Loading"), started in the course folder whose
# nbgrader_config.py sets the exchange and the offline math. COURSE: another course folder;
# LAB_ARGS: more options for `jupyter lab` (e.g. --no-browser --port 8890).
COURSE ?= .
lab: | $(STAMP) $(MATHJAX)
	cd "$(COURSE)" && PATH="$(abspath $(BIN)):$$PATH" "$(abspath $(BIN))/jupyter" lab \
	  --ip=127.0.0.1 $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS)

# Headless Chromium for the rendered-book tests and bubblewrap for the grader's sandbox
# (Debian's packages; need root to install).
browser:
	@command -v chromium >/dev/null && command -v bwrap >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium bubblewrap >/dev/null; \
	  else echo "Tests need Debian's chromium and bubblewrap: sudo apt-get install chromium bubblewrap"; fi; }

clean: book-clean
	rm -rf test-artifacts .pytest_cache
