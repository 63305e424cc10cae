"""The categorical commitment index of tokendyn.latent.commitment on hand-built trajectories."""

import pytest
import torch

from tokendyn.latent.commitment import commitment_index, continuous_commitment_index, flow_trajectory
from tokendyn.latent.samplers import init, ode_sample, ode_step
from latent_toys import PointMass


def unmask_and_commit(b=2, n=5, undecided=-1, order=None):
    """One position filled per step (in ``order``), never changed again: ``[n + 1, b, n]``."""
    order = list(range(n)) if order is None else order
    tokens = torch.arange(b * n).reshape(b, n) % 7
    states = torch.full((n + 1, b, n), undecided)
    for t, i in enumerate(order, start=1):
        states[t:, :, i] = tokens[:, i]
    return states


def test_unmask_and_commit_gives_one():
    out = commitment_index(unmask_and_commit())
    assert (out.value, out.committed, out.n) == (1.0, 10, 10)
    masked = commitment_index(unmask_and_commit(undecided=99, order=[3, 0, 4, 1, 2]), undecided=99)
    assert masked.value == 1.0


def test_half_the_positions_changed_later_gives_one_half():
    states = torch.tensor([[-1, -1, -1, -1], [1, 2, 3, 4], [1, 2, 7, 8]])[:, None, :]
    out = commitment_index(states)
    assert (out.value, out.committed, out.n) == (0.5, 2, 4)


def test_remasked_unfilled_and_glauber_positions_are_not_committed():
    # Position 0 remasked then refilled with the same token; 1 never filled; 2 committed at the end.
    states = torch.tensor([[-1, -1, -1], [5, -1, -1], [-1, -1, -1], [5, -1, 6]])[:, None, :]
    assert commitment_index(states).committed == 1
    # A Glauber chain: a full sequence resampled one site at a time (site 2 never revisited).
    glauber = torch.tensor([[1, 2, 3], [4, 2, 3], [4, 5, 3]])[:, None, :]
    assert commitment_index(glauber).value == 0.0


def test_continuous_trajectory_gives_zero():
    out = continuous_commitment_index(torch.randn(5, 2, 3, 4, generator=torch.Generator().manual_seed(0)))
    assert (out.value, out.committed, out.n) == (0.0, 0, 6) and "continuous" in out.reason


def test_flow_trajectory_records_every_state_of_a_sampler():
    net = PointMass(torch.tensor([0.5, -1.0]))
    x = torch.randn(3, 4, 2, generator=torch.Generator().manual_seed(1))
    traj = flow_trajectory(init(x, 0.0, 4), lambda s: ode_step(net, s))
    assert traj.shape == (5, 3, 4, 2)
    assert torch.equal(traj[0], x) and torch.allclose(traj[-1], ode_sample(net, x, 0.0, 4))
    assert continuous_commitment_index(traj).value == 0.0


def test_bad_trajectories_are_rejected():
    with pytest.raises(ValueError, match="states"):
        commitment_index(torch.zeros(3, 4))
    with pytest.raises(ValueError, match="states"):
        commitment_index(torch.zeros(1, 2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="states"):
        commitment_index(torch.zeros(3, 2, 4))
    with pytest.raises(TypeError, match="undecided"):
        commitment_index(torch.zeros(3, 2, 4, dtype=torch.long), undecided=0.5)
    with pytest.raises(ValueError, match="latents"):
        continuous_commitment_index(torch.zeros(3, 2, 4))
    with pytest.raises(ValueError, match="latents"):
        continuous_commitment_index(torch.zeros(3, 2, 4, 5, dtype=torch.long))


def test_revised_share_counts_re_chosen_positions():
    from tokendyn.latent.commitment import revised_share

    s = torch.tensor([[[-1, -1, 5]], [[3, -1, 5]], [[3, 4, 6]], [[2, 4, 6]]])  # [4, 1, 3]
    # position 0: 3 -> 2 (revised); position 1: filled once; position 2: 5 -> 6 (revised)
    assert revised_share(s) == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="states"):
        revised_share(s[:1])
