"""voir's data channel, read: one JSON object per line, turned into the run's records.

A program run through ``voir`` (milabench's benchmark folders, docs/suites.md "milabench's
folders through voir") writes its data to the file descriptor ``DATA_FD`` names, one JSON object
per line, apart from its stdout and stderr:

- ``{"rate": R, "units": U, "task": "train"[, "elapsed": S]}``: one observation, ``S`` seconds
  of ``R x S`` items when ``elapsed`` is there (benchmate's ``BENCHMATE_LOG_MODE=all``), else
  the rate ``R`` as given, in ``U``;
- ``{"loss": L, "task": "train"}``: a ``loss`` record (a NaN or an infinity fails the run as
  ``nan``);
- ``{"progress": [i, n], "task": "early_stop"}``: a ``progress`` record (the live progress line);
- ``{"gpudata": {...}}``, ``{"process": {...}}``: kept as ``command`` records of status
  ``telemetry`` (our own monitor samples the same processes and GPUs: not counted twice);
- ``{"$event": "error", "$data": {"type": T, "message": M}}``: the failure reason ``T: M`` if
  the command fails;
- ``{"$event": "stop"}``: voir's early stop, the command is ended as milabench ends it.

Rates of another task (``"task": "valid"``), phases and lines that are not JSON objects are
only kept in the data file (``voir.data.jsonl`` in the run's work folder). With ``DATA_FD`` 1 or
2, voir smuggles its lines into the output as escape sequences (voir/smuggle.py);
:meth:`DataChannel.unsmuggle` takes them out of an output line.

A data line is someone else's text, read as a stream line is (core/untrusted.py): one longer
than ``MAX_LINE_BYTES`` (1 MiB) or nested deeper than ``MAX_DEPTH`` (128 levels) is left out,
and so is a ``telemetry`` record that would be too long or too deep for the stream's reader
(measure/stream.line_problem): the stream stays readable and the run keeps its rates. The first
line left out for each reason is said in a ``warning`` record (the report shows it); the
command's ``end`` record counts them all (``data_dropped``).

Pure Python, no torch.
"""

from __future__ import annotations

import math
import re
import time
from typing import IO, Any

from pytest_dlbench.core import untrusted
from pytest_dlbench.core.errors import shorten
from pytest_dlbench.core.numbers import as_number
from pytest_dlbench.measure.bench import NonFiniteLoss
from pytest_dlbench.measure.stream import Event, line_problem
from pytest_dlbench.suite.logparsers import OBSERVATIONS

__all__ = ["STOP", "DataChannel", "decode_smuggled"]

#: What :meth:`DataChannel.feed` returns for voir's ``{"$event": "stop"}``.
STOP = "stop"
#: The task whose rates are the benchmark's observations.
TRAIN = "train"
#: The longest ``units`` a data line may set: it is copied into every ``rate`` record, so a
#: long one would make each of them as long (units are a few characters: ``items/s``).
MAX_UNITS = 64
# voir/smuggle.py: ESC [ then the data's UTF-8 bytes in hex written with the 16 characters
# 0-9 : ; < = > ?, then "z".
_SMUGGLED = re.compile("\x1b\\[([0-9:;<=>?]*)z")
_HEX = str.maketrans("0123456789:;<=>?", "0123456789abcdef")


def decode_smuggled(text: str) -> tuple[str, list[str]]:
    """``text`` without voir's escape sequences, and what they held (decoded, in order)."""
    found: list[str] = []

    def take(match: re.Match[str]) -> str:
        try:
            found.append(bytes.fromhex(match.group(1).translate(_HEX)).decode("utf-8"))
        except ValueError:
            return match.group(0)  # not voir's: leave it in the output
        return ""

    plain = _SMUGGLED.sub(take, text)
    return plain, found


