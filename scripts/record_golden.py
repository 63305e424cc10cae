"""Golden seeded trajectories of the samplers on exact toy models (float64, so no float order can
move a token): every chain at every step, for the Glauber and coupled kernels, the kinetic
(one move at a time) sampler, and the ODE and SDE samplers on an exact token mixture (their
latents at every step, compared to 1e-9, and the decoded tokens, exactly). ``tests/test_golden.py`` replays each case and compares
whole trajectories; re-record only when a change of the random-number order is intended, and say
why in the commit.

Usage: ``python scripts/record_golden.py`` -> ``tests/golden/samplers.json``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))

from tokendyn.mcmc import glauber, toy  # noqa: E402
from tokendyn.analysis import traps
from tokendyn.latent import exact, samplers  # noqa: E402
from tokendyn.core.atomic import write_json  # noqa: E402

OUT = ROOT / "tests" / "golden" / "samplers.json"


def _model(spec: dict[str, Any]) -> toy.PairwiseConditional:
    kind = spec["model"]
    if kind == "potts":
        return toy.potts_chain(spec["n"], spec["q"], field=spec.get("field", 0.5), seed=spec["model_seed"])
    if kind == "incompatible_ising":
        return toy.incompatible_ising(spec["n"], seed=spec["model_seed"])
    raise ValueError(f"unknown golden model {kind!r}")


def _tau(spec: dict[str, Any]) -> float | torch.Tensor:
    tau = spec["tau"]
    return torch.tensor(tau, dtype=torch.float64) if isinstance(tau, list) else tau


# Each case: a toy model, a start, a seed, a temperature. The large-q Potts model spans several
# blocks of the draw's two-level inverse CDF (sampling.BLOCK) with a ragged tail.
CASES: list[dict[str, Any]] = [
    {"name": "potts6x4-tau1", "kind": "glauber", "model": "potts", "n": 6, "q": 4, "model_seed": 0,
     "batch": 8, "steps": 30, "tau": 1.0, "seed": 5},
    {"name": "potts6x4-tau0.05", "kind": "glauber", "model": "potts", "n": 6, "q": 4, "model_seed": 0,
     "batch": 8, "steps": 30, "tau": 0.05, "seed": 5},
    {"name": "potts6x4-tau100", "kind": "glauber", "model": "potts", "n": 6, "q": 4, "model_seed": 0,
     "batch": 8, "steps": 30, "tau": 100.0, "seed": 5},
    {"name": "potts6x4-per-chain-tau", "kind": "glauber", "model": "potts", "n": 6, "q": 4, "model_seed": 0,
     "batch": 4, "steps": 30, "tau": [0.3, 1.0, 3.0, 30.0], "seed": 7},
    {"name": "potts3x1300-tau0.7", "kind": "glauber", "model": "potts", "n": 3, "q": 1300, "field": 2.0,
     "model_seed": 1, "batch": 16, "steps": 40, "tau": 0.7, "seed": 3},
    {"name": "ising8-maximal", "kind": "coupled", "coupling": "maximal", "model": "incompatible_ising",
     "n": 8, "model_seed": 0, "batch": 8, "steps": 40, "tau": 1.0, "seed": 11},
    {"name": "potts6x4-crn", "kind": "coupled", "coupling": "crn", "model": "potts", "n": 6, "q": 4,
     "model_seed": 0, "batch": 8, "steps": 40, "tau": 1.5, "seed": 13},
    {"name": "potts6x4-kinetic-tau0.4", "kind": "kinetic", "model": "potts", "n": 6, "q": 4, "model_seed": 0,
     "batch": 8, "steps": 25, "tau": 0.4, "seed": 17},
    {"name": "mixture-ode-K4", "kind": "flow", "sampler": "ode", "d": 4, "M": 6, "sigma": 0.5, "model_seed": 2,
     "batch": 4, "length": 3, "steps": 4, "seed": 19},
    {"name": "mixture-sde-K4", "kind": "flow", "sampler": "sde", "d": 4, "M": 6, "sigma": 0.5, "model_seed": 2,
     "batch": 4, "length": 3, "steps": 4, "seed": 19},
]


def _flow(spec: dict[str, Any]) -> dict[str, Any]:
    """ODE (Euler) or SDE steps on an exact token mixture: the latents at every grid time and the
    readout's tokens of the last."""
    net = exact.TokenMixture(exact.token_means(spec["d"], spec["M"], seed=spec["model_seed"]), spec["sigma"])
    gen = torch.Generator().manual_seed(spec["seed"])
    x = torch.randn(spec["batch"], spec["length"], spec["d"], generator=gen, dtype=torch.float64)
    state = samplers.init(x, 0.0, spec["steps"])
    zs = [state.x.tolist()]
    while not state.done:
        state, _info = (samplers.ode_step(net, state) if spec["sampler"] == "ode"
                        else samplers.sde_step(net, state, generator=gen))
        zs.append(state.x.tolist())
    return {"z": zs, "tokens": net.decode(state.x).tolist()}


def replay(spec: dict[str, Any]) -> dict[str, Any]:
    """A case's whole trajectory: ``{"x": [steps + 1][batch][n]}`` (and ``"y"`` for pairs; the
    kinetic sampler's ``"x"`` is one record per move, with ``"times"``; a flow's ``"z"`` and
    ``"tokens"``)."""
    if spec["kind"] == "flow":
        return _flow(spec)
    model = _model(spec)
    b, n = spec["batch"], model.n
    x0 = torch.zeros(b, n, dtype=torch.long)
    gen = torch.Generator().manual_seed(spec["seed"])
    tau = _tau(spec)
    if spec["kind"] == "glauber":
        s = glauber.init(x0)
        xs = [s.tokens.tolist()]
        for _ in range(spec["steps"]):
            s, _info = glauber.step(model, s, gen, tau=tau)
            xs.append(s.tokens.tolist())
        return {"x": xs}
    if spec["kind"] == "kinetic":
        k = traps.kinetic_sample(model, x0, tau=tau, moves=spec["steps"], seed=spec["seed"])
        return {"x": k.states.tolist(), "times": k.times.tolist()}
    y0 = torch.full((b, n), model.q - 1, dtype=torch.long)
    c = glauber.init_coupled(x0, y0)
    xs, ys = [c.x.tolist()], [c.y.tolist()]
    for _ in range(spec["steps"]):
        c, _info = glauber.coupled_step(model, c, gen, tau=tau, coupling=spec["coupling"])
        xs.append(c.x.tolist())
        ys.append(c.y.tolist())
    return {"x": xs, "y": ys}


def main() -> int:
    torch.set_num_threads(1)
    cases = [{**spec, **replay(spec)} for spec in CASES]
    write_json(OUT, {"kind": "golden-samplers", "command": "python scripts/record_golden.py", "cases": cases})
    print(f"wrote {OUT.relative_to(ROOT)}: {len(cases)} cases")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
