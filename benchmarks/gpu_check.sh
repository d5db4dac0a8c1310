#!/usr/bin/env bash
# One check of pytest-dlbench's CUDA paths on a GPU machine, in under 10 minutes.
#
# GPU machines often have torch, torchvision, timm, pytest, xdist and pandas but no package index,
# so the project is carried as source (PYTHONPATH=src) and its pytest plugin is loaded with -p.
# What such a machine lacks travels as wheels inside the checkout (a lease copies the checkout,
# not /tmp): `python benchmarks/gpu_wheels.py .whl` here, then, under a limit of 500 s there:
#   bash benchmarks/gpu_check.sh /tmp/gc --quick --budget 440 --wheels .whl --copy-to $OUT
# Figures: one table at the end, also OUT_DIR/gpu_check.txt (rewritten after every row); record
# them with the date and device in benchmarks/README.md. docs/gpu.md says how to read the table.
#
#   bash benchmarks/gpu_check.sh [OUT_DIR] [--quick] [--budget S] [--wheels DIR] [--copy-to DIR] [--dry-run]
#
# Options in any order. --budget bounds the whole script (a lease's minutes); --copy-to copies
# the table and the logs after every row to a folder that outlives a kill; --dry-run needs no
# GPU (fake GPUs, fake pytest runs): it checks the script itself. PYTHON names the interpreter;
# else the first of python3, python that imports torch.
set -uo pipefail
usage() { sed -n '12p' "$0" | sed 's/^#  *//'; }
out=${OUT:-/tmp/dlbench-gpu-check}
flags=()
dry_run=0
wheels=""
copy_to=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) flags+=("$1") ;;
    --dry-run) flags+=("$1"); dry_run=1 ;;
    --budget|--wheels|--copy-to)
      [ $# -ge 2 ] || { echo "gpu_check: $1 needs a value" >&2; usage >&2; exit 2; }
      case "$1" in --budget) flags+=("--budget=$2") ;; --wheels) wheels=$2 ;; *) copy_to=$2 ;; esac
      shift ;;
    --budget=*) flags+=("$1") ;;
    --wheels=*) wheels=${1#--wheels=} ;;
    --copy-to=*) copy_to=${1#--copy-to=} ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "gpu_check: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) out=$1 ;;
  esac
  shift
done
if [ -n "$wheels" ] && ! ls "$wheels"/*.whl >/dev/null 2>&1; then
  echo "gpu_check: --wheels $wheels: no .whl files there (carry them inside the checkout: python benchmarks/gpu_wheels.py .whl)" >&2; exit 2
fi
# Relative paths name places in the caller's directory, before the cd below.
mkdir -p "$out" && out=$(cd "$out" && pwd) || { echo "gpu_check: cannot create $out" >&2; exit 2; }
[ -z "$wheels" ] || wheels=$(cd "$wheels" && pwd)
if [ -n "$copy_to" ]; then
  mkdir -p "$copy_to" && copy_to=$(cd "$copy_to" && pwd) \
    || { echo "gpu_check: --copy-to: cannot create $copy_to" >&2; exit 2; }
  flags+=("--copy-to=$copy_to")
fi
cd "$(dirname "$0")/.."

# The interpreter: one that has torch, where a machine has several (a bare python3 beside a
# virtual environment's). Its children (pytest, the benchmarks) use the same one.
py=${PYTHON:-}
if [ -z "$py" ]; then
  for candidate in python3 python; do
    if command -v "$candidate" >/dev/null && "$candidate" -c "import torch" 2>/dev/null; then
      py=$candidate; break
    fi
  done
  py=${py:-python3}
fi
command -v "$py" >/dev/null || { echo "gpu_check: no Python interpreter '$py'" >&2; exit 2; }

if [ -n "$wheels" ]; then
  # Into the output folder, not the machine's environment: nothing is left behind.
  "$py" -m pip install -q --no-index --no-deps --no-compile --disable-pip-version-check \
    --target "$out/site" "$wheels"/*.whl || { echo "gpu_check: installing $wheels failed" >&2; exit 2; }
  export PYTHONPATH="$out/site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
# Without the installed entry point, pytest finds the plugin through -p (not when it is installed:
# pytest would register it twice).
if ! "$py" -c "import importlib.metadata as m; m.distribution('pytest-dlbench')" 2>/dev/null; then
  export PYTEST_ADDOPTS="-p pytest_dlbench.plugin ${PYTEST_ADDOPTS:-}"
fi
# Every module a run needs is named in seconds when missing, not found by a benchmark minutes in.
# A dry run needs only what it runs (torch for the timer on the CPU, the project's own modules).
DRY_RUN=$dry_run "$py" - <<'PY' || { echo "gpu_check: a module the check needs is missing (see above); carry it: python benchmarks/gpu_wheels.py DIR on a machine with pip, then --wheels DIR here" >&2; exit 2; }
import importlib.util, os, sys
dry = os.environ["DRY_RUN"] == "1"
needed = ["torch", "pytest", "yaml", "pydantic"]
gpu_only = ["torchvision", "timm", "xdist", "pandas", "pynvml", "psutil", "scipy", "jinja2",
            "matplotlib", "torchinfo", "wcwidth"]
missing = [m for m in needed + ([] if dry else gpu_only) if importlib.util.find_spec(m) is None]
if missing:
    hint = ("; name an interpreter that has torch with PYTHON=/path/to/python"
            if "torch" in missing else "")
    raise SystemExit(f"missing ({sys.executable}): " + ", ".join(missing) + hint)
if dry:
    absent = [m for m in gpu_only if importlib.util.find_spec(m) is None]
    if absent:
        print("gpu_check --dry-run: not installed here, not needed for a dry run: "
              + ", ".join(absent))
PY
# exec: a signal sent to this script (timeout, a closing session) reaches the check itself, which
# kills its pytest runs and prints the table; gpu_check.py writes OUT_DIR/gpu_check.txt itself.
PYTHONUNBUFFERED=1 exec "$py" benchmarks/gpu_check.py "$out" ${flags[@]+"${flags[@]}"}
