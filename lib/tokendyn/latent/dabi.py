"""DABI: decoder amplification of boundary-aligned inputs, measured at controlled perturbation norms.

Paper 2 compares the loss increase of a decoder under a structured, boundary-aligned perturbation
of norm ``s`` with that under a norm-matched isotropic one: about 1 for smooth image decoders,
``>> 10^2`` for sharp text readouts. :func:`residual_dabi` scores a generator's own
residual in one number; this module sweeps unit directions over norms, with intervals.

A *latent* here is one row of ``z`` ``[N, d]``. Text: the per-token vectors ``[B, L, d]`` flattened
to ``[B * L, d]`` (the readout acts on each alone). Images: each image's whole latent sequence
``[B, 16, c]`` flattened to ``[B, 16 * c]``, with a decoder that reshapes it back. Loss functions
map latents ``[N, d]`` to one loss per latent ``[N]`` against the clean target.

Directions:

- :func:`nearest_boundary`: for a linear readout ``logits = z @ W.T + b``, the exact nearest
  decision boundary of the target class and the unit normal towards it;
- :func:`gradient_direction`: for any differentiable decoder, the unit gradient of a per-latent
  loss (:func:`margin_loss` for a classifier: steepest descent of the target's margin;
  :func:`squared_error` for a reconstruction);
- :func:`top_singular_directions`: for a smooth decoder with no boundary (an image decoder), the
  top right singular vector of its Jacobian at each latent, by power iteration: the direction whose
  squared-error increase ``s^2 ||J u||^2`` is largest to second order, i.e. the sharpest one;
- :func:`isotropic_directions`: seeded uniform directions on the sphere.

:func:`dabi` measures one structured direction; :func:`dabi_curves` measures several against one
shared set of isotropic directions, through a *line evaluation* (:data:`LineEval`) that a decoder
may implement cheaply (a linear readout computes ``z W^T`` once and moves along ``u W^T``), and
also counts argmax flips from the same evaluations.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ..core.checks import check_range
from ..core.stats import Estimate, bootstrap, wilson

LatentLoss = Callable[[torch.Tensor], torch.Tensor]
"""``z`` ``[N, d]`` -> per-latent loss ``[N]`` against the clean target."""

LineEval = Callable[[torch.Tensor, Sequence[float]], tuple[torch.Tensor, "torch.Tensor | None"]]
"""``(u [N, d], norms [S]) -> (loss [S, N], argmax [S, N] or None)``: each latent's loss (float64)
at ``z + s u`` for every ``s`` (``s = 0`` allowed), and the decoded class there for a classifier
(``None`` for a decoder without an argmax). ``z`` and the clean targets are fixed inside."""

_UNIT_TOL = 1e-4


def _check_latents(z: torch.Tensor, name: str = "z") -> None:
    if z.dim() != 2 or z.shape[0] < 1 or z.shape[1] < 1:
        raise ValueError(f"{name} must be [N, d] with N, d >= 1, got shape {tuple(z.shape)}")
    if not z.is_floating_point():
        raise ValueError(f"{name} must be a floating tensor, got {z.dtype}")


def _check_targets(y: torch.Tensor, n: int, n_classes: int, name: str = "y") -> None:
    if y.shape != (n,) or y.is_floating_point() or y.dtype == torch.bool:
        raise ValueError(f"{name} must be integer ids [{n}], got {y.dtype} {tuple(y.shape)}")
    if int(y.min()) < 0 or int(y.max()) >= n_classes:
        raise ValueError(f"{name}: ids must lie in [0, {n_classes}), got [{int(y.min())}, {int(y.max())}]")


def _check_directions(z: torch.Tensor, directions: torch.Tensor, name: str = "structured_dir") -> None:
    if directions.shape != z.shape:
        raise ValueError(f"{name} must have the shape of z {tuple(z.shape)}, got {tuple(directions.shape)}")
    off = ((directions.norm(dim=1) - 1).abs() > _UNIT_TOL).sum()
    if off:
        raise ValueError(f"{name}: {int(off)} of {len(z)} vectors are not unit length (allowed 1 +- {_UNIT_TOL})")


def _chunked_argmax(weight: torch.Tensor, bias: torch.Tensor, z: torch.Tensor, chunk: int) -> torch.Tensor:
    best = torch.full((len(z),), float("-inf"), dtype=z.dtype, device=z.device)
    arg = torch.zeros(len(z), dtype=torch.long, device=z.device)
    for start in range(0, weight.shape[0], chunk):
        m, i = (z @ weight[start:start + chunk].T + bias[start:start + chunk]).max(1)
        better = m > best  # strict: ties keep the lowest id, as argmax does
        best, arg = torch.where(better, m, best), torch.where(better, i + start, arg)
    return arg


@torch.no_grad()
def nearest_boundary(weight: torch.Tensor, bias: torch.Tensor, z: torch.Tensor, y: torch.Tensor | None = None,
                     *, chunk: int = 1024) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The nearest decision boundary of class ``y`` for a linear readout, and the unit normal to it.

    ``weight`` ``[V, d]``, ``bias`` ``[V]``, latents ``z`` ``[N, d]``, targets ``y`` ``[N]`` (``None``:
    the readout's argmax). The signed distance to the boundary between ``y`` and ``k`` is
    ``((w_y - w_k) . z + b_y - b_k) / ||w_y - w_k||`` (negative when ``k`` already outscores ``y``);
    ``k*`` minimises it over ``k != y``. Returns ``(k_star [N], distance [N], direction [N, d])``
    with ``direction = -(w_y - w_k*) / ||w_y - w_k*||``: moving ``distance`` along it reaches the
    boundary. Competitors are scanned ``chunk`` rows of ``weight`` at a time, using
    ``||w_y - w_k||^2 = ||w_y||^2 + ||w_k||^2 - 2 w_y . w_k``: memory ``O(N * chunk)``, never
    ``[N, V, d]``. The returned distance and direction are recomputed from ``w_y - w_k*`` directly.
    A competitor with the same row as ``y`` (no boundary) is skipped.
    """
    _check_latents(z)
    if weight.dim() != 2 or weight.shape[0] < 2 or bias.shape != weight.shape[:1] or z.shape[1] != weight.shape[1]:
        raise ValueError(f"weight/bias/z do not fit a linear readout with V >= 2: weight {tuple(weight.shape)}, "
                         f"bias {tuple(bias.shape)}, z {tuple(z.shape)}")
    check_range("chunk", chunk, 1, None, integer=True)
    if y is None:
        y = _chunked_argmax(weight, bias, z, chunk)
    _check_targets(y, len(z), weight.shape[0])
    wy = weight[y]  # [N, d]
    sq = (weight * weight).sum(1)  # [V]
    sq_y, logit_y = sq[y], (z * wy).sum(1) + bias[y]  # [N]
    best = torch.full((len(z),), float("inf"), dtype=z.dtype, device=z.device)
    k_star = torch.zeros(len(z), dtype=torch.long, device=z.device)
    tiny = torch.finfo(z.dtype).eps * (sq.max() + 1)
    for start in range(0, weight.shape[0], chunk):
        w, b = weight[start:start + chunk], bias[start:start + chunk]
        gap = logit_y[:, None] - (z @ w.T + b)  # [N, c]
        dist2 = sq_y[:, None] + sq[start:start + chunk][None, :] - 2 * wy @ w.T
        d = gap / dist2.clamp_min(tiny).sqrt()
        ks = torch.arange(start, start + len(w), device=z.device)
        d = d.masked_fill((ks[None, :] == y[:, None]) | (dist2 <= tiny), float("inf"))
        m, i = d.min(1)
        better = m < best
        best, k_star = torch.where(better, m, best), torch.where(better, ks[i], k_star)
    if torch.isinf(best).any():
        raise ValueError("weight: some targets have no competitor with a different row (no decision boundary)")
    normal = wy - weight[k_star]
    length = normal.norm(dim=1)
    distance = ((z * normal).sum(1) + bias[y] - bias[k_star]) / length
    return k_star, distance, -normal / length[:, None]


