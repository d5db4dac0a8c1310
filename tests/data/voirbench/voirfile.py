"""The voir instruments of the tiny folder, as milabench's voirfiles declare theirs: forward the
values the program gives to voir's data channel, and stop after ``skip + stop`` train rates."""

from dataclasses import dataclass

from voir import configurable
from voir.instruments import early_stop, log


@dataclass
class Config:
    """voir's options: what milabench's ``voir: {options: ...}`` mapping sets (--config)."""

    dash: bool = False
    interval: str = "1s"
    skip: int = 5
    stop: int = 20
    gpu_poll: float = 3


@configurable
def instrument_main(ov, options: Config):
    yield ov.phases.init
    ov.require(
        log("value", "progress", "rate", "units", "loss", "elapsed", "gpudata", context="task"),
        early_stop(n=options.skip + options.stop, key="rate", task="train", signal="stop"),
    )
