# Two commands on a fresh machine with Python 3.11:
#   make book   set up .venv and build _build/html/index.html, every chapter executed
#   make test   the same set-up, then unit tests, every chapter through nbval, and a browser check
# Set-up runs only when its inputs change, so a second `make book` needs no network.

VENV      := .venv
STAMP     := $(VENV)/.setup-done
SETUP_IN  := requirements/lock.txt pyproject.toml js/package-lock.json scripts/setup_env.sh
PY        := $(VENV)/bin/python
NOTEBOOKS := $(sort $(wildcard book/*.ipynb))
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
export PYDEVD_DISABLE_FILE_VALIDATION := 1
# Spinning OpenMP threads made steps 8-15x slower whenever the 2 cores were shared (benchmarks).
export OMP_WAIT_POLICY := PASSIVE

.PHONY: setup book test unit nbval browser bench notebooks clean help

help:
	@echo "make book | make test | make bench | make notebooks (re-execute chapters in place) | make clean"

setup: $(STAMP)

$(STAMP): $(SETUP_IN)
	bash scripts/setup_env.sh
	touch $@

book: setup
	$(VENV)/bin/jupyter-book build . --builder html
	@test -f _build/html/index.html && echo "book: _build/html/index.html"

# The browser check reads the built book, so `test` builds it first.
test: book
	bash scripts/ensure_chromium.sh
	TOKENDYN_REQUIRE_BOOK=1 $(VENV)/bin/pytest tests $(NOTEBOOKS) --nbval-lax --nbval-current-env \
		--nbval-cell-timeout=1200 -p no:cacheprovider

unit: setup
	$(VENV)/bin/pytest tests -m "not browser" -p no:cacheprovider

nbval: setup
	$(VENV)/bin/pytest $(NOTEBOOKS) --nbval-lax --nbval-current-env --nbval-cell-timeout=1200 -p no:cacheprovider

browser: book
	bash scripts/ensure_chromium.sh
	TOKENDYN_REQUIRE_BOOK=1 $(VENV)/bin/pytest tests -m browser -p no:cacheprovider

bench: setup
	$(PY) benchmarks/run.py

# Re-execute every chapter in place at its defaults (the committed outputs nbval compares with).
notebooks: setup
	cd book && for nb in $(notdir $(NOTEBOOKS)); do \
		../$(VENV)/bin/jupyter nbconvert --to notebook --execute --inplace $$nb || exit 1; done

clean:
	rm -rf _build
