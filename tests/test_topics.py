"""Topic classifier, null controls, distances to real passages, region visits and AR fluency, on
cases whose answers are known exactly."""

import math
from types import SimpleNamespace

import pytest
import torch

from tokendyn.analysis import topics


def clusters(k=3, per=20, d=8, noise=0.05, seed=0):
    g = torch.Generator().manual_seed(seed)
    centres = torch.eye(d)[:k] * 1.0
    emb = torch.cat([centres[c] + noise * torch.randn(per, d, generator=g) for c in range(k)])
    labels = [f"t{c}" for c in range(k) for _ in range(per)]
    return emb, labels


def test_centroid_classifier_on_separable_embeddings():
    emb, labels = clusters()
    clf = topics.fit_centroids(emb, labels)
    assert clf.labels == ("t0", "t1", "t2")
    assert torch.allclose(clf.centroids.norm(dim=-1), torch.ones(3, dtype=torch.float64))
    acc = topics.accuracy(clf, emb, labels)
    assert acc.value == 1.0 and acc.n == 60 and acc.lo > 0.9
    # held-out points from the same clusters, and scores that are cosines
    test, tl = clusters(seed=1)
    assert topics.accuracy(clf, test, tl).value == 1.0
    assert float(clf.scores(torch.eye(8)[:1]).max()) <= 1.0 + 1e-12
    # a point orthogonal to every centroid is forced into a topic, unless the reject option is on
    junk = torch.eye(8)[5:8]
    forced = clf.predict(junk)
    # each nearly orthogonal point still gets the topic of its largest cosine, however small
    assert forced.tolist() == clf.scores(junk).argmax(-1).tolist() and float(clf.scores(junk).abs().max()) < 0.05
    gated = topics.with_reject(clf, emb, keep=0.9)
    assert (gated.predict(junk, gated=True) == -1).all()
    assert gated.names(gated.predict(junk, gated=True)) == [topics.NONE] * 3
    kept = (gated.predict(emb, gated=True) >= 0).double().mean()
    assert 0.9 <= float(kept) <= 0.9 + 1 / 60 + 1e-12
    shares = topics.label_shares(gated, torch.cat([emb, junk]), gated=True)
    assert abs(sum(e.value for e in shares.values()) - 1) < 1e-12 and shares[topics.NONE].value >= 3 / 63
    # a wrong label order is refused, and so is a single label
    with pytest.raises(ValueError, match="at least two labels"):
        topics.fit_centroids(emb[:20], labels[:20])
    assert topics.fit_centroids(emb, labels, order=["t2", "t1", "t0"]).index("t2") == 0


def test_null_controls():
    support = torch.zeros(50, dtype=torch.bool)
    support[[3, 7, 11]] = True
    ids = topics.random_token_ids(support, 200, 6, seed=1)
    assert ids.shape == (200, 6) and set(ids.unique().tolist()) == {3, 7, 11}
    assert torch.equal(ids, topics.random_token_ids(support, 200, 6, seed=1))
    texts = ["a b c", "d e", "f g h i"]
    sh = topics.shuffled_words(texts, seed=0)
    assert [len(t.split()) for t in sh] == [3, 2, 4]
    assert sorted(w for t in sh for w in t.split()) == list("abcdefghi")
    assert sh != texts and sh == topics.shuffled_words(texts, seed=0)


def test_knn_similarity_by_hand():
    refs = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [-1.0, 0.0]])
    lab = ["a", "b", "a", "b"]
    e = torch.tensor([[1.0, 0.0]])
    s = topics.knn_similarity(e, refs, lab, ["a", "b"], k=1)
    assert torch.allclose(s, torch.tensor([[1.0, 0.0]], dtype=torch.float64))
    s2 = topics.knn_similarity(e, refs, lab, ["a", "b"], k=2)
    assert torch.allclose(s2, torch.tensor([[(1 + 2 ** -0.5) / 2, -0.5]], dtype=torch.float64))
    with pytest.raises(ValueError, match="fewer than k=3"):
        topics.knn_similarity(e, refs, lab, ["a"], k=3)


