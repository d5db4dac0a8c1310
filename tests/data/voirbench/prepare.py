"""The tiny folder's prepare step, as milabench's ``prepare.py``: called with the benchmark's
arguments, it writes the data set under ``--data`` (else ``$MILABENCH_DIR_DATA/FakeImageNet``).
``--prepare-fail`` makes it fail (tests)."""

import argparse
import json
import os
import random
import sys
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--data", default=None)
parser.add_argument("--prepare-fail", action="store_true")
args, _ = parser.parse_known_args()
if args.prepare_fail:
    print("RuntimeError: cannot write the data set", file=sys.stderr)
    sys.exit(2)
folder = Path(args.data or os.path.join(os.environ["MILABENCH_DIR_DATA"], "FakeImageNet"))
folder.mkdir(parents=True, exist_ok=True)
rng = random.Random(0)
samples = [(x, 3 * x + 1 + rng.gauss(0, 0.1)) for x in (rng.uniform(-1, 1) for _ in range(640))]
(folder / "train.json").write_text(json.dumps(samples))
count = Path(os.environ["MILABENCH_DIR_EXTRA"]) / "prepared"  # how many times it ran (tests)
count.write_text(str(int(count.read_text()) + 1 if count.exists() else 1))
print(f"prepared {len(samples)} samples in {folder}")
