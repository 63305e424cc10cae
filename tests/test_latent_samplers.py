"""Samplers, noising and the training loop of tokendyn.latent against closed-form flows."""

import math

import pytest
import torch
from torch import nn

from tokendyn.latent.flow import FlowConfig, VelocityNet, flow_loss, noise_scale, noise_to
from tokendyn.latent.samplers import (ode_sample, posterior_mean, sde_sample, terminal_start,
                                      time_grid)
from tokendyn.training.loop import train
from tokendyn.models.weights_init import init_weights


class GaussianVelocity(nn.Module):
    """Exact rectified-flow velocity for data x1 ~ N(mu, sigma^2 I): v = E[x1 - eps | x_t]."""

    def __init__(self, mu: torch.Tensor, sigma: float):
        super().__init__()
        self.mu, self.sigma = mu, sigma

    def var(self, t):
        return t ** 2 * self.sigma ** 2 + (1 - t) ** 2

    def forward(self, x, t):
        t = t[:, None, None]
        return self.mu + (t * self.sigma ** 2 - (1 - t)) / self.var(t) * (x - t * self.mu)

    def exact_map(self, x, t0):
        """Where the exact ODE takes x at t0 at time 1."""
        return self.mu + self.sigma * (x - t0 * self.mu) / math.sqrt(self.var(t0))


@pytest.fixture
def gauss():
    return GaussianVelocity(torch.tensor([1.0, -2.0, 0.5]), sigma=0.7)


def start(seed=0, shape=(8, 5, 3)):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_noise_scale_values():
    assert noise_scale(0.5) == 1.0
    assert noise_scale(0.8) == pytest.approx(0.25)
    assert noise_scale(1.0) == 0.0
    with pytest.raises(ValueError, match="t=0"):
        noise_scale(0.0)


def test_noise_to_is_the_interpolation_and_seeded():
    x1 = torch.ones(2, 3, 4)
    xt, eps = noise_to(x1, 0.25, torch.Generator().manual_seed(3))
    assert torch.allclose(xt, 0.25 * x1 + 0.75 * eps)
    xt2, _ = noise_to(x1, 0.25, torch.Generator().manual_seed(3))
    assert torch.equal(xt, xt2)
    with pytest.raises(ValueError, match="t=1.5"):
        noise_to(x1, 1.5, torch.Generator())


def test_grid_and_terminal_start():
    assert time_grid(0.2, 4).tolist() == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0])
    assert terminal_start(0.0, 4) == 0.75
    assert terminal_start(0.5, 2) == 0.75


def test_posterior_mean_matches_closed_form(gauss):
    x, t = start(), 0.6
    want = gauss.mu + t * gauss.sigma ** 2 / gauss.var(t) * (x - t * gauss.mu)
    assert torch.allclose(posterior_mean(gauss, x, t), want, atol=1e-12)


@pytest.mark.parametrize("t0", [0.0, 0.3])
def test_ode_converges_to_exact_map_at_its_order(gauss, t0):
    x = start()
    exact = gauss.exact_map(x, t0)
    err = {(m, k): (ode_sample(gauss, x, t0, k, m) - exact).abs().max().item()
           for m in ("euler", "heun") for k in (16, 32)}
    # Euler is first order: the error halves when K doubles.
    assert err["euler", 16] / err["euler", 32] == pytest.approx(2.0, rel=0.15)
    # Heun is second order: far below Euler at the same K.
    assert err["heun", 32] < 1e-3
    assert err["heun", 16] < err["euler", 16] / 50 and err["heun", 32] < err["euler", 32] / 50


def test_euler_single_step_is_the_posterior_mean(gauss):
    x = start()
    assert torch.allclose(ode_sample(gauss, x, 0.4, 1), posterior_mean(gauss, x, 0.4), atol=1e-12)


def test_sde_reinjects_fresh_noise_and_is_seeded(gauss):
    x = start()
    a = sde_sample(gauss, x, 0.0, 4, generator=torch.Generator().manual_seed(1))
    b = sde_sample(gauss, x, 0.0, 4, generator=torch.Generator().manual_seed(1))
    c = sde_sample(gauss, x, 0.0, 4, generator=torch.Generator().manual_seed(2))
    assert torch.equal(a, b) and not torch.allclose(a, c)
    # K = 1: no re-injection happens, the SDE is the one posterior-mean step.
    one = sde_sample(gauss, x, 0.0, 1, generator=torch.Generator().manual_seed(1))
    assert torch.allclose(one, posterior_mean(gauss, x, 0.0))


def test_sde_output_is_a_posterior_mean_of_the_reinjected_state(gauss):
    # The last step starts from t_{K-1} x1_hat + (1 - t_{K-1}) eps: rebuild it by hand.
    x, g = start(), torch.Generator().manual_seed(5)
    out = sde_sample(gauss, x, 0.0, 2, generator=g)
    g2 = torch.Generator().manual_seed(5)
    x1_hat = posterior_mean(gauss, x, 0.0)
    eps = torch.randn(x.shape, generator=g2, dtype=x.dtype)
    assert torch.allclose(out, posterior_mean(gauss, 0.5 * x1_hat + 0.5 * eps, 0.5), atol=1e-12)


