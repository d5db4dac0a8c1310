"""Reading a W&B offline run (``wandb/offline-run-<time>-<id>/run-<id>.wandb``) back.

wandb 0.2x removed its Python reader of these files (``wandb.sdk.internal.datastore``) and the
offline API (``wandb.Api``) needs a server, so this reads the file itself: the LevelDB log
format (32 KiB blocks, 7-byte record headers, records split in FIRST/MIDDLE/LAST chunks) behind
a 7-byte ``:W&B`` header, each record a ``wandb_internal_pb2.Record`` protobuf. Used to tell
whether a run was already logged (its file holds an ``exit`` record) and by the tests.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

__all__ = ["OfflineRun", "find_offline_runs", "read_offline_run", "records"]

_BLOCK = 32768
_HEADER = 7
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4
_IDENT = b":W&B"
_MAGIC = 0xBEE1


def records(path: str | PathLike[str]) -> Iterator[bytes]:
    """The raw records of a ``.wandb`` file; a torn tail (a writer killed) ends the scan."""
    data = Path(path).read_bytes()
    if len(data) < _HEADER:
        return
    ident, magic, _version = struct.unpack("<4sHB", data[:_HEADER])
    if ident != _IDENT or magic != _MAGIC:
        raise ValueError(f"{path}: not a W&B run file")
    pos, pending = _HEADER, b""
    while pos + _HEADER <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < _HEADER:  # the rest of a block too small for a header is padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + _HEADER])
        if kind == 0 and length == 0:  # zero padding up to the block's end
            pos += left
            continue
        start, pos = pos + _HEADER, pos + _HEADER + length
        if pos > len(data):
            return
        chunk = data[start:pos]
        if kind == _FULL:
            yield chunk
        elif kind == _FIRST:
            pending = chunk
        elif kind == _MIDDLE:
            pending += chunk
        elif kind == _LAST:
            yield pending + chunk
            pending = b""


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _item_key(item: Any) -> str:
    return item.key or "/".join(item.nested_key)


@dataclass
class OfflineRun:
    path: Path
    run_id: str = ""
    project: str = ""
    group: str = ""
    name: str = ""
    job_type: str = ""
    tags: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)  # one dict per logged step
    summary: dict[str, Any] = field(default_factory=dict)
    exit_code: int | None = None  # None: the run never finished

    @property
    def finished(self) -> bool:
        return self.exit_code is not None

    def series(self, key: str) -> list[Any]:
        """The values of ``key`` over the history rows that have it, in step order."""
        return [row[key] for row in self.history if key in row]


def read_offline_run(path: str | PathLike[str]) -> OfflineRun:
    """Config, history, summary and exit of one offline run (its ``.wandb`` file or folder)."""
    from wandb.proto import wandb_internal_pb2 as pb

    path = Path(path)
    if path.is_dir():
        path = next(path.glob("run-*.wandb"))
    run = OfflineRun(path=path)
    for raw in records(path):
        record = pb.Record()  # type: ignore[attr-defined]  # protoc-generated: no type stubs
        record.ParseFromString(raw)
        kind = record.WhichOneof("record_type")
        if kind == "run":
            r = record.run
            run.run_id, run.project, run.group = r.run_id, r.project, r.run_group
            run.name, run.job_type, run.tags = r.display_name, r.job_type, list(r.tags)
            for item in r.config.update:
                run.config[_item_key(item)] = _value(item.value_json)
        elif kind == "config":
            for item in record.config.update:
                run.config[_item_key(item)] = _value(item.value_json)
        elif kind == "history":
            row = {_item_key(i): _value(i.value_json) for i in record.history.item}
            run.history.append(row)
        elif kind == "summary":
            for item in record.summary.update:
                run.summary[_item_key(item)] = _value(item.value_json)
            for item in record.summary.remove:
                run.summary.pop(_item_key(item), None)
        elif kind == "exit":
            run.exit_code = int(record.exit.exit_code)
    run.config.pop("_wandb", None)
    return run


def find_offline_runs(wandb_dir: str | PathLike[str], run_id: str | None = None) -> list[Path]:
    """The ``.wandb`` files of the offline runs under ``<dir>/wandb`` (of one id, if given)."""
    root = Path(wandb_dir)
    if root.name != "wandb":
        root = root / "wandb"
    pattern = f"offline-run-*-{run_id}/run-{run_id}.wandb" if run_id else "offline-run-*/*.wandb"
    return sorted(root.glob(pattern))
