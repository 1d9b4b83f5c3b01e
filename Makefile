# The two commands of the README. Each one creates the virtual environment it
# needs on first use (Python 3.11), so a fresh clone needs nothing else:
#   make book   build the HTML book, executing every notebook (_build/html)
#   make test   run the whole test suite (unit tests + every notebook via nbval)
#   make assignments  student notebooks, keys and autograders (_build/assignments)
#   make mutants  mutation check of the book, slow, not in CI (_build/mutants.md)
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.mvkm-installed

.PHONY: book test env assignments mutants clean

# torch is installed first and pinned: a bare `torch` requirement would pull
# a CUDA build of several GB; torch==2.13.0 resolves to the local CPU build.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e ".[book,test]"
	touch $(STAMP)

env: $(STAMP)

book: $(STAMP)
	$(BIN)/jupyter-book build . --all -W -n --keep-going
	$(BIN)/python tests/check_offline_html.py _build/html

test: $(STAMP)
	$(BIN)/python -m pytest

assignments: $(STAMP)
	$(BIN)/python tools/assignments.py _build/assignments

# One named fault at a time in a copy of mvkm/, every chapter notebook run against
# it; the report says which notebooks catch which fault (tests/mutants.py).
mutants: $(STAMP)
	$(BIN)/python tests/mutants.py --out _build/mutants.md

clean:
	rm -rf _build $(VENV)
