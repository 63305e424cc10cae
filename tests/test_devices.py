"""The book-wide device switch."""

import pytest
import torch

from tokendyn import devices


def test_cpu_is_the_default(monkeypatch):
    monkeypatch.delenv("TOKENDYN_DEVICE", raising=False)
    assert devices.default_device() == torch.device("cpu")
    assert devices.default_dtype() == torch.float32


def test_auto_and_explicit(monkeypatch):
    monkeypatch.setenv("TOKENDYN_DEVICE", "auto")
    assert devices.default_device().type == ("cuda" if torch.cuda.is_available() else "cpu")
    monkeypatch.setenv("TOKENDYN_DTYPE", "bf16")
    assert devices.default_dtype(torch.device("cpu")) == torch.float32  # never bf16 on the CPU


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised without CUDA")
def test_cuda_without_cuda_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("TOKENDYN_DEVICE", "cuda")
    with pytest.raises(RuntimeError, match="TOKENDYN_DEVICE='cuda' but CUDA is not available"):
        devices.default_device()


def test_bad_dtype_names_the_variable(monkeypatch):
    monkeypatch.setenv("TOKENDYN_DTYPE", "int8")
    with pytest.raises(ValueError, match="TOKENDYN_DTYPE='int8' is not allowed"):
        devices.default_dtype(torch.device("cuda"))
