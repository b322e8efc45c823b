# metricsched: `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=
NODES ?= 6
N ?= 5000
SEED ?= 1
QUALITY_SEEDS ?= 1,2,3
VERSION := $(shell sed -n 's/^__version__ = "\(.*\)"/\1/p' operator/metricsched/__init__.py)
# The image `make image` builds and the chart's default (image.repository:appVersion).
IMG ?= metricsched:$(VERSION)

.PHONY: help
help: ## List the targets
	@grep -hE '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

$(VENV)/.installed: setup.cfg pyproject.toml constraints.txt
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade 'pip>=24'
	$(PY) -m pip install -q -e '.[dev]' --constraint constraints.txt
	@touch $@

.PHONY: install
install: $(VENV)/.installed ## Create .venv with metricsched (editable) and the dev tools

.PHONY: deps
deps: ## Install system packages the cluster needs (Prometheus, openssl) if missing
	@bash hack/install-deps.sh

.PHONY: tools
tools: ## Build (or reuse) the pinned control-plane binaries and metrics-server, cached in ~/.cache/metricsched (version: METRICSCHED_KUBE_VERSION)
	@hack/build-tools.sh >/dev/null
	@hack/build-metrics-server.sh >/dev/null

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
lint: install ## ruff, format, mypy --strict and the import layering (import-linter); part of make test
	$(VENV)/bin/ruff check operator tests hack bench
	$(VENV)/bin/ruff format --check operator tests bench
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy --strict tests/faults tests/unit/faults
	$(VENV)/bin/lint-imports

.PHONY: helm-lint
helm-lint: install tools ## helm lint --strict, and helm template | kubeconform -strict per chart ci/*-values.yaml
	@hack/helm-lint.sh

.PHONY: alert-rules
alert-rules: install tools ## Regenerate manifests/alerts/metricsched-rules.yaml (plain Prometheus rules) from the chart's PrometheusRule
	@$(PY) hack/alert-rules.py

.PHONY: docker-lint
docker-lint: install ## hadolint the Dockerfile (make image builds it with podman)
	$(VENV)/bin/hadolint Dockerfile

.PHONY: docker-build
docker-build: ## Build the operator image with Docker and python:3.11-slim: make docker-build IMG=<registry>/metricsched:0.2.0
	docker build -t $(IMG) .

.PHONY: image-deps
image-deps: ## Install podman, runc, skopeo and mmdebstrap if missing (apt-get)
	@bash hack/install-image-deps.sh

.PHONY: image
image: install image-deps ## Build the operator image offline with podman (Debian base, host wheels); log in build/image/
	@$(PY) hack/image.py build --image $(IMG)

.PHONY: image-push
image-push: ## Push the image make image built: make image-push REGISTRY=registry.example.com/team
	@test -n "$(REGISTRY)" || { echo "usage: make image-push REGISTRY=<registry>[/<path>]" >&2; exit 2; }
	CONTAINERS_CONF=build/image/containers.conf podman push localhost/$(IMG) docker://$(REGISTRY)/$(IMG)

.PHONY: release
release: install tools image ## Build what a release publishes into dist/: packaged chart + index.yaml, image OCI archive + digest, CRD, SHA256SUMS (CHART_URL=<https://...> for absolute chart URLs)
	@$(PY) hack/release.py --image $(IMG) $(if $(CHART_URL),--chart-url $(CHART_URL))

.PHONY: image-test
image-test: install deps tools image ## The image as the chart runs it, and the containerised operator scheduling a pod
	$(VENV)/bin/pytest -m image $(PYTEST_ARGS)

.PHONY: unit
unit: install tools ## Unit tests only (no cluster, no image; the chart tests use the pinned helm and kubeconform)
	$(VENV)/bin/pytest -m 'not e2e and not image and not faults' $(PYTEST_ARGS)

.PHONY: test
test: install deps tools image lint ## Lint, then all tests: the unit tests on two workers, then e2e, image and the fault suite on the local control plane (started if needed)
	$(VENV)/bin/pytest -n 2 -m 'not e2e and not image and not faults' $(PYTEST_ARGS)
	$(VENV)/bin/pytest -m '(e2e or image or faults) and not soak' --durations=30 $(PYTEST_ARGS)

