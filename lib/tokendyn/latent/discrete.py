"""Discrete generators with and without categorical commitment: autoregressive and masked diffusion.

Paper 2's escape is commitment: a sampler that locks a token at a position and feeds that token
back. Its ablation keeps the sharp readout and the same random draws but feeds back the
probability-weighted (expected) embedding instead of the drawn token's embedding. Both samplers
here take ``feedback``:

- ``"token"``: the drawn token's input embedding is fed back (committed; CCI 1 once finished);
- ``"expected"``: ``p @ E`` is fed back, ``p`` the (tempered) next-token or site distribution and
  ``E`` the model's input embedding matrix. No discrete selection enters the state, so CCI is 0.

The emitted text is the drawn tokens in both cases: the same uniforms give the same draw whenever
the distributions agree, so the two variants differ only by what is fed back. The model runs in its
own dtype (float32 here); the tempered softmax and the draw are float64, as every sampler of the
project (:mod:`tokendyn.mcmc.sampling`; recorded in :attr:`Decoded.precision`).

:func:`ar_decode` runs a causal LM (SmolLM2 offline) with a key-value cache;
:func:`mask_diffusion_decode` unmasks a fixed number of random positions of a ``[MASK]`` sequence
per step with a masked LM (``[CLS] ... [SEP]`` wrapping) and never re-masks them ("unmask and
commit"; no confidence-based remasking).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from ..core.checks import check_choice, check_range
from ..core.positions import check_content_fits, check_context
from ..mcmc.sampling import draw, probabilities, uniforms
from .commitment import Commitment, commitment_index, continuous_commitment_index

FEEDBACK = ("token", "expected")
UNDECIDED = -1


@dataclass(frozen=True)
class Decoded:
    """A decoded batch: ``tokens`` ``[B, n]`` (the emitted ids), ``cci`` (from the sampler's own
    trajectory: the id states ``[steps + 1, B, n]`` with ``-1`` undecided when tokens are fed back,
    the fed-back embeddings when expected embeddings are), ``feedback`` and ``precision``."""

    tokens: Tensor
    cci: Commitment
    feedback: str
    precision: str = ""


def _draw(logits: Tensor, tau: float, gen: torch.Generator, banned: Tensor | None) -> tuple[Tensor, Tensor]:
    """Probabilities ``[..., V]`` (float64, ``banned`` ids at zero) and one draw per row ``[...]``:
    the project's tempered softmax and inverse-CDF draw (:mod:`tokendyn.mcmc.sampling`), one CPU uniform
    per row, so a seed gives the same draws on any device."""
    z = logits.reshape(-1, logits.shape[-1])
    if banned is not None:
        z = z.clone()
        z[:, banned.to(z.device)] = float("-inf")
    p = probabilities(z, tau)
    u = uniforms(p.shape[0], gen, torch.device("cpu")).to(p.device)
    idx, _ = draw(p, u)
    return p.reshape(logits.shape), idx.reshape(logits.shape[:-1])


def _precision(emb: Tensor) -> str:
    return f"model {str(emb.dtype).removeprefix('torch.')}, draws float64"


def _check(feedback: str, tau: float, n_new: int, seed: int) -> None:
    check_choice("feedback", feedback, FEEDBACK)
    # finite: an infinite tau turns banned ids' -inf logits into nan probabilities
    check_range("tau", tau, 0, math.inf, lo_open=True, hi_open=True)
    check_range("n", n_new, 1, 4096, integer=True)
    check_range("seed", seed, 0, None, integer=True)


def _check_banned(banned: Tensor | None, vocab: int) -> None:
    """``banned`` ``[k]``: distinct integer ids in ``[0, vocab)`` that leave at least one token."""
    if banned is None:
        return
    if not isinstance(banned, Tensor) or banned.dim() != 1 or banned.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"banned must be an integer torch.Tensor [k] of token ids, got "
                        f"{tuple(banned.shape) if isinstance(banned, Tensor) else type(banned).__name__}"
                        f"{' ' + str(banned.dtype) if isinstance(banned, Tensor) else ''}")
    if banned.numel() and (int(banned.min()) < 0 or int(banned.max()) >= vocab):
        raise ValueError(f"banned must hold token ids in [0, {vocab}), got ids in "
                         f"[{int(banned.min())}, {int(banned.max())}]")
    if banned.unique().numel() >= vocab:
        raise ValueError(f"banned holds all {vocab} token ids: nothing is left to draw")


@torch.no_grad()
def ar_decode(model: Any, prompt: Tensor, n_new: int, *, seed: int, tau: float = 1.0,
              feedback: str = "token", banned: Tensor | None = None) -> Decoded:
    """Sample ``n_new`` tokens after ``prompt`` ``[B, p]`` (equal-length prompts, no padding) with a
    causal LM (a transformers ``*ForCausalLM``). Returns :class:`Decoded` with ``tokens`` ``[B, n_new]``.

    ``feedback="expected"`` feeds ``p @ E`` at each new position (the commitment ablation).
    ``banned`` ``[k]``: ids never drawn (e.g. end-of-text, so every row has ``n_new`` tokens).
    """
    _check(feedback, tau, n_new, seed)
    if not isinstance(prompt, Tensor) or prompt.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"prompt must be an integer torch.Tensor [B, p] of token ids, got "
                        f"{prompt.dtype if isinstance(prompt, Tensor) else type(prompt).__name__}")
    if prompt.dim() != 2 or prompt.shape[1] < 1 or prompt.shape[0] < 1:
        raise ValueError(f"prompt must be [B, p] with B >= 1 and p >= 1, got shape {tuple(prompt.shape)}")
    p_len = prompt.shape[1]
    check_context(model, p_len + n_new, what=f"prompt p={p_len} + n={n_new} new tokens",
                  allowed="p + n")
    dev = next(model.parameters()).device
    emb = model.get_input_embeddings().weight  # [V, h]
    head = model.get_output_embeddings()
    vocab = int(head.weight.shape[0]) if head is not None else int(emb.shape[0])
    if int(prompt.min()) < 0 or int(prompt.max()) >= emb.shape[0]:
        raise ValueError(f"prompt must hold token ids in [0, {emb.shape[0]}), got ids in "
                         f"[{int(prompt.min())}, {int(prompt.max())}]")
    _check_banned(banned, vocab)
    gen = torch.Generator().manual_seed(seed)
    out = model(input_ids=prompt.to(dev), use_cache=True)
    past, logits = out.past_key_values, out.logits[:, -1]
    b = prompt.shape[0]
    states = torch.full((n_new + 1, b, n_new), UNDECIDED, dtype=torch.long)
    fed = torch.zeros(n_new + 1, b, n_new, emb.shape[1])
    toks = []
    for k in range(n_new):
        p, tok = _draw(logits, tau, gen, banned)
        toks.append(tok)
        states[k + 1] = states[k]
        states[k + 1, :, k] = tok.cpu()
        x = emb[tok] if feedback == "token" else (p.to(emb.dtype) @ emb)  # [B, h]
        fed[k + 1] = fed[k]
        fed[k + 1, :, k] = x.float().cpu()
        out = model(inputs_embeds=x[:, None, :], cache=past, use_cache=True)  # transformers 5: `cache`
        past, logits = out.past_key_values, out.logits[:, -1]
    cci = commitment_index(states) if feedback == "token" else continuous_commitment_index(fed)
    return Decoded(torch.stack(toks, 1).cpu(), cci, feedback, _precision(emb))


@torch.no_grad()
def mask_diffusion_decode(loaded: Any, n: int, batch: int, steps: int, *, seed: int, tau: float = 1.0,
                          feedback: str = "token") -> Decoded:
    """Masked-diffusion decoding with a masked LM (``loaded.model``, ``loaded.tokenizer``).

    Starts from ``[CLS] [MASK] * n [SEP]`` for ``batch`` rows; each of ``steps`` steps unmasks
    ``n / steps`` positions (a seeded random order per row, the last step takes the rest) by drawing
    from the model's distribution at them given the current state, special tokens excluded.
    ``feedback="token"`` writes the drawn ids (unmask and commit); ``"expected"`` writes ``p @ E``
    there instead and keeps it. Returns :class:`Decoded` with ``tokens`` ``[batch, n]``.
    """
    _check(feedback, tau, n, seed)
    check_range("batch", batch, 1, None, integer=True)
    check_range("steps", steps, 1, n, integer=True)
    model, tok = loaded.model, loaded.tokenizer
    check_content_fits(model, n, extra=2, wrapping=f" with {tok.cls_token}/{tok.sep_token} wrapping",
                       label=getattr(loaded, "name", type(model).__name__))
    dev = next(model.parameters()).device
    emb = model.get_input_embeddings().weight
    gen = torch.Generator().manual_seed(seed)
    ids = torch.full((batch, n + 2), tok.mask_token_id, dtype=torch.long)
    ids[:, 0], ids[:, -1] = tok.cls_token_id, tok.sep_token_id
    x = emb[ids.to(dev)].clone()  # [B, n + 2, h]
    banned = torch.tensor(sorted(set(tok.all_special_ids)), dtype=torch.long)
    order = torch.argsort(torch.rand(batch, n, generator=gen), 1)  # position k unmasked at rank order
    bounds = torch.linspace(0, n, steps + 1).round().long()
    states = torch.full((steps + 1, batch, n), UNDECIDED, dtype=torch.long)
    fed = torch.zeros(steps + 1, batch, n, emb.shape[1])
    out_tok = torch.full((batch, n), UNDECIDED, dtype=torch.long)
    rows = torch.arange(batch)[:, None]
    for s in range(steps):
        sel = order[:, bounds[s]:bounds[s + 1]]  # [B, m] content positions
        logits = model(inputs_embeds=x).logits[:, 1:-1]  # [B, n, V]
        p, t = _draw(logits[rows, sel], tau, gen, banned)  # [B, m, V], [B, m]
        out_tok[rows, sel] = t.cpu()
        states[s + 1] = states[s]
        states[s + 1][rows, sel] = t.cpu()
        x[rows, sel + 1] = emb[t] if feedback == "token" else (p.to(emb.dtype) @ emb)
        fed[s + 1] = fed[s]
        fed[s + 1][rows, sel] = x[rows, sel + 1].float().cpu()
    cci = commitment_index(states) if feedback == "token" else continuous_commitment_index(fed)
    return Decoded(out_tok, cci, feedback, _precision(emb))
