# ragsift — everyday targets. `make help` lists them.
SHELL := /bin/bash
PY := .venv/bin/python
# Tests and benches start many Python processes: let them keep bytecode (a shell with
# PYTHONDONTWRITEBYTECODE set made each one compile scipy, pydantic and ragsift again)
unexport PYTHONDONTWRITEBYTECODE

.DEFAULT_GOAL := help
.PHONY: help install lock demo test unit e2e-faults lint format bench bench-quick bench-scale bench-plots services-up services-down services-status deploy-tools schemas clean

help: ## Show this help
	@grep -E '^[a-zA-Z0-9_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2}'

install: ## Create .venv with the locked dependencies (cached outside the repo)
	@scripts/install

lock: ## Re-resolve requirements.lock and requirements-runtime.lock after pyproject.toml changes
	@scripts/lock

demo: install ## Run the main job on the embedded default (no servers needed)
	@.venv/bin/ragsift demo

test: ## Install, start Kafka + Redis, run unit, integration and e2e tests, stop them
	@scripts/test

unit: install ## Unit tests only (no services)
	@$(PY) -m pytest tests/unit -q -n 2

lint: install ## ruff (lint + format check) and mypy
	@.venv/bin/ruff check ragsift tests bench
	@.venv/bin/ruff format --check ragsift tests bench
	@.venv/bin/mypy

format: install ## Apply ruff formatting and safe fixes
	@.venv/bin/ruff check --fix ragsift tests bench
	@.venv/bin/ruff format ragsift tests bench

e2e-faults: ## The full fault suite and soak: 10,000 queries per fault, 3-minute soak, both runtimes (~10 min)
	@RAGSIFT_FAULT_QUERIES=10000 RAGSIFT_SOAK_SECONDS=180 scripts/test tests/e2e/test_faults.py

bench: install ## Run every benchmark (starts Kafka + Redis); prints one JSON document
	@scripts/services up
	@eval "$$(scripts/services env)"; $(PY) bench/suite.py

bench-quick: install ## Every benchmark at a small size (checks the benches; figures not quotable)
	@scripts/services up
	@eval "$$(scripts/services env)"; $(PY) bench/suite.py --quick

bench-scale: install ## Cost as the corpus grows, up to 1M chunks (hours on 2 cores); one JSON document
	@$(PY) bench/scale.py --sizes 10000,100000,1000000

bench-plots: install ## Redraw docs/*.png from a saved `make bench` document: make bench-plots BENCH_JSON=file
	@$(PY) bench/plots.py $(BENCH_JSON)

schemas: install ## Regenerate ragsift/schemas/json from the models
	@.venv/bin/ragsift schemas export

services-up: ## Start the test Kafka broker and redis-server (downloads cached)
	@scripts/services up

services-down: ## Stop what services-up started
	@scripts/services down

services-status: ## Show whether Kafka and Redis are up
	@scripts/services status

deploy-tools: ## Install promtool and kustomize for the deployment tests (cached)
	@scripts/deploy-tools install

clean: ## Remove build and cache folders in the repo
	rm -rf .pytest_cache .mypy_cache .ruff_cache build dist *.egg-info
