"""Phases 1 and 2 of the head recipe: the corpus cut into windows, and the frozen encoder's states at
the masked sites cached once in safetensors shards (a killed run keeps every finished shard)."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor

from ...core import integrity
from ...core.atomic import write_atomic, write_json
from ...evaluation import is_heldout
from ...models import shipped
from ..corpus import make_chunks, training_texts
from ..loop import save_atomic
from ..masking import mask_batch, special_token_mask
from ..mlm import IncompatibleCheckpoint
from .settings import HeadSettings

__all__ = ["MANIFEST", "CachedStates", "n_layers", "only_layers", "lower_states", "upper_states",
           "windows_digest", "CacheTarget", "states_at", "build_cache", "build_caches", "load_cache",
           "heldout_texts", "train_windows", "val_windows", "cache_family"]

MANIFEST = "manifest.json"


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
