#!/bin/bash
# Runs before vLLM starts (ExecStartPre). Any failed check stops the start with the reason
# in the journal: vLLM never starts without swap, on a torch without sm_75, or unclamped.
set -euo pipefail

: "${VENV:?}" "${SWAP_SIZE_GB:?}"
fail() { echo "gemma4-vllm preflight: $*" >&2; exit 1; }
ok() { echo "gemma4-vllm preflight: $*"; }

if [ "$SWAP_SIZE_GB" -gt 0 ]; then
  [ -n "$(swapon --show=NAME --noheadings)" ] ||
    fail "swap is off; vLLM is OOM-killed while staging weights without it. Run: sudo systemctl restart gemma4-t4-provision"
  ok "swap on: $(swapon --show=NAME,SIZE --noheadings | tr -s ' ')"
fi

gpu=$(nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader 2>/dev/null) ||
  fail "nvidia-smi does not answer: the driver is not loaded. See: journalctl -u gemma4-t4-provision"
ok "GPU: $gpu"

python=$VENV/bin/python
[ -x "$python" ] || fail "no virtualenv at $VENV. Run: sudo systemctl restart gemma4-t4-provision"

arch_flags=$("$python" -c 'import torch; print(torch._C._cuda_getArchFlags())')
case " $arch_flags " in
  *" sm_75 "*) ok "torch carries sm_75" ;;
  *) fail "torch has no sm_75 kernels (arch flags: $arch_flags)" ;;
esac

# The clamp: registered as a vLLM plugin and matching the installed vLLM's kernel launcher.
"$python" -m turing_clamp check || fail "the Turing clamp is not in place (see above); refusing to start vLLM unclamped"
# Every kernel variant Gemma 4 launches, compiled for sm_75 with the clamp's parameters.
"$python" -m turing_clamp fit --strict --cache-dir "${VLLM_CACHE_ROOT:-$HOME/.cache/vllm}/turing-fit" ||
  fail "a Gemma 4 attention kernel does not fit sm_75 with the clamp; refusing to start"
