"""ProfileConfig: --bench-profile, the suite's profile: mapping, merging and one-line errors."""

from __future__ import annotations

import pytest

from pytest_dlbench.core.errors import DlbenchError
from pytest_dlbench.profile import KEYS, REPORTS, ProfileConfig, ProfileError, ReportConfig


def test_empty_cli_value_switches_every_report_on() -> None:
    config = ProfileConfig.parse_cli("")
    assert config.enabled_reports == REPORTS
    assert ProfileConfig.parse_cli(None).enabled_reports == REPORTS


def test_cli_comma_list() -> None:
    config = ProfileConfig.parse_cli("speed, time,memory")
    assert config.enabled_reports == ("speed", "time", "memory")
    assert not config.enabled("trace")
    assert config["memory"] == ReportConfig(enabled=True)


def test_unknown_report_is_one_line_naming_the_valid_ones() -> None:
    with pytest.raises(ProfileError) as info:
        ProfileConfig.parse_cli("speed,sped")
    message = str(info.value)
    assert "\n" not in message
    assert message == ("--bench-profile: unknown report 'sped'; valid reports: "
                       "speed, time, memory, system, summary, snapshot, trace")
    assert isinstance(info.value, DlbenchError)


def test_mapping_sets_keys_and_enables_only_with_enabled() -> None:
    config = ProfileConfig.from_mapping({
        "memory": {"enabled": True, "warmup": 1, "steps": 6, "top": 10, "extra_plots": True},
        "time": {"verbose": True},  # keys without enabled: not on by itself
        "trace": True,
    })
    assert config.enabled_reports == ("memory", "trace")
    assert config["memory"] == ReportConfig(True, False, 1, 6, True, False, 10)
    assert config["time"].verbose and not config["time"].enabled


@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        ({"memory": {"steps": 0}}, "profile.memory.steps: must be >= 1, got 0"),
        ({"memory": {"warmup": -1}}, "profile.memory.warmup: must be >= 0, got -1"),
        ({"memory": {"top": "many"}}, "profile.memory.top: expected an integer >= 1, got 'many'"),
        ({"memory": {"step": 4}}, "profile.memory: unknown key 'step'; valid keys: enabled, "
                                  "verbose, warmup, steps, extra_plots, trace_rank0_only, top"),
        ({"tracing": True}, "profile: unknown report 'tracing'; valid reports: speed, time, "
                            "memory, system, summary, snapshot, trace"),
        ({"time": {"verbose": "loud"}}, "profile.time.verbose: expected true or false, "
                                        "got 'loud'"),
        ({"time": 3}, "profile.time: expected a mapping of enabled, verbose, warmup, steps, "
                      "extra_plots, trace_rank0_only, top or true/false, got int"),
        (42, "profile: expected true, a list of reports or a mapping of report: settings, "
             "got int"),
    ],
)
def test_bad_mappings_are_one_line_errors(mapping: object, message: str) -> None:
    with pytest.raises(ProfileError) as info:
        ProfileConfig.from_mapping(mapping)
    assert str(info.value) == message
    assert "\n" not in str(info.value)


def test_where_prefixes_the_message() -> None:
    with pytest.raises(ProfileError, match=r"^suite\.yaml: resnet18: profile\.memory\.steps: "):
        ProfileConfig.from_mapping({"memory": {"steps": 0}},
                                   where="suite.yaml: resnet18: profile")


@pytest.mark.parametrize("value", [True, "", "speed,time,memory,system,summary,snapshot,trace"])
def test_mapping_shorthands_for_everything(value: object) -> None:
    assert ProfileConfig.from_mapping(value).enabled_reports == REPORTS


def test_mapping_shorthands() -> None:
    assert not ProfileConfig.from_mapping(None)
    assert not ProfileConfig.from_mapping(False)
    assert ProfileConfig.from_mapping(["time", "speed"]).enabled_reports == ("speed", "time")
    assert ProfileConfig.from_mapping("summary").enabled_reports == ("summary",)


def test_override_strings_are_read_like_yaml() -> None:
    # --bench-override may hand values over as text.
    config = ProfileConfig.from_mapping({"memory": {"enabled": "yes", "steps": "4"}})
    assert config["memory"].enabled and config["memory"].steps == 4


def test_cli_switches_on_and_the_mapping_sets_the_keys() -> None:
    mapping = ProfileConfig.from_mapping({
        "memory": {"steps": 3, "warmup": 0},  # keys, not enabled
        "system": {"enabled": True},
    })
    merged = ProfileConfig.merge(ProfileConfig.parse_cli("memory,time"), mapping)
    assert merged.enabled_reports == ("time", "memory", "system")
    assert (merged["memory"].warmup, merged["memory"].steps) == (0, 3)
    assert ProfileConfig.merge(None, mapping) == mapping
    assert ProfileConfig.merge(ProfileConfig.parse_cli("trace"), None).enabled_reports == (
        "trace",
    )
    # A mapping cannot switch off what the command line asked for.
    off = ProfileConfig.from_mapping({"trace": {"enabled": False}})
    assert ProfileConfig.merge(ProfileConfig.parse_cli(""), off).enabled("trace")


def test_round_trip_through_the_config_record() -> None:
    config = ProfileConfig.from_mapping({"memory": {"enabled": True, "top": 7},
                                         "trace": {"enabled": True, "trace_rank0_only": True}})
    data = config.to_dict()
    assert set(data) == set(REPORTS)
    assert all(set(item) == set(KEYS) for item in data.values())
    assert ProfileConfig.from_dict(data) == config
    assert ProfileConfig.from_dict(None) == ProfileConfig()
    with pytest.raises(ProfileError, match="unknown key 'colour'"):
        ProfileConfig.from_dict({"memory": {"colour": "red"}})


def test_window_plan() -> None:
    config = ProfileConfig.from_mapping({
        "time": {"enabled": True, "warmup": 1, "steps": 4},
        "memory": {"enabled": True, "warmup": 2, "steps": 3},
        "trace": {"enabled": True, "warmup": 1, "steps": 5},
        "snapshot": {"enabled": True, "warmup": 0, "steps": 9},
        "summary": True,
    })
    cpu = config.plan(cuda=False)
    # torch.profiler follows the memory report (trace and speed only when memory is off).
    assert (cpu.timed, cpu.profiler_warmup, cpu.profiler_steps) == (5, 2, 3)
    assert cpu.total == 5 + 5  # no snapshot without CUDA
    assert config.plan(cuda=True).total == 5 + 9  # the snapshot's window is the longer one
    trace_only = ProfileConfig.from_mapping({"trace": {"enabled": True, "steps": 4},
                                             "speed": True})
    assert trace_only.profiler_window() == (2, 4)
    # Reports that need no window add no step.
    assert ProfileConfig.parse_cli("system,summary").window_length(cuda=True) == 0
    assert ProfileConfig.parse_cli("snapshot").window_length(cuda=False) == 0
