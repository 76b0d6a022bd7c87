#!/usr/bin/env bash
# Build the sdist and wheel, install the wheel into a fresh virtual environment outside the
# repository, and run the main job and one DP-SGD command from an empty temporary folder.
# Nothing may come from the source tree: the check below fails if pacpriv (or its bundled
# mechanisms) is imported from anywhere but the new environment's site-packages.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

"$python" -m build --sdist --wheel --outdir "$work/dist" "$repo" >"$work/build.log" 2>&1 \
    || { cat "$work/build.log"; exit 1; }
wheel="$(ls "$work"/dist/pacpriv-*.whl)"
echo "built: $(basename "$wheel") and $(basename "$(ls "$work"/dist/pacpriv-*.tar.gz)")"

"$python" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --upgrade pip
"$work/venv/bin/python" -m pip install --quiet "$wheel[plot]"

mkdir "$work/empty"
cd "$work/empty"
unset PYTHONPATH
"$work/venv/bin/python" - "$work/venv" <<'PY'
import pathlib, sys
import pacpriv, pacpriv.mechanisms
venv = pathlib.Path(sys.argv[1]).resolve()
for mod in (pacpriv, pacpriv.mechanisms):
    where = pathlib.Path(mod.__file__).resolve()
    assert venv in where.parents, f"{mod.__name__} imported from {where}, not the wheel"
try:
    import mechanisms  # noqa: F401
except ImportError:
    pass
else:
    raise SystemExit("the wheel installed a top-level package called 'mechanisms'")
print(f"pacpriv {pacpriv.__version__} imported from the wheel")
PY
"$work/venv/bin/pacpriv" --version
"$work/venv/bin/pacpriv" pac run --mechanism kmeans --dataset iris --mi-budget 0.015625 \
    --trials 200 --n-jobs 2 --seed 0 --out report --no-progress
test -s report/report.json && test -s report/report.md && test -s report/report.html
"$work/venv/bin/pacpriv" dpsgd bound --steps-per-epoch 100 --epochs 10 --noise-multiplier 1.0
echo "wheel smoke test passed"