def test_region_visits_on_hand_built_paths():
    # frames at steps 0, 10, 20, 30, 40, 50; chain 0: out in in out in out (2 entries, 1 return)
    # chain 1: never; chain 2: starts inside, leaves, comes back at 40; chain 3: enters at 50
    inside = torch.tensor([[0, 1, 1, 0, 1, 0],
                           [0, 0, 0, 0, 0, 0],
                           [1, 1, 0, 0, 1, 1],
                           [0, 0, 0, 0, 0, 1]], dtype=torch.bool).T
    v = topics.region_visits(inside, [0, 10, 20, 30, 40, 50])
    assert v.entries.tolist() == [2, 0, 1, 1] and v.returns.tolist() == [1, 0, 0, 0]
    assert v.ever.tolist() == [True, False, True, True]
    assert v.first_entry.tolist() == [10.0, math.inf, 40.0, 50.0]
    assert torch.allclose(v.time_fraction, torch.tensor([0.6, 0.0, 0.6, 0.2], dtype=torch.float64))
    s = topics.visit_summary(v, seed=0, n_boot=500)
    assert s["ever"].value == 0.75 and s["ever"].n == 4
    assert abs(s["time_fraction"].value - 0.35) < 1e-12 and s["returns"].value == 0.25
    assert s["first_entry"].value == 40.0 and s["first_entry"].lo <= 40.0 <= s["first_entry"].hi
    assert topics.median_entry([5.0, math.inf, math.inf]) == math.inf
    assert topics.median_entry([5.0, 7.0, math.inf, math.inf]) == 7.0
    with pytest.raises(ValueError, match="strictly increasing"):
        topics.region_visits(inside, [0, 10, 10, 30, 40, 50])


class BigramLM(torch.nn.Module):
    """A causal LM whose logits at position t are a fixed row for token x_t: NLLs known exactly."""

    def __init__(self, V=12):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.table = torch.nn.Parameter(torch.randn(V, V, generator=g))

    def forward(self, input_ids, attention_mask):
        return SimpleNamespace(logits=self.table[input_ids])


class CharTokenizer:
    unk_token_id, unk_token, bos_token_id = None, None, None

    def convert_tokens_to_ids(self, t):
        return 0 if t == "<|endoftext|>" else None

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [1 + (ord(c) % 11) for c in text]}


def test_ar_nll_is_exact_and_padding_free():
    ar = SimpleNamespace(model=BigramLM(), tokenizer=CharTokenizer())
    texts = ["ab", "hello", "z"]
    got = topics.ar_nll(ar, texts, batch=3)
    one = torch.cat([topics.ar_nll(ar, [t], batch=1) for t in texts])
    assert torch.allclose(got, one, atol=1e-12)
    lp = ar.model.table.detach().double().log_softmax(-1)
    for t, g in zip(texts, got):
        ids = [0] + [1 + (ord(c) % 11) for c in t]
        exact = -sum(float(lp[a, b]) for a, b in zip(ids[:-1], ids[1:])) / (len(ids) - 1)
        assert abs(float(g) - exact) < 1e-5   # log-softmax in float32


def test_topic_split_is_disjoint_and_seeded():
    from transformers import AutoTokenizer

    from tokendyn.core.paths import data_dir

    tok = AutoTokenizer.from_pretrained(str(data_dir() / "models" / "minilm-mlm"))
    loaded = SimpleNamespace(tokenizer=tok)
    sp = topics.topic_split(loaded, ["health", "politics"], n_tokens=12, n_start=2, n_train=3, n_val=2, seed=0)
    assert sp.train_labels == ["health"] * 3 + ["politics"] * 3 and len(sp.val_texts) == 4
    assert all(len(v) == 2 for v in sp.starts.values())
    assert all(topics.content_length(loaded, t) >= 12 for v in sp.starts.values() for t in v)
    snippets = sp.train_texts + sp.val_texts
    assert len(set(snippets)) == len(snippets)
    from tokendyn.mcmc.conditional import content_ids, decode

    start_snippets = decode(loaded, content_ids(loaded, [s for v in sp.starts.values() for s in v], 12))
    assert not set(start_snippets) & set(snippets)
    again = topics.topic_split(loaded, ["health", "politics"], n_tokens=12, n_start=2, n_train=3, n_val=5, seed=0)
    assert again.starts == sp.starts and again.train_texts == sp.train_texts
    with pytest.raises(ValueError, match="topics='sport' is not allowed|not allowed"):
        topics.topic_split(loaded, ["health", "sport"], n_tokens=12, n_start=1, n_train=1, n_val=1)


