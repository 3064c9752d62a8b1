"""The GPU-free fit checker: every attention launch Gemma 4 makes on a T4, compiled for sm_75.

For each variant (head 256 and 512, every query-per-KV ratio up to 16, and the query and KV
heads one rank holds when a Gemma 4 build is split over 1, 2 or 4 T4s; prefill, 2D decode and
3D split-KV decode) it calls vLLM's real ``unified_attention`` launcher on small CPU tensors of
the right shapes, with the clamp applied against the sm_75 limit, and records the exact launch
(constexprs, warps, stages) instead of running it. Each recorded launch is then specialised and
compiled the way Triton's own JIT does, for GPUTarget("cuda", 75, 32): ``metadata.shared`` is
the number the loader compares with the device limit, and ``ptxas -v`` on the PTX gives
registers and spills. No GPU is needed; vLLM, torch (CPU) and triton must import.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from . import contract, plugin, policy, targets

PATHS = ("prefill-2d", "decode-2d", "decode-3d")
_PTXAS_REGS = re.compile(r"Used (\d+) registers")
_PTXAS_SPILLS = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")


@dataclass(frozen=True)
class Variant:
    head_size: int
    queries_per_kv: int
    path: str
    kv_heads: int = 1  # on one rank: the query heads are queries_per_kv x kv_heads

    @property
    def query_heads(self) -> int:
        return self.queries_per_kv * self.kv_heads

    @property
    def sliding(self) -> bool:
        return self.head_size < max(targets.GEMMA4_HEAD_SIZES)


@dataclass
class Result:
    kernel: str
    head_size: int
    queries_per_kv: int
    path: str
    query_heads: int
    kv_heads: int
    tile_size: int
    block_m: int
    num_warps: int
    num_stages: int
    shared_bytes: int
    registers: int
    spill_store_bytes: int
    spill_load_bytes: int
    limit: int

    @property
    def fits(self) -> bool:
        return self.shared_bytes <= self.limit

    @property
    def spill_free(self) -> bool:
        return self.spill_store_bytes == 0 and self.spill_load_bytes == 0


# --- recording the launches vLLM's launcher makes ------------------------------------------------


class _Recorder:
    """Takes the place of a JIT kernel: ``kernel[grid](**kwargs)`` records instead of launching."""

    def __init__(self, name: str, kernel: Any, sink: list):
        self.name, self.kernel, self.sink = name, kernel, sink

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.kernel, attr)

    def __getitem__(self, grid: Any):
        return lambda *args, **kwargs: self.sink.append((self.name, self.kernel, dict(kwargs)))


def _call_launcher(module: Any, variant: Variant) -> None:
    import torch

    kv_heads, block = variant.kv_heads, targets.KV_BLOCK_SIZE
    q_heads = variant.query_heads
    if variant.path == "prefill-2d":
        query_lens, seq_lens, threshold = [64], [64], None
    elif variant.path == "decode-2d":  # more sequences than the 3D threshold: the 2D kernel decodes
        query_lens, seq_lens, threshold = [1, 1], [64, 64], 1
    else:
        query_lens, seq_lens, threshold = [1], [64], 8
    tokens, num_seqs = sum(query_lens), len(seq_lens)
    blocks_per_seq = max(seq_lens) // block
    head = variant.head_size
    segments = 16
    fp16 = torch.float16
    q = torch.zeros(tokens, q_heads, head, dtype=fp16)
    cache = torch.zeros(num_seqs * blocks_per_seq, block, kv_heads, head, dtype=fp16)
    cu = torch.tensor([0, *torch.tensor(query_lens).cumsum(0).tolist()], dtype=torch.int32)
    window = (targets.GEMMA4_SLIDING_WINDOW - 1, 0) if variant.sliding else (-1, -1)
    three_d = {}
    if threshold is not None:
        padded = policy.next_power_of_2(head)
        three_d = dict(
            seq_threshold_3D=threshold,
            num_par_softmax_segments=segments,
            softmax_segm_output=torch.zeros(tokens, q_heads, segments, padded, dtype=torch.float32),
            softmax_segm_max=torch.zeros(tokens, q_heads, segments, dtype=torch.float32),
            softmax_segm_expsum=torch.zeros(tokens, q_heads, segments, dtype=torch.float32),
        )
    module.unified_attention(
        q=q, k=cache, v=cache.clone(), out=torch.zeros_like(q), cu_seqlens_q=cu, max_seqlen_q=max(query_lens),
        seqused_k=torch.tensor(seq_lens, dtype=torch.int32), max_seqlen_k=max(seq_lens), softmax_scale=1.0,
        causal=True, window_size=window,
        block_table=torch.arange(num_seqs * blocks_per_seq, dtype=torch.int32).reshape(num_seqs, blocks_per_seq),
        softcap=0, q_descale=None, k_descale=None, v_descale=None, **three_d,
    )


def record_launches(module: Any, variant: Variant, clamped: bool, limit: int) -> list[tuple[str, Any, dict]]:
    """The kernel launches vLLM's launcher makes for ``variant``, with or without the clamp."""
    sink: list = []
    kernel, reduce = module.kernel_unified_attention, module.reduce_segments
    with contextlib.ExitStack() as stack:
        stack.callback(setattr, module, "reduce_segments", reduce)
        stack.callback(setattr, module, "kernel_unified_attention", kernel)
        module.reduce_segments = _Recorder("reduce_segments", reduce, sink)
        if clamped:
            stack.enter_context(plugin.applied(module, lambda: limit))
            module.kernel_unified_attention._turing_clamp_inner = _Recorder("kernel_unified_attention", kernel, sink)
        else:
            module.kernel_unified_attention = _Recorder("kernel_unified_attention", kernel, sink)
        _call_launcher(module, variant)
    return sink


