# gemma4-t4: `make plan` (the offline plan of both stacks) and `make test` (everything CI runs).
PYTHON ?= python3
VENV := .venv
FIT := .fit
CLAMP_VLLM := $(shell $(PYTHON) -m gemma4_t4.catalog clamp-matrix | tr ' ' '\n' | cut -d: -f1)
FIT_ENVS := $(foreach v,$(CLAMP_VLLM),$(FIT)/vllm-$(v)/.installed)
STACKS := gce-t4 sagemaker-t4

.PHONY: plan test fit fit-env lint device-bundle clean

$(VENV)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $@

plan: $(VENV)/.installed
	@for stack in $(STACKS); do $(VENV)/bin/python -m gemma4_t4 plan $$stack || exit 1; echo; done

$(FIT)/vllm-%/.installed: turing/fit-env.sh turing/pyproject.toml gemma4_t4/catalog.py
	turing/fit-env.sh $* $(FIT)/vllm-$*

fit-env: $(FIT_ENVS)

# The GPU-free fit checker on both pinned vLLM versions: fails on any variant over 64 KiB or any spill.
fit: fit-env
	@for v in $(CLAMP_VLLM); do (cd /tmp && $(CURDIR)/$(FIT)/vllm-$$v/bin/python -m turing_clamp fit --strict) || exit 1; echo; done

lint: $(VENV)/.installed
	shellcheck cloudinit/*.sh cloudinit/scripts/*.sh turing/*.sh components/scripts/*.sh
	$(VENV)/bin/hadolint turing/Dockerfile

test: $(VENV)/.installed fit-env
	$(VENV)/bin/python -m pytest -q

# The three vLLM files the GPU numerics need (turing/gpu/numerics.py), for the device machine.
device-bundle: fit-env
	@for v in $(CLAMP_VLLM); do mkdir -p .device/vllm-$$v; \
	  src=$(FIT)/vllm-$$v/lib/python*/site-packages/vllm; \
	  cp $$src/v1/attention/ops/triton_unified_attention.py $$src/v1/attention/ops/triton_attention_helpers.py \
	     $$src/v1/kv_cache_interface.py .device/vllm-$$v/; done

clean:
	rm -rf $(VENV) $(FIT) .device .pytest_cache
