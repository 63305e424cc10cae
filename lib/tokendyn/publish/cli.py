"""The ``tokendyn`` command line.

``tokendyn sweep CHAPTER --grid NAME=V1,V2,... [--grid ...] [-p NAME=VALUE ...]
[--backend local|ray] [--address ADDR] [--out DIR]``: run a chapter at every point of a parameter
grid (:func:`tokendyn.publish.sweep.run_sweep`), skipping finished points, and gather every point's
results into one table. ``tokendyn params CHAPTER`` lists a chapter's parameters.

Values are JSON (``0.5``, ``true``, ``"science"``, ``[8, 16]``) or plain words; commas inside brackets
do not split, so ``--grid 'ns=[8,16],[32]'`` is two points. Exit status: 0 when every point is
done, 1 when a point failed, 2 for a usage error (raised before anything runs).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tokendyn", description="Token Dynamics: run the book's "
                                "chapters at scale.")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sweep", help="run a chapter over a parameter grid, resumably",
                       description="Run CHAPTER once per grid point with papermill, each point into "
                       "its own folder under --out named by a hash of the chapter and its "
                       "parameters. Finished points are skipped, so rerunning a killed sweep "
                       "resumes it. At the end every point's results are gathered into one table.")
    s.add_argument("chapter", help="a notebook path, or a chapter name in book/ (e.g. 00_getting_started)")
    s.add_argument("--grid", action="append", default=[], metavar="NAME=V1,V2,...",
                   help="one axis of the grid (repeat for more axes; the grid is their product)")
    s.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE",
                   help="a parameter fixed for every point (repeatable)")
    s.add_argument("--backend", choices=("local", "ray"), default="local",
                   help="local: one point after another here; ray: one Ray task per point")
    s.add_argument("--address", default=None,
                   help="Ray cluster to join ('auto': the one `ray start` made here); default: "
                   "start a local Ray")
    s.add_argument("--out", default=None, help="output folder (default: sweeps/<chapter>)")
    s.add_argument("--num-cpus", type=int, default=None,
                   help="CPUs of a local Ray (default: all); with --backend ray only")
    s.add_argument("--num-gpus", type=float, default=None,
                   help="GPUs per point on Ray (default: 1 when the cluster has GPUs, else 0)")
    s.add_argument("--format", choices=("auto", "parquet", "csv"), default="auto",
                   help="format of the gathered table (auto: parquet when pyarrow is installed)")
    s.add_argument("--timeout", type=int, default=None, metavar="SECONDS",
                   help="papermill's per-cell execution timeout")
    s.add_argument("--kernel", default="python3", help="Jupyter kernel name (default: python3)")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.add_argument("--dry-run", action="store_true",
                   help="list the points, their folders and whether each is done; run nothing")
    q = sub.add_parser("params", help="list a chapter's parameters")
    q.add_argument("chapter")
    return p


def _sweep(args: argparse.Namespace) -> int:
    from . import sweep

    try:
        axes = sweep.parse_grid(args.grid)
        fixed = sweep.parse_params(args.param)
        if not axes:
            raise ValueError("give at least one --grid NAME=V1,V2,... (use -p for single values)")
        if args.backend != "ray" and (args.address or args.num_cpus or args.num_gpus is not None):
            raise ValueError("--address, --num-cpus and --num-gpus need --backend ray")
        nb = sweep.resolve_chapter(args.chapter)
        if args.dry_run:
            import pandas as pd

            pts = [{**p, **fixed} for p in sweep.grid(**axes)]
            sweep._check_known(nb, {k for p in pts for k in p})
            out = Path(args.out if args.out is not None else Path("sweeps") / nb.stem).resolve()
            rows = [{"point": sweep.point_dir(nb, p, out).name, **p,
                     "done": sweep.is_done(sweep.point_dir(nb, p, out))} for p in pts]
            print(f"{nb.name}: {len(pts)} points under {out}")
            print(pd.DataFrame(rows).to_string(index=False))
            return 0
        res = sweep.run_sweep(nb, axes, params=fixed, out=args.out, backend=args.backend,
                              address=args.address, num_cpus=args.num_cpus, num_gpus=args.num_gpus,
                              progress=not args.no_progress, table_format=args.format,
                              kernel_name=args.kernel, timeout_s=args.timeout)
    except (ValueError, TypeError, FileNotFoundError, ImportError) as e:
        print(f"tokendyn sweep: error: {e}", file=sys.stderr)
        return 2
    print(f"{nb.name}: {sweep.summary_line(res)}")
    for name, err in res.failed.items():
        print(f"  failed {name}: {err}")
    print(f"table: {res.table_path} ({len(res.table)} rows)")
    cols = [c for c in res.table.columns if not c.startswith("provenance.")]
    with __import__("pandas").option_context("display.width", 160, "display.max_columns", 12):
        print(res.table[cols].to_string(index=False))
    return 1 if res.failed else 0


def _params(args: argparse.Namespace) -> int:
    from . import sweep

    try:
        nb = sweep.resolve_chapter(args.chapter)
    except FileNotFoundError as e:
        print(f"tokendyn params: error: {e}", file=sys.stderr)
        return 2
    for row in sweep.chapter_parameters(nb):
        print(f"{row['name']} = {row['default']}" + (f"    # {row['help']}" if row["help"] else ""))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tokendyn`` console script; returns the exit status."""
    args = _parser().parse_args(argv)
    if args.command != "sweep" or threading.current_thread() is not threading.main_thread():
        return {"sweep": _sweep, "params": _params}[args.command](args)
    # A scheduler's SIGTERM unwinds like Ctrl-C: finished points stay marked, and a local Ray is
    # shut down instead of being orphaned.
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        return _sweep(args)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    sys.exit(main())