# --- compiling one launch for sm_75 ----------------------------------------------------------------


def compile_sm75(kernel: Any, kwargs: dict[str, Any]) -> tuple[int, int, int, int, int, int]:
    """(shared bytes, registers, spill stores, spill loads, warps, stages) of this launch on sm_75,
    specialised exactly as triton.runtime.jit does at launch time."""
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import get_ptxas
    from triton.compiler import ASTSource, make_backend
    from triton.compiler import compile as triton_compile
    from triton.runtime.jit import create_function_from_signature

    target = GPUTarget("cuda", targets.SM75[0] * 10 + targets.SM75[1], targets.WARP_SIZE)
    backend = make_backend(target)
    binder = create_function_from_signature(kernel.signature, kernel.params, backend)
    bound_args, specialization, options = binder(**kwargs)
    options, signature, constexprs, attrs = kernel._pack_args(backend, kwargs, bound_args, specialization, options)
    compiled = triton_compile(ASTSource(kernel, signature, constexprs, attrs), target=target,
                              options=options.__dict__)
    with tempfile.TemporaryDirectory() as tmp:
        ptx = Path(tmp, "kernel.ptx")
        ptx.write_text(compiled.asm["ptx"])
        report = subprocess.run([get_ptxas(target.arch).path, "-v", f"--gpu-name=sm_{target.arch}", str(ptx),
                                 "-o", str(Path(tmp, "kernel.cubin"))], capture_output=True, text=True, check=True)
    text = report.stdout + report.stderr
    regs = _PTXAS_REGS.search(text)
    spills = _PTXAS_SPILLS.search(text)
    if regs is None or spills is None:
        raise RuntimeError(f"unexpected ptxas -v output: {text!r}")
    return (int(compiled.metadata.shared), int(regs.group(1)), int(spills.group(1)), int(spills.group(2)),
            int(compiled.metadata.num_warps), int(compiled.metadata.num_stages))


