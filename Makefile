# rooflow: `make run` runs the default workflow and writes report.html; `make test` runs the tests.
# Both create the virtual environment (.venv) with the pinned dependencies first.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
CORES  ?= all
# Two pytest workers, one test file per work unit and the real workflow/cluster runs kept together
# (tests/conftest.py): the unit tests fill the cores the real runs leave idle. PYTEST_WORKERS= runs serially.
PYTEST_WORKERS ?= -n 2 --dist loadfile --no-loadscope-reorder

.PHONY: install run report test test-fast lint bench clean

install: $(VENV)/.installed

$(VENV)/.installed: requirements.txt requirements-dev.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install -r requirements.txt -r requirements-dev.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $@

run: install  ## the default workflow on this machine, then the self-contained HTML report
	$(BIN)/snakemake --cores $(CORES)
	$(BIN)/snakemake --report report.html
	@echo "open report.html (results in results/, logs in logs/)"

report: install
	$(BIN)/snakemake --report report.html

test: install  ## every test, including the real workflow run, the SLURM cluster and the browser check
	$(BIN)/python -m pytest $(PYTEST_WORKERS)

test-fast: install  ## unit tests only (seconds)
	$(BIN)/python -m pytest -m "not slow"

lint: install
	$(BIN)/ruff check rooflow scripts tests benchmarks
	$(BIN)/snakefmt --check Snakefile rules
	$(BIN)/snakemake --lint

bench: install  ## benchmarks: estimator speed, CPU ceilings, ncu aggregation and its CSV tokenizers, workflow DAG time, ncu distinct-mode op counts
	$(BIN)/python benchmarks/bench_estimate.py
	$(BIN)/python benchmarks/bench_estimate.py --module
	$(BIN)/python benchmarks/bench_ceilings.py
	$(BIN)/python benchmarks/bench_ncu_aggregate.py
	$(BIN)/python benchmarks/bench_csv_tokenizers.py
	$(BIN)/python benchmarks/bench_workflow_dag.py
	$(BIN)/python benchmarks/bench_distinct_ops.py

clean:
	rm -rf results logs report.html .snakemake
