# reprobook: `make book` builds everything from scratch; `make test` runs what CI runs.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
RB     := $(VENV)/bin/reprobook
PROFILE ?= smoke
JOBS   ?= 2

.PHONY: book test unit chapters nbval html e2e bench clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# torch==2.13.0 is pinned in pyproject.toml: the CPU build that lies on this machine's disk.
	$(PY) -m pip install --quiet -e '.[test,anchors]'
	touch $@

## make book: install, run every chapter at $(PROFILE), build the HTML book, print its path
book: $(VENV)/.installed
	$(RB) run --all --profile $(PROFILE) --jobs $(JOBS)
	$(RB) book --profile $(PROFILE) --quiet

## make test: unit tests, every chapter at smoke with expected verdicts, nbval, book, browser, Dask
test: $(VENV)/.installed unit chapters nbval html e2e

# Both cores: pytest-xdist; nbval keeps each notebook on one worker (its cells run in order).
unit: $(VENV)/.installed
	TRITON_INTERPRET=1 $(PY) -m pytest tests -m "not e2e" -q -p no:cacheprovider -n $(JOBS)

# The kernels chapters time their kernels: they run first and alone, so that no neighbouring
# chapter skews their speed ratios; the second command then skips them as up to date.
chapters: $(VENV)/.installed
	$(RB) toc --check
	$(RB) run --part kernels --profile smoke --jobs 1
	$(RB) run --all --profile smoke --jobs $(JOBS)

nbval: $(VENV)/.installed
	REPROBOOK_STATIC=1 $(PY) -m pytest --nbval-lax runs/smoke -q -p no:cacheprovider \
	    --nbval-cell-timeout=600 --nbval-sanitize-with nbval-sanitize.cfg -n $(JOBS) --dist loadfile

html: $(VENV)/.installed
	$(RB) book --profile smoke --quiet

e2e: $(VENV)/.installed
	$(PY) -m pytest tests -m e2e -q -p no:cacheprovider

bench: $(VENV)/.installed
	$(RB) bench kernels --quick

clean:
	rm -rf _build runs
