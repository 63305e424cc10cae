"""Per-site conditionals: exact against a toy model's known conditionals."""

import pytest
import torch

from tokendyn.mcmc import fill, toy


def test_site_conditionals_match_the_toy_conditionals():
    m = toy.potts_chain(5, 3, coupling=1.0, field=0.5)
    x = torch.tensor([0, 1, 2, 1, 0])
    out = fill.site_conditionals(m, x, tau=0.7, k=3)
    for i in range(5):
        lp = torch.log_softmax(m.site_logits(x.view(1, 5), torch.tensor([i])).double()[0] / 0.7, -1)
        assert out.logp_current[i].item() == pytest.approx(lp[x[i]].item(), abs=1e-6)
        assert out.entropy[i].item() == pytest.approx(-(lp.exp() * lp).sum().item(), abs=1e-6)
        assert out.top_ids[i, 0].item() == lp.argmax().item()
    assert torch.equal(out.is_argmax, out.top_ids[:, 0] == x)
    assert torch.allclose(out.top_probs.sum(-1), torch.ones(5), atol=1e-6)  # k = q: all mass


def test_uniform_model_has_maximal_entropy():
    out = fill.site_conditionals(toy.uniform(4, 6), torch.tensor([0, 1, 2, 3]), k=2)
    assert torch.allclose(out.entropy, torch.full((4,), torch.log(torch.tensor(6.0)).item()), atol=1e-6)


def test_bad_arguments():
    m = toy.uniform(4, 6)
    with pytest.raises(ValueError, match="tau=0"):
        fill.site_conditionals(m, torch.tensor([0, 1, 2, 3]), tau=0)
    with pytest.raises(ValueError, match="k=7 is out of range"):
        fill.site_conditionals(m, torch.tensor([0, 1, 2, 3]), k=7)
    with pytest.raises(ValueError, match="one sequence"):
        fill.site_conditionals(m, torch.zeros(2, 4, dtype=torch.long))


def test_all_site_logits_mask_each_site_of_each_state():
    m = toy.potts_chain(4, 3, coupling=1.0, field=0.5)
    x = torch.tensor([[0, 1, 2, 1], [2, 2, 0, 1]])
    out = fill.all_site_logits(m, x)
    assert out.shape == (2, 4, 3)
    for b in range(2):
        for i in range(4):
            assert torch.equal(out[b, i], m.site_logits(x[b:b + 1], torch.tensor([i]))[0])
    # the token at the site itself is masked: changing it changes nothing at that site
    y = x.clone()
    y[:, 2] = (y[:, 2] + 1) % 3
    assert torch.equal(fill.all_site_logits(m, y)[:, 2], out[:, 2])
    assert not torch.equal(fill.all_site_logits(m, y)[:, 1], out[:, 1])
