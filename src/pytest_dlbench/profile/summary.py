"""The model summary: torchinfo's layers, parameters, mult-adds and sizes of the model a
benchmark handed over with ``bench.watch(model, example)``.

torchinfo runs one forward pass of the example in eval mode without gradients and puts the
model back in the mode it was in; it is made after the run, so it never touches a measurement.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from pytest_dlbench.core import numbers as fmt
from pytest_dlbench.measure.flops import model_device
from pytest_dlbench.profile._tables import table
from pytest_dlbench.profile.base import NoteReport, register

__all__ = ["LayerRow", "SummaryReport", "build_summary_report", "not_watched"]

#: Layers nested deeper than this are folded into their parent (torchinfo's ``depth``).
DEPTH = 3


@dataclass(frozen=True)
class LayerRow:
    name: str  # "Conv2d: 1-1" style, torchinfo's
    module: str  # class name
    depth: int
    output_shape: str
    params: int
    trainable: bool
    mult_adds: int


@register
@dataclass(frozen=True)
class SummaryReport:
    name: ClassVar[str] = "summary"

    model: str
    example: str  # the input shapes
    total_params: int
    trainable_params: int
    mult_adds: int
    input_bytes: int
    forward_backward_bytes: int
    params_bytes: int
    layers: tuple[LayerRow, ...]
    text: str  # torchinfo's own table
    note: str = ""

    @property
    def total_bytes(self) -> int:
        return self.input_bytes + self.forward_backward_bytes + self.params_bytes

    def to_dict(self) -> dict[str, Any]:
        return {"report": self.name, **asdict(self), "total_bytes": self.total_bytes}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SummaryReport:
        names = set(cls.__dataclass_fields__) - {"name"}
        values = {k: v for k, v in data.items() if k in names}
        values["layers"] = tuple(LayerRow(**r) for r in data.get("layers") or ())
        return cls(**values)

    def rows(self) -> list[dict[str, Any]]:
        return [asdict(r) for r in self.layers]

    def render(self, verbose: bool = False) -> str:
        frozen = self.total_params - self.trainable_params
        lines = [
            f"summary: {self.model}, {fmt.count(self.total_params)} parameters "
            f"({fmt.count(self.trainable_params)} trainable"
            + (f", {fmt.count(frozen)} frozen" if frozen else "") + "), "
            f"{fmt.si(self.mult_adds)} mult-adds for {self.example}",
            f"  sizes: parameters {fmt.byte_size(self.params_bytes)}, input "
            f"{fmt.byte_size(self.input_bytes)}, forward/backward pass "
            f"{fmt.byte_size(self.forward_backward_bytes)}, "
            f"total {fmt.byte_size(self.total_bytes)}",
        ]
        if verbose:
            if self.text:
                lines.extend("  " + line for line in self.text.splitlines())
            else:
                rows = [["  " * (r.depth - 1) + r.module, r.output_shape, fmt.count(r.params),
                         fmt.count(r.mult_adds)] for r in self.layers]
                lines.append(table(["layer", "output", "params", "mult-adds"], rows))
        if self.note:
            lines.append(f"  {self.note}")
        return "\n".join(lines)


def not_watched(bench: str) -> NoteReport:
    return NoteReport("summary",
                      f"summary: {bench} never called bench.watch(model, example)")


def _shapes(example: Any) -> str:
    if hasattr(example, "shape"):
        return "x".join(str(d) for d in example.shape)
    if isinstance(example, Mapping):
        return ", ".join(f"{k}={_shapes(v)}" for k, v in example.items())
    if isinstance(example, (list, tuple)):
        return ", ".join(_shapes(v) for v in example)
    return type(example).__name__


def build_summary_report(model: Any, example: Any, *, depth: int = DEPTH) -> SummaryReport:
    """torchinfo.summary of ``model`` called with ``example`` (a tensor, a tuple of positional
    inputs, a dict of keyword inputs, or a function returning one of them)."""
    import torchinfo


    if callable(example) and not hasattr(example, "shape"):
        example = example()
    # torchinfo moves the example to this device (the FLOPs count shares the rule).
    device = model_device(model) or "cpu"
    data = list(example) if isinstance(example, tuple) else example
    stats = torchinfo.summary(
        model, input_data=data, device=device, depth=depth, verbose=0,
        col_names=("output_size", "num_params", "mult_adds"),
        row_settings=("var_names",),
    )
    layers = tuple(
        LayerRow(
            name=f"{layer.class_name} ({layer.var_name})",
            module=layer.class_name,
            depth=int(layer.depth),
            output_shape="x".join(str(d) for d in (layer.output_size or ())),
            params=int(layer.num_params),
            trainable=bool(getattr(layer, "trainable_params", layer.num_params)),
            mult_adds=int(layer.macs),
        )
        for layer in stats.summary_list
        if layer.depth <= depth
    )
    return SummaryReport(
        model=type(model).__name__,
        example=_shapes(example),
        total_params=int(stats.total_params),
        trainable_params=int(stats.trainable_params),
        mult_adds=int(stats.total_mult_adds),
        input_bytes=int(stats.total_input),
        forward_backward_bytes=int(stats.total_output_bytes),
        params_bytes=int(stats.total_param_bytes),
        layers=layers,
        text=str(stats),
    )
