"""book.below prints round-off as the bound it stays under."""

from tokendyn.publish import book


def test_below_prints_the_bound_or_the_value():
    assert book.below(0.0, 1e-12) == "< 1e-12"
    assert book.below(3e-13, 1e-12) == "< 1e-12"
    assert book.below(0.0, 1e-9) == "< 1e-9"  # not '1e-09'
    assert book.below(1e-12, 1e-12) == "1e-12"  # not below: the value itself
    assert book.below(0.25, 1e-12) == "0.25"


def test_interval_and_table_format_what_the_reader_sees():
    import math

    import pandas as pd

    from tokendyn.publish import book

    assert book.interval(1.234, 1.0, 1.5) == "1.23 [1.00, 1.50]"
    assert book.interval(math.inf, 2.0, math.inf, ".1f") == "censored [2.0, censored]"
    assert book.interval(float("nan"), 1.0, math.inf, "g", nan="above the grid", inf="above") == "above the grid [1, above]"
    html = book.table(pd.DataFrame({"τ": ["1"], "b [95% CI]": ["1.02 [0.95, 1.10]"]}), "Table").to_html()
    assert "b [95% CI]" in html and "1.02 [0.95, 1.10]" in html and "<caption>Table</caption>" in html
    assert "row_heading" not in html  # no index column
    raw = book.table(pd.DataFrame({"x": [0.12345, float("nan")], "n": [3, 4]}), precision=3).to_html()
    assert "0.123" in raw and "0.12345" not in raw and ">–<" in raw and "nan" not in raw.lower()