class DataChannel:
    """Turns voir's data lines into ``bench``'s records (module docstring).

    ``keep``: where every data line is copied as it came (the run's ``voir.data.jsonl``);
    ``units``: the suite's units, which win over the lines' own."""

    def __init__(self, bench: Any, *, keep: IO[str] | None = None,
                 units: str | None = None) -> None:
        self.bench = bench
        self.keep = keep
        self.units = units
        self.lines = 0  # data lines read
        self.rates = 0  # train rates read (recorded or not: skip + stop caps the records)
        self.error: str | None = None  # "Type: message" of voir's last error event
        self.stopped = False  # voir said stop
        self.dropped = 0  # data lines left out: too long, too deep (module docstring)
        self._said: set[str] = set()  # the reasons already said in a warning record
        self._progress: float | None = None

    # -- input -------------------------------------------------------------------------------
    def unsmuggle(self, line: str) -> tuple[str, list[str]]:
        """An output line without voir's smuggled data, and the data lines it held."""
        if "\x1b[" not in line:
            return line, []
        plain, found = decode_smuggled(line)
        # A smuggled JSON line ends with its own "\n": split what one write held.
        data = [part for chunk in found for part in chunk.splitlines() if part.strip()]
        return plain, data

    def feed(self, line: str, *, cut: int = 0) -> str | None:
        """Read one data line; :data:`STOP` when voir asks the command to end. ``cut``: the
        bytes the reader dropped from this line's end (it is then only its head: left out)."""
        text = line.strip()
        if not text:
            return None
        self.lines += 1
        if self.keep is not None:
            self.keep.write(text + "\n")
            self.keep.flush()
        size = len(text.encode("utf-8", "surrogatepass")) + cut
        if cut or size > untrusted.MAX_LINE_BYTES:
            self._drop(f"longer than {untrusted.MAX_LINE_BYTES} bytes ({size} bytes)")
            return None
        try:
            # Bounded as a stream line is: a line nested 100,000 levels deep is refused before
            # json recurses into it (a RecursionError would end the run).
            data = untrusted.loads(text)
        except untrusted.FileRefused as exc:
            self._drop(str(exc))
            return None
        except ValueError:
            return None
        if not isinstance(data, dict):
            return None
        signal = data.get("$event")
        if signal is not None:
            return self._signal(signal, data.get("$data"))
        task = data.get("task")
        if "rate" in data and task in (None, TRAIN):
            self._rate(data)
        if "loss" in data and task in (None, TRAIN):
            self._loss(data.get("loss"))
        if "progress" in data:
            self._progress_line(data.get("progress"))
        if "gpudata" in data or "process" in data:
            kept = {k: data[k] for k in ("gpudata", "process", "task") if k in data}
            record = {"event": Event.COMMAND, "status": "telemetry", "time": time.time(), **kept}
            problem = line_problem(record)
            if problem is not None:
                self._drop(f"its telemetry record would be {problem}")
            else:
                self.bench.stream.write_many([record])
        return None

    def _drop(self, why: str) -> None:
        """Leave the current line out; the first of each reason is said in the stream."""
        self.dropped += 1
        reason = why.split(" (")[0]
        if reason in self._said:
            return
        self._said.add(reason)
        self.bench.stream.write(
            Event.WARNING, source=OBSERVATIONS,
            message=(f"voir data line {self.lines} left out: {why} (later lines left out for "
                     "this reason are only counted: the command record's data_dropped)"),
        )

    # -- each kind of line -------------------------------------------------------------------
    def _signal(self, signal: Any, payload: Any) -> str | None:
        if signal == STOP:
            self.stopped = True
            return STOP
        if signal == "error" and isinstance(payload, dict):
            kind = str(payload.get("type") or "error")
            message = " ".join(str(payload.get("message") or "").split())
            self.error = shorten(f"{kind}: {message}" if message else kind)
        return None

    def _rate(self, data: dict[str, Any]) -> None:
        rate = as_number(data.get("rate"))
        if rate is None or not math.isfinite(rate) or rate <= 0:
            return
        self.rates += 1
        bench = self.bench
        units = self.units or data.get("units")
        if isinstance(units, str) and 0 < len(units) <= MAX_UNITS and units != bench.units:
            bench.set_units(units)
        elapsed = as_number(data.get("elapsed"))
        if elapsed is not None and math.isfinite(elapsed) and elapsed > 0:
            # The step's own time: the steady window is items over seconds, as for every step.
            bench.log_step(rate * elapsed, elapsed, per_rank=False)
        elif not bench.done:
            bench.log_rate(rate)

    def _loss(self, value: Any) -> None:
        loss = as_number(value)
        if loss is None:
            if not (isinstance(value, str) and value.lower() in ("nan", "inf", "-inf")):
                return
            loss = float(value)
        step = max(self.bench.observations - 1, 0)
        self.bench.stream.write(Event.LOSS, value=loss, step=step)
        if not math.isfinite(loss):
            raise NonFiniteLoss(loss, step)

    def _progress_line(self, value: Any) -> None:
        if not isinstance(value, list | tuple) or len(value) != 2:
            return
        done, total = as_number(value[0]), as_number(value[1])
        if done is None or not total or total <= 0:
            return
        percent = min(100.0, max(0.0, 100.0 * done / total))
        if percent != self._progress:
            self._progress = percent
            self.bench.log_progress(percent)
