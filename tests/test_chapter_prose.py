"""The prose helpers every chapter module shares (tokendyn.publish.chapters): counts in words, lists
joined with "and", ranges. Each chapter keeps its own style through the parameters."""

from __future__ import annotations

import pytest

from tokendyn.publish.chapters import count_words, join_words, range_words


def test_count_words_keeps_each_style():
    assert [count_words(n) for n in (0, 1, 12, 13, 1500)] == ["no", "one", "twelve", "13", "1,500"]
    assert count_words(11, through=10) == "11" and count_words(10, through=10) == "ten"   # chapter 5's style
    assert count_words(0, zero="zero", through=10) == "zero"                             # the models appendix's
    assert count_words(-2) == "-2"
    with pytest.raises(ValueError, match=r"through=13 is out of range: allowed \[0, 12\]"):
        count_words(3, through=13)


def test_join_words_and_range_words():
    assert join_words([]) == "" and join_words(["a"]) == "a"
    assert join_words(["a", "b", "c"]) == "a, b and c" and join_words([1, 2], last="or") == "1 or 2"
    assert range_words(200, 600, ",") == "200 to 600" and range_words(0.31, 0.314, ".2f") == "0.31"
