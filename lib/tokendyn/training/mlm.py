"""The recipe of the shipped masked LMs: defaults, what is trained, the loss and a resumable run.

One seed drives everything (data order, masks, head initialisation: explicit ``torch.Generator``
objects, no dropout). :func:`train_mlm` checkpoints to ``<ckpt>/last.pt`` and resumes from it; the
rate is warmup-stable-decay, so a run may be lengthened by resuming from a checkpoint still in the
stable phase, and gives the same model as a fresh run with the longer ``steps``.
``scripts/train_mlm.py`` is its command line (and exports the result to ``data/models``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..core.paths import data_dir
from ..evaluation import PROBE_FILE, cloze_probe
from ..models import shipped
from .corpus import length_batches, make_chunks, train_tokenizer, training_texts
from .distill import distill_loss, load_targets
from .loop import Progress, run_steps, save_atomic
from .masking import context_unlikelihood, masked_step_logits, special_token_mask
from .schedule import lr_at

# Per model: steps, batch, lr, mask rate, warmup (trained on 2 CPU cores unless a GPU is present).
DEFAULTS: dict[str, dict[str, Any]] = {
    "minilm-mlm": dict(steps=1200, batch=32, lr=3e-4, mask_rate=0.25, warmup=50),
    "splade-tiny-mlm": dict(steps=800, batch=32, lr=5e-4, mask_rate=0.2, warmup=50),
    "splade-tiny-nopolitics": dict(steps=800, batch=32, lr=5e-4, mask_rate=0.2, warmup=50,
                                   sotu_share=0.0),
    **{name: dict(steps=600, batch=32, lr=5e-4, mask_rate=0.25, warmup=50)
       for name in ("minilm-depth2", "minilm-depth3", "minilm-depth4")},
    "roberta-mini": dict(steps=1200, batch=64, lr=1e-3, mask_rate=0.2, warmup=100),
    "modernbert-mini": dict(steps=1200, batch=64, lr=1e-3, mask_rate=0.2, warmup=100),
}
# The settings a checkpoint is bound to: resuming with other values is refused.
FIXED = ("model", "batch", "lr", "seq_len", "mask_rate", "warmup", "sotu_share", "seed", "init_from",
         "unlikelihood", "teacher", "teacher_weight")
# What checkpoints made before a setting existed implicitly used.
_FIXED_BEFORE = {"init_from": None, "unlikelihood": 0.0, "teacher": None, "teacher_weight": 0.0}


@dataclass
class MLMSettings:
    """One training run of a shipped MLM (``model`` a key of :data:`DEFAULTS`)."""

    model: str
    steps: int
    batch: int
    lr: float
    mask_rate: float
    warmup: int
    sotu_share: float = 0.15  # SOTU share of training words
    seq_len: int = 64
    decay_frac: float = 0.2  # share of steps in the final linear decay
    seed: int = 0
    init_from: str | None = None  # a shipped model folder to start from
    unlikelihood: float = 0.0  # weight of the context-copy penalty
    teacher: str | None = None  # a folder of teacher shards to train on instead of the corpus
    teacher_weight: float = 0.0  # share of the soft teacher target where there is one

    @property
    def decay(self) -> int:
        """Steps in the final decay."""
        return max(1, int(self.decay_frac * self.steps))

    @property
    def drop_politics(self) -> bool:
        """The corpus ablation: no politics-topic Wikipedia leads (and no SOTU)."""
        return self.model.endswith("-nopolitics")

    def fixed(self) -> dict[str, Any]:
        """The settings :data:`FIXED` binds a checkpoint to."""
        return {k: getattr(self, k) for k in FIXED}


@dataclass
class TrainedMLM:
    """What :func:`train_mlm` leaves: the model (on its training device), tokenizer, the names of
    what was trained, steps taken, seconds spent in them, and the warm start's training record."""

    model: Any
    tokenizer: Any
    trainable: list[str]
    step: int
    elapsed: float
    init_meta: dict[str, Any] | None


