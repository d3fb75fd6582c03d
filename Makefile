# Two commands a new user needs: `make demo` and `make test`. Both install from a lockfile first:
# `make demo` what the wheel needs and nothing else (requirements.lock: no extra), `make test` that plus the
# `dev`, `dask` and `s3` extras and the docs (requirements-dev.lock, the same pins for what both hold).
# `make docs` builds the site in a small venv of its own (requirements-docs.lock). docs/installing.md says more.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# One stamp per lock: `make demo` then `make test` in one checkout adds the dev lock on top of the runtime one.
RUNTIME := $(VENV)/.installed-runtime
DEV     := $(VENV)/.installed-dev

# No network here and no telemetry wanted anywhere Prefect runs.
export DO_NOT_TRACK := 1
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS ?= 90

DOCS_VENV := .venv-docs
# Bytecode for the venv and the project, compiled once at install, in parallel (about 10 s on two cores).
# Where PYTHONDONTWRITEBYTECODE is set (it is on the machine this project is built on), Python caches nothing it
# compiles: every command compiled its ~600 modules again (1.6 s), and Prefect's server its own at each start.
COMPILE = $(BIN)/python -m compileall -q -j 0 $(VENV)/lib src

.PHONY: install demo test bench lock sandbox docs reference pyright clean

# A developer's venv: everything `make test` needs.
install: $(DEV)

$(RUNTIME): requirements.lock pyproject.toml
	$(PYTHON) -m venv $(VENV)
	@# --no-deps: each lock holds every pin (uv wrote them), so pip installs them as they are. Resolving again,
	@# pip 23 in hash mode refuses a dependency asked for with an extra (httpx[http2]) once a newer release of it
	@# is out. pip check then says whether the lock missed one.
	@# --no-compile: pip compiles one file at a time; $(COMPILE) below does it in parallel.
	$(BIN)/python -m pip install --quiet --no-compile --no-deps --require-hashes -r requirements.lock
	@# The editable build prints a long, harmless setuptools notice: show it only if the install fails.
	$(BIN)/python -m pip install --quiet --no-deps -e . 2>/dev/null || $(BIN)/python -m pip install --no-deps -e .
	$(BIN)/python -m pip check
	$(COMPILE)
	touch $(RUNTIME)

$(DEV): $(RUNTIME) requirements-dev.lock
	$(BIN)/python -m pip install --quiet --no-deps --require-hashes -r requirements-dev.lock
	$(BIN)/python -m pip check
	$(COMPILE)
	touch $(DEV)

demo: $(RUNTIME)
	$(BIN)/fleet refresh data/sample_fleet.csv
	@# Every refresh writes the fleet report next to the lake: one HTML file, opens offline.
	@test -f data/lake/report.html && echo "Fleet report: $(CURDIR)/data/lake/report.html (open it in a browser)"
	@test -f data/lake/todo.csv && echo "To-do list: $(CURDIR)/data/lake/todo.csv (for spreadsheets)"

# Three workers on two cores (much of a test is waiting on a subprocess), a whole test file per worker: a file's
# module fixtures (servers, sandboxes, killed runs) start once. Then the tests marked `alone`: Prefect's own
# worker, stopped mid-run, did not stop its flow run within the bound while three test workers loaded the box
# (it waited for the flow run to complete); that is left open, and said so in docs/stopping.md.
test: install
	$(BIN)/python -m pytest -q -n 3 --dist loadfile -m "not bench and not alone"
	$(BIN)/python -m pytest -q -m alone

bench: install
	$(BIN)/python -m pytest -q -m bench -s tests/bench

sandbox: $(RUNTIME)
	$(BIN)/fleet sandbox

# The docs site, strict (a broken link or anchor fails), into site/: only mkdocs and its theme are installed.
docs: $(DOCS_VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(DOCS_VENV)/bin/mkdocs build --strict

$(DOCS_VENV)/.installed: requirements-docs.lock
	$(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/python -m pip install --quiet --no-compile --no-deps --require-hashes -r requirements-docs.lock
	$(DOCS_VENV)/bin/python -m pip check
	touch $@

# Stock pyright with the repository's configuration ([tool.pyright]): every import resolves, `fleet_data`'s included
# (editors' go-to-definition). CI runs it (.ci/run); minutes on a busy machine, so not in `make test`.
pyright: install
	$(BIN)/pyright

# The reference pages (docs/reference/), written again from the code after an option, command or variable
# changed; tests/flows/test_cli_help.py fails until they are.
reference: $(RUNTIME)
	$(BIN)/python -m fleet_data.flows.cli.reference

# Re-pin after editing pyproject.toml (needs uv: pip install uv). uv keeps the pins already in the files
# unless told otherwise (make lock UPGRADE=--upgrade). The dev lock is constrained by the runtime one, so
# `make test` tests the very versions `make demo` installs.
UPGRADE ?=
lock:
	uv pip compile pyproject.toml $(UPGRADE) --python-version 3.11 --generate-hashes -o requirements.lock
	uv pip compile pyproject.toml $(UPGRADE) --extra dev --extra dask --extra s3 --group docs -c requirements.lock \
		--python-version 3.11 --generate-hashes -o requirements-dev.lock
	uv pip compile --group docs -c requirements-dev.lock --python-version 3.11 --generate-hashes -o requirements-docs.lock

clean:
	rm -rf $(VENV) $(DOCS_VENV) .pytest_cache .mypy_cache .ruff_cache