def check_variant(module: Any, variant: Variant, clamped: bool, limit: int) -> list[Result]:
    results = []
    for name, kernel, kwargs in record_launches(module, variant, clamped, limit):
        shared, regs, stores, loads, warps, stages = compile_sm75(kernel, kwargs)
        results.append(Result(
            kernel=name, head_size=variant.head_size, queries_per_kv=variant.queries_per_kv, path=variant.path,
            query_heads=variant.query_heads, kv_heads=variant.kv_heads, tile_size=kwargs["TILE_SIZE"],
            block_m=kwargs.get("BLOCK_M", 0), num_warps=warps, num_stages=stages, shared_bytes=shared, registers=regs,
            spill_store_bytes=stores, spill_load_bytes=loads, limit=limit))
    return results


def all_variants() -> list[Variant]:
    """Every query-per-KV ratio on one KV head, then each rank's heads under tensor parallelism
    (num_query_heads is a constexpr: another head count is another kernel)."""
    variants = [Variant(h, r, p) for h in targets.GEMMA4_HEAD_SIZES for r in targets.GEMMA4_QUERIES_PER_KV
                for p in PATHS]
    for head, query_heads, kv_heads in sorted(targets.per_rank_shapes()):
        for path in PATHS:
            variant = Variant(head, query_heads // kv_heads, path, kv_heads)
            if variant not in variants:
                variants.append(variant)
    return variants


def tensor_parallel_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each Gemma 4 build at each tensor parallel size, per head size: the heads one rank holds and
    the worst of the kernels compiled for that shape (all paths)."""
    table = []
    for (head, query_heads, kv_heads), uses in sorted(targets.per_rank_shapes().items()):
        kernels = [r for r in rows if (r["head_size"], r["query_heads"], r["kv_heads"]) == (head, query_heads,
                                                                                           kv_heads)]
        for build, tp in uses:
            table.append({
                "build": build, "tensor_parallel_size": tp, "head_size": head, "query_heads": query_heads,
                "kv_heads": kv_heads, "kernels": len(kernels),
                "shared_bytes": max((r["shared_bytes"] for r in kernels), default=0),
                "spill_bytes": max((r["spill_store_bytes"] + r["spill_load_bytes"] for r in kernels), default=0),
                "fits": bool(kernels) and all(r["fits"] for r in kernels),
                "spill_free": bool(kernels) and all(r["spill_free"] for r in kernels),
            })
    return sorted(table, key=lambda t: (t["tensor_parallel_size"], t["build"], t["head_size"]))


# --- report --------------------------------------------------------------------------------------


def _fingerprint(module: Any, limit: int, clamped: bool) -> str:
    import triton

    digest = hashlib.sha256()
    for path in [Path(module.__file__), *sorted(Path(__file__).parent.glob("*.py"))]:
        digest.update(path.read_bytes())
    digest.update(f"{triton.__version__}|{contract.vllm_version()}|{limit}|{clamped}".encode())
    return digest.hexdigest()[:20]


def build_report(clamped: bool = True, limit: int = targets.SM75_SHARED_LIMIT, variants: list[Variant] | None = None,
                 cache_dir: Path | None = None) -> dict[str, Any]:
    import triton

    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")  # keep vLLM on its real Triton, never a GPU
    module = contract.load_module()
    found = contract.problems(module)
    if found:
        raise policy.ClampError(contract.describe(found))
    cache_file = None
    if cache_dir is not None and variants is None:
        cache_file = Path(cache_dir) / f"fit-{_fingerprint(module, limit, clamped)}.json"
        if cache_file.is_file():
            return json.loads(cache_file.read_text())
    rows: list[Result] = []
    errors: list[str] = []
    complete = variants is None
    for variant in variants or all_variants():
        try:
            rows += check_variant(module, variant, clamped, limit)
        except policy.ClampError as err:  # the clamp refused this shape: a finding, not a crash
            errors.append(f"head {variant.head_size}, {variant.queries_per_kv} q/kv, {variant.path}: {err}")
    variants = [{**asdict(r), "fits": r.fits, "spill_free": r.spill_free} for r in rows]
    report = {
        "vllm": contract.vllm_version(),
        "triton": triton.__version__,
        "target": f"sm_{targets.SM75[0]}{targets.SM75[1]}",
        "shared_limit": limit,
        "clamped": clamped,
        "variants": variants,
        # Only a full run covers every per-rank shape (a shape with no kernel there was refused).
        "tensor_parallel": tensor_parallel_rows(variants) if complete else [],
        "refused": errors,
        "fits": not errors and all(r.fits for r in rows),
        "spill_free": not errors and all(r.spill_free for r in rows),
    }
    if cache_file is not None:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        cache_file.write_text(json.dumps(report))
    return report


def format_report(report: dict[str, Any]) -> str:
    head = (f"vLLM {report['vllm']}, triton {report['triton']}, {report['target']}, limit "
            f"{report['shared_limit']:,} B, {'clamped' if report['clamped'] else 'stock'}")
    lines = [head, f"{'kernel':<25}{'head':>5}{'q/kv':>5}{'heads':>7} {'path':<11}{'tile':>5}{'BLOCK_M':>8}"
             f"{'warps':>6}{'shared B':>10}{'regs':>6}{'spill st/ld B':>15}  verdict"]
    for v in report["variants"]:
        lines.append(f"{v['kernel']:<25}{v['head_size']:>5}{v['queries_per_kv']:>5}"
                     f"{v['query_heads']:>4}/{v['kv_heads']:<2} {v['path']:<11}{v['tile_size']:>5}{v['block_m']:>8}"
                     f"{v['num_warps']:>6}{v['shared_bytes']:>10,}{v['registers']:>6}"
                     f"{v['spill_store_bytes']:>8}/{v['spill_load_bytes']:<6}  {_verdict(v)}")
    lines += ["", "per rank under tensor parallelism (query/KV heads one rank holds; worst kernel of that shape):",
              f"{'TP':>3} {'build':<9}{'head':>5}{'heads':>7}{'kernels':>8}{'shared B':>10}{'spill B':>9}  verdict"]
    for t in report.get("tensor_parallel", []):
        lines.append(f"{t['tensor_parallel_size']:>3} {t['build']:<9}{t['head_size']:>5}"
                     f"{t['query_heads']:>4}/{t['kv_heads']:<2}{t['kernels']:>8}{t['shared_bytes']:>10,}"
                     f"{t['spill_bytes']:>9,}  {_verdict(t) if t['kernels'] else 'NOT COMPILED'}")
    lines += [f"refused: {e}" for e in report["refused"]]
    lines.append(f"every variant fits: {report['fits']}; spill-free: {report['spill_free']}")
    return "\n".join(lines)


def _verdict(row: dict[str, Any]) -> str:
    return "FAILS" if not row["fits"] else ("fits" if row["spill_free"] else "fits, spills")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="turing_clamp fit", description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--strict", action="store_true", help="also fail on any register spill")
    parser.add_argument("--stock", action="store_true", help="vLLM's own parameters, without the clamp")
    parser.add_argument("--cache-dir", type=Path, help="reuse a report for the same vLLM, triton and clamp")
    args = parser.parse_args(argv)
    try:
        report = build_report(clamped=not args.stock, cache_dir=args.cache_dir)
    except ImportError as err:
        print(f"turing_clamp fit: run it where vLLM and Triton import ({err}); `make fit` builds such "
              "environments for both pinned vLLM versions", file=sys.stderr)
        return 2
    except policy.ClampError as err:
        print(f"turing_clamp fit: {err}", file=sys.stderr)
        return 1
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    if not report["fits"]:
        return 1
    if args.strict and not report["spill_free"]:
        return 1
    return 0
