"""Passages and corpora: real text, deterministic, with clear errors."""

import json

import pytest

from tokendyn.core import data

PAPER_TOPICS = ("health", "sports", "food", "science", "politics")


@pytest.mark.parametrize("topic", PAPER_TOPICS)
def test_each_topic_has_forty_real_passages(topic):
    ps = data.passages(topic, 40, seed=0)
    assert len(ps) == 40 and len(set(ps)) == 40
    assert all(len(p.split()) >= 12 for p in ps)


def test_passages_are_deterministic_and_nested():
    a = data.passages("health", 10, seed=3)
    assert a == data.passages("health", 10, seed=3)
    assert data.passages("health", 20, seed=3)[:10] == a
    assert data.passages("health", 10, seed=4) != a


def test_topics_are_about_their_topic():
    sports = " ".join(data.passages("sports", 40)).lower()
    food = " ".join(data.passages("food", 40)).lower()
    assert sum(w in sports for w in ("olympic", "football", "player", "championship")) >= 3
    assert sum(w in food for w in ("food", "cook", "dish", "cuisine")) >= 3


def test_bad_arguments_name_the_parameter():
    with pytest.raises(ValueError, match="topic='cars'"):
        data.passages("cars", 5)
    with pytest.raises(ValueError, match=r"n=0 is out of range: allowed \[1, inf\]"):
        data.passages("health", 0)
    with pytest.raises(ValueError, match="n=100000 is out of range"):
        data.passages("health", 100_000)
    with pytest.raises(ValueError, match="source="):
        data.corpus("twitter")


@pytest.mark.parametrize("source,min_docs", [("wiki", 10_000), ("sotu", 233), ("recipes", 3_000), ("moby-dick", 130)])
def test_corpora_are_installed(source, min_docs):
    docs = data.corpus(source)
    assert len(docs) >= min_docs and all(isinstance(d, str) and d for d in docs[:50])


def test_paragraphs_keep_whole_sentences():
    text = " ".join(f"Sentence number {i} has a few words in it." for i in range(30))
    ps = data.paragraphs(text, min_words=25)
    assert ps and all(p.endswith(".") and len(p.split()) >= 25 for p in ps)


def test_msmarco_loader_reads_a_local_file(tmp_path):
    rows = [{"query": "q1", "passages": {"passage_text": ["alpha passage one", "beta passage two"]}},
            {"query": "q2", "passages": {"passage_text": ["gamma passage three", "alpha passage one"]}}]
    f = tmp_path / "ms_marco_sample.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in rows))
    got = data.msmarco_passages(3, seed=0, path=f)
    assert sorted(got) == ["alpha passage one", "beta passage two", "gamma passage three"]
    assert got == data.msmarco_passages(3, seed=0, path=f)
    with pytest.raises(ValueError, match="holds 3 passages"):
        data.msmarco_passages(4, path=f)


# --- the same passages on every machine, or an error --------------------------------

@pytest.fixture
def fresh_pools():
    def clear():
        for f in (data._sotu, data._recipes, data._topic_pool):
            f.cache_clear()

    clear()
    yield
    clear()


@pytest.mark.parametrize("topic,env,what", [("politics", "TOKENDYN_NODE_MODULES", "State of the Union"),
                                            ("food", "TOKENDYN_ASSETS", "Wikibooks recipes")])
def test_a_missing_source_raises_instead_of_shrinking_the_pool(fresh_pools, topic, env, what, tmp_path,
                                                              monkeypatch):
    full = data.passages(topic, 40, seed=0)
    monkeypatch.setenv(env, str(tmp_path))  # the source is not there
    data._sotu.cache_clear(), data._recipes.cache_clear(), data._topic_pool.cache_clear()
    with pytest.raises(FileNotFoundError, match=f"the '{topic}' passage pool needs this source.*{what}"):
        data.passages(topic, 40, seed=0)  # before the fix: 886 / 296 passages, different ones
    with pytest.raises(FileNotFoundError, match="make setup"):
        data.pool_hash([topic])
    data.passages("health", 5)  # topics without a second source are unaffected
    monkeypatch.undo()
    data._sotu.cache_clear(), data._recipes.cache_clear(), data._topic_pool.cache_clear()
    assert data.passages(topic, 40, seed=0) == full


def test_pool_hash_fingerprints_the_pools(fresh_pools, monkeypatch):
    h = data.pool_hash()
    assert len(h) == 16 and h == data.pool_hash(list(data.TOPICS))
    assert data.pool_hash(["health"]) != data.pool_hash(["sports"]) != h
    with pytest.raises(ValueError, match="topic='cars'"):
        data.pool_hash(["cars"])
    pool = data._topic_pool("health")
    monkeypatch.setattr(data, "_topic_pool", lambda t: pool[:-1] if t == "health" else ())
    assert data.pool_hash(["health"]) != h  # one passage fewer is another pool
