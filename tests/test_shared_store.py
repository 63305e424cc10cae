"""A chapter's pages share an expensive run through one checkpoint store (tokendyn.publish.book.shared_store):
the first page computes it, the next reads it, and a run under another float order never reads it."""

from __future__ import annotations

import torch

from tokendyn.publish import book


def test_the_second_page_reads_what_the_first_computed(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENDYN_SHARED_RUNS", str(tmp_path))
    calls = []

    def chains():
        calls.append(1)
        return {"x": torch.arange(6).reshape(2, 3)}

    first = book.shared_store("04_basins").get_or_compute("chains", {"seed": 0}, chains)
    second = book.shared_store("04_basins").get_or_compute("chains", {"seed": 0}, chains)   # another page, same run
    assert len(calls) == 1 and torch.equal(first["x"], second["x"])
    book.shared_store("04_basins").get_or_compute("chains", {"seed": 1}, chains)             # other parameters: computed
    assert len(calls) == 2
    assert book.shared_store("04_basins").folder == tmp_path / "04_basins" / book.float_order()


def test_another_float_order_or_a_named_folder_does_not_share(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENDYN_SHARED_RUNS", str(tmp_path))
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    native = book.float_order()
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    assert book.float_order() != native                       # ATen's default kernels add floats in another order
    assert book.shared_store("04_basins").folder != tmp_path / "04_basins" / native
    assert book.shared_store("04_basins", tmp_path / "mine").folder == tmp_path / "mine"   # a page's checkpoint_dir
