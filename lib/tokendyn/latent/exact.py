"""An exact posterior-mean generator: a Gaussian mixture whose modes are tokens.

``M`` token means ``mu_m`` in ``R^d``; a token ``m`` (weight ``pi_m``) has latents
``N(mu_m, sigma^2 I)``; the ``L`` positions of a sequence are independent. Under the rectified-flow
interpolation of :mod:`.flow`, ``x_t = t x1 + (1 - t) x0`` with ``x0 ~ N(0, I)``, given token ``m``
the state is ``x_t ~ N(t mu_m, V I)`` with ``V = t^2 sigma^2 + (1 - t)^2``, so everything is closed form:

    responsibilities   r_m(x, t) = softmax_m( log pi_m - |x - t mu_m|^2 / (2 V) )
    E[x1 | x_t, m]     = mu_m + (t sigma^2 / V) (x - t mu_m)
    E[x0 | x_t, m]     = ((1 - t) / V) (x - t mu_m)
    v(x, t)            = E[x1 - x0 | x_t] = sum_m r_m (mu_m + a (x - t mu_m)),  a = (t sigma^2 - (1 - t)) / V

This ``v`` equals ``(E[x1 | x_t] - x_t) / (1 - t)`` for ``t < 1`` and stays finite at ``t = 1``
(``v = x`` there), so no ``1 / (1 - t)`` has to be clamped. :class:`TokenMixture` is a drop-in
for :class:`~.flow.VelocityNet` (``forward(x [B, L, d], t [B]) -> [B, L, d]``): the samplers, the
oracle roll-in, the tube law and DABI run on it unchanged, with the generator's error known exactly.

Its readout is the Bayes classifier of clean latents (equal isotropic components):
``logits_m = mu_m . z / sigma^2 - |mu_m|^2 / (2 sigma^2) + log pi_m``, a
:class:`~.contextual.LinearReadout`; its boundaries are the (weight-shifted) bisectors of the means.

The terminal residual from ``t`` (noise scale ``s = (1 - t) / t``, ``lambda = s^2 / (sigma^2 + s^2)``) is

    E[x1 | x_t] - x1 = lambda (sum_m r_m mu_m - mu_y)  +  isotropic noise of s sigma / sqrt(sigma^2 + s^2) per coordinate,

the first term (mixing the token means) along the mean differences, i.e. the boundary normals.
So for ``s << sigma`` the residual is ``s eps`` and isotropic (flips follow the tube law with
``kappa = 1 / sqrt(2 pi)``, at a structured/isotropic ratio of 1); for ``s >~ sigma`` the mixing
term is aimed at the boundaries and the ratio grows with ``d`` until the isotropic part's norm,
``~ sqrt(d)`` times the above, dominates it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from ..core.checks import check_choice, check_range
from .contextual import LinearReadout

ARRANGEMENTS = ("random", "simplex")


def _finite_positive(name: str, value: float) -> None:
    check_range(name, value, 0, math.inf, lo_open=True, hi_open=True)


class TokenMixture(nn.Module):
    """The exact velocity of a token Gaussian mixture (module docstring): means ``[M, d]``, one
    ``sigma`` for every token, ``weights`` ``[M]`` (uniform when ``None``). Computes in float64 and
    returns the input's dtype."""

    def __init__(self, means: torch.Tensor, sigma: float, weights: torch.Tensor | None = None):
        super().__init__()
        if not isinstance(means, torch.Tensor) or not means.is_floating_point() or means.dim() != 2:
            raise ValueError(f"means must be a float tensor [M, d], got "
                             f"{tuple(means.shape) if isinstance(means, torch.Tensor) else type(means).__name__}")
        check_range("M", means.shape[0], 2, None, integer=True)
        check_range("d", means.shape[1], 1, None, integer=True)
        if not torch.isfinite(means).all():
            raise ValueError("means must be finite")
        _finite_positive("sigma", sigma)
        m = means.shape[0]
        if weights is None:
            weights = torch.full((m,), 1.0 / m, dtype=torch.float64)
        weights = torch.as_tensor(weights, dtype=torch.float64)
        if weights.shape != (m,) or not torch.isfinite(weights).all() or (weights <= 0).any():
            raise ValueError(f"weights must be {m} positive finite numbers, got shape {tuple(weights.shape)}")
        if abs(float(weights.sum()) - 1) > 1e-6:  # float32 weights sum to 1 only to ~1e-7
            raise ValueError(f"weights must sum to 1 (within 1e-6), got {float(weights.sum())!r}")
        self.sigma = float(sigma)
        self.register_buffer("means", means.detach().to(torch.float64).clone())
        self.register_buffer("weights", weights / weights.sum())

    @property
    def d(self) -> int:
        return self.means.shape[1]

    @property
    def M(self) -> int:
        return self.means.shape[0]

    def _prep(self, x: torch.Tensor, t: float | torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``x`` ``[..., d]`` and ``t`` (scalar, 0-d, or ``[B]`` with ``x`` ``[B, ...]``) -> float64
        ``x`` and ``t`` shaped to broadcast against ``x``'s leading dims ``[B, 1, ..., 1]``."""
        if not isinstance(x, torch.Tensor) or not x.is_floating_point():
            raise TypeError(f"x must be a float torch.Tensor [..., d], got "
                            f"{x.dtype if isinstance(x, torch.Tensor) else type(x).__name__}")
        if x.dim() < 1 or x.shape[-1] != self.d:
            raise ValueError(f"x has shape {tuple(x.shape)}, but the mixture takes [..., d] with d = {self.d}")
        tt = torch.as_tensor(t, dtype=torch.float64, device=x.device)
        if tt.dim() == 1:
            if x.dim() < 2 or tt.shape[0] != x.shape[0]:
                raise ValueError(f"t [B] must match x's first dim: t {tuple(tt.shape)}, x {tuple(x.shape)}")
            tt = tt.reshape(-1, *([1] * (x.dim() - 1)))
        elif tt.dim() != 0:
            raise ValueError(f"t must be a scalar or [B], got shape {tuple(tt.shape)}")
        if ((tt < 0) | (tt > 1) | torch.isnan(tt)).any():
            raise ValueError("t is out of range: allowed [0, 1]")
        return x.to(torch.float64), tt

    def _resp(self, x: torch.Tensor, tt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Responsibilities ``[..., M]`` and the variance ``V`` (broadcast like ``tt``)."""
        var = tt * tt * self.sigma ** 2 + (1 - tt) ** 2
        # |x - t mu|^2 without |x|^2 (the same for every m): no [..., M, d] tensor.
        mu = self.means
        score = (tt * (x @ mu.T) - 0.5 * (tt * tt) * (mu * mu).sum(1)) / var + self.weights.log()
        # Log-odds floored at -700: exp stays a normal float (subnormals make CPU arithmetic ~100x
        # slower near t = 1); what that changes is below 1e-300.
        e = (score - score.max(-1, keepdim=True).values).clamp_min(-700.0).exp()
        return e / e.sum(-1, keepdim=True), var

    @torch.no_grad()
    def responsibilities(self, x: torch.Tensor, t: float | torch.Tensor) -> torch.Tensor:
        """``P(token m | x_t = x)``: ``x`` ``[..., d]`` at ``t`` -> ``[..., M]`` (float64)."""
        return self._resp(*self._prep(x, t))[0]

    @torch.no_grad()
    def posterior_mean(self, x: torch.Tensor, t: float | torch.Tensor) -> torch.Tensor:
        """``E[x1 | x_t = x]``: ``x`` ``[..., d]`` at ``t`` -> ``[..., d]`` (``x``'s dtype)."""
        xd, tt = self._prep(x, t)
        r, var = self._resp(xd, tt)
        c = tt * self.sigma ** 2 / var  # within-token shrinkage of x_t towards t mu_m
        return (c * xd + (1 - c * tt) * (r @ self.means)).to(x.dtype)

    @torch.no_grad()
    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """Exact velocity ``E[x1 - x0 | x_t = x]`` at ``x`` ``[B, L, d]``, ``t`` ``[B]`` (or 0-d)
        -> ``[B, L, d]`` in ``x``'s dtype; finite on all of ``[0, 1]``."""
        xd, tt = self._prep(x, t)
        r, var = self._resp(xd, tt)
        a = (tt * self.sigma ** 2 - (1 - tt)) / var
        return (a * xd + (1 - a * tt) * (r @ self.means)).to(x.dtype)

    def readout_weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The Bayes readout of clean latents as ``(weight [M, d], bias [M])`` (float64), the form
        :func:`~.tube.readout_margins` and :func:`~.dabi.nearest_boundary` take."""
        s2 = self.sigma ** 2
        return self.means / s2, -(self.means * self.means).sum(1) / (2 * s2) + self.weights.log()

    def readout(self, dtype: torch.dtype = torch.float64) -> LinearReadout:
        """The Bayes readout as a :class:`~.contextual.LinearReadout` (``logits``, ``decode``) in ``dtype``."""
        weight, bias = self.readout_weights()
        head = LinearReadout(self.d, self.M).to(dtype)
        with torch.no_grad():
            head.readout.weight.copy_(weight)
            head.readout.bias.copy_(bias)
        return head.eval()

    @torch.no_grad()
    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """Bayes-readout ids of latents ``[..., d]`` -> ``[...]`` (computed in float64)."""
        weight, bias = self.readout_weights()
        if z.shape[-1] != self.d:
            raise ValueError(f"z has shape {tuple(z.shape)}, but the readout takes [..., d] with d = {self.d}")
        return (z.to(torch.float64) @ weight.T + bias).argmax(-1)

    @torch.no_grad()
    def sample(self, shape: Sequence[int], generator: torch.Generator, *, dtype: torch.dtype = torch.float64
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """Clean latents and their token ids: ``shape`` (e.g. ``(B, L)``) -> ``(x1 [*shape, d], ids [*shape])``,
        seeded by ``generator``; ``ids`` are the mixture components (not the readout's decode)."""
        shape = tuple(int(s) for s in shape)
        if not shape or min(shape) < 1:
            raise ValueError(f"shape must hold sizes >= 1, got {shape}")
        if not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
        n = math.prod(shape)
        ids = torch.multinomial(self.weights, n, replacement=True, generator=generator)
        noise = torch.randn(n, self.d, generator=generator, dtype=torch.float64)
        x1 = self.means[ids] + self.sigma * noise
        return x1.reshape(*shape, self.d).to(dtype), ids.reshape(shape)


def token_means(d: int, M: int, *, spacing: float = 4.0, seed: int = 0, arrangement: str = "random"
                ) -> torch.Tensor:
    """``M`` token means in ``R^d``: ``[M, d]`` float64, seeded.

    ``"random"``: independent ``N(0, spacing^2 / (2 d) I)`` vectors, so two means are ``spacing``
    apart in root mean square. ``"simplex"`` (``M <= d + 1``): a regular simplex with every pair
    exactly ``spacing`` apart, centred at 0, in a random ``(M - 1)``-dimensional subspace; its margins
    do not depend on ``d`` (the extra coordinates are orthogonal to every boundary normal), so ``d``
    can be varied at matched margins.
    """
    check_range("d", d, 1, None, integer=True)
    check_range("M", M, 2, None, integer=True)
    _finite_positive("spacing", spacing)
    check_range("seed", seed, 0, None, integer=True)
    check_choice("arrangement", arrangement, ARRANGEMENTS)
    g = torch.Generator().manual_seed(seed)
    if arrangement == "random":
        return torch.randn(M, d, generator=g, dtype=torch.float64) * (spacing / math.sqrt(2 * d))
    check_range("M", M, 2, d + 1, integer=True)
    corners = torch.eye(M, dtype=torch.float64) - 1.0 / M  # pairwise sqrt(2) apart, in the plane sum = 0
    _, _, vh = torch.linalg.svd(corners)
    flat = corners @ vh[: M - 1].T  # [M, M - 1], distances kept
    frame, _ = torch.linalg.qr(torch.randn(d, M - 1, generator=g, dtype=torch.float64))  # [d, M - 1]
    return flat @ frame.T * (spacing / math.sqrt(2))


def token_mixture(d: int, M: int, *, spacing: float = 4.0, sigma: float = 0.5, seed: int = 0,
                  arrangement: str = "random", weights: torch.Tensor | None = None) -> TokenMixture:
    """A :class:`TokenMixture` over :func:`token_means` (``d``, ``M``, ``spacing``, ``seed``,
    ``arrangement``) with per-coordinate spread ``sigma`` and ``weights`` ``[M]`` (uniform if ``None``)."""
    _finite_positive("sigma", sigma)
    return TokenMixture(token_means(d, M, spacing=spacing, seed=seed, arrangement=arrangement), sigma, weights)