# The pinned Kubernetes versions (hack/go/k8s/<v>), the default first; make parity runs the
# oracle of each, make parity PARITY_VERSIONS=v1.37.2 one of them.
PARITY_VERSIONS ?= $(shell hack/build-tools.sh --versions)

.PHONY: parity
parity: install ## Differential oracle vs kube-scheduler, per pinned version (PARITY_VERSIONS), on N random pods (N=5000, SEED=1); prints minimal reproductions
	@test -n "$(PARITY_VERSIONS)" || { echo "parity: no versions (hack/build-tools.sh --versions)" >&2; exit 2; }
	@failed=; for v in $(PARITY_VERSIONS); do \
	  echo "=== kube-scheduler $$v"; \
	  METRICSCHED_KUBE_VERSION=$$v hack/build-tools.sh --oracle >/dev/null || exit 1; \
	  METRICSCHED_KUBE_VERSION=$$v $(PY) -m tests.parity --pods $(N) --seed $(SEED) || failed="$$failed $$v"; \
	done; \
	if [ -n "$$failed" ]; then echo "parity: disagreements on$$failed"; exit 1; fi

.PHONY: e2e
e2e: install deps tools ## End-to-end tests only; one test: make e2e PYTEST_ARGS='-k smoke'
	$(VENV)/bin/pytest -m e2e $(PYTEST_ARGS)

.PHONY: faults
faults: install deps tools ## The fault-injection suite only (tests/faults, two replicas per scenario; ~15 min; not the soak scenarios)
	$(VENV)/bin/pytest -m 'faults and not soak' $(PYTEST_ARGS)

.PHONY: soak
soak: install deps tools ## The fault suite's soak scenarios (minutes each, not in make test): quiet nodes for 3 min
	$(VENV)/bin/pytest -m soak $(PYTEST_ARGS)

.PHONY: faults-report
faults-report: install deps tools ## Run the fault suite and write docs/reliability.md (+ docs/reliability.json)
	@mkdir -p docs
	rm -f docs/reliability.json
	-METRICSCHED_FAULTS_RESULTS=$(CURDIR)/docs/reliability.json $(VENV)/bin/pytest -m 'faults and not soak' $(PYTEST_ARGS)
	$(PY) -m tests.faults.report --results docs/reliability.json --out docs/reliability.md

$(VENV)/.bench-installed: setup.cfg pyproject.toml | $(VENV)/.installed
	$(PY) -m pip install -q -e '.[dev,bench]'
	@touch $@

.PHONY: bench
bench: install deps tools $(VENV)/.bench-installed ## Benchmarks vs kube-scheduler (default, all nodes scored) and a null binder, 3 interleaved repeats, pinned (~5-6 h on 2 cores, estimated), then placement quality (~7-8 h, estimated); writes bench/README.md
	$(PY) -m bench run --plan full
	$(PY) -m bench quality --plan full --pipeline realistic --seeds $(QUALITY_SEEDS) --publish

.PHONY: bench-quality
bench-quality: install deps tools $(VENV)/.bench-installed ## Placement quality, realistic pipeline: metricsched default/Measured/amount right, half, double/off, kube-scheduler, random on scenarios a-d, seeds $(QUALITY_SEEDS) (~7-8 h on 2 cpus, estimated); publishes bench/README.md's section
	$(PY) -m bench quality --plan full --pipeline realistic --seeds $(QUALITY_SEEDS) --publish

.PHONY: bench-quality-smoke
bench-quality-smoke: install deps tools $(VENV)/.bench-installed ## Short placement-quality run, not a result (scale-out d, 6 nodes, realistic pipeline, metricsched default + kube-scheduler, 1 seed, ~8 min); report in bench/results/, fails only on harness errors
	$(PY) -m bench quality --plan smoke --pipeline realistic --seeds $(SEED)

.PHONY: bench-smoke
bench-smoke: install deps tools $(VENV)/.bench-installed ## Short benchmark (100 nodes, 300 pods, metricsched, null binder, kube-scheduler default and all nodes, 2 repeats, steady, a profile, a takeover; ~12-15 min); fails only on harness errors
	$(PY) -m bench run --plan smoke

.PHONY: demo
demo: install deps tools ## Bring up the cluster, run the operator, show pods following metrics
	@$(PY) hack/demo.py

.PHONY: clean
clean: cluster-down ## Stop the cluster and remove .cluster/ and caches in the repo
	rm -rf .cluster .pytest_cache .mypy_cache .ruff_cache build/image
