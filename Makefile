VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8080
DEMO_PORT ?= 8090

.PHONY: run test lint bench bench-fleet soak install services clean

install: $(VENV)/.installed

# The workspace's members (each a distribution: pyproject.toml, "The workspace"), editable, and
# the workspace's own `dev` extra; pip takes each member's dependency on another from this
# command line, never from an index.
MEMBERS := libs/core libs/client libs/gateway libs/db services/proxy services/control-plane services/demo services/cli

$(VENV)/.installed: pyproject.toml $(addsuffix /pyproject.toml,$(MEMBERS))
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $(addprefix -e ,$(MEMBERS)) -e '.[dev]'
	touch $@

services:
	@scripts/ensure-services
	@scripts/ensure-browser
	@scripts/ensure-promtool

lint: install
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python scripts/check_module_size.py

# Everything not marked `serial` on three workers (on two cores: they wait on processes and
# timers much of the time; 203 s against 278 s with two), a whole file per worker at a time (module
# fixtures stay in one process); the files with `slow` tests (processes, a wheel build, 1 M-row
# EXPLAINs) are collected first and `--no-loadscope-reorder` keeps them first, so the quick
# files fill the workers' tails. `lint` runs beside that phase (mypy from a cold cache is
# a minute and a half of one core, and the workers leave a core's worth idle while they wait
# on processes); its output follows the phase's, and either failing fails `make test`. Then
# the `serial` ones (they measure time across processes) alone, so they never share the
# machine with a worker. docs/development.md, "Markers".
test: install services
	@lint_out=$$(mktemp); \
	{ $(MAKE) --no-print-directory lint > "$$lint_out" 2>&1; echo $$? >> "$$lint_out.rc"; } & \
	$(BIN)/pytest -q -n 3 --dist loadfile --no-loadscope-reorder -m 'not serial'; tested=$$?; \
	wait; echo "--- make lint (run beside the tests above)"; cat "$$lint_out"; \
	linted=$$(cat "$$lint_out.rc"); rm -f "$$lint_out" "$$lint_out.rc"; \
	test "$$tested" -eq 0 && test "$$linted" -eq 0
	$(BIN)/pytest -q -m serial

run: install
	@DEMO_PORT=$(DEMO_PORT) scripts/run-demo $(HOST) $(PORT)

bench: install services
	$(BIN)/python -m bench.run

# A fleet of agent-like workers against a provider-fidelity mock (token buckets, rate-limit
# headers); ~3 minutes; not part of `make test` (docs/performance.md, "Third wave: the fleet")
bench-fleet: install services
	$(BIN)/python -m bench.fleet

soak: install services
	$(BIN)/python -m bench.soak $(SOAK_ARGS)

clean:
	rm -rf $(VENV) leasegate.db .pytest_cache .mypy_cache .ruff_cache