def test_visit_summary_means_use_the_same_resamples_as_the_stats_bootstrap():
    from tokendyn.core import stats

    g = torch.Generator().manual_seed(0)
    inside = torch.rand(30, 12, generator=g) < 0.3
    v = topics.region_visits(inside, range(30))
    s = topics.visit_summary(v, seed=3, n_boot=400)
    ref = stats.bootstrap(v.time_fraction.numpy(), seed=3, n_boot=400)
    assert abs(s["time_fraction"].lo - ref.lo) < 1e-12 and abs(s["time_fraction"].hi - ref.hi) < 1e-12
    assert s["ever"].value == float(v.ever.double().mean())


def test_region_figures_build_valid_specs():
    import pandas as pd

    from tokendyn.publish.figures import basins

    visits = pd.DataFrame([{"region": r, "labels": d, "start": s, "tau": t, "time_fraction value": 0.2,
                            "time_fraction lo": 0.1, "time_fraction hi": 0.3}
                           for r in ("health", "politics") for d in ("argmax", "gated") for s in ("health", "all")
                           for t in (0.7, 1.0)])
    basins.region_time(visits, ["health", "politics"], ["health", "all"], "t").to_dict()
    spec = basins.group_boxplot({"a": [1.0, 2.0], "b": [3.0]}, "x", "t", rule=1.5).to_dict()
    assert sum(len(d) for d in spec["datasets"].values()) == 4   # three values and the rule
    refs = pd.DataFrame({"pc1": [0.0, 1.0], "pc2": [0.0, 1.0], "topic": ["a", "b"], "text": ["u", "v"]})
    path = pd.DataFrame({"chain": [3, 3, 5, 5], "frame": [0, 1, 0, 1], "step": [0, 25, 0, 25],
                         "pc1": [0.1, 0.2, 0.3, 0.4],
                         "pc2": [0.0] * 4, "start": "health", "label": "politics", "gated": "none of these",
                         "text": ["one two three"] * 4})
    basins.embedding_paths(refs, path, "t").to_dict()
    spec = basins.path_explorer(refs, path).to_dict()
    params = {p["name"]: p for p in spec.get("params", [])} or \
        {p["name"]: p for v in spec["vconcat"] for p in v.get("params", [])}
    assert params["chain_pick"]["bind"]["options"] == [3, 5] and params["frame_pick"]["bind"]["max"] == 1
    abl = pd.DataFrame({"corpus": ["with", "without"], "region": "politics", "tau": 1.0, "time fraction": [0.2, 0.1],
                        "lo": [0.1, 0.0], "hi": [0.3, 0.2]})
    basins.corpus_ablation(abl, ["politics"]).to_dict()


def test_repeated_words_scores_tautologies_not_plain_text():
    from tokendyn.analysis import topics

    r = topics.repeated_words(["a mental hospital, also known as a mental hospital, is a mental hospital.",
                               "the population density was 120 per square mile.",
                               "a a a the the of", "", "Sport is a SPORT."])
    assert r.dtype == torch.float64
    assert r.tolist() == [0.5, 0.0, 0.0, 0.0, 0.5]
    with pytest.raises(TypeError, match="sequence of strings"):
        topics.repeated_words("one text")
    with pytest.raises(ValueError, match="min_letters"):
        topics.repeated_words(["x"], min_letters=0)


REGIONS = ["health", "sports", "food", "science", "politics"]


def test_region_shares_count_frames_after_the_start_and_none_in_no_region():
    labels = torch.tensor([[4, 0], [4, -1], [0, -1], [4, 1], [-1, 1]])      # [T = 5, B = 2]
    s = topics.region_shares(labels, 5)
    assert torch.equal(s[0], torch.tensor([0.25, 0, 0, 0, 0.5], dtype=torch.float64))
    assert torch.equal(s[1], torch.tensor([0, 0.5, 0, 0, 0], dtype=torch.float64))
    with pytest.raises(ValueError, match=r"labels must lie in \[-1, 4\]"):
        topics.region_shares(torch.tensor([[0], [5]]), 5)
    with pytest.raises(ValueError, match="labels must be an integer tensor"):
        topics.region_shares(torch.zeros(1, 3, dtype=torch.long), 5)


