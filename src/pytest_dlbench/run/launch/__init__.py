"""Launching njobs benchmarks: torchrun command lines, node launchers, and the in-rank side."""
