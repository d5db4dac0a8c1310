#!/usr/bin/env bash
# One check of pytest-dlbench's CUDA paths on a GPU machine, in under 10 minutes.
#
# The GPU machines have torch, torchvision, timm, pytest, xdist, pandas and nvidia-ml-py but no
# package index, so the project is carried as source (PYTHONPATH=src) and its pytest plugin is
# loaded with -p. Figures: one table at the end (and $OUT/gpu_check.txt); record them with the
# date and device in benchmarks/README.md.
#
#   bash benchmarks/gpu_check.sh [OUT_DIR] [--quick]
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-/tmp/dlbench-gpu-check}}
shift || true
mkdir -p "$out"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
# Without the installed entry point, pytest finds the plugin through -p (not when it is installed:
# pytest would register it twice).
if ! python -c "import importlib.metadata as m; m.distribution('pytest-dlbench')" 2>/dev/null; then
  export PYTEST_ADDOPTS="-p pytest_dlbench.plugin ${PYTEST_ADDOPTS:-}"
fi
python - <<'PY' || { echo "gpu_check: a module the check needs is missing (see above)"; exit 2; }
import importlib.util
missing = [m for m in ("torch", "torchvision", "timm", "pytest", "xdist", "yaml", "pandas",
                       "pynvml") if importlib.util.find_spec(m) is None]
if missing:
    raise SystemExit("missing: " + ", ".join(missing))
PY
python benchmarks/gpu_check.py "$out" "$@" | tee "$out/gpu_check.txt"
exit "${PIPESTATUS[0]}"