def test_excess_over_controls_by_hand():
    shares = torch.tensor([[0.1, 0.2, 0.3, 0.0, 0.4],     # from health: politics 0.4 - mean(0.2, 0.3, 0.0)
                           [0.0, 0.0, 0.0, 0.0, 1.0]], dtype=torch.float64)  # started in politics
    ex = topics.excess_over_controls(shares, [0, 4], 4)
    assert ex[0].item() == pytest.approx(0.4 - 0.5 / 3) and math.isnan(ex[1].item())
    # a control (science) compared without the target: 0.0 - mean(0.2, 0.3)
    assert topics.excess_over_controls(shares, [0, 4], 3, exclude=(4,))[0].item() == pytest.approx(-0.25)


def _chains(pull: float, n: int, seed: int) -> tuple[torch.Tensor, list[str]]:
    """Chains from health, sports and food whose every frame after the start lands in politics with
    probability ``pull`` and otherwise in a uniform region (the start included)."""
    g = torch.Generator().manual_seed(seed)
    start = [REGIONS[i % 3] for i in range(n)]
    t = 200
    labels = torch.randint(0, 5, (t, n), generator=g)
    labels[torch.rand(t, n, generator=g) < pull] = 4
    labels[0] = torch.tensor([i % 3 for i in range(n)])
    return labels, start


def test_attractor_test_finds_a_pull_and_not_a_uniform_region():
    labels, start = _chains(0.3, 90, 0)
    r = topics.attractor_test(labels, start, REGIONS, seed=0)
    # every frame: politics 0.3 + 0.7/5 = 0.44, any other region 0.14: the excess is 0.30
    assert r.excess.lo < 0.30 < r.excess.hi and r.excess.lo > r.null.hi
    assert abs(r.null.value) < 0.02 and r.null_region != "politics"
    flat, start = _chains(0.0, 90, 1)
    r0 = topics.attractor_test(flat, start, REGIONS, seed=0)
    assert r0.excess.lo < 0 < r0.excess.hi and not r0.excess.lo > r0.null.hi
    # the null is the largest control: a region the chains favour shows up as the null, not as the target's pull
    big, start = _chains(0.0, 90, 2)
    big[1:][torch.rand(big[1:].shape, generator=torch.Generator().manual_seed(3)) < 0.3] = 3   # science is big
    rb = topics.attractor_test(big, start, REGIONS, seed=0)
    assert rb.null_region == "science" and rb.null.lo > 0.2 and rb.excess.value < 0
    with pytest.raises(ValueError, match="target"):
        topics.attractor_test(labels, start, REGIONS, target="weather")


def test_fluent_gate_by_hand():
    real_nll = torch.arange(1.0, 101.0)                 # 95% quantile 95.05
    real_rep = torch.zeros(100)
    ok = topics.fluent(torch.tensor([50.0, 96.0, 50.0, 50.0]), torch.tensor([0.1, 0.1, 0.6, 0.1]),
                       torch.tensor([0.0, 0.0, 0.0, 0.5]), real_nll=real_nll, real_repeats=real_rep)
    assert ok.tolist() == [True, False, False, False]
    with pytest.raises(ValueError, match="share one shape"):
        topics.fluent(torch.zeros(2), torch.zeros(3), torch.zeros(2), real_nll=real_nll, real_repeats=real_rep)


def test_attractor_vs_null_figure_greys_the_null_and_needs_its_columns():
    import pandas as pd

    from tokendyn.publish.figures import basins

    df = pd.DataFrame([{"model": "m", "tau": 1.0, "statistic": s, "value": v, "lo": v - 0.1, "hi": v + 0.1}
                       for s, v in (("politics", 0.2), ("null: science", 0.01))])
    spec = basins.attractor_vs_null(df).to_dict()
    assert spec["spec"]["layer"][0]["encoding"]["color"]["scale"]["range"] == ["#c0392b", "#7f8c8d"]
    kinds = {r["statistic"]: r["kind"] for r in spec["datasets"][next(iter(spec["datasets"]))]}
    assert kinds == {"politics": "politics", "null: science": "null (largest control region)"}
    with pytest.raises(ValueError, match="statistic"):
        basins.attractor_vs_null(df.drop(columns="statistic"))