class IncompatibleCheckpoint(RuntimeError):
    """The checkpoint in the folder was made with other settings, or cannot be lengthened."""


def check_resumable(state: dict[str, Any], path: Path, fixed: dict[str, Any], steps: int, decay: int) -> None:
    """Refuse to resume ``state`` (a checkpoint read from ``path``) unless it was made with the
    ``fixed`` settings, and, when the step count changed, unless it is still in its stable phase
    (before the decay that its own ``steps`` and the new ``steps`` put last)."""
    if state["fixed"] != fixed:
        raise IncompatibleCheckpoint(f"checkpoint {path} was made with {state['fixed']}, "
                                     f"not {fixed}: move it away to start over")
    old_stable_end = state["steps"] - state["decay"]
    if state["steps"] != steps and state["step"] > min(old_stable_end, steps - decay):
        raise IncompatibleCheckpoint(f"checkpoint at step {state['step']} is past the stable phase; "
                                     f"cannot change --steps from {state['steps']} to {steps}")


def run_schedule(opt: torch.optim.Optimizer, loss_at: Callable[[int], torch.Tensor], s: Any, *,
                 params: list[torch.nn.Parameter], stop: int | None, progress: Progress,
                 save: Callable[[Progress], None], ckpt_minutes: float, log: Callable[[str], None]) -> Progress:
    """:func:`~.loop.run_steps` on the shipped MLMs' schedule: ``s``'s warmup-stable-decay rate over
    ``s.steps`` (``s.lr``, ``s.warmup``, ``s.decay``), up to ``stop`` (default all), a checkpoint every
    ``ckpt_minutes`` and a log line every 20 steps. Shared by the MLM and the head recipes."""
    return run_steps(opt, loss_at, params=params,
                     lr_at_step=lambda step: lr_at(step, s.lr, s.steps, s.warmup, s.decay),
                     stop=s.steps if stop is None else min(stop, s.steps), total=s.steps, progress=progress,
                     save=save, save_every_seconds=ckpt_minutes * 60, log_every=20, log=log)


def set_trainable(model: torch.nn.Module, trainable: list[str]) -> tuple[set[str], dict[str, list[int]]]:
    """Freeze ``model`` except the ``trainable`` names (``"w[103]"`` trains one row of ``w``: a
    gradient hook zeroes the others). Returns the trained parameter names and, per row-trained
    matrix, its rows."""
    rows: dict[str, list[int]] = {}
    for t in trainable:
        base, row = shipped.split_row(t)
        if row is not None:
            rows.setdefault(base, []).append(row)
    names = {shipped.split_row(t)[0] for t in trainable}
    for n, p in model.named_parameters():
        p.requires_grad_(n in names)
        if n in rows:  # train only the listed rows of this matrix (e.g. the mask token's)
            keep = torch.zeros(p.shape[0], 1, dtype=p.dtype)
            keep[rows[n]] = 1.0
            p.register_hook(lambda g, k=keep: g * k.to(g.device))
    return names, rows


def make_optimizer(model: torch.nn.Module, names: set[str], rows: dict[str, list[int]],
                   lr: float) -> torch.optim.AdamW:
    """AdamW over the trained parameters: weight decay 0.01 on matrices, none on vectors, and for
    row-trained matrices none and a 5x rate (``lr_mult``) so that the near-blank mask embedding can
    move to a useful place within a short run (decay would shrink the frozen rows)."""
    decay_params = [p for n, p in model.named_parameters() if n in names and p.ndim >= 2 and n not in rows]
    other = [p for n, p in model.named_parameters() if n in names and p.ndim < 2]
    row_params = [p for n, p in model.named_parameters() if n in rows]
    return torch.optim.AdamW([{"params": decay_params, "weight_decay": 0.01, "lr_mult": 1.0},
                              {"params": other, "weight_decay": 0.0, "lr_mult": 1.0},
                              {"params": row_params, "weight_decay": 0.0, "lr_mult": 5.0}],
                             lr=lr, betas=(0.9, 0.98), eps=1e-6)