def test_bad_sampler_arguments_fail_before_compute(gauss):
    x = start()
    with pytest.raises(ValueError, match="method"):
        ode_sample(gauss, x, 0.0, 4, "rk4")
    with pytest.raises(ValueError, match="steps=0"):
        ode_sample(gauss, x, 0.0, 0)
    with pytest.raises(ValueError, match="t0"):
        sde_sample(gauss, x, 1.0, 2, generator=torch.Generator())
    with pytest.raises(ValueError, match=r"\[B, L, d\]"):
        ode_sample(gauss, x[0], 0.0, 2)


def tiny_net(seed=0):
    return init_weights(VelocityNet(FlowConfig(dim=3, seq_len=5, width=16, depth=1, heads=2, ff=32)),
                       torch.Generator().manual_seed(seed))


def test_velocity_net_shapes_and_seeded_init():
    net, net2 = tiny_net(), tiny_net()
    for a, b in zip(net.parameters(), net2.parameters()):
        assert torch.equal(a, b)
    x = torch.randn(4, 5, 3)
    assert net(x, torch.rand(4)).shape == (4, 5, 3)
    assert net(x, torch.tensor(0.5)).shape == (4, 5, 3)


@pytest.mark.slow
def test_training_lowers_the_loss_and_resumes_to_the_same_weights(tmp_path):
    data = torch.randn(64, 5, 3, generator=torch.Generator().manual_seed(0)) * 0.3 + 1.0

    def run(ckpt, fail_at=None):
        net, g, calls = tiny_net(), torch.Generator().manual_seed(7), [0]

        def loss(gen):
            calls[0] += 1
            if fail_at is not None and calls[0] == fail_at:
                raise KeyboardInterrupt
            return flow_loss(net, data[torch.randint(64, (16,), generator=gen)], gen)

        losses = train(net, loss, steps=40, lr=1e-2, generator=g, checkpoint=ckpt, checkpoint_every=10,
                       log_every=10, log=lambda s: None)
        return net, losses

    straight, losses = run(tmp_path / "a.pt")
    assert losses[-1] < losses[0]
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "b.pt", fail_at=25)  # dies after the step-20 checkpoint
    resumed, _ = run(tmp_path / "b.pt")
    for a, b in zip(straight.parameters(), resumed.parameters()):
        assert torch.equal(a, b)


def test_init_and_steps_are_the_samplers_one_step_at_a_time(gauss):
    from tokendyn.latent import samplers as S

    x = start(4)
    state = S.init(x, 0.2, 4)
    assert state.grid == pytest.approx((0.2, 0.4, 0.6, 0.8, 1.0)) and state.t == 0.2 and not state.done
    infos = []
    while not state.done:
        state, info = S.ode_step(gauss, state, S.heun)
        infos.append(info)
    assert torch.equal(state.x, ode_sample(gauss, x, 0.2, 4, "heun"))
    assert [i.t_from for i in infos] == pytest.approx([0.2, 0.4, 0.6, 0.8])
    # the step's x1_hat is the posterior mean at the time the step starts
    assert torch.allclose(infos[0].x1_hat, posterior_mean(gauss, x, 0.2), atol=1e-12)
    with pytest.raises(ValueError, match="already at t = 1"):
        S.ode_step(gauss, state)
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    s = S.init(x, 0.0, 3)
    while not s.done:
        s, info = S.sde_step(gauss, s, generator=g1)
    assert torch.equal(s.x, info.x1_hat)  # the last re-injecting step returns the posterior mean
    assert torch.equal(s.x, sde_sample(gauss, x, 0.0, 3, generator=g2))
    with pytest.raises(ValueError, match="method"):
        S.ode_step(gauss, S.init(x), "rk4")


def test_generate_shares_the_start_noise_and_k1_is_one_posterior_mean_step():
    from tokendyn.latent.samplers import generate

    net = GaussianVelocity(torch.tensor([1.0, -2.0, 0.5]), 0.3)
    shape = (4, 5, 3)
    o1, s1 = generate(net, shape, 1, "ode", seed=3), generate(net, shape, 1, "sde", seed=3)
    assert torch.equal(o1, s1)
    o4, s4 = generate(net, shape, 4, "ode", seed=3), generate(net, shape, 4, "sde", seed=3)
    assert not torch.equal(o4, s4)
    assert torch.equal(s4, generate(net, shape, 4, "sde", seed=3))  # seeded
    with pytest.raises(ValueError, match="sampler"):
        generate(net, shape, 4, "heun", seed=0)
    with pytest.raises(ValueError, match="shape"):
        generate(net, (4, 3), 4, "ode", seed=0)
