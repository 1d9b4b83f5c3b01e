# The two commands of the README. Each one creates the virtual environment it
# needs on first use (Python 3.11), so a fresh clone needs nothing else:
#   make test   run the whole test suite (unit tests + every notebook via nbval)
#   make book   build the HTML book from the notebooks' stored outputs, which
#               `make test` has just verified (_build/html; a few minutes)
#   make book-full  the same, executing every notebook again (for releases)
#   make test-wheel  the built wheel, without torch, on Python 3.12 and 3.13: the
#               package's unit tests from the installed copy (CI runs it)
#   make assignments  student notebooks, keys and autograders (_build/assignments)
#   make mutants  mutation check of the book, slow, not in CI (_build/mutants.md)
#   make check-pages  the built pages measured in headless Chromium (Debian's
#               chromium): nothing wider than its box (CI runs it after make book)
#   make dist   the sdist and the wheel in dist/, checked by twine (README, "Publishing")
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.mvkm-installed

.PHONY: book book-full test test-wheel env assignments gradebook mutants check-pages dist clean

# torch is installed first and pinned, so that the package's `torch>=2.1` finds it
# installed. From PyPI alone, pip resolves torch on Linux to the CUDA build (several GB,
# with some 19 nvidia-* packages); PyTorch's own index holds the CPU build:
#   make env TORCH_INDEX=https://download.pytorch.org/whl/cpu
# (pip then takes 2.13.0+cpu, which satisfies ==2.13.0). Empty by default: on the machine
# the Makefile was written on, pip's configuration already resolves a local CPU build.
TORCH_INDEX ?=
TORCH_PIP_INDEX := $(if $(strip $(TORCH_INDEX)),--extra-index-url $(strip $(TORCH_INDEX)))

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==2.13.0 $(TORCH_PIP_INDEX)
	$(BIN)/python -m pip install --quiet -e ".[book,test]"
	touch $(STAMP)

env: $(STAMP)

BOOK_FLAGS := --all -W -n --keep-going

book: $(STAMP)
	$(BIN)/jupyter-book build . $(BOOK_FLAGS)
	$(BIN)/python tests/check_offline_html.py _build/html

# _config.yml with `execute_notebooks: force`: every notebook executed by the build
book-full: $(STAMP)
	mkdir -p _build
	sed 's/^  execute_notebooks: "off"$$/  execute_notebooks: force/' _config.yml > _build/_config_full.yml
	grep -q '^  execute_notebooks: force$$' _build/_config_full.yml
	$(BIN)/jupyter-book build . $(BOOK_FLAGS) --config _build/_config_full.yml
	$(BIN)/python tests/check_offline_html.py _build/html

test: $(STAMP)
	$(BIN)/python -m pytest

# The package's own unit tests (not the book's, the gradings' or the project's):
# what `pip install mvkm` users get is tested with them on the other Pythons.
PACKAGE_TESTS := $(addsuffix .py,$(addprefix tests/test_,bad_inputs boundary covariance datasets edges_kernels \
                 evaluation features gram_compact hard_spectra kernels kpls linalg matfree optional plotting ppca \
                 memory_guard offsets ownership preimage reliability rkm sklearn_checks smm stiefel validation))
# Python versions for test-wheel: pyenv's interpreters where they are, else from PATH.
WHEEL_VERSIONS ?= 3.12 3.13
wheel_python = $(or $(firstword $(wildcard $(HOME)/.pyenv/versions/$(1).*/bin/python$(1))),python$(1))

# No torch, no reservoirpy, no sktime: the tests that need them skip, saying so (tests/conftest.py).
# One target per version, so that `make -j2 test-wheel` runs them side by side.
test-wheel: $(addprefix test-wheel-,$(WHEEL_VERSIONS))

_build/wheel/.built: $(STAMP) pyproject.toml $(wildcard mvkm/*.py mvkm/data/*)
	rm -rf _build/wheel && mkdir -p _build/wheel
	$(BIN)/python -m pip wheel . --no-deps --quiet -w _build/wheel
	touch $@

test-wheel-%: _build/wheel/.built
	rm -rf _build/venv-$*
	$(call wheel_python,$*) -m venv _build/venv-$*
	_build/venv-$*/bin/python -m pip install --quiet _build/wheel/mvkm-*.whl pytest hypothesis clarabel
	MVKM_TEST_INSTALLED=1 _build/venv-$*/bin/python -P -m pytest -o addopts="" -p no:cacheprovider \
	  -q -rs $(PACKAGE_TESTS)

# Needs a Chromium (apt-get install chromium, or CHROMIUM=/path/to/chrome); builds the book
# (make book) and measures the chapters of tools/reading_path.py's FRAMED. CI runs it
# beside test-wheel: `make -j3 check-pages book test-wheel` builds the book once.
check-pages: book
	$(BIN)/python tools/check_rendering.py _build/html

assignments: $(STAMP)
	$(BIN)/python tools/assignments.py _build/assignments

# A class's submissions into one CSV gradebook, graded in parallel:
#   make gradebook AUTOGRADER=_build/assignments/rkm-primal/autograder/rkm-primal-autograder_*.zip \
#        SUBMISSIONS=folder/ [GRADES=grades.csv] [JOBS=4]
GRADES ?= grades.csv
gradebook: $(STAMP)
	$(BIN)/python tools/assignments.py grade $(AUTOGRADER) $(SUBMISSIONS) -o $(GRADES) $(if $(JOBS),-j $(JOBS))

# One named fault at a time in a copy of mvkm/, every chapter notebook run against
# it; the report says which notebooks catch which fault (tests/mutants.py).
mutants: $(STAMP)
	$(BIN)/python tests/mutants.py --out _build/mutants.md

# The sdist and the wheel, from this tree (the version is mvkm/__init__.py's __version__),
# checked by twine; build and twine are installed into the environment on first use.
# Publishing is then one command: $(BIN)/python -m twine upload dist/*
dist: $(STAMP)
	rm -rf dist
	$(BIN)/python -m pip install --quiet build twine
	$(BIN)/python -m build --outdir dist .
	$(BIN)/python -m twine check --strict dist/*

clean:
	rm -rf _build dist $(VENV)
