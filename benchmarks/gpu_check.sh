#!/usr/bin/env bash
# One check of pytest-dlbench's CUDA paths on a GPU machine, in under 10 minutes.
#
# The GPU machines have torch, torchvision, timm, pytest, xdist, pandas and nvidia-ml-py but no
# package index, so the project is carried as source (PYTHONPATH=src) and its pytest plugin is
# loaded with -p. Figures: one table at the end (and $OUT_DIR/gpu_check.txt); record them with
# the date and device in benchmarks/README.md. docs/gpu.md says how to read the table.
#
#   bash benchmarks/gpu_check.sh [OUT_DIR] [--quick] [--dry-run]     (in any order)
#
# --dry-run: no GPU needed (fake GPUs, fake pytest runs): checks the script itself.
set -uo pipefail
usage() { sed -n '9p' "$0" | sed 's/^#  *//'; }
out=${OUT:-/tmp/dlbench-gpu-check}
flags=()
dry_run=0
for arg in "$@"; do
  case "$arg" in
    --quick) flags+=("$arg") ;;
    --dry-run) flags+=("$arg"); dry_run=1 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "gpu_check: unknown option $arg" >&2; usage >&2; exit 2 ;;
    *) out=$arg ;;
  esac
done
cd "$(dirname "$0")/.."
mkdir -p "$out"
out=$(cd "$out" && pwd)
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
# Without the installed entry point, pytest finds the plugin through -p (not when it is installed:
# pytest would register it twice).
if ! python -c "import importlib.metadata as m; m.distribution('pytest-dlbench')" 2>/dev/null; then
  export PYTEST_ADDOPTS="-p pytest_dlbench.plugin ${PYTEST_ADDOPTS:-}"
fi
# A dry run needs only what it runs (torch for the timer on the CPU, the project's own modules);
# the modules only a GPU run uses are named when missing, not required.
DRY_RUN=$dry_run python - <<'PY' || { echo "gpu_check: a module the check needs is missing (see above)"; exit 2; }
import importlib.util, os
dry = os.environ["DRY_RUN"] == "1"
needed = ["torch", "pytest", "yaml"]
gpu_only = ["torchvision", "timm", "xdist", "pandas", "pynvml"]
missing = [m for m in needed + ([] if dry else gpu_only) if importlib.util.find_spec(m) is None]
if missing:
    raise SystemExit("missing: " + ", ".join(missing))
if dry:
    absent = [m for m in gpu_only if importlib.util.find_spec(m) is None]
    if absent:
        print("gpu_check --dry-run: not installed here, not needed for a dry run: "
              + ", ".join(absent))
PY
python benchmarks/gpu_check.py "$out" ${flags[@]+"${flags[@]}"} | tee "$out/gpu_check.txt"
exit "${PIPESTATUS[0]}"