def margin_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Minus the margin of ``target``: ``max_{k != y} logit_k - logit_y``. ``logits`` ``[N, V]``,
    ``target`` ``[N]`` -> ``[N]``. Its ascent direction decreases the margin (towards a boundary)."""
    own = logits.gather(1, target[:, None])[:, 0]
    other = logits.scatter(1, target[:, None], float("-inf")).max(1).values
    return other - own


def cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-latent cross-entropy: ``logits`` ``[N, V]``, ``target`` ``[N]`` -> ``[N]``."""
    return torch.nn.functional.cross_entropy(logits, target, reduction="none")


def squared_error(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-latent squared error summed over all but the first dim: ``[N, ...]`` x2 -> ``[N]``."""
    return (output - target).pow(2).flatten(1).sum(1)


def gradient_direction(decoder: Callable[[torch.Tensor], torch.Tensor],
                       loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                       z: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Unit ascent direction of ``loss_fn(decoder(z), target)`` per latent, by autograd: ``[N, d]``.

    ``decoder`` maps ``z`` ``[N, d]`` to logits or a reconstruction ``[N, ...]`` with each latent's
    output depending on that latent only (rows are separable, so one backward pass of the summed
    loss gives every row's own gradient). ``loss_fn(output, target) -> [N]``: :func:`margin_loss`
    for a classifier (the direction decreases the target's margin fastest; for a linear readout it
    points at the competitor with the highest logit, which need not be the Euclidean-nearest
    boundary of :func:`nearest_boundary`), :func:`squared_error` for a reconstruction decoder. A
    latent with zero gradient gets a zero vector (not a unit one).
    """
    _check_latents(z)
    with torch.enable_grad():
        x = z.detach().clone().requires_grad_(True)
        loss = loss_fn(decoder(x), target)
        if loss.shape != (len(z),):
            raise ValueError(f"loss_fn must return one loss per latent [{len(z)}], got {tuple(loss.shape)}")
        (g,) = torch.autograd.grad(loss.sum(), x)
    return g / g.norm(dim=1, keepdim=True).clamp_min(torch.finfo(g.dtype).tiny)


def isotropic_directions(shape: Sequence[int], generator: torch.Generator, *,
                         dtype: torch.dtype = torch.float32, device: torch.device | str | None = None) -> torch.Tensor:
    """Independent uniform unit vectors on the sphere: ``shape`` ``(..., d)`` -> ``[..., d]``, seeded."""
    shape = tuple(int(s) for s in shape)
    if not shape or shape[-1] < 1:
        raise ValueError(f"shape must end with the dimension d >= 1, got {shape}")
    g = torch.randn(shape, generator=generator, dtype=dtype)
    return (g / g.norm(dim=-1, keepdim=True)).to(device)


def isotropic_like(residual: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """A Gaussian direction per latent vector with the same norm as ``residual`` ``[..., d]`` -> ``[..., d]``."""
    g = torch.randn(residual.shape, generator=generator, dtype=residual.dtype).to(residual.device)
    return g * (residual.norm(dim=-1, keepdim=True) / g.norm(dim=-1, keepdim=True).clamp_min(1e-12))


def residual_dabi(loss: Callable[[torch.Tensor], float], clean: torch.Tensor, residual: torch.Tensor,
                  generator: torch.Generator) -> float:
    """DABI of a generator's own residual: the loss increase of ``clean + residual`` over that of
    ``clean + isotropic`` (norm-matched per vector, one draw). ``clean``/``residual`` ``[..., d]``.

    The same ratio as :func:`dabi`, at each vector's own residual norm instead of a fixed norm
    along a unit direction field, and without an interval: a generator's score, not a decoder's curve.

    ``loss(z)`` is the decoder's loss against the clean target (cross-entropy for text, pixel MSE
    for images). About 1 for a smooth decoder; large when the structured residual aims at boundaries.
    """
    base = loss(clean)
    num = loss(clean + residual) - base
    den = loss(clean + isotropic_like(residual, generator)) - base
    return float(num / den) if den > 0 else float("inf")


@dataclass(frozen=True)
class DabiPoint:
    """DABI at one perturbation norm: mean loss increases over latents and their ratio."""

    norm: float
    structured: float
    isotropic: float
    ratio: Estimate


def _ratio(a: np.ndarray, b: np.ndarray) -> float:
    num, den = float(a.mean()), float(b.mean())
    if den > 0:
        return num / den
    return float("inf") if num > 0 else float("nan")


def loss_line(loss_fn: LatentLoss, z: torch.Tensor) -> LineEval:
    """The plain :data:`LineEval` of a per-latent loss on ``z`` ``[N, d]``: one call of ``loss_fn``
    per norm, no argmax."""

    def line(u: torch.Tensor, norms: Sequence[float]) -> tuple[torch.Tensor, None]:
        rows = []
        for s in norms:
            out = loss_fn(z + s * u)
            if out.shape != (len(z),):
                raise ValueError(f"loss_fn must return one loss per latent [{len(z)}], got {tuple(out.shape)}")
            rows.append(out.double())
        return torch.stack(rows), None

    return line


@torch.no_grad()
def dabi(loss_fn: LatentLoss, z: torch.Tensor, structured_dir: torch.Tensor, norms: Sequence[float], *,
         n_iso: int = 8, generator: torch.Generator, n_boot: int = 2000, level: float = 0.95,
         seed: int = 0) -> list[DabiPoint]:
    """DABI at each norm ``s``: mean of ``loss(z + s u) - loss(z)`` for the structured unit directions
    ``u = structured_dir`` ``[N, d]`` over that for ``n_iso`` isotropic unit directions per latent.

    ``loss_fn`` maps ``[N, d]`` -> ``[N]``. The isotropic directions are drawn once from
    ``generator`` and reused at every norm, and each is used with both signs: the symmetric pair
    cancels the first-order term exactly (the isotropic law is symmetric, so this is unbiased) and
    leaves the curvature that an isotropic perturbation actually probes. The ratio's interval is a
    paired percentile bootstrap over latents (resampled indices, both means recomputed; ``seed``).
    A non-positive isotropic mean gives a ratio of ``inf`` (or ``nan`` if the structured mean is not
    positive either). Returns one :class:`DabiPoint` per norm, in order. Pass float64 latents for
    confidently read-out ones: a float32 cross-entropy rounds their small increases to 0.
    (:func:`dabi_curves` with :func:`loss_line` and one direction.)
    """
    _check_latents(z)
    _check_directions(z, structured_dir)
    return dabi_curves(loss_line(loss_fn, z), z, {"structured": structured_dir}, norms, n_iso=n_iso,
                       generator=generator, n_boot=n_boot, level=level, seed=seed).points["structured"]


@dataclass(frozen=True)
class Curves:
    """DABI and flips of one decoder along several structured directions against shared isotropic ones.

    ``points[kind]``: one :class:`DabiPoint` per norm; ``flips[kind]``: one :class:`FlipRates` per
    norm (structured along ``kind`` against the first isotropic direction, ``+s``), empty when the
    decoder has no argmax. ``isotropic_increase[i]`` ``[N]`` is each latent's isotropic increase at
    norm ``i`` (mean over the ``2 n_iso`` signed directions)."""

    norms: list[float]
    points: dict[str, list[DabiPoint]]
    flips: dict[str, list[FlipRates]]
    isotropic_increase: list[np.ndarray]


@torch.no_grad()
def dabi_curves(line: LineEval, z: torch.Tensor, directions: dict[str, torch.Tensor], norms: Sequence[float], *,
                n_iso: int = 8, generator: torch.Generator, n_boot: int = 2000, level: float = 0.95,
                seed: int = 0) -> Curves:
    """DABI(s) along each unit direction field of ``directions`` (name -> ``[N, d]``) on latents ``z``
    ``[N, d]``, all against one set of ``n_iso`` isotropic directions per latent (each with both
    signs, drawn once from ``generator``), as in :func:`dabi`; ``line`` evaluates the decoder along a
    direction (:data:`LineEval`). Where ``line`` returns the argmax, flips are counted from the same
    evaluations (Wilson intervals at ``level``). The isotropic denominator is computed once for all
    directions, which is what makes several directions cheap. Intervals: paired percentile
    bootstrap over latents (``n_boot``, ``seed``)."""
    _check_latents(z)
    if not directions:
        raise ValueError("directions must hold at least one direction field")
    for name, u in directions.items():
        _check_directions(z, u, f"directions[{name!r}]")
    if len(z) < 2:
        raise ValueError(f"z: a bootstrap over latents needs N >= 2, got {len(z)}")
    norms = [float(s) for s in norms]
    if not norms:
        raise ValueError("norms must hold at least one norm")
    for s in norms:
        check_range("norms", s, 0, None, lo_open=True)
    check_range("n_iso", n_iso, 1, None, integer=True)
    check_range("n_boot", n_boot, 100, None, integer=True)
    check_range("level", level, 0.0, 1.0, lo_open=True)
    iso = isotropic_directions((n_iso, *z.shape), generator, dtype=z.dtype, device=z.device)

    def run(u: torch.Tensor, ss: Sequence[float]) -> tuple[torch.Tensor, torch.Tensor | None]:
        loss, cls = line(u, ss)
        if loss.shape != (len(ss), len(z)):
            raise ValueError(f"line must return losses [{len(ss)}, {len(z)}], got {tuple(loss.shape)}")
        return loss.double(), cls

    base_loss, base_cls = run(iso[0], [0.0])
    base = base_loss[0]
    signed = norms + [-s for s in norms]
    inc_iso = torch.zeros(len(norms), len(z), dtype=torch.float64)
    first_cls = None
    for j, u in enumerate(iso):
        loss, cls = run(u, signed)
        inc_iso += (loss[:len(norms)] - base) + (loss[len(norms):] - base)
        if j == 0 and cls is not None:
            first_cls = cls[:len(norms)]
    inc_iso = (inc_iso / (2 * n_iso)).cpu().numpy()
    idx = np.arange(len(z), dtype=np.float64)
    points: dict[str, list[DabiPoint]] = {}
    flips: dict[str, list[FlipRates]] = {}
    for name, u in directions.items():
        loss, cls = run(u, norms)
        inc_s = (loss - base).cpu().numpy()
        points[name] = []
        for i, s in enumerate(norms):
            a, b = inc_s[i], inc_iso[i]
            est = bootstrap(idx, lambda r, a=a, b=b: _ratio(a[r.astype(int)], b[r.astype(int)]),
                            n_boot=n_boot, level=level, seed=seed)
            points[name].append(DabiPoint(s, float(a.mean()), float(b.mean()), est))
        flips[name] = []
        if cls is not None and base_cls is not None and first_cls is not None:
            n = len(z)
            for i, s in enumerate(norms):
                k_s = int((cls[i] != base_cls[0]).sum())
                k_i = int((first_cls[i] != base_cls[0]).sum())
                flips[name].append(FlipRates(s, wilson(k_s, n, level), wilson(k_i, n, level), k_s, k_i, n))
    return Curves(norms, points, flips, list(inc_iso))


def top_singular_directions(decoder: Callable[[torch.Tensor], torch.Tensor], z: torch.Tensor, *, n_iter: int = 30,
                            generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """The top right singular vector of each latent's decoder Jacobian, by power iteration on ``J^T J``.

    ``decoder`` maps ``z`` ``[N, d]`` to outputs ``[N, ...]``, each row depending on its own latent
    only (so one batched ``jvp``/``vjp`` gives every row's own product). Starting from a seeded
    random unit vector per latent, ``n_iter`` steps of ``v <- J^T J v / ||J^T J v||``
    (``torch.func.jvp`` then ``torch.func.vjp``, exact products, no finite differences). Returns
    ``(direction [N, d], sigma [N])`` with ``sigma = ||J v||`` (the top singular value once
    converged) and each direction's sign fixed so that its largest-magnitude coordinate is positive.

    Why this is the image decoders' sharpest direction: a squared error against the clean decode
    has zero gradient at ``z``, and ``loss(z + s u) - loss(z) = s^2 ||J u||^2 + O(s^3)``; ``v``
    maximises it over unit ``u``, so its DABI at small ``s`` is the largest any direction can have,
    ``d sigma_1^2 / ||J||_F^2`` (an isotropic ``u`` gets ``||J||_F^2 / d``).
    """
    _check_latents(z)
    check_range("n_iter", n_iter, 1, None, integer=True)
    x = z.detach()
    v = isotropic_directions(x.shape, generator, dtype=x.dtype, device=x.device)
    with torch.enable_grad():
        _, vjp_fn = torch.func.vjp(decoder, x)
        for _ in range(n_iter):
            _, jv = torch.func.jvp(decoder, (x,), (v,))
            (jtjv,) = vjp_fn(jv)
            v = jtjv / jtjv.norm(dim=1, keepdim=True).clamp_min(torch.finfo(x.dtype).tiny)
        _, jv = torch.func.jvp(decoder, (x,), (v,))
    sigma = jv.detach().flatten(1).norm(dim=1)
    v = v.detach()
    lead = v.gather(1, v.abs().argmax(1, keepdim=True))
    return v * torch.where(lead < 0, -1.0, 1.0).to(v.dtype), sigma


@dataclass(frozen=True)
class FlipRates:
    """Argmax flips under a structured and a norm-matched isotropic perturbation of norm ``norm``:
    Wilson intervals (``value`` is the fraction, ``n`` the number of latents) and the flip counts."""

    norm: float
    structured: Estimate
    isotropic: Estimate
    k_structured: int
    k_isotropic: int
    n: int


@torch.no_grad()
def flip_rates(readout_logits_fn: Callable[[torch.Tensor], torch.Tensor], z: torch.Tensor,
               structured_dir: torch.Tensor, norm: float, *, generator: torch.Generator,
               level: float = 0.95) -> FlipRates:
    """How often the readout's argmax at ``z`` ``[N, d]`` changes when moved by ``norm`` along
    ``structured_dir`` ``[N, d]`` (unit rows), against one isotropic unit direction per latent from
    ``generator``. ``readout_logits_fn`` maps ``[N, d]`` -> logits ``[N, V]``."""
    _check_latents(z)
    _check_directions(z, structured_dir)
    check_range("norm", norm, 0, None, lo_open=True)
    clean = readout_logits_fn(z).argmax(-1)
    iso = isotropic_directions(z.shape, generator, dtype=z.dtype, device=z.device)
    k_s = int((readout_logits_fn(z + norm * structured_dir).argmax(-1) != clean).sum())
    k_i = int((readout_logits_fn(z + norm * iso).argmax(-1) != clean).sum())
    n = len(z)
    return FlipRates(float(norm), wilson(k_s, n, level), wilson(k_i, n, level), k_s, k_i, n)
