"""Tests for tokendyn.training (masking, schedule, losses, batches) and scripts/train_mlm.py's checks."""

from __future__ import annotations

import math

import pytest
import torch
from script_runs import run_scripts

from tokendyn.training.corpus import length_batches
from tokendyn.training.distill import distill_loss
from tokendyn.training.masking import context_unlikelihood, mask_batch
from tokendyn.training.mlm import masked_lm_loss
from tokendyn.training.schedule import lr_at, warmup_cosine


class _Tok:
    mask_token_id = 3

    def __len__(self):
        return 100


def _batch():
    ids = torch.randint(5, 100, (64, 32), generator=torch.Generator().manual_seed(0))
    ids[:, 0], ids[:, -1] = 1, 2  # [CLS] ... [SEP]
    ids[0, 10:] = 0  # padding
    ids[0, 9] = 2
    special = torch.zeros(100, dtype=torch.bool)
    special[:5] = True
    return ids, special


def test_mask_batch_follows_the_bert_rule_and_is_seeded():
    ids, special = _batch()
    inp, pos, tgt = mask_batch(ids, _Tok(), special, 0.15, torch.Generator().manual_seed(1))
    inp2, pos2, tgt2 = mask_batch(ids, _Tok(), special, 0.15, torch.Generator().manual_seed(1))
    assert torch.equal(inp, inp2) and torch.equal(pos, pos2)
    assert torch.equal(tgt, ids[pos[:, 0], pos[:, 1]])
    assert not special[ids[pos[:, 0], pos[:, 1]]].any()  # never a special or padding target
    assert set(pos[:, 0].tolist()) == set(range(64))  # every row has a target
    picked = torch.zeros_like(ids, dtype=torch.bool)
    picked[pos[:, 0], pos[:, 1]] = True
    assert torch.equal(inp[~picked], ids[~picked])  # only picked sites change
    share = picked[~special[ids]].float().mean().item()
    assert 0.13 < share < 0.19
    masked = (inp[picked] == 3).float().mean().item()
    assert 0.7 < masked < 0.9  # ~80% of targets are shown as the mask token


def test_mask_batch_applies_bert_shares_to_the_sites_it_picks():
    from tokendyn.training.masking import BERT_SHARES

    ids = torch.randint(5, 100, (400, 64), generator=torch.Generator().manual_seed(0))
    special = torch.zeros(100, dtype=torch.bool)
    special[:5] = True
    inp, _, _ = mask_batch(ids, _Tok(), special, 1.0, torch.Generator().manual_seed(2))  # every site picked
    n = ids.numel()
    shares = ((inp == 3).float().mean().item(), ((inp != 3) & (inp != ids)).float().mean().item(),
              (inp == ids).float().mean().item())
    # a random draw is dropped when it lands on a special id (5 of 100) and is invisible when it lands
    # on the site's own id (1 of 100): 94 of 100 random draws show
    to_mask, to_random, keep = BERT_SHARES
    want = (to_mask, to_random * 0.94, keep + to_random * 0.06)
    for got, w in zip(shares, want):  # within 4 binomial s.e.
        assert abs(got - w) < 4 * (w * (1 - w) / n) ** 0.5, (shares, want)


def test_lr_schedule_warmup_stable_decay():
    f = lambda s: lr_at(s, 1e-3, steps=100, warmup=10, decay=20)  # noqa: E731
    assert f(0) == pytest.approx(1e-4) and f(9) == pytest.approx(1e-3)
    assert f(50) == f(79) == 1e-3
    assert f(90) == pytest.approx(5e-4) and f(99) == pytest.approx(5e-5)
    # the stable phase does not depend on the total, so a run can be lengthened by resuming
    assert lr_at(60, 1e-3, 200, 10, 40) == f(60)
    # warmup-cosine: linear to 1 over the warmup, then down to 0 at the end
    assert warmup_cosine(0, 1000) == pytest.approx(0.01, rel=1e-3) and warmup_cosine(1000, 1000) == 0.0
    assert warmup_cosine(99, 1000) == pytest.approx(0.5 * (1 + math.cos(math.pi * 99 / 1000)))


