"""Schedules: when to run which configs x suites, how often, and on which runners.

A ``schedules.yaml``::

    schedules:
      - name: nightly-h100
        cron: "0 2 * * *"          # minute hour day month weekday; 6 fields = seconds first
        timezone: Europe/Berlin    # IANA name; default UTC
        configs: [configs/vllm-llama3-8b.yaml]
        suites: [baselines/chat-short.yaml, baselines/batch-throughput.yaml]
        repeats: 3                 # runs of each config x suite per slot (the noise estimate)
        labels: {gpu: h100}        # only workers started with --labels gpu=h100 take them
        bisect:                    # optional; off by default (see docs/scheduling.md)
          enabled: true            # a confirmed regression at a config change of 2+ fields
          max_probes: 12           #   queues one bisection of the two versions
          max_minutes: 120

Paths are relative to the file. Validated once here (``extra="forbid"``). Inside, a schedule is
a ``tracker.store.schedule_rows.ScheduleRow`` with absolute paths.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from apscheduler.triggers.cron import CronTrigger
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveFloat,
    PositiveInt,
    field_validator,
    model_validator,
)

from tracker.bisection.probes import DEFAULT_MAX_PROBES
from tracker.errors import ConfigError
from tracker.inputs.configs import NAME_MAX_CHARS, NAME_PATTERN, load_config
from tracker.inputs.suites import load_suite
from tracker.inputs.yamlfile import read_yaml_mapping, validate_model, where
from tracker.store.schedule_rows import ScheduleBisect, ScheduleRow

LABEL_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
CRON_FIELDS = ("minute", "hour", "day", "month", "day_of_week")
CLI_SOURCE = "cli"


MAX_REPEATS = 100  # runs of one config x suite per firing: more is a typo, not a night


def build_trigger(cron: str, timezone: str) -> CronTrigger:
    """A cron trigger from 5 fields (minute hour day month weekday) or 6 (seconds first)."""
    fields = cron.split()
    if len(fields) not in (5, 6):
        raise ValueError(f"a cron expression has 5 fields (minute hour day month weekday) or 6 "
                         f"(seconds first), got {len(fields)}: {cron!r}; e.g. '0 2 * * *'")
    names = ("second", *CRON_FIELDS) if len(fields) == 6 else CRON_FIELDS
    zone = parse_timezone(timezone)  # its own message: the cron is not what is wrong
    try:
        trigger = CronTrigger(timezone=zone, **dict(zip(names, fields, strict=True)))
    except ValueError as exc:
        raise ValueError(f"invalid cron expression {cron!r}: {exc}") from None
    if trigger.get_next_fire_time(None, datetime.now(zone)) is None:
        raise ValueError(f"cron expression {cron!r} never fires (no such date, e.g. February "
                         "31); e.g. '0 2 * * *' for 02:00 every night")
    return trigger


def parse_timezone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {name!r}; give an IANA name such as UTC or "
                         "Europe/Berlin") from None


class BisectSpec(BaseModel):
    """``bisect:``: queue a bisection after a confirmed regression at a config change."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = False
    max_probes: PositiveInt = DEFAULT_MAX_PROBES  # tracker bisect's own default
    max_minutes: PositiveFloat | None = None  # None: no limit on time

    def as_row(self) -> ScheduleBisect:
        return ScheduleBisect(self.enabled, self.max_probes, self.max_minutes)


class ScheduleSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=NAME_PATTERN, max_length=NAME_MAX_CHARS)
    cron: str
    timezone: str = "UTC"
    configs: list[str] = Field(min_length=1)
    suites: list[str] = Field(min_length=1)
    repeats: int = Field(default=1, gt=0, le=MAX_REPEATS)  # runs of each pair per firing
    labels: dict[str, str] = Field(default_factory=dict)
    bisect: BisectSpec = Field(default_factory=BisectSpec)

    @field_validator("labels", mode="before")
    @classmethod
    def _labels_as_text(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            return {str(k): v if isinstance(v, str) else str(v) for k, v in value.items()}
        return value

    @field_validator("labels")
    @classmethod
    def _label_keys(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if not LABEL_KEY.fullmatch(key):
                raise ValueError(f"label {key!r} must be letters, digits, '.', '_' or '-'")
        return value

    @model_validator(mode="after")
    def _valid_cron(self) -> ScheduleSpec:
        build_trigger(self.cron, self.timezone)
        return self


class ScheduleFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    schedules: list[ScheduleSpec] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_names(self) -> ScheduleFile:
        seen: set[str] = set()
        for spec in self.schedules:
            if spec.name in seen:
                raise ValueError(f"schedule name {spec.name!r} is used twice; names must differ")
            seen.add(spec.name)
        return self


def load_schedules(path: str | Path) -> list[ScheduleRow]:
    """The schedules of a file, validated, with every config and suite loaded once to check it."""
    file = Path(path)
    data, lines = read_yaml_mapping(file, "schedules")
    parsed = validate_model(ScheduleFile, data, file, lines)
    base = file.resolve().parent
    rows: list[ScheduleRow] = []
    for index, spec in enumerate(parsed.schedules):
        for key in ("configs", "suites"):
            for position, name in enumerate(getattr(spec, key)):
                if not (base / name).is_file():
                    loc = ("schedules", index, key, position)
                    raise ConfigError(f"{where(file, loc, lines)}: schedules[{index}].{key}"
                                      f"[{position}]: file {name!r} not found (paths are relative "
                                      f"to {base}); fix the path")
        rows.append(build_schedule_row(spec, base, str(file.resolve())))
    return rows


def build_schedule_row(spec: ScheduleSpec, base: Path, source: str) -> ScheduleRow:
    """The stored form, with absolute paths. Every config and suite is loaded once to validate
    it."""
    configs = tuple(str((base / p).resolve()) for p in spec.configs)
    suites = tuple(str((base / p).resolve()) for p in spec.suites)
    for config in configs:
        load_config(config)
    for suite in suites:
        load_suite(suite)
    return ScheduleRow(spec.name, spec.cron, spec.timezone, configs, suites, spec.repeats,
                       dict(spec.labels), source, bisect=spec.bisect.as_row())


def parse_labels(text: str | None, option: str = "--labels") -> dict[str, str]:
    """Parse ``gpu=h100,zone=a`` (commas or repeated options) into a mapping, empty for None."""
    labels: dict[str, str] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not LABEL_KEY.fullmatch(key) or not value:
            raise ConfigError(f"{option} {text}: {item.strip()!r} is not KEY=VALUE; give labels "
                              "such as gpu=h100,zone=a")
        labels[key] = value
    return labels


# --- firing times --------------------------------------------------------------------------


def compute_next_fire(row: ScheduleRow, now: datetime) -> datetime | None:
    fire: datetime | None = build_trigger(row.cron, row.timezone).get_next_fire_time(None, now)
    return fire


def compute_slot(trigger: CronTrigger, now: datetime) -> datetime:
    """The latest fire time at or before ``now``: the slot a (possibly late) firing belongs to.

    After a restart, APScheduler coalesces missed firings into one. That one firing belongs to
    the latest slot missed. It is ``now`` itself when the trigger never fired in the past year.
    """
    lookback = timedelta(seconds=1)
    while lookback <= timedelta(days=400):
        first: datetime | None = trigger.get_next_fire_time(None, now - lookback)
        if first is not None and first <= now:
            slot = first
            while True:
                following: datetime | None = trigger.get_next_fire_time(slot, now)
                if following is None or following <= slot or following > now:
                    return slot
                slot = following
        lookback *= 2
    return now
