"""Seeded weight initialisation: every draw comes from an explicit generator, none from torch's global RNG."""

from __future__ import annotations

import math
from typing import TypeVar

import torch
from torch import nn

M = TypeVar("M", bound=nn.Module)


def init_weights(module: M, generator: torch.Generator, *, std: float | None = None) -> M:
    """Re-initialise every parameter of ``module`` in place from ``generator``; return ``module``.

    Parameters of 2 or more dimensions (matrices, embeddings, convolution kernels) are drawn from
    N(0, 1/fan_in) when ``std`` is None (``fan_in`` = the size of one output row, e.g. ``in x kh x kw``),
    else from N(0, std^2); the weight of a norm layer is set to one; every other parameter (biases)
    to zero. Modules are visited in registration order, and a parameter shared by two modules (tied
    input and output embeddings) is drawn at each of them, the last draw staying.
    """
    with torch.no_grad():
        for mod_name, mod in module.named_modules():
            for name, p in mod.named_parameters(recurse=False):
                if p.dim() >= 2:
                    if std is None:
                        p.copy_(torch.randn(p.shape, generator=generator) / math.sqrt(p[0].numel()))
                    else:
                        p.normal_(0.0, std, generator=generator)
                elif name == "weight" and (isinstance(mod, nn.LayerNorm) or "norm" in mod_name):
                    p.fill_(1.0)
                else:
                    p.zero_()
    return module
