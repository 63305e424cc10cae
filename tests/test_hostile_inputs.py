"""Bad arguments to public entry points fail at once with a ValueError/TypeError naming the
parameter and its range, not deep inside torch (a hostile user's probe).

Each test is one input that used to fail with a raw torch/Python error, or silently gave nan.
"""

from __future__ import annotations

import math
import re

import pytest
import torch

from tokendyn.core import checks, stats
from tokendyn.latent import discrete
from tokendyn.mcmc import fill, glauber, sampling, toy
from tokendyn.analysis import influence, rectangle, traps
from tokendyn.mcmc.conditional import MLMConditional
from tokendyn.mcmc.diagnostics.scaling import n_log_n
from tokendyn.latent import samplers
from tokendyn.latent.flow import FlowConfig, VelocityNet
from tokendyn.latent.tube import readout_margins
from tokendyn.models.tiny import build_tiny


def _m(s: str) -> str:
    return re.escape(s)


@pytest.fixture(scope="module")
def cond():
    return MLMConditional(build_tiny("bert"))


@pytest.fixture(scope="module")
def tiny_causal():
    from transformers import GPT2Config, GPT2LMHeadModel

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return GPT2LMHeadModel(GPT2Config(vocab_size=50, n_positions=32, n_embd=16, n_layer=1, n_head=2,
                                          bos_token_id=0, eos_token_id=0)).eval()


@pytest.fixture(scope="module")
def net():
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return VelocityNet(FlowConfig(dim=2, seq_len=3, width=8, depth=1, heads=2, ff=8)).eval()


def test_check_range_open_upper_end():
    with pytest.raises(ValueError, match=_m("level=1.0 is out of range: allowed (0.0, 1.0)")):
        checks.check_range("level", 1.0, 0.0, 1.0, lo_open=True, hi_open=True)
    with pytest.raises(ValueError, match=_m("c=inf is out of range: allowed (-inf, inf)")):
        checks.check_range("c", math.inf, -math.inf, math.inf, lo_open=True, hi_open=True)
    checks.check_range("c", 1e300, -math.inf, math.inf, lo_open=True, hi_open=True)


def test_glauber_init_names_a_non_tensor_start():  # was AttributeError: 'list' has no 'clone'
    with pytest.raises(TypeError, match=_m("x0 must be a torch.Tensor of token ids [B, n], got list")):
        glauber.init([[1, 2]])
    with pytest.raises(TypeError, match=_m("y0 must be a torch.Tensor of token ids [B, n], got NoneType")):
        glauber.init_coupled(torch.zeros(1, 2, dtype=torch.long), None)


def test_all_site_logits_checks_its_states(cond):  # was IndexError in torch's embedding
    with pytest.raises(ValueError, match=_m(f"x must lie in [0, vocab_size={cond.vocab_size})")):
        fill.all_site_logits(cond, torch.full((2, 4), 10**6))
    assert fill.all_site_logits(cond, torch.zeros(0, 4, dtype=torch.long) + 10).shape == (0, 4, cond.vocab_size)


def test_site_conditionals_refuses_an_infinite_tau(cond):  # was silently nan entropies
    x = torch.full((4,), 10)
    with pytest.raises(ValueError, match=_m("tau=inf is out of range: allowed [0.001, 10000.0]")):
        fill.site_conditionals(cond, x, tau=math.inf)
    with pytest.raises(TypeError, match=_m("tokens must be a torch.Tensor of token ids [n], got list")):
        fill.site_conditionals(cond, [10, 11])


def test_draw_sites_needs_two_sites():  # was RuntimeError: random_ expects 'from' < 'to'
    with pytest.raises(ValueError, match=_m("n=1 is out of range: allowed [2, inf]")):
        rectangle.draw_sites(3, 1, torch.Generator())
    with pytest.raises(TypeError, match=_m("n must be an integer, got 1.5")):
        rectangle.draw_sites(3, 1.5, torch.Generator())


def test_toy_site_kernel_and_couplings_are_checked():
    potts = toy.potts_chain(4, 3)
    with pytest.raises(ValueError, match=_m("i=4 is out of range: allowed [0, 3]")):  # was IndexError
        toy.site_kernel(potts, 4, 1.0)
    with pytest.raises(ValueError, match=_m("i=-1 is out of range: allowed [0, 3]")):  # was site 3, silently
        toy.site_kernel(potts, -1, 1.0)
    with pytest.raises(ValueError, match=_m("coupling=inf is out of range: allowed (-inf, inf)")):  # was nan
        toy.potts_chain(4, 3, coupling=math.inf)
    with pytest.raises(ValueError, match=_m("skew=-inf is out of range: allowed (-inf, inf)")):
        toy.incompatible_ising(4, skew=-math.inf)


def test_influence_curves_and_grids_are_checked(cond):
    with pytest.raises(ValueError, match=_m("taus and values must be two [T] sequences with T >= 1, got 1 taus "
                                            "and values of shape (2,)")):  # was IndexError
        influence.crossing(torch.tensor([1.0]), torch.tensor([1.0, 0.5]))
    with pytest.raises(ValueError, match=_m("got 0 taus")):
        influence.crossing_bracket([], torch.tensor([]))
    with pytest.raises(TypeError, match=_m("taus must be a sequence of temperatures, got float: pass [1.0] "
                                           "for one")):  # was "'float' object is not iterable"
        influence.estimate_influence(cond, torch.full((1, 3), 10), 1.0)
    with pytest.raises(ValueError, match=_m("trajectory must be [S + 1, B, n] with S >= 1, got "
                                            "(0, 2, 3)")):  # was IndexError from argmax
        traps.first_exit_times(torch.zeros(0, 2, 3, dtype=torch.long))


