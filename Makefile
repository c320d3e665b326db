# The two commands of the README: `make run` and `make test`. Each sets up what it needs.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# `make run` needs only the runtime dependencies; `make test` (and the tools) the test extra too.
RUN_STAMP := $(VENV)/.installed-run
# `make run PORT=19092`: the client port; the controller listens on the next one unless
# CONTROLLER_PORT says otherwise (the node derives its voter from its listeners).
# Only from make's command line: many dev containers export PORT for web apps.
ifneq ($(origin PORT),command line)
PORT   := 9092
endif
CONTROLLER_PORT ?= $(shell expr $(PORT) + 1)

.PHONY: run test lint install install-run tools bench report-card clean fuzz fuzz-seeds fuzz-preauth
MODE   ?= quick

run: install-run
	$(VENV)/bin/kafkapy server --override listeners=PLAINTEXT://127.0.0.1:$(PORT),CONTROLLER://127.0.0.1:$(CONTROLLER_PORT)

test: install tools
	bash scripts/test.sh

# The static checks alone (import contracts, ruff, mypy); `make test` runs them first.
lint: install
	bash scripts/lint.sh

install: $(STAMP)

install-run: $(RUN_STAMP)

# $(1): what to install editable: '.' (runtime) or '.[test]' (everything).
define install_venv
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip 'cython>=3.0' setuptools wheel
	$(PY) -m pip install -q -e '$(1)'
	# Editable installs import from the source tree, so build the extensions in place too.
	$(PY) setup.py -q build_ext --inplace
endef

$(RUN_STAMP): pyproject.toml setup.py $(wildcard ext/*/*.pyx ext/*/*.pxd)
	$(call install_venv,.)
	touch $(RUN_STAMP)

# The full install covers the runtime one too.
$(STAMP): pyproject.toml setup.py $(wildcard ext/*/*.pyx ext/*/*.pxd)
	$(call install_venv,.[test])
	touch $(STAMP) $(RUN_STAMP)

tools: install
	bash scripts/install-test-tools.sh

bench: install tools
	$(PY) -m benchmarks.run

# The client libraries' own test suites against a fresh node each; rewrites docs/compatibility.md
# and the README's numbers. MODE=full runs librdkafka's whole suite (long).
report-card: install tools
	$(PY) compat-tests/report_card.py run --mode $(MODE) --report

# A long fuzz campaign against a fresh node (docs/fuzzing.md); the summary and reproducer frames
# land in $(FUZZ_OUT). `make fuzz-seeds` re-records the committed seed corpus from the stock clients.
FRAMES   ?= 1000000
SEED     ?= 1
FUZZ_OUT ?= .fuzz/seed-$(SEED)
fuzz: install
	$(PY) -m kafkapy.testing.fuzz run --frames $(FRAMES) --seed $(SEED) --out $(FUZZ_OUT)

# The pre-authentication surface of a secured listener (sasl_ssl, sasl_plaintext or ssl), for
# ten minutes at the most: `make fuzz-preauth LISTENER=sasl_plaintext`.
LISTENER ?= sasl_ssl
fuzz-preauth: install
	$(PY) -m kafkapy.testing.fuzz run --listener $(LISTENER) --frames $(FRAMES) --seed $(SEED) \
		--time-budget 600 --out .fuzz/preauth-$(LISTENER)-$(SEED)

fuzz-seeds: install tools
	$(PY) -m kafkapy.testing.fuzz record

clean:
	rm -rf $(VENV) .tools build kafkapy/*/_fast*.so kafkapy/*/_fast*.c
