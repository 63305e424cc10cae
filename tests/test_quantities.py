"""The cross-page registry of shared quantities: marks are read back, and a disagreement, a missing
page or an unknown key is named (the built book is checked in tests/test_book_render.py)."""

import pytest

from tokendyn.publish import quantities as Q

KEY = "flow-dabi-recorded-K4"


def test_show_writes_the_registry_format_and_marks_read_it_back():
    html = f"<p>DABI {Q.show(KEY, 7.271067)} here</p>"
    assert Q.marks(html) == [(KEY, "7.27")]
    with pytest.raises(KeyError, match="not a shared quantity"):
        Q.show("no-such-quantity", 1.0)


def test_disagreements_name_a_second_text_a_missing_page_and_an_unknown_key():
    same = {doc: Q.show(KEY, 7.27) for doc in Q.SHARED[KEY].pages}
    assert not [p for p in Q.disagreements(same) if p.startswith(KEY + ":")]
    first, second = Q.SHARED[KEY].pages[:2]
    other = {first: Q.show(KEY, 7.27), second: Q.show(KEY, 7.9)}
    assert any("shown as 7.27 on" in p and "7.9 on" in p for p in Q.disagreements(other))
    assert f"{KEY}: not shown on {second}" in Q.disagreements({first: Q.show(KEY, 7.27), second: "<p>7.27</p>"})
    rogue = '<span class="tokendyn-quantity" data-quantity="made-up">3</span>'
    assert any(p.startswith("made-up: marked on") for p in Q.disagreements({first: rogue}))


def test_the_ladder_marks_only_the_shipped_rung():
    assert Q.ladder_value("shipped (3,000 steps)", KEY, 7.271067) == Q.show(KEY, 7.271067)
    assert Q.ladder_value("ladder, 1,000 steps", KEY, 6.8337) == "6.83"
    rows = [{"generator": "ladder, 1,000 steps", "K": 4, "dabi": 6.8},
            {"generator": "shipped (3,000 steps)", "K": 8, "dabi": 7.6},
            {"generator": "shipped (3,000 steps)", "K": 4, "dabi": 7.3}]
    assert Q.shipped_ladder_dabi(rows, ks=(4, 8, 16)) == {4: 7.3, 8: 7.6}
    assert Q.shipped_ladder_dabi(rows + [{"generator": "shipped (3,000 steps)", "K": 2, "dabi": 15.0}], ks=(4,)) == {4: 7.3}