def masked_lm_loss(logits: torch.Tensor, targets: torch.Tensor, ids: torch.Tensor, rows: torch.Tensor,
                   special: torch.Tensor, *, teacher: dict[str, torch.Tensor] | None = None,
                   tix: torch.Tensor | None = None, teacher_weight: float = 0.0,
                   unlikelihood: float = 0.0) -> torch.Tensor:
    """The training loss at ``M`` masked sites: cross-entropy of ``targets (M,)`` under ``logits
    (M, V)`` (mixed with the teacher's soft targets at rows ``tix (M,)`` when ``teacher`` is given,
    :func:`~.distill.distill_loss`), plus ``unlikelihood`` times the context-copy penalty over the
    clean windows ``ids (B, L)`` (``rows (M,)``: each site's window)."""
    logits = logits.float()
    dev = logits.device
    targets = targets.to(dev)
    if teacher is None:
        loss = torch.nn.functional.cross_entropy(logits, targets)
    else:
        assert tix is not None, "tix is needed with a teacher"
        loss = distill_loss(logits, targets, tix, teacher, teacher_weight)
    if unlikelihood > 0:
        loss = loss + unlikelihood * context_unlikelihood(logits, ids.to(dev), rows.to(dev), targets,
                                                          special.to(dev))
    return loss


def warm_start(model: torch.nn.Module, folder: Path) -> dict[str, Any] | None:
    """Load a shipped model folder's weights into ``model``; return its ``model.json`` training
    record with the folder's eval numbers (None without a model.json)."""
    shipped.apply_weights(model, folder / shipped.WEIGHTS)
    meta_file = folder / "model.json"
    init_meta = json.loads(meta_file.read_text())["training"] if meta_file.is_file() else None
    eval_file = folder / "eval.json"
    if init_meta is not None and eval_file.is_file():  # how good the starting point was
        ev0 = json.loads(eval_file.read_text())
        init_meta["eval"] = {k: ev0[k] for k in ("top1", "top5", "copy_rate", "pseudo_perplexity")}
    return init_meta


