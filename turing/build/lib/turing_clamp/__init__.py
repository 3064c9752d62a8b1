"""The Turing tile clamp for vLLM's Triton unified-attention kernel.

Gemma 4's 512-wide global attention makes vLLM's stock launch ask for 98,304 bytes of shared
memory per block; a Tesla T4 (sm_75) allows 65,536. Registered as a vLLM general plugin, this
package re-picks the kernel's tile size and warp count from the device's real limit on GPUs of
compute capability below 8, and does nothing anywhere else.
"""

__version__ = "1.0.0"
