"""GPU numerics of the clamp: vLLM's real kernel with the clamp's Turing parameters against a
float32 reference attention, and stock-vs-clamped timings. Needs a CUDA GPU (any: the clamp is
applied with the T4's 65,536-byte limit, so the launch parameters are exactly a T4's).

    PYTHONPATH=turing:.device/vllm-0.33.0/shim python3 turing/gpu/numerics.py --version 0.33.0 --out result.json

``--cases ratios`` runs 1, 2, 8 and 16 query heads per KV head on 2 KV heads; ``--cases per-rank``
the query and KV heads one rank holds when a Gemma 4 build is split over 1, 2 or 4 T4s
(turing_clamp.targets.per_rank_shapes: one GPU runs any single rank's shapes); ``all`` both.

The shim is vLLM's real attention files in a minimal `vllm` package (`make device-bundle` builds
it from the pinned wheels, see vllm_shim.py); where vLLM itself is installed, only turing/ (the
clamp, from this checkout) goes on PYTHONPATH.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

TOLERANCE = 1e-2


@dataclass(frozen=True)
class Case:
    head: int
    queries_per_kv: int
    path: str  # prefill (fresh + chunked), decode-2d, decode-3d
    window: int  # 0: global attention
    kv_heads: int = 2

    def label(self) -> str:
        win = f"window {self.window}" if self.window else "global"
        heads = f"{self.queries_per_kv * self.kv_heads}/{self.kv_heads} heads"
        return f"head {self.head}, {self.queries_per_kv} q/kv ({heads}), {self.path}, {win}"


PATHS = ("prefill", "decode-2d", "decode-3d")


def cases(which: str) -> list[Case]:
    """The cases of ``--cases``: ratios, per-rank or all (both, each shape once)."""
    from turing_clamp import targets

    def window(head: int) -> int:
        return targets.GEMMA4_SLIDING_WINDOW if head < max(targets.GEMMA4_HEAD_SIZES) else 0

    chosen = []
    if which in ("ratios", "all"):
        chosen += [Case(h, r, p, window(h)) for h in targets.GEMMA4_HEAD_SIZES for r in (1, 2, 8, 16) for p in PATHS]
    if which in ("per-rank", "all"):
        for head, query_heads, kv_heads in sorted(targets.per_rank_shapes()):
            chosen += [Case(head, query_heads // kv_heads, p, window(head), kv_heads) for p in PATHS]
    return list(dict.fromkeys(chosen))


# Sequence lengths (query tokens, tokens in the KV cache) per path: a fresh prompt and a chunk
# after cached tokens; four decodes, one 3D decode pair. SHORT keeps every path and still crosses
# the 512-token window, for the CPU interpreter.
LENGTHS = {
    "prefill": ([700, 100], [700, 900]), "decode-2d": ([1, 1, 1, 1], [37, 513, 900, 1200]),
    "decode-3d": ([1, 1], [650, 1100]),
}
SHORT_LENGTHS = {
    "prefill": ([48, 16], [48, 560]), "decode-2d": ([1, 1, 1, 1], [37, 513, 560, 600]),
    "decode-3d": ([1, 1], [520, 600]),
}


def make_batch(case: Case, seed: int, block: int = 16, scale_len: int = 1, device: str = "cuda",
               short: bool = False):
    import torch

    kv_heads = case.kv_heads
    gen = torch.Generator(device=device).manual_seed(seed)
    query_lens, seq_lens = (SHORT_LENGTHS if short else LENGTHS)[case.path]
    if case.path == "prefill":
        query_lens, seq_lens = [n * scale_len for n in query_lens], [n * scale_len for n in seq_lens]
    q_heads = kv_heads * case.queries_per_kv
    blocks_per_seq = [-(-s // block) for s in seq_lens]
    num_blocks = sum(blocks_per_seq) + 7
    cache_k = torch.randn(num_blocks, block, kv_heads, case.head, generator=gen, device=device, dtype=torch.float16)
    cache_v = torch.randn(num_blocks, block, kv_heads, case.head, generator=gen, device=device, dtype=torch.float16)
    # Paged KV: every sequence's blocks scattered over the cache in a random order.
    perm = torch.randperm(num_blocks, generator=gen, device=device).to(torch.int32)
    table = torch.zeros(len(seq_lens), max(blocks_per_seq), dtype=torch.int32, device=device)
    start = 0
    for i, n in enumerate(blocks_per_seq):
        table[i, :n] = perm[start:start + n]
        start += n
    q = torch.randn(sum(query_lens), q_heads, case.head, generator=gen, device=device, dtype=torch.float16)
    cu = torch.tensor([0, *torch.tensor(query_lens).cumsum(0).tolist()], dtype=torch.int32, device=device)
    return q, cache_k, cache_v, table, cu, query_lens, seq_lens


def reference(q, cache_k, cache_v, table, query_lens, seq_lens, window, scale, block=16):
    """Plain float32 attention over the gathered pages: causal, optionally sliding-window."""
    import torch

    outs, offset = [], 0
    q_per_kv = q.shape[1] // cache_k.shape[2]
    for i, (lq, lk) in enumerate(zip(query_lens, seq_lens, strict=True)):
        pages = table[i, : -(-lk // block)].long()
        k = cache_k[pages].reshape(-1, cache_k.shape[2], cache_k.shape[3])[:lk].float()
        v = cache_v[pages].reshape(-1, cache_v.shape[2], cache_v.shape[3])[:lk].float()
        k = k.repeat_interleave(q_per_kv, dim=1)
        v = v.repeat_interleave(q_per_kv, dim=1)
        qi = q[offset:offset + lq].float()
        scores = torch.einsum("qhd,khd->hqk", qi, k) * scale
        q_pos = torch.arange(lk - lq, lk, device=q.device)[:, None]
        k_pos = torch.arange(lk, device=q.device)[None, :]
        allowed = k_pos <= q_pos
        if window:
            allowed &= (q_pos - k_pos) < window
        scores = scores.masked_fill(~allowed, float("-inf"))
        outs.append(torch.einsum("hqk,khd->qhd", scores.softmax(-1), v))
        offset += lq
    return torch.cat(outs)


def run_kernel(module, case, batch, scale):
    import torch

    q, cache_k, cache_v, table, cu, query_lens, seq_lens = batch
    out = torch.empty_like(q)
    three_d = {}
    if case.path == "decode-3d":
        segments = 16
        padded = 1 << (case.head - 1).bit_length()
        three_d = dict(
            seq_threshold_3D=8, num_par_softmax_segments=segments,
            softmax_segm_output=torch.empty(q.shape[0], q.shape[1], segments, padded, device=q.device),
            softmax_segm_max=torch.empty(q.shape[0], q.shape[1], segments, device=q.device),
            softmax_segm_expsum=torch.empty(q.shape[0], q.shape[1], segments, device=q.device),
        )
    elif case.path == "decode-2d":
        three_d = dict(seq_threshold_3D=1, num_par_softmax_segments=16,
                       softmax_segm_output=torch.empty(1, device=q.device),
                       softmax_segm_max=torch.empty(1, device=q.device),
                       softmax_segm_expsum=torch.empty(1, device=q.device))
    module.unified_attention(
        q=q, k=cache_k, v=cache_v, out=out, cu_seqlens_q=cu, max_seqlen_q=max(query_lens),
        seqused_k=torch.tensor(seq_lens, dtype=torch.int32, device=q.device), max_seqlen_k=max(seq_lens),
        softmax_scale=scale, causal=True, window_size=(case.window - 1, 0) if case.window else (-1, -1),
        block_table=table, softcap=0, q_descale=None, k_descale=None, v_descale=None, **three_d)
    return out


class LaunchSpy:
    """Passes launches through to the real kernel and keeps their parameters."""

    def __init__(self, kernel):
        self.kernel, self.seen = kernel, []

    def __getattr__(self, name):
        return getattr(self.kernel, name)

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.seen.append({k: kwargs.get(k) for k in ("TILE_SIZE", "BLOCK_M", "IS_3D", "num_warps")})
            return self.kernel[grid](*args, **kwargs)
        return launch


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--version", required=True, help="the vLLM version under test (recorded in the result)")
    parser.add_argument("--out", type=Path, required=True, help="where to write the JSON result")
    parser.add_argument("--seeds", type=int, default=3, help="random batches per case")
    parser.add_argument("--cases", choices=("ratios", "per-rank", "all"), default="all",
                        help="query/KV head shapes to run (default: all)")
    parser.add_argument("--short", action="store_true",
                        help="shorter sequences (still past the 512-token window): what the interpreter runs in CI")
    parser.add_argument("--interpret", action="store_true",
                        help="no GPU: run the kernel in Triton's interpreter on the CPU (its arithmetic with the T4's "
                             "launch parameters; not its speed, nor shared memory, which `fit` covers); no timings")
    args = parser.parse_args()
    device = "cpu" if args.interpret else "cuda"
    if args.interpret:
        # Read by triton.jit when vLLM's kernels are defined, so before the module is loaded; no
        # device visible keeps vLLM on its real Triton.
        os.environ["TRITON_INTERPRET"] = "1"
        os.environ["CUDA_VISIBLE_DEVICES"] = ""

    import torch
    import triton
    from triton.testing import do_bench

    from turing_clamp import contract, plugin, targets

    module = contract.load_module()
    limit = targets.SM75_SHARED_LIMIT
    rows, worst = [], 0.0
    for case in cases(args.cases):
        scale = case.head ** -0.5
        errors = []
        spy = LaunchSpy(module.kernel_unified_attention)
        with plugin.applied(module, lambda: limit):
            module.kernel_unified_attention._turing_clamp_inner = spy
            for seed in range(args.seeds):
                batch = make_batch(case, seed, device=device, short=args.short)
                out = run_kernel(module, case, batch, scale).float()
                ref = reference(batch[0], batch[1], batch[2], batch[3], batch[5], batch[6], case.window, scale)
                errors.append(((out - ref).norm() / ref.norm()).item())
            if not args.interpret:
                torch.cuda.synchronize()
        worst = max(worst, *errors)
        rows.append({"case": case.label(), "rel_err_max": max(errors), "launch": spy.seen[0],
                     "ok": max(errors) <= TOLERANCE})
        print(f"{case.label():<62} rel.err {max(errors):.2e}  {spy.seen[0]}", flush=True)

    timings = []
    timed = (Case(512, 8, "prefill", 0), Case(256, 8, "prefill", 512), Case(512, 8, "decode-3d", 0),
             Case(512, 8, "decode-2d", 0))
    for case in () if args.interpret else timed:
        batch = make_batch(case, 0, scale_len=2)
        scale = case.head ** -0.5
        def launch(case=case, batch=batch, scale=scale):
            return run_kernel(module, case, batch, scale)

        stock_ms = do_bench(launch, warmup=20, rep=200)
        with plugin.applied(module, lambda: limit):
            clamped_ms = do_bench(launch, warmup=20, rep=200)
        timings.append({"case": case.label(), "stock_ms": stock_ms, "clamped_ms": clamped_ms})
        print(f"time {case.label():<45} stock {stock_ms:.4f} ms  clamped {clamped_ms:.4f} ms", flush=True)

    result = {"vllm": args.version, "cases_run": args.cases, "short": args.short, "triton": triton.__version__,
              "torch": torch.__version__,
              "device": "Triton interpreter (CPU)" if args.interpret else torch.cuda.get_device_name(),
              "tolerance": TOLERANCE, "worst_rel_err": worst, "all_ok": all(r["ok"] for r in rows), "cases": rows,
              "timings": timings}
    args.out.write_text(json.dumps(result, indent=2))
    print(f"worst relative error {worst:.2e}; all within {TOLERANCE}: {result['all_ok']}")
    return 0 if result["all_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