def test_margin_bound_takes_any_margin_and_refuses_nan():
    assert traps.margin_bound(-1e308, 10, 1.0) == math.inf  # was OverflowError
    assert traps.margin_bound(3.0, 1, 1.0) == 0.0
    assert abs(traps.margin_bound(2.0, 10, 0.5) - 9 * math.exp(-4.0)) < 1e-15
    with pytest.raises(ValueError, match=_m("margin=nan is out of range: allowed [-inf, inf]")):
        traps.margin_bound(math.nan, 10, 1.0)


def test_ar_decode_checks_tau_prompt_and_banned(tiny_causal):
    prompt = torch.zeros(2, 3, dtype=torch.long)
    with pytest.raises(ValueError, match=_m("tau=inf is out of range: allowed (0, inf)")):  # was nan draws
        discrete.ar_decode(tiny_causal, prompt, 2, seed=0, tau=math.inf, banned=torch.tensor([1]))
    with pytest.raises(ValueError, match=_m("prompt must hold token ids in [0, 50), got ids in [100, 100]")):
        discrete.ar_decode(tiny_causal, torch.full((2, 3), 100), 2, seed=0)  # was IndexError in torch
    with pytest.raises(TypeError, match=_m("prompt must be an integer torch.Tensor [B, p] of token ids, got "
                                           "torch.float32")):
        discrete.ar_decode(tiny_causal, prompt.float(), 2, seed=0)
    with pytest.raises(ValueError, match=_m("banned holds all 50 token ids: nothing is left to draw")):
        discrete.ar_decode(tiny_causal, prompt, 2, seed=0, banned=torch.arange(50))  # was nan draws
    with pytest.raises(ValueError, match=_m("banned must hold token ids in [0, 50), got ids in [100, 100]")):
        discrete.ar_decode(tiny_causal, prompt, 2, seed=0, banned=torch.tensor([100]))  # was IndexError
    with pytest.raises(TypeError, match=_m("banned must be an integer torch.Tensor [k] of token ids, got list")):
        discrete.ar_decode(tiny_causal, prompt, 2, seed=0, banned=[1])


def test_mask_diffusion_refuses_an_infinite_tau():
    with pytest.raises(ValueError, match=_m("tau=inf is out of range: allowed (0, inf)")):
        discrete.mask_diffusion_decode(build_tiny("bert"), 4, 1, 2, seed=0, tau=math.inf)


def test_flow_samplers_check_latents_against_the_network(net):
    msg = "but the network takes [B, L, d] with d = dim = 2 and L in [1, seq_len = 3]"
    with pytest.raises(ValueError, match=_m("x has shape (2, 3, 5), " + msg)):  # was a matmul RuntimeError
        samplers.ode_sample(net, torch.randn(2, 3, 5))
    with pytest.raises(ValueError, match=_m("x has shape (2, 4, 2), " + msg)):  # was a broadcast RuntimeError
        samplers.sde_sample(net, torch.randn(2, 4, 2), generator=torch.Generator())
    with pytest.raises(ValueError, match=_m("shape has shape (2, 3, 5), " + msg)):
        samplers.generate(net, (2, 3, 5), 2, "ode", seed=0)
    with pytest.raises(TypeError, match=_m("x must be a float torch.Tensor [B, L, d], got torch.int64")):
        samplers.ode_sample(net, torch.zeros(2, 3, 2, dtype=torch.long))
    with pytest.raises(TypeError, match=_m("generator must be a torch.Generator, got NoneType")):  # was global RNG
        samplers.sde_sample(net, torch.randn(2, 3, 2), generator=None)
    assert samplers.ode_sample(net, torch.randn(2, 2, 2)).shape == (2, 2, 2)  # shorter L is fine


def test_choose_alternatives_needs_k_of_at_least_one():  # was RuntimeError: selected index k out of range
    with pytest.raises(ValueError, match=_m("k=-1 is out of range: allowed [1, inf]")):
        sampling.choose_alternatives(torch.randn(2, 5), torch.tensor([0, 1]), -1, "model", 1.0, torch.Generator())


def test_readout_margins_names_a_wrong_dtype():  # was RuntimeError: expected m1 and m2 same dtype
    with pytest.raises(TypeError, match=_m("z must be a float torch.Tensor, got torch.int64")):
        readout_margins(torch.randn(4, 2), torch.randn(4), torch.zeros(3, 2, dtype=torch.long))


def test_interval_levels_and_counts_are_checked():
    with pytest.raises(ValueError, match=_m("level=1 is out of range: allowed (0.0, 1.0)")):  # was StatisticsError
        stats.wilson(3, 10, 1)
    with pytest.raises(ValueError, match=_m("k_b=11 is out of range: allowed [0, 10]")):  # was numpy's "p > 1"
        stats.ratio_interval(1, 10, 11, 10)
    with pytest.raises(ValueError, match=_m("n=0 is out of range: allowed [1, inf]")):  # was "math domain error"
        n_log_n(0)
    import numpy as np

    assert n_log_n(np.int64(3)) == pytest.approx(3 * math.log(3))
