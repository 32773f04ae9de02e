# The two commands a fresh machine needs. Each makes .venv and installs the project first.
#   make demo   runs the main job (tracker demo) on the embedded store in runs/
#   make test   runs the whole test suite
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)

.PHONY: demo test install

$(STAMP): pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	@# uv when it can be had (about 25 s here), else pip (about 100 s): tools/install.py says why
	$(VENV)/bin/python tools/install.py
	@# pip compiles the 15,600 modules one by one (about 80 s here); this spreads them over the
	@# cores. One module of torch's tests is Python 3.12 syntax, and pip skips it as well. The
	@# packages' own test suites (3,400 modules: pandas, sympy, scipy...) are never imported here.
	$(VENV)/bin/python -m compileall -qq -j 0 -x 'py312_intrinsics|/tests/' $(VENV)/lib \
		|| echo "compileall: some modules did not compile; they compile when imported"
	@# tracker's own modules too: every measuring child and CLI process would compile them again
	@# (this machine sets PYTHONDONTWRITEBYTECODE, so an import never writes them)
	$(VENV)/bin/python -m compileall -qq -j 0 tracker
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/tracker demo

test: $(STAMP)
	@# Two workers on two cores: half the suite's time is MLflow, DuckDB, LightGBM and process starts,
	@# which the second core takes. Not three: 0.9.14 ran three, and on CI's machine the quick demo's
	@# measurements, beside two other workers, came out too imprecise to learn from (README).
	@# Each worker measures under device locks of its own, on one OpenMP thread; tests marked alone,
	@# and the quick demo while it measures, run while no other test does (tests/conftest.py)
	$(VENV)/bin/python -m pytest -n 2 --dist loadgroup
