"""The book-wide device switch."""

import pytest
import torch

from tokendyn.core import devices


def test_cuda_when_present_is_the_default(monkeypatch):
    monkeypatch.delenv("TOKENDYN_DEVICE", raising=False)
    monkeypatch.delenv("TOKENDYN_DTYPE", raising=False)
    assert devices.default_device().type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert devices.default_dtype() == torch.float32
    monkeypatch.setenv("TOKENDYN_DEVICE", "cpu")
    assert devices.default_device() == torch.device("cpu")


def test_book_setup_threads_and_device(monkeypatch):
    from tokendyn.publish import book

    monkeypatch.setenv("TOKENDYN_THREADS", "1")
    monkeypatch.setenv("TOKENDYN_DEVICE", "cpu")
    before = torch.get_num_threads()
    try:
        s = book.setup(7)
        assert s.threads == 1 and torch.get_num_threads() == 1 and s.device == torch.device("cpu")
    finally:
        torch.set_num_threads(before)
    monkeypatch.delenv("TOKENDYN_THREADS")
    assert book.threads() == book.available_cores()
    for bad in ("0", "two"):
        monkeypatch.setenv("TOKENDYN_THREADS", bad)
        with pytest.raises((ValueError, TypeError), match="TOKENDYN_THREADS"):
            book.threads()


def test_progress_bars_can_be_switched_off(monkeypatch):
    from tokendyn.publish import book

    monkeypatch.setenv("TOKENDYN_PROGRESS", "0")
    assert not book.progress_enabled() and list(book.progress(range(3))) == [0, 1, 2]
    monkeypatch.setenv("TOKENDYN_PROGRESS", "1")
    assert book.progress_enabled() and list(book.progress(range(3))) == [0, 1, 2]


def test_auto_and_explicit(monkeypatch):
    monkeypatch.setenv("TOKENDYN_DEVICE", "auto")
    assert devices.default_device().type == ("cuda" if torch.cuda.is_available() else "cpu")
    monkeypatch.setenv("TOKENDYN_DTYPE", "bf16")
    assert devices.default_dtype(torch.device("cpu")) == torch.bfloat16  # AVX-512 BF16 on these CPUs
    monkeypatch.setenv("TOKENDYN_DTYPE", "fp16")
    with pytest.raises(ValueError, match="TOKENDYN_DTYPE='fp16' is not allowed: choose one of \\['fp32', 'bf16'\\]"):
        devices.default_dtype(torch.device("cpu"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised without CUDA")
def test_cuda_without_cuda_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("TOKENDYN_DEVICE", "cuda")
    with pytest.raises(RuntimeError, match="TOKENDYN_DEVICE='cuda' but CUDA is not available"):
        devices.default_device()


def test_bad_dtype_names_the_variable(monkeypatch):
    monkeypatch.setenv("TOKENDYN_DTYPE", "int8")
    with pytest.raises(ValueError, match="TOKENDYN_DTYPE='int8' is not allowed"):
        devices.default_dtype(torch.device("cuda"))
