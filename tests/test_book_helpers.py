"""book.below prints round-off as the bound it stays under."""

from tokendyn import book


def test_below_prints_the_bound_or_the_value():
    assert book.below(0.0, 1e-12) == "< 1e-12"
    assert book.below(3e-13, 1e-12) == "< 1e-12"
    assert book.below(0.0, 1e-9) == "< 1e-9"  # not '1e-09'
    assert book.below(1e-12, 1e-12) == "1e-12"  # not below: the value itself
    assert book.below(0.25, 1e-12) == "0.25"
