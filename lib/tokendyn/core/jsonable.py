"""JSON-safe values for results files, without importing torch (the command line and every Ray
worker start faster without it)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any


def plain(x: Any) -> Any:
    """Turn tensors, numpy scalars and paths into JSON-safe values (NaN and inf become strings)."""
    if hasattr(x, "detach"):  # a torch tensor
        x = x.detach().cpu().tolist()
    if hasattr(x, "tolist") and not isinstance(x, (list, tuple, dict, str)):
        x = x.tolist()
    if isinstance(x, dict):
        return {str(k): plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if isinstance(x, Path):
        return str(x)
    return x