def test_context_unlikelihood_penalises_only_wrong_copies_once_each():
    V = 8
    special = torch.zeros(V, dtype=torch.bool)
    special[:2] = True  # ids 0, 1: [CLS]/[SEP]-like
    ids = torch.tensor([[0, 4, 5, 5, 6, 1]])  # window: 4, 5 (twice), 6
    logits = torch.log(torch.tensor([[0.05, 0.05, 0.1, 0.1, 0.3, 0.2, 0.1, 0.1]]))
    rows, targets = torch.tensor([0]), torch.tensor([6])  # the answer 6 also sits in the window
    got = context_unlikelihood(logits, ids, rows, targets, special)
    # penalised: 4 and 5 (5 only once), never the answer 6 nor the special ids
    want = -(torch.log1p(-torch.tensor(0.3)) + torch.log1p(-torch.tensor(0.2)))
    assert torch.isclose(got, want)
    # a model that puts no mass on the window's other tokens pays nothing
    clean = torch.log(torch.tensor([[0.2, 0.2, 0.2, 0.2, 1e-12, 1e-12, 0.2, 1e-12]]))
    assert context_unlikelihood(clean, ids, rows, targets, special) < 1e-9
    # the training loss adds it with its weight to the plain cross-entropy
    ce = torch.nn.functional.cross_entropy(logits, targets)
    assert torch.equal(masked_lm_loss(logits, targets, ids, rows, special), ce)
    assert torch.isclose(masked_lm_loss(logits, targets, ids, rows, special, unlikelihood=2.0), ce + 2 * want)


def test_distill_loss_mixes_the_teacher_only_where_it_gave_a_target():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 10, generator=g)
    targets = torch.tensor([1, 2, 3])
    teacher = {"tid": torch.tensor([[4, 5], [2, 6]], dtype=torch.int32),
               "tp": torch.tensor([[0.75, 0.25], [1.0, 0.0]], dtype=torch.float16)}
    tix = torch.tensor([0, -1, 1])
    logp = logits.log_softmax(-1)
    want = torch.stack([
        0.7 * -logp[0, 1] + 0.3 * -(0.75 * logp[0, 4] + 0.25 * logp[0, 5]),
        -logp[1, 2],
        0.7 * -logp[2, 3] + 0.3 * -logp[2, 2]]).mean()
    got = distill_loss(logits, targets, tix, teacher, 0.3)
    assert torch.allclose(got, want, atol=1e-6)
    # weight 0 is the plain MLM loss, whatever the teacher says
    plain = torch.nn.functional.cross_entropy(logits, targets)
    assert torch.allclose(distill_loss(logits, targets, tix, teacher, 0.0), plain, atol=1e-6)
    assert torch.allclose(distill_loss(logits, targets, torch.full((3,), -1), teacher, 0.9),
                          plain, atol=1e-6)
    ids, special = torch.zeros(1, 4, dtype=torch.long), torch.zeros(10, dtype=torch.bool)
    assert torch.equal(masked_lm_loss(logits, targets, ids, torch.zeros(3, dtype=torch.long), special,
                                      teacher=teacher, tix=tix, teacher_weight=0.3), got)


def test_length_batches_cover_each_row_at_most_once_and_group_lengths():
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(5, 60, (1000,), generator=g)
    bs = length_batches(lengths, 32, torch.Generator().manual_seed(1))
    flat = torch.cat(bs)
    assert len(flat) == len(set(flat.tolist())) and all(len(b) == 32 for b in bs)
    assert len(bs) >= 1000 // 32 - 1
    spread = sum(int(lengths[b].max() - lengths[b].min()) for b in bs) / len(bs)
    assert spread < 10  # random batches of 32 span about 50
    again = length_batches(lengths, 32, torch.Generator().manual_seed(1))
    assert all(torch.equal(a, b) for a, b in zip(bs, again))


def test_bad_arguments_fail_before_any_work(tmp_path):
    ck = ["--ckpt-dir", str(tmp_path)]
    calls = {  # arguments -> what the error must say
        ("--mask-rate", "0.9"): "ValueError: mask_rate",
        ("--steps", "0"): "ValueError: steps",
        ("--init-from", "/nonexistent", "--steps", "1"): "--init-from /nonexistent",
        ("--unlikelihood", "-1", "--steps", "1"): "ValueError: unlikelihood",
        ("--teacher", str(tmp_path), "--steps", "1"): f"--teacher {tmp_path}",
        ("--teacher-weight", "1.5", "--steps", "1"): "ValueError: teacher_weight",
    }
    runs = run_scripts([("train_mlm.py", ["--model", "minilm-mlm", *a, *ck]) for a in calls])
    for (args, want), r in zip(calls.items(), runs):
        assert r.returncode != 0 and want in r.stderr, (args, r.stderr[-1000:])
    assert not (tmp_path / "minilm-mlm" / "last.pt").exists()
