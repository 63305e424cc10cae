"""Every file the project writes, written atomically; every record it reads, read with a clear error.

A write goes to a temporary file in the target's folder (``.<name>.<random>.tmp``), is flushed to
disk, and only then takes the target's name (``os.replace``), so a reader sees the old file or the
new one, never a mix or a prefix, and a writer killed mid-write leaves the old file intact (a
stray ``.tmp`` beside it at worst, which never has the record's name)::

    write_json(path, record, sort_keys=True)               # json.dumps(record, sort_keys=True) + "\\n"
    write_atomic(path, lambda p: torch.save(obj, p))     # any writer that takes a path
    replace_dir(folder, lambda d: model.save_pretrained(d))  # a folder read as a unit

:func:`read_record` reads a JSON record back and raises :class:`RecordError` naming the file, what
is wrong with it (missing, empty or truncated, not JSON, not an object, missing keys, another kind
of run) and how to remake it (the record's own ``command`` when it can be read, even from a
truncated file). This module imports nothing heavy (no torch), so the command line and the sweep
use it too.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["write_atomic", "write_text", "write_bytes", "write_json", "replace_dir", "read_record",
           "RecordError", "MissingRecordError"]


def _fsync_file(path: Path) -> None:
    """Flush a written file's bytes to disk (before a name points at them)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    """Flush a folder's entries (a rename in it) to disk; best effort (not every system can)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomic(path: str | Path, write: Callable[[Path], None], *, mode: int = 0o644) -> Path:
    """Write ``path`` atomically: ``write(tmp)`` fills a temporary file in the same folder, which is
    given ``mode``, flushed to disk and renamed onto ``path``; then the folder is flushed (best
    effort). Creates the parent folders. On any exception (``write``'s included) the temporary file
    is removed, ``path`` is left as it was, and the exception propagates. Returns ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        os.chmod(tmp, mode)  # mkstemp makes 0600; a record is an ordinary readable file
        _fsync_file(tmp)  # the bytes are on disk before the name points at them
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)
    return path


def write_bytes(path: str | Path, data: bytes, *, mode: int = 0o644) -> Path:
    """Atomically write ``data`` to ``path`` (:func:`write_atomic`)."""
    return write_atomic(path, lambda p: p.write_bytes(data), mode=mode)


def write_text(path: str | Path, text: str, *, encoding: str = "utf-8", mode: int = 0o644) -> Path:
    """Atomically write ``text`` to ``path`` (no newline translation: the bytes are ``text``'s)."""
    return write_bytes(path, text.encode(encoding), mode=mode)


def write_json(path: str | Path, obj: Any, *, end: str = "\n", mode: int = 0o644, **json_kwargs: Any) -> Path:
    """Atomically write ``json.dumps(obj, **json_kwargs) + end`` to ``path`` (UTF-8)."""
    return write_text(path, json.dumps(obj, **json_kwargs) + end, mode=mode)


def replace_dir(path: str | Path, fill: Callable[[Path], None]) -> Path:
    """Replace the folder ``path`` by one that ``fill(tmp)`` writes into a temporary sibling folder:
    every file in it is flushed to disk, then the old folder is renamed aside, the new one renamed
    in, and the old one removed. A reader never sees a half-filled folder under ``path`` (only, for
    an instant, no folder there); a writer killed in ``fill`` leaves the old folder intact. When
    another writer put its own complete folder there first, that one is kept. On any exception in
    ``fill`` the temporary folder is removed and the exception propagates. Returns ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    new = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    try:
        fill(new)
        for f in new.rglob("*"):
            if f.is_file() and not f.is_symlink():
                _fsync_file(f)
        for d in [new, *(d for d in new.rglob("*") if d.is_dir() and not d.is_symlink())]:
            _fsync_dir(d)
        os.chmod(new, 0o755)  # mkdtemp makes 0700; the folder is an ordinary readable one
    except BaseException:
        shutil.rmtree(new, ignore_errors=True)
        raise
    aside: Path | None = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.old")
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        aside = None
    try:
        os.rename(new, path)
    except OSError:
        shutil.rmtree(new, ignore_errors=True)
        if not path.exists():  # not another writer's complete folder that got there in between
            if aside is not None:
                os.rename(aside, path)  # the old folder back
            raise
    if aside is not None:
        if aside.is_dir() and not aside.is_symlink():
            shutil.rmtree(aside, ignore_errors=True)
        else:
            aside.unlink(missing_ok=True)
    _fsync_dir(path.parent)
    return path


class RecordError(ValueError):
    """A record file that cannot be used: missing, empty or truncated, not JSON, not a JSON object,
    missing a key, or from another kind of run. The message names the file, what is wrong and how
    to remake it."""


class MissingRecordError(RecordError, FileNotFoundError):
    """A record file that is not there (also a ``FileNotFoundError``)."""


_COMMAND = re.compile(r'"command"\s*:\s*"((?:[^"\\]|\\.)*)"')
_DEFAULT_REMAKE = ("remake it with the chapter or script that records it (its command is in the chapter's "
                   "text), or restore the committed copy (git checkout -- <path>)")


def _command(record: Any, text: str | None) -> str | None:
    """The record's own ``command``: from the parsed record, else recovered from its raw text."""
    if isinstance(record, dict) and isinstance(record.get("command"), str) and record["command"]:
        return record["command"]
    m = _COMMAND.search(text or "")
    if m is None:
        return None
    try:
        return json.loads(f'"{m.group(1)}"') or None
    except json.JSONDecodeError:
        return m.group(1) or None


def _truncated(text: str, e: json.JSONDecodeError) -> bool:
    """Whether JSON that fails to parse is a record cut short: an object or list that stops before
    its end (the parser ran off the end of the text, or it does not end with its closing bracket)."""
    body = text.strip()
    if not body or body[0] not in "{[":
        return False
    return e.pos >= len(text.rstrip()) or body[-1] not in "}]" or e.msg.startswith("Unterminated string")


def read_record(path: str | Path, *, kind: str | None = None, keys: tuple[str, ...] = (),
                remake: str | None = None) -> dict[str, Any]:
    """The JSON object in ``path``, checked: it holds ``keys`` (and, with ``kind``, its ``"kind"``
    is ``kind``). Raises :class:`RecordError` (:class:`MissingRecordError` for a missing file)
    whose message names the file, what is wrong with it and how to remake it: the record's own
    ``command`` when it can be read (from a truncated file too), else ``remake``, else a generic
    hint."""
    path = Path(path)
    text: str | None = None
    record: Any = None

    def fail(problem: str, cls: type[RecordError] = RecordError) -> RecordError:
        cmd = _command(record, text)
        how = f"Remake it with: {cmd}" if cmd else (remake or _DEFAULT_REMAKE).replace("<path>", str(path))
        return cls(f"record {path} {problem}. {how[0].upper()}{how[1:]}")

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise fail("is missing (no such file)", MissingRecordError) from None
    except IsADirectoryError:
        raise fail("is a folder, not a record file") from None
    except UnicodeDecodeError as e:
        raise fail(f"is not JSON: its bytes are not UTF-8 text (byte {e.start})") from None
    if not text.strip():
        raise fail(f"is empty ({len(text)} bytes): truncated, a write that never finished")
    try:
        record = json.loads(text)
    except json.JSONDecodeError as e:
        if e.msg.startswith("Extra data"):
            raise fail(f"is not JSON: more text follows its end (char {e.pos} of {len(text)}), "
                       "two writes mixed in one file") from None
        if _truncated(text, e):
            raise fail(f"is truncated: its JSON ends early ({e.msg}; char {e.pos} of {len(text)}), "
                       "a write that never finished") from None
        raise fail(f"is not JSON ({e.msg}: line {e.lineno} column {e.colno})") from None
    if not isinstance(record, dict):
        raise fail(f"is not a record: it holds a JSON {type(record).__name__}, not an object")
    if kind is not None and "kind" in record and record["kind"] != kind:
        raise fail(f"is from another kind of run: its kind is {record['kind']!r}, not {kind!r}")
    need = (*keys, "kind") if kind is not None else keys
    missing = [k for k in dict.fromkeys(need) if k not in record]
    if missing:
        what = f" (a {record['kind']!r} record)" if isinstance(record.get("kind"), str) else ""
        raise fail(f"is missing key{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}{what}")
    return record
