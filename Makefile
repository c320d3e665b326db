# The two commands of the README: `make run` and `make test`. Each sets up what it needs.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: run test install tools bench report-card clean
MODE   ?= quick

run: install
	$(VENV)/bin/kafkapy server

test: install tools
	bash scripts/test.sh

install: $(STAMP)

$(STAMP): pyproject.toml setup.py $(wildcard ext/*/*.pyx ext/*/*.pxd)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip 'cython>=3.0' setuptools wheel
	$(PY) -m pip install -q -e '.[test]'
	# Editable installs import from the source tree, so build the extensions in place too.
	$(PY) setup.py -q build_ext --inplace
	touch $(STAMP)

tools: install
	bash scripts/install-test-tools.sh

bench: install tools
	$(PY) -m benchmarks.run

# The client libraries' own test suites against a fresh node each; rewrites docs/compatibility.md
# and the README's numbers. MODE=full runs librdkafka's whole suite (long).
report-card: install tools
	$(PY) compat-tests/report_card.py run --mode $(MODE) --report

clean:
	rm -rf $(VENV) .tools build kafkapy/*/_fast*.so kafkapy/*/_fast*.c