def train_mlm(s: MLMSettings, ckpt: Path, *, device: torch.device, stop: int | None = None,
              ckpt_minutes: float = 4.0, train: bool = True,
              log: Callable[[str], None] = print) -> TrainedMLM:
    """Build ``s.model``, resume from ``ckpt/last.pt`` if there, and train to step ``stop`` of the
    ``s.steps`` schedule (default all of it; ``train=False`` only restores the checkpoint).

    Training windows ``(N, s.seq_len)`` are cached in ``ckpt`` (as is a scratch model's tokenizer).
    The checkpoint (trained parameters, optimiser, step) is written every ``ckpt_minutes`` and at
    the end, followed by a cloze-probe line in the log. Raises :class:`IncompatibleCheckpoint` when
    ``ckpt`` holds a run with other :data:`FIXED` settings, or one past its stable phase whose
    ``steps`` differ.
    """
    texts = None
    tok_dir = None
    if s.model in shipped.SCRATCH_SIZES:
        tok_dir = ckpt / "tokenizer"
        if not (tok_dir / "tokenizer.json").is_file():
            texts = training_texts(s.sotu_share, s.drop_politics)
            train_tokenizer(s.model, texts, tok_dir, shipped.SCRATCH_SIZES[s.model]["vocab"])
            log(f"trained tokenizer -> {tok_dir}")
    model, tok, trainable = shipped.build(s.model, torch.Generator().manual_seed(s.seed),
                                          tokenizer_dir=tok_dir)
    init_meta = None
    if s.init_from is not None:
        init_meta = warm_start(model, Path(s.init_from))
        log(f"warm start from {s.init_from}")
    names, rows = set_trainable(model, trainable)
    model.to(device)

    teacher = None
    data_file = ckpt / f"chunks_L{s.seq_len}_s{s.sotu_share}.pt"
    if s.teacher is not None:
        teacher = load_targets(s.teacher)
        chunks = teacher["ids"][:, :s.seq_len]
        log(f"teacher: {teacher['tid'].shape[0]} soft targets over {chunks.shape[0]} sentences")
    elif data_file.is_file():
        chunks = torch.load(data_file, weights_only=True)
    else:
        texts = texts or training_texts(s.sotu_share, s.drop_politics)
        chunks = make_chunks(tok, texts, s.seq_len)
        save_atomic(chunks, data_file)
    log(f"{chunks.shape[0]} training windows of {s.seq_len} tokens")
    special = special_token_mask(tok)

    params = [p for n, p in model.named_parameters() if n in names]
    opt = make_optimizer(model, names, rows, s.lr)
    progress = Progress()
    last = ckpt / "last.pt"
    if last.is_file():
        state = torch.load(last, weights_only=True)
        check_resumable({**state, "fixed": {**_FIXED_BEFORE, **state["fixed"]}}, last, s.fixed(), s.steps, s.decay)
        model.load_state_dict(state["model"], strict=False)
        opt.load_state_dict(state["opt"])
        progress = Progress(step=state["step"], elapsed=state["elapsed"])
        log(f"resumed from step {progress.step} ({progress.elapsed / 60:.1f} min trained so far)")

    def save(p: Progress) -> None:
        tsd = {n: q.detach().cpu() for n, q in model.named_parameters() if n in names}
        save_atomic({"fixed": s.fixed(), "steps": s.steps, "decay": s.decay, "step": p.step,
                     "elapsed": p.elapsed, "model": tsd, "opt": opt.state_dict()}, last)
        if (data_dir() / PROBE_FILE).is_file():
            model.eval()
            pr = cloze_probe(model, tok)
            log(f"checkpoint step {p.step}: probe top1 {pr['top1']:.3f} top5 {pr['top5']:.3f} "
                f"copy {pr['copy_rate']:.3f}")
            model.train()

    n_chunks = chunks.shape[0]
    per_epoch = n_chunks // s.batch
    lengths = (chunks != tok.pad_token_id).sum(1)
    schedule: tuple[int, list[torch.Tensor]] | None = None

    def loss_at(step: int) -> torch.Tensor:
        nonlocal schedule
        epoch, k = divmod(step, per_epoch)
        eg = torch.Generator().manual_seed(s.seed * 7919 + epoch)
        if teacher is None:
            idx = torch.randperm(n_chunks, generator=eg)[k * s.batch:(k + 1) * s.batch]
        else:  # sentences differ in length: batch similar lengths together
            if schedule is None or schedule[0] != epoch:
                schedule = (epoch, length_batches(lengths, s.batch, eg))
            idx = schedule[1][k]
        mg = torch.Generator().manual_seed(s.seed * 1_000_003 + step)
        ids, pos, targets, logits = masked_step_logits(model, tok, chunks[idx].long(), special, s.mask_rate,
                                                       mg, device)
        tix = None if teacher is None else teacher["tidx"][idx][pos[:, 0], pos[:, 1]].long()
        return masked_lm_loss(logits, targets, ids, pos[:, 0], special, teacher=teacher, tix=tix,
                              teacher_weight=s.teacher_weight, unlikelihood=s.unlikelihood)

    model.train()
    if train:
        run_schedule(opt, loss_at, s, params=params, stop=stop, progress=progress, save=save,
                     ckpt_minutes=ckpt_minutes, log=log)
    return TrainedMLM(model=model, tokenizer=tok, trainable=trainable, step=progress.step,
                      elapsed=progress.elapsed, init_meta=init_meta)
