# metricsched: `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=
NODES ?= 6

.PHONY: help
help: ## List the targets
	@grep -hE '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

$(VENV)/.installed: setup.cfg pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade 'pip>=24'
	$(PY) -m pip install -q -e '.[dev]'
	@touch $@

.PHONY: install
install: $(VENV)/.installed ## Create .venv with metricsched (editable) and the dev tools

.PHONY: deps
deps: ## Install system packages the cluster needs (Prometheus, openssl) if missing
	@bash hack/install-deps.sh

.PHONY: tools
tools: ## Build (or reuse) the pinned control-plane binaries, cached in ~/.cache/metricsched
	@hack/build-tools.sh >/dev/null

.PHONY: cluster-up
cluster-up: install deps tools ## Start etcd, kube-apiserver, KCM, kwok nodes, exporter, Prometheus (NODES=6)
	@$(PY) hack/cluster.py up --nodes $(NODES)

.PHONY: cluster-down
cluster-down: ## Stop every process cluster-up started and free its ports
	@python3 hack/cluster.py down

.PHONY: cluster-status
cluster-status: ## Show the local control plane's processes and ports
	@python3 hack/cluster.py status

.PHONY: lint
lint: install ## ruff and mypy --strict
	$(VENV)/bin/ruff check operator tests hack
	$(VENV)/bin/ruff format --check operator tests
	$(VENV)/bin/mypy

.PHONY: unit
unit: install ## Unit tests only (no cluster)
	$(VENV)/bin/pytest -m 'not e2e' $(PYTEST_ARGS)

.PHONY: test
test: install deps tools ## All tests: unit and e2e (starts the local control plane if needed)
	$(VENV)/bin/pytest $(PYTEST_ARGS)

.PHONY: e2e
e2e: install deps tools ## End-to-end tests only; one test: make e2e PYTEST_ARGS='-k smoke'
	$(VENV)/bin/pytest -m e2e $(PYTEST_ARGS)

.PHONY: demo
demo: install deps tools ## Bring up the cluster, run the operator, show pods following metrics
	@$(PY) hack/demo.py

.PHONY: clean
clean: cluster-down ## Stop the cluster and remove .cluster/ and caches in the repo
	rm -rf .cluster .pytest_cache .mypy_cache .ruff_cache
