#!/bin/bash
# Runs before vLLM starts (ExecStartPre). Any failed check stops the start with the reason
# in the journal: vLLM never starts without swap, without the driver, on a torch that cannot
# run on the T4, or unclamped. The service retries every 30 s, so a check that passes later
# (provisioning still running, or retried) lets vLLM start without anyone's help.
# A refusal that no retry changes (a torch without sm_75 kernels, a kernel that does not fit, fewer GPUs than
# ranks) is also written to $VERDICT: the progress unit then reports the phase `failed`, not `retrying`, so
# that `gemma4-t4 wait` ends at once with the reason. A check that passes, or fails in a way that heals,
# removes it.
set -euo pipefail

: "${VENV:?}" "${SWAP_SIZE_GB:?}" "${DATA_MOUNT:?}"
# The unit's StateDirectory= (gemma4-vllm), which systemd makes for the service user; progress.py reads it.
VERDICT=${STATE_DIRECTORY:-/var/lib/gemma4-vllm}/refused
fail() { rm -f "$VERDICT"; echo "gemma4-vllm preflight: $*" >&2; exit 1; }
# refuse: final only once provisioning is done (before that, its next attempt may still put the piece in place):
# provision.sh's mark of this boot's finished run (a file: the service user may not ask systemd over D-Bus).
PROVISIONED=${GEMMA4_T4_PROVISIONED:-/run/gemma4-t4/provisioned}
refuse() {
  [ -e "$PROVISIONED" ] || fail "$*"
  echo "gemma4-vllm preflight: $*" >&2
  echo "$*" >"$VERDICT.new" && mv -f "$VERDICT.new" "$VERDICT"
  exit 1
}
ok() { echo "gemma4-vllm preflight: $*"; }
provision="see: journalctl -u gemma4-t4-provision"

mountpoint -q "$DATA_MOUNT" || fail "the data disk is not mounted at $DATA_MOUNT; $provision"

if [ "$SWAP_SIZE_GB" -gt 0 ]; then
  [ -n "$(swapon --show=NAME --noheadings)" ] ||
    fail "swap is off; vLLM is OOM-killed while staging weights without it; $provision"
  ok "swap on: $(swapon --show=NAME,SIZE --noheadings | tr -s ' ')"
fi

gpu=$(nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader 2>/dev/null) ||
  fail "nvidia-smi does not answer: the NVIDIA driver is not installed or not loaded; $provision"
ok "GPU: $(tr '\n' ';' <<<"$gpu" | sed 's/;$//')"
# vLLM's tensor parallelism needs one GPU per rank: a VM that came back with fewer (a GPU lost to
# a host error) would otherwise fail deep inside vLLM's start.
ranks=$(sed -n 's/.*--tensor-parallel-size \([0-9][0-9]*\).*/\1/p' <<<"${VLLM_ARGS:-}")
gpus=$(grep -c . <<<"$gpu")
[ "$gpus" -ge "${ranks:-1}" ] ||
  refuse "vLLM is set to --tensor-parallel-size ${ranks} but nvidia-smi lists $gpus GPU(s); see: nvidia-smi -L"
[ -e /dev/nvidia-uvm ] || fail "/dev/nvidia-uvm is missing: nvidia-uvm is not loaded (see the nvidia-uvm lines above)"

python=$VENV/bin/python
[ -x "$python" ] || fail "no vLLM virtualenv at $VENV; $provision"
[ -f "$VENV/.gemma4-t4-lock.sha256" ] || fail "the vLLM install in $VENV is incomplete; $provision"

# The boot test's CPU stand-in for vLLM (tests/test_guest_boot.py); the plan never sets this.
standin=${GEMMA4_T4_ALLOW_CPU_STANDIN:-0}

# torch must carry sm_75 kernels and see the T4 (CUDA driver and runtime agree).
torch_gpu=$("$python" -c '
import torch
arch = torch.cuda.get_arch_list()
seen = torch.cuda.is_available() and torch.cuda.get_device_capability(0) == (7, 5)
print("sm_75" in arch, seen, " ".join(arch))') || fail "torch does not import in $VENV (see above); $provision"
read -r has_sm75 sees_t4 arch_list <<<"$torch_gpu"
[ "$has_sm75" = True ] || refuse "torch in $VENV has no sm_75 kernels (arch list: ${arch_list:-none})"
if [ "$sees_t4" = True ]; then
  ok "torch carries sm_75 and sees the T4"
elif [ "$standin" = 1 ]; then
  ok "torch sees no CUDA GPU: allowed for the boot test's CPU stand-in (GEMMA4_T4_ALLOW_CPU_STANDIN=1)"
else
  fail "torch carries sm_75 but sees no T4 (torch.cuda.is_available() is false): the driver and torch's CUDA do not match"
fi

if [ "$standin" = 1 ]; then
  # vLLM's CPU build has no Triton kernels (it swaps in placeholders) for the clamp to hook or
  # compile: the stand-in proves the plugin is installed; check and fit run on the real vLLM
  # wheels in tests/test_turing_real_vllm.py.
  "$python" -c 'import importlib.metadata as m, sys
sys.exit(not any(ep.value == "turing_clamp.plugin:register" for ep in m.entry_points(group="vllm.general_plugins")))' ||
    refuse "the Turing clamp's vLLM plugin is not installed in $VENV"
  ok "the Turing clamp's plugin is installed; kernel check and sm_75 fit skipped for the CPU stand-in"
  rm -f "$VERDICT"
  exit 0
fi
# The clamp: registered as a vLLM plugin and matching the installed vLLM's kernel launcher.
"$python" -m turing_clamp check || refuse "the Turing clamp is not in place (see above); refusing to start vLLM unclamped"
# Every kernel variant Gemma 4 launches, compiled for sm_75 with the clamp's parameters.
"$python" -m turing_clamp fit --strict --cache-dir "${VLLM_CACHE_ROOT:-$HOME/.cache/vllm}/turing-fit" ||
  refuse "a Gemma 4 attention kernel does not fit sm_75 with the clamp; refusing to start"
rm -f "$VERDICT"
