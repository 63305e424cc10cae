"""What every chapter does first: threads, device, quiet libraries, numbered figures, progress bars.

Import this module before torch in a chapter (``from tokendyn.publish import book``): it asks idle OpenMP
threads to sleep, which only works before the OpenMP runtime starts (spinning threads made each
step 8-15x slower on a shared 2-core machine; see the Performance appendix).

- :func:`setup` picks the thread count (``TOKENDYN_THREADS``, else every core this process may use)
  and the device (``TOKENDYN_DEVICE``, else CUDA when present), silences library chatter that
  would otherwise land in the built pages, and starts the chapter's figure numbering.
- :func:`fmt` prints a number the way the chapters' checked outputs do, with a word for a missing
  (nan) or censored (infinite) one.
- :func:`progress` wraps a loop in a ``tqdm.auto`` bar when a person is watching (Jupyter,
  papermill, a terminal); the book's own builds set ``TOKENDYN_PROGRESS=0`` so pages show none.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import logging  # noqa: E402
import math  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Iterable, Iterator  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import TYPE_CHECKING, TypeVar  # noqa: E402

import torch  # noqa: E402

from ..core import devices
from . import plotting  # noqa: E402

if TYPE_CHECKING:
    import pandas as pd
    from ..core.checkpoint import Store
    from pandas.io.formats.style import Styler
from ..core.checks import check_range  # noqa: E402

T = TypeVar("T")


@dataclass(frozen=True)
class Setup:
    """Where a chapter runs: its device, thread count and model dtype."""

    device: torch.device
    threads: int
    dtype: torch.dtype

    def __str__(self) -> str:
        return f"device {self.device}, {self.threads} CPU threads, models in {str(self.dtype).removeprefix('torch.')}"


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def threads() -> int:
    """``TOKENDYN_THREADS`` if set (a positive integer), else :func:`available_cores`."""
    raw = os.environ.get("TOKENDYN_THREADS", "").strip()
    if not raw:
        return available_cores()
    try:
        n = int(raw)
    except ValueError:
        raise ValueError(f"TOKENDYN_THREADS={raw!r} is not an integer: allowed [1, inf]") from None
    check_range("TOKENDYN_THREADS", n, 1, None, integer=True)
    return n


def quiet() -> None:
    """Silence progress bars and warnings that libraries print while loading models.

    transformers' "sequence length is longer than the specified maximum" is about tokenizing a
    whole passage before we keep its first n tokens, and GGUF conversion bars are loading chatter;
    neither says anything about a result.
    """
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    for name in ("sentence_transformers", "gguf", "accelerate", "huggingface_hub"):
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")
    warnings.filterwarnings("ignore", message=".*TypedStorage is deprecated.*")
    if not progress_enabled():
        # transformers' GGUF loader calls tqdm.auto directly, past its own progress-bar switch.
        try:
            import functools

            import transformers.modeling_gguf_pytorch_utils as gguf_utils
            from tqdm.auto import tqdm

            gguf_utils.tqdm = functools.partial(tqdm, disable=True)
        except ImportError:
            pass


def setup(chapter: str | int) -> Setup:
    """Set threads and device, quiet the libraries, number this chapter's figures; return the set-up.

    ``chapter`` is what figure numbers start with (``"2"`` gives Figure 2.1, 2.2, ...).
    """
    n = threads()
    torch.set_num_threads(n)
    quiet()
    plotting.setup()
    plotting.number_figures(chapter)
    dev = devices.default_device()
    return Setup(dev, n, devices.default_dtype(dev))


FLOAT_ORDER_VARS = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_CBWR")
"""Environment variables that choose the CPU kernels, and so the order in which floats are added."""


def float_order() -> str:
    """A short fingerprint of what decides how this process adds floats: the CPU model, torch's
    version, its thread count, the default device and :data:`FLOAT_ORDER_VARS`. Two runs with the
    same fingerprint take the same seeded paths."""
    import hashlib
    import platform

    cpu = platform.processor()
    try:
        cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    parts = [cpu, torch.__version__, str(torch.get_num_threads()), str(devices.default_device())]
    parts += [f"{k}={os.environ.get(k, '')}" for k in FLOAT_ORDER_VARS]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:12]


def shared_store(chapter: str, checkpoint_dir: str | os.PathLike[str] | None = None) -> Store:
    """The checkpoint store the pages of ``chapter`` share, so that a run two pages need is made
    once: the first page computes and records it, the next reads it (a page run alone computes it).

    ``checkpoint_dir`` (a page's parameter) when given; else ``shared_runs_dir()/<chapter>/<float
    order>`` (:func:`float_order`): a page never reads a run made under another float order, so
    checking a page under several float orders checks its own chains. The store keys every cell by
    its parameters and model (:class:`~tokendyn.core.checkpoint.Store`).
    """
    from ..core.checkpoint import Store
    from ..core.paths import shared_runs_dir

    if checkpoint_dir is not None:
        return Store(checkpoint_dir)
    return Store(shared_runs_dir() / chapter / float_order())


def progress_enabled() -> bool:
    """Progress bars unless ``TOKENDYN_PROGRESS=0`` (set by the book's own builds and tests)."""
    return os.environ.get("TOKENDYN_PROGRESS", "1").strip() not in ("0", "false", "no", "off")


def progress(items: Iterable[T], desc: str = "", total: int | None = None) -> Iterator[T]:
    """``items`` with a ``tqdm.auto`` bar when :func:`progress_enabled`, else unchanged."""
    if not progress_enabled():
        yield from items
        return
    from tqdm.auto import tqdm

    yield from tqdm(items, desc=desc, total=total, leave=False)


def load_mlms(names: list[str] | None, *, device: torch.device | str | None = None,
              wrap: str = "special") -> dict[str, tuple]:
    """Load masked LMs with their conditionals: name -> (LoadedMLM, MLMConditional), in order.
    Each conditional runs with the step settings measured for it on this machine
    (:mod:`tokendyn.mcmc.step_settings`), which the chapter's results record.

    ``names`` None loads every embedded MLM that ships with the book. The names are checked
    before any weights load.
    """
    from ..models import available, load_mlm
    from ..mcmc.step_settings import conditional

    if names is None:
        names = [r["name"] for r in available() if r["kind"] == "mlm (embedded)"]
    if isinstance(names, str) or not all(isinstance(n, str) and n.strip() for n in names) or not names:
        raise ValueError(f"mlm_names={names!r}: give a non-empty list of model names, hub ids or local paths")
    out = {}
    for name in names:
        loaded = load_mlm(name, device=device)
        out[name] = (loaded, conditional(loaded, wrap=wrap))
    return out


def describe_mlms(mlms: dict[str, tuple]) -> str:
    """One line: each model with its parameter count."""
    from ..models import n_params

    return ", ".join(f"{k} ({n_params(v[0].model) / 1e6:.1f}M)" for k, v in mlms.items())


def context_use(names: Iterable[str]) -> dict[str, float | None]:
    """Cloze-probe top-5 of each model (None when it has no ``eval.json``, e.g. a hub model)."""
    from ..models.shipped import probe_top5

    return {n: probe_top5(n) for n in names}


def uses_context(names: Iterable[str]) -> list[str]:
    """The models whose cloze-probe top-5 reaches :data:`~tokendyn.models.shipped.CONTEXT_TOP5`
    (0.25), or that have no probe score (hub models, which are trained to use context)."""
    from ..models.shipped import CONTEXT_TOP5

    return [n for n, t in context_use(names).items() if t is None or t >= CONTEXT_TOP5]


def fmt(x: float | None, spec: str = ".3g", *, nan: str = "censored", inf: str = "censored") -> str:
    """``x`` formatted by ``spec``; ``nan`` for None or nan, ``inf`` for an infinite value.

    A censored median or a constant fitted to one is infinite; a crossover outside the grid is nan,
    and which side of the grid it lies on is the word to print (``nan="above the grid"``).
    """
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return nan
    return inf if not math.isfinite(x) else f"{x:{spec}}"


def below(x: float, bound: float) -> str:
    """``'< 1e-12'`` when ``x < bound`` (round-off printed as the bound it stays under, the same on
    every machine), else ``x`` to two significant digits: what a checked output prints for a
    quantity that is zero up to rounding."""
    mantissa, exponent = f"{bound:.0e}".split("e")
    return f"< {mantissa}e{int(exponent)}" if x < bound else f"{x:.2g}"


def sig(x: float, digits: int = 3) -> float:
    """``x`` rounded to ``digits`` significant digits, as a float (what a checked output prints,
    so that round-off below the claim's precision cannot change it)."""
    return float(f"{x:.{digits}g}")


def interval(x: float | None, lo: float | None, hi: float | None, spec: str = ".2f", *,
             nan: str = "censored", inf: str = "censored") -> str:
    """``'x [lo, hi]'``, each part by :func:`fmt` (an infinite upper end prints ``inf``'s word)."""
    return f"{fmt(x, spec, nan=nan, inf=inf)} [{fmt(lo, spec, nan=nan, inf=inf)}, {fmt(hi, spec, nan=nan, inf=inf)}]"


def table(df: pd.DataFrame, caption: str = "", *, precision: int | None = None) -> Styler:
    """A results table as the reader sees it: no index, human headers as given, an optional caption,
    a missing value shown as a dash (never "nan").

    The numbers are formatted by the caller (``interval``, ``fmt``) to what the claim needs; the
    checked text of the same numbers goes in a hidden cell, so a page shows a table, not a printout.
    ``precision``: decimals for float columns the caller left as numbers (pandas' default if None).
    """
    style = df.style.hide(axis="index").format(na_rep="–", precision=precision)
    return style.set_caption(caption) if caption else style
