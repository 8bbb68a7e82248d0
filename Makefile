# gicomm: two commands on a fresh Debian machine.
#   make run    set up, run the default campaign with the local profile, print where the report is
#   make test   set up, then every test (python, pipeline, native ctest, Soft-RoCE guest)
SHELL := /bin/bash
.ONESHELL:
.SHELLFLAGS := -eu -o pipefail -c

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.gicomm-installed
JOBS ?= $(shell nproc)
NATIVE_BUILD := build/ctest
# Debian packages the native build and the tests need (installed when we are root and they are missing).
SYSTEM_PACKAGES := $(shell grep -v '^\#' tools/system-packages.txt)

.PHONY: doctor run test setup system-packages lint native-test pytest softroce-test clean archive container-recipes export claim artifact-docs

setup: system-packages $(STAMP)

system-packages:
	@bash tools/install-system-packages.sh $(SYSTEM_PACKAGES)

$(STAMP): requirements.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q $(if $(wildcard wheels),--no-index --find-links wheels) -r requirements.txt
	$(BIN)/python -m pip install -q --no-deps -e .
	@touch $@

run: setup
	$(BIN)/snakemake --profile profiles/local --cores $(JOBS)
	@$(BIN)/python -m gicomm.where_report

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/snakefmt --check Snakefile workflow/rules
	$(BIN)/snakemake --lint

native-test: setup
	cmake -S native -B $(NATIVE_BUILD) -DGICOMM_CUDA_ARCHS=90 >/dev/null
	cmake --build $(NATIVE_BUILD) -j $(JOBS)
	ctest --test-dir $(NATIVE_BUILD) --output-on-failure -j $(JOBS)

# One pytest worker per core, at most four (pytest-xdist; whole modules per worker, the longest first:
# tests/conftest.py): most tests spend their time in one Python process, so more workers use the
# other cores. PYTEST_JOBS=1 runs them all in this process.
PYTEST_JOBS ?= $(shell n=$$(nproc); echo $$(( n < 4 ? n : 4 )))
pytest: setup
	$(BIN)/python -m pytest -q --durations=12 $(if $(filter-out 0 1,$(PYTEST_JOBS)),-n $(PYTEST_JOBS) --dist loadfile --no-loadscope-reorder)

# The verbs backend, the two-rank launcher and exchange, and the counter path proof against a real
# kernel RDMA stack (Soft-RoCE in a QEMU guest); says plainly when it skips and why.
softroce-test: native-test
	bash tools/softroce/ci.sh $(NATIVE_BUILD)

test: lint native-test pytest softroce-test

# Artifact evaluation: a self-contained tarball (WITH_WHEELS=1 bundles the Python wheels), the
# container recipes regenerated from the pins, and a campaign's report as one zip.
archive:
	@bash tools/make-archive.sh dist

container-recipes: setup
	$(BIN)/python -m gicomm.container

# One command per claim (ARTIFACT.md): CLAIM=<id> [SWEEP=reduced]
SWEEP ?= full
claim: setup
	@test -n "$(CLAIM)" || { echo "usage: make claim CLAIM=<id> [SWEEP=reduced] (ids: ARTIFACT.md)"; exit 2; }
	$(BIN)/python -m gicomm.claim_cli "$(CLAIM)" --sweep "$(SWEEP)" --cores $(JOBS)

artifact-docs: setup
	$(BIN)/python -m gicomm.artifact
	$(BIN)/python -m gicomm.docs

# What this host should reach, what it reaches, and why it is below (docs/doctor.md): measures the
# floors when a GPU build exists (floors that need a GPU say so), checks the host, judges the latest
# campaign of this host kind; prints the table, writes results/doctor/report/doctor.html.
# DOCTOR_RANKS=2: the NIC floors (DOCTOR_NIC, verbs by default then) between two ranks: two local
# processes, or srun across the nodes of a two-node Slurm allocation. On a host without an RDMA
# device they run over the emulated rdma-core (labelled so, and flagged as a stand-in).
DOCTOR_ARGS ?=
DOCTOR_RANKS ?= 1
DOCTOR_NIC ?= $(if $(filter 2,$(DOCTOR_RANKS)),verbs,)
doctor: setup
	cmake -S native -B $(NATIVE_BUILD) -DGICOMM_CUDA_ARCHS=90 >/dev/null
	cmake --build $(NATIVE_BUILD) -j $(JOBS) --target gicomm-bench-floors $(if $(DOCTOR_NIC),gicomm_emu) \
	  >/dev/null 2>&1 || true
	driver=$(NATIVE_BUILD)/bin/gicomm-bench-floors
	nic=(--ranks $(DOCTOR_RANKS))
	for b in $(DOCTOR_NIC); do nic+=(--nic $$b); done
	if [ -n "$(DOCTOR_NIC)" ] && ! ls /sys/class/infiniband/* >/dev/null 2>&1; then
	  nic+=(--driver-prefix $(NATIVE_BUILD)/bin/gicomm-emu-run)
	fi
	$(BIN)/python -m gicomm.doctor $$(test -x $$driver && echo --floors-driver $$driver) "$${nic[@]}" $(DOCTOR_ARGS)

CAMPAIGN ?= local
export: setup
	$(BIN)/snakemake --profile profiles/local --cores $(JOBS) results/$(CAMPAIGN)/export/$(CAMPAIGN)-report.zip

clean:
	rm -rf build .snakemake results/*/ ; git checkout -- results 2>/dev/null || true
