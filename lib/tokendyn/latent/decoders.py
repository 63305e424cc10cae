"""Decoders under test for DABI: clean latents, a per-latent loss and structured directions, in one object.

Chapter 6 compares image decoders, text readouts and an identity anchor with one protocol
(:func:`tokendyn.latent.dabi.dabi_curves`). Each :class:`DecoderUnderTest` holds latents ``z``
``[N, d]`` (one row per token for text, one per image for images), the decoder's loss of a latent
against the clean target ``[N, d]`` -> ``[N]``, and one or two unit direction fields ``[N, d]``,
named by their *kind* so that decoders are compared like with like:

- ``"residual"``: the generator's own terminal residual ``z_hat - z`` (a flow's posterior-mean step),
  where the decoder has a generator (the image flows, the 16-d word flow, the contextual flow);
- ``"sharpest"``: the direction in which the decoder is sharpest. For a linear argmax readout the
  exact normal of the nearest decision boundary (:func:`.dabi.nearest_boundary`); for a nonlinear
  classifier head the unit gradient of the target's margin (:func:`.dabi.margin_loss`); for a smooth
  image decoder, which has no boundary, the top right singular vector of its Jacobian
  (:func:`.dabi.top_singular_directions`), the direction of largest squared-error increase.

Constructors: :func:`linear_readout`, :func:`classifier_head`, :func:`image_decoder` and
:func:`identity_anchor` (the identity with squared error, whose loss increase is ``s^2`` along every
unit direction: DABI is 1 exactly, up to round-off). :func:`mlm_states` and :func:`ar_states` read
a masked or causal LM's own hidden states and head, so a real model's readout is tested by the same
protocol. :func:`shipped_decoders` builds every shipped decoder with both kinds of direction where
they exist (chapter 6 and ``scripts/record_dabi.py`` share it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from ..core.checks import check_range
from .dabi import (Curves, DabiPoint, FlipRates, LineEval, cross_entropy, dabi, dabi_curves, flip_rates,
                   gradient_direction, loss_line, margin_loss, nearest_boundary, squared_error, top_singular_directions)

KINDS = ("image", "text", "anchor")
DIRECTION_KINDS = ("residual", "sharpest")
"""The two kinds of structured direction every decoder is measured along, where it has them."""


def _unit_rows(v: torch.Tensor) -> torch.Tensor:
    n = v.norm(dim=1, keepdim=True)
    if bool((n == 0).any()):
        raise ValueError("a structured direction is zero for some latent: it has no direction")
    return v / n


@dataclass
class DecoderUnderTest:
    """One decoder, its clean latents ``z`` ``[N, d]``, loss ``[N, d] -> [N]`` and unit direction
    fields ``directions`` (kind -> ``[N, d]``), each described in ``labels`` (kind -> words).
    ``logits`` (classifiers only) maps ``[N, d]`` -> ``[N, V]``; ``line`` is the decoder's
    :data:`.dabi.LineEval` (``None``: one loss call per norm, :func:`.dabi.loss_line`)."""

    name: str
    kind: str
    z: torch.Tensor
    loss: Callable[[torch.Tensor], torch.Tensor]
    directions: dict[str, torch.Tensor]
    labels: dict[str, str]
    logits: Callable[[torch.Tensor], torch.Tensor] | None = None
    line: LineEval | None = field(default=None, repr=False)

    @property
    def structured(self) -> torch.Tensor:
        """The first direction field (the sharpest one where the decoder has it) ``[N, d]``."""
        return next(iter(self.directions.values()))

    @property
    def direction(self) -> str:
        """Words for :attr:`structured`."""
        return next(iter(self.labels.values()))

    @property
    def vocab(self) -> int | None:
        """The width of the logits (the classes a readout chooses among); ``None`` for a decoder
        that is not a classifier."""
        return None if self.logits is None else int(self.logits(self.z[:1]).shape[-1])

    @property
    def rms(self) -> float:
        """RMS per coordinate of the clean latents: the scale against which a norm is small."""
        return float(self.z.double().pow(2).mean().sqrt())

    def _along(self, along: str | None) -> torch.Tensor:
        if along is None:
            return self.structured
        if along not in self.directions:
            raise ValueError(f"{self.name} has no {along!r} direction; it has {sorted(self.directions)}")
        return self.directions[along]

    def dabi(self, norms: Sequence[float], *, along: str | None = None, seed: int = 0, n_iso: int = 8,
             n_boot: int = 2000) -> list[DabiPoint]:
        """:func:`.dabi.dabi` at each norm along ``along`` (default: :attr:`structured`), isotropic
        directions seeded by ``seed``."""
        return dabi(self.loss, self.z, self._along(along), norms, n_iso=n_iso,
                    generator=torch.Generator().manual_seed(seed), n_boot=n_boot, seed=seed)

    def curves(self, norms: Sequence[float], *, seed: int = 0, n_iso: int = 8, n_boot: int = 2000) -> Curves:
        """:func:`.dabi.dabi_curves` along every direction kind at each absolute norm, against one set
        of isotropic directions seeded by ``seed``; flips too for a classifier."""
        line = self.line if self.line is not None else loss_line(self.loss, self.z)
        return dabi_curves(line, self.z, self.directions, norms, n_iso=n_iso,
                           generator=torch.Generator().manual_seed(seed), n_boot=n_boot, seed=seed)

    def flips(self, norm: float, *, along: str | None = None, seed: int = 0) -> FlipRates:
        """Argmax flips at ``norm``, structured (``along``) against one isotropic direction per latent."""
        if self.logits is None:
            raise ValueError(f"{self.name} is not a classifier: it has no argmax to flip")
        return flip_rates(self.logits, self.z, self._along(along), norm,
                          generator=torch.Generator().manual_seed(seed))


def _chunks(n: int, chunk: int) -> list[slice]:
    return [slice(a, min(a + chunk, n)) for a in range(0, n, chunk)]


def linear_line(weight: torch.Tensor, bias: torch.Tensor, z: torch.Tensor, target: torch.Tensor, *,
                chunk: int = 512) -> LineEval:
    """The :data:`.dabi.LineEval` of a linear readout (``weight`` ``[V, d]``, ``bias`` ``[V]``) with
    cross-entropy against ``target`` ``[N]`` on latents ``z`` ``[N, d]``: logits at ``z + s u`` are
    ``z W^T + b + s (u W^T)``, so each ``chunk`` of latents costs two products with ``W`` whatever the
    number of norms. Same dtype as the inputs (float64 in :func:`linear_readout`)."""
    check_range("chunk", chunk, 1, None, integer=True)

    def line(u: torch.Tensor, norms: Sequence[float]) -> tuple[torch.Tensor, torch.Tensor]:
        loss = torch.empty(len(norms), len(z), dtype=torch.float64)
        cls = torch.empty(len(norms), len(z), dtype=torch.long)
        for sl in _chunks(len(z), chunk):
            base, step = z[sl] @ weight.T + bias, u[sl] @ weight.T  # [n, V] each
            for i, s in enumerate(norms):
                lg = base + s * step if s != 0 else base
                loss[i, sl] = cross_entropy(lg, target[sl]).double()
                cls[i, sl] = lg.argmax(1)
        return loss, cls

    return line


def head_line(head: Callable[[torch.Tensor], torch.Tensor], z: torch.Tensor, target: torch.Tensor, *,
              chunk: int = 512) -> LineEval:
    """The :data:`.dabi.LineEval` of a classifier ``head`` (``[n, d]`` -> logits ``[n, V]``) with
    cross-entropy against ``target`` ``[N]``: one head call per norm and ``chunk`` of latents, the
    cross-entropy taken in float64 (a confident head's small increases round to 0 in float32)."""
    check_range("chunk", chunk, 1, None, integer=True)

    def line(u: torch.Tensor, norms: Sequence[float]) -> tuple[torch.Tensor, torch.Tensor]:
        loss = torch.empty(len(norms), len(z), dtype=torch.float64)
        cls = torch.empty(len(norms), len(z), dtype=torch.long)
        for sl in _chunks(len(z), chunk):
            for i, s in enumerate(norms):
                lg = head(z[sl] + s * u[sl])
                loss[i, sl] = cross_entropy(lg.double(), target[sl])
                cls[i, sl] = lg.argmax(1)
        return loss, cls

    return line


def linear_readout(name: str, weight: torch.Tensor, bias: torch.Tensor, z: torch.Tensor,
                   residual: torch.Tensor | None = None, *, dtype: torch.dtype = torch.float64) -> DecoderUnderTest:
    """A linear readout ``logits = z W^T + b`` (``weight`` ``[V, d]``) on latents ``z`` ``[N, d]``.

    The target is the clean decode. Directions: ``"sharpest"``, the nearest boundary's exact normal,
    and with ``residual`` ``[N, d]`` (a generator's residual) also ``"residual"``, its unit direction.
    Computed in ``dtype`` (float64 by default: a confident readout's small loss increases round to 0
    in float32).
    """
    w, b, zz = weight.to(dtype), bias.to(dtype), z.to(dtype)
    _, _, normal = nearest_boundary(w, b, zz)
    target = (zz @ w.T + b).argmax(1)

    def logits(x: torch.Tensor) -> torch.Tensor:
        return x @ w.T + b

    def loss(x: torch.Tensor) -> torch.Tensor:
        return cross_entropy(logits(x), target)

    dirs, labels = {"sharpest": normal}, {"sharpest": "nearest boundary normal"}
    if residual is not None:
        dirs["residual"], labels["residual"] = _unit_rows(residual.to(dtype)), "generator residual"
    return DecoderUnderTest(name, "text", zz, loss, dirs, labels, logits, linear_line(w, b, zz, target))


def classifier_head(name: str, head: Callable[[torch.Tensor], torch.Tensor], z: torch.Tensor) -> DecoderUnderTest:
    """A differentiable classifier ``head`` (``[N, d]`` -> logits ``[N, V]``) on hidden states ``z``.

    Target: the clean argmax; ``"sharpest"`` direction: the unit gradient of the margin loss (towards
    the nearest boundary to first order). A head with no generator has no ``"residual"``."""
    with torch.no_grad():
        target = torch.cat([head(z[sl]).argmax(1) for sl in _chunks(len(z), 1024)])
    direction = gradient_direction(head, margin_loss, z, target)

    def loss(x: torch.Tensor) -> torch.Tensor:
        return cross_entropy(head(x).double(), target)

    return DecoderUnderTest(name, "text", z, loss, {"sharpest": direction}, {"sharpest": "margin gradient"},
                            head, head_line(head, z, target))


def image_decoder(name: str, decode: Callable[[torch.Tensor], torch.Tensor], z: torch.Tensor,
                  residual: torch.Tensor | None = None, *, n_iter: int = 30, seed: int = 0) -> DecoderUnderTest:
    """A smooth image decoder of latent sequences ``z`` ``[N, P, c]`` -> images; squared error against
    the clean decode. Directions, per image flattened to ``[N, P * c]``: ``"sharpest"``, the top
    right singular vector of the decoder's Jacobian (:func:`.dabi.top_singular_directions`,
    ``n_iter`` power steps from a start seeded by ``seed``), and with ``residual`` ``[N, P, c]``
    also ``"residual"``, its unit direction."""
    if z.dim() != 3 or (residual is not None and residual.shape != z.shape):
        raise ValueError(f"z and residual must be [N, P, c] of one shape, got {tuple(z.shape)}, "
                         f"{None if residual is None else tuple(residual.shape)}")
    shape = z.shape[1:]
    with torch.no_grad():
        clean = decode(z)

    def flat_decode(x: torch.Tensor) -> torch.Tensor:
        return decode(x.reshape(-1, *shape))

    def loss(x: torch.Tensor) -> torch.Tensor:
        return squared_error(decode(x.reshape(-1, *shape).float()).double(), clean.double())

    labels = {"sharpest": "decoder Jacobian top singular direction"}
    res = None if residual is None else _unit_rows(residual.flatten(1).double())  # zero residuals fail first
    top, _ = top_singular_directions(flat_decode, z.flatten(1).float(), n_iter=n_iter,
                                     generator=torch.Generator().manual_seed(seed))
    dirs = {"sharpest": _unit_rows(top.double())}
    if res is not None:
        dirs["residual"], labels["residual"] = res, "generator residual"
    return DecoderUnderTest(name, "image", z.flatten(1).double(), loss, dirs, labels)


def identity_anchor(z: torch.Tensor, structured: torch.Tensor) -> DecoderUnderTest:
    """The identity decoder with squared error on ``z`` ``[N, d]``: DABI 1 for any unit ``structured``."""
    zz = z.double()

    def loss(x: torch.Tensor) -> torch.Tensor:
        return squared_error(x, zz)

    return DecoderUnderTest("identity (squared error)", "anchor", zz, loss, {"any": _unit_rows(structured.double())},
                            {"any": "any direction"})


@torch.no_grad()
def mlm_states(loaded: Any, texts: Sequence[str], n_tokens: int, *, max_len: int = 64
               ) -> tuple[torch.Tensor, Callable[[torch.Tensor], torch.Tensor]]:
    """A BERT-style masked LM's last hidden states at the content tokens of ``texts`` (wrapped
    ``[CLS] ... [SEP]``, truncated to ``max_len``), the first ``n_tokens`` of them ``[n_tokens, H]``,
    and its own MLM head (``[N, H]`` -> logits ``[N, V]``)."""
    check_range("n_tokens", n_tokens, 2, None, integer=True)
    model, tok = loaded.model, loaded.tokenizer
    enc = tok(list(texts), truncation=True, max_length=max_len, padding=True, return_tensors="pt",
              return_special_tokens_mask=True)
    special = enc.pop("special_tokens_mask").bool()
    h = model.base_model(**enc).last_hidden_state  # [B, T, H]
    z = h[(enc["attention_mask"].bool() & ~special)]
    if len(z) < n_tokens:
        raise ValueError(f"n_tokens={n_tokens} is out of range: these texts hold {len(z)} content tokens")
    return z[:n_tokens].float(), model.cls


@torch.no_grad()
def ar_states(loaded: Any, texts: Sequence[str], n_tokens: int, *, max_len: int = 64
              ) -> tuple[torch.Tensor, torch.Tensor]:
    """A causal LM's final (normed) hidden states at the tokens of ``texts``, the first ``n_tokens``
    ``[n_tokens, H]``, and its linear output head's weight ``[V, H]`` (next-token logits = z W^T)."""
    check_range("n_tokens", n_tokens, 2, None, integer=True)
    model, tok = loaded.model, loaded.tokenizer
    rows = []
    for t in texts:
        ids = tok(t, return_tensors="pt", truncation=True, max_length=max_len)["input_ids"]
        rows.append(model.model(input_ids=ids).last_hidden_state[0])
        if sum(len(r) for r in rows) >= n_tokens:
            break
    z = torch.cat(rows)
    if len(z) < n_tokens:
        raise ValueError(f"n_tokens={n_tokens} is out of range: these texts hold {len(z)} tokens")
    head = model.get_output_embeddings()
    if getattr(head, "bias", None) is not None:
        raise ValueError("the causal LM's output head has a bias: use linear_readout with it")
    return z[:n_tokens].float(), head.weight.detach().float()


SHIPPED = ("digits AE", "faces AE", "16-d word readout", "contextual readout", "minilm-mlm head", "SmolLM2 head")
"""The shipped decoders of chapter 6, in its order: two image decoders, then four text readouts."""


def shipped_decoders(models: Mapping[str, Any], *, n_tokens: int, n_digits: int, n_faces: int, terminal_k: int,
                     seed: int, passages: Sequence[str], names: Sequence[str] = SHIPPED,
                     n_iter: int = 30) -> dict[str, DecoderUnderTest]:
    """Every shipped decoder of ``names`` (default :data:`SHIPPED`) with both kinds of direction where
    it has them, as chapter 6 and ``scripts/record_dabi.py`` measure them.

    ``models``: the loaded ``"digits"``, ``"faces"`` (image latent models), ``"word"`` (16-d word
    model), ``"context"`` (contextual model), ``"mlm"`` (``minilm-mlm``) and ``"ar"`` (SmolLM2);
    only those that ``names`` needs are read. Latents: ``n_digits`` / ``n_faces`` held-out images,
    ``n_tokens`` held-out tokens (``n_tokens / 32`` windows of 32 for the two latent text models; the
    first ``n_tokens`` content tokens of ``passages`` for the two LMs, which must hold that many).
    ``"residual"``: the flow's oracle terminal step at ``K = terminal_k`` minus the clean latent
    (:func:`tokendyn.latent.tube.oracle_terminal`, noise from a generator seeded by ``seed`` per
    model, so one decoder's directions do not depend on which others are built). The minilm-mlm and
    SmolLM2 heads have no generator of latents: ``"sharpest"`` only.
    """
    from . import tube

    check_range("n_tokens", n_tokens, 64, None, integer=True)
    check_range("terminal_k", terminal_k, 2, None, integer=True)
    unknown = [n for n in names if n not in SHIPPED]
    if unknown:
        raise ValueError(f"names {unknown} are not shipped decoders; allowed: {list(SHIPPED)}")
    out: dict[str, DecoderUnderTest] = {}
    with torch.no_grad():
        for name in names:
            g = torch.Generator().manual_seed(seed)
            if name in ("digits AE", "faces AE"):
                model, n = (models["digits"], n_digits) if name == "digits AE" else (models["faces"], n_faces)
                ae = model.autoencoder
                z = ae.encode(model.heldout(n, seed=seed))  # [n, P, c]
                z_hat, _ = tube.oracle_terminal(model.flow, z, terminal_k, g)
                out[name] = image_decoder(name, ae.decode, z, z_hat - z, n_iter=n_iter, seed=seed)
            elif name in ("16-d word readout", "contextual readout"):
                model = models["word"] if name == "16-d word readout" else models["context"]
                ae = model.autoencoder
                x1 = ae.encode(model.heldout(n_tokens // 32, seed=seed))  # [B, 32, d]
                x_hat, _ = tube.oracle_terminal(model.flow, x1, terminal_k, g)
                out[name] = linear_readout(name, ae.readout.weight, ae.readout.bias, x1.flatten(0, 1),
                                           (x_hat - x1).flatten(0, 1))
            elif name == "minilm-mlm head":
                z, head = mlm_states(models["mlm"], passages, n_tokens)
                out[name] = classifier_head(name, head, z)
            else:
                z, w = ar_states(models["ar"], passages, n_tokens)
                out[name] = linear_readout(name, w, torch.zeros(len(w)), z)
    return out


def curve_rows(dut: DecoderUnderTest, norms: Sequence[float], *, seed: int = 0, n_iso: int = 8,
               n_boot: int = 2000) -> list[dict[str, Any]]:
    """:meth:`DecoderUnderTest.curves` at ``norms`` given in units of the decoder's latent RMS per
    coordinate, as flat rows: one per direction kind and norm, with the DABI and its interval, the
    mean structured and isotropic loss increases and (classifiers) the flips along that direction and
    along the first isotropic direction with their Wilson intervals."""
    norms = [float(s) for s in norms]
    rms = dut.rms
    cv = dut.curves([s * rms for s in norms], seed=seed, n_iso=n_iso, n_boot=n_boot)
    rows = []
    for kind, pts in cv.points.items():
        for i, (s, p) in enumerate(zip(norms, pts)):
            row = {"decoder": dut.name, "kind": dut.kind, "along": kind, "direction": dut.labels[kind], "norm": s,
                   "latent norm": p.norm, "rms": rms, "n": int(p.ratio.n), "DABI": p.ratio.value, "lo": p.ratio.lo,
                   "hi": p.ratio.hi, "structured increase": p.structured, "isotropic increase": p.isotropic}
            if cv.flips.get(kind):
                f = cv.flips[kind][i]
                row.update({"flips": f.structured.value, "flips_lo": f.structured.lo, "flips_hi": f.structured.hi,
                            "k_flips": f.k_structured, "iso_flips": f.isotropic.value, "iso_flips_lo": f.isotropic.lo,
                            "iso_flips_hi": f.isotropic.hi, "k_iso_flips": f.k_isotropic})
            rows.append(row)
    return rows


def argmax_decoder(head: nn.Module, chunk: int = 4096) -> Callable[[torch.Tensor], torch.Tensor]:
    """The decode ``[..., d] -> [...]`` ids of a head ``[N, d] -> [N, V]``: argmax, ``chunk`` latents at a time."""
    check_range("chunk", chunk, 1, None, integer=True)

    @torch.no_grad()
    def decode(z: torch.Tensor) -> torch.Tensor:
        flat = z.reshape(-1, z.shape[-1])
        return torch.cat([head(c).argmax(-1) for c in flat.split(chunk)]).reshape(z.shape[:-1])

    return decode


@torch.no_grad()
def logit_gaps(head: nn.Module, z: torch.Tensor, chunk: int = 4096) -> torch.Tensor:
    """Top-1 minus top-2 logit of a head at each latent ``[N, d]`` -> ``[N]``: the cliff's height
    (a readout's sharpness), where the Euclidean margin is its distance."""
    return torch.cat([head(c).topk(2, -1).values.diff(dim=-1).neg()[:, 0] for c in z.split(chunk)])