def _record_rows(pulls: dict[str, float]) -> list[dict]:
    rows = [{"model": "reference", "role": "reference", "regions": REGIONS, "real_fluent": {"fluent": 90, "n": 100}}]
    for i, (name, pull) in enumerate(pulls.items()):
        a, start = _chains(pull, 60, 0)          # the same seed: chain b of every model pairs
        b, _ = _chains(pull, 60, 1)
        rows.append({"model": name, "role": "ablation" if name == "without" else "claim", "steps": 200,
                     "tau": [0.7] * 60 + [1.0] * 60, "start_topic": start + start,
                     "labels_gated": torch.cat([a, b], 1).tolist(), "labels_argmax": torch.cat([a, b], 1).tolist(),
                     "politics_fluency": {"fluent": 5 * (i + 1), "n": 50}})
    return rows


def test_attractor_run_reads_a_record_into_the_rules_inputs():
    run = topics.attractor_run(_record_rows({"with": 0.3, "other": 0.2, "without": 0.0}), ablation_with="with")
    assert run.models == ("with", "other") and run.ablation_models == ("with", "without")
    assert run.chains == 60 and run.steps == 200
    assert set(run.tests) == {(m, t, lab) for m in ("with", "other", "without") for t in (0.7, 1.0)
                              for lab in ("gated", "argmax")}
    r = run.tests[("with", 1.0, "gated")]
    assert r.excess.lo > r.null.hi and r.excess.lo < 0.30 < r.excess.hi
    # paired fall in politics share: 0.3 + 0.7 / 5 = 0.44 with, 1 / 5 without
    assert run.ablation[1.0].lo < 0.24 < run.ablation[1.0].hi and run.ablation[0.7].lo > 0.15
    assert (run.politics_fluent.value, run.politics_fluent.n) == (15 / 100, 100)   # claim models only, pooled
    assert run.real_fluent.value == 0.9
    assert len(run.figure_rows()) == 12 and {row["labels"] for row in run.rows()} == {"gated", "argmax"}
    with pytest.raises(ValueError, match="ablation_with"):
        topics.attractor_run(_record_rows({"with": 0.3, "without": 0.0}), ablation_with="other")
    with pytest.raises(ValueError, match="reference row"):
        topics.attractor_run(_record_rows({"with": 0.3})[1:])


class _WordTok:
    def decode(self, ids):
        return " ".join(f"w{i}" for i in ids)


class _FirstWordEmbedder:
    """w0 -> (1, 0), w1 -> (0, 1), any other first word far from both."""

    def encode(self, texts, **kw):
        return torch.tensor([{"w0": [1.0, 0.0], "w1": [0.0, 1.0]}.get(t.split()[0], [-1.0, -1.0]) for t in texts])


def test_label_frames_without_references_labels_the_same_frames_and_scores_none():
    """The recorded attractor run (labels only) and chapter 4 (labels and kNN) read a frame alike."""
    e = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    labels = ["a", "a", "b", "b"]
    clf = topics.fit_centroids(e, labels, order=["a", "b"])
    gclf = topics.with_reject(clf, e, keep=1.0)
    traj = torch.tensor([[[0, 5], [1, 5]], [[9, 9], [9, 9]], [[1, 5], [7, 5]]])          # [T=3, B=2, n=2]
    loaded, steps = SimpleNamespace(tokenizer=_WordTok()), torch.tensor([0, 5, 10])
    bare = topics.label_frames(loaded, _FirstWordEmbedder(), traj, steps, every=10, clf=clf, gated_clf=gclf)
    full = topics.label_frames(loaded, _FirstWordEmbedder(), traj, steps, every=10, clf=clf, gated_clf=gclf,
                               refs=e, ref_labels=labels, regions=["a", "b"], k=2)
    assert bare.steps.tolist() == [0, 10] and bare.texts == ["w0 w5", "w1 w5", "w1 w5", "w7 w5"]
    assert bare.gated.tolist() == [[0, 1], [1, -1]] and bare.gated_names[3] == topics.NONE
    assert bare.similarity is None and full.similarity.shape == (2, 2, 2)
    for field in ("states", "steps", "emb", "argmax", "gated"):
        assert torch.equal(getattr(bare, field), getattr(full, field)), field
    assert (bare.texts, bare.label_names, bare.gated_names, bare.classes) == \
        (full.texts, full.label_names, full.gated_names, full.classes)
    with pytest.raises(ValueError, match="give refs"):
        topics.label_frames(loaded, _FirstWordEmbedder(), traj, steps, every=10, clf=clf, gated_clf=gclf, regions=["a"])
