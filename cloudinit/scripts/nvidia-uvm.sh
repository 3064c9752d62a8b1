#!/bin/bash
# Runs as root before vLLM starts (ExecStartPre=+). CUDA creates /dev/nvidia-uvm by calling the
# setuid nvidia-modprobe, which NoNewPrivileges= blocks for the vLLM service, and nothing else
# loads nvidia-uvm at boot: load it here, with the privilege the service does not have.
if [ -e /dev/nvidia-uvm ]; then
  exit 0
fi
if nvidia-modprobe -u -c=0; then
  echo "nvidia-uvm: loaded, /dev/nvidia-uvm created"
else
  echo "nvidia-uvm: nvidia-modprobe -u failed; the preflight will say what is missing" >&2
fi
exit 0
