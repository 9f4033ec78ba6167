"""The schedules file, cron triggers and slots: pure, on literal inputs."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from tracker.errors import ConfigError
from tracker.scheduling.schedules import (
    build_trigger,
    compute_next_fire,
    compute_slot,
    load_schedules,
    parse_labels,
)
from tracker.store.run_queue import labels_match
from tracker.store.schedule_rows import ScheduleBisect


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "schedules.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_load_schedules_resolves_paths_against_the_file(files: dict[str, Path]) -> None:
    path = _write(files["fast"].parent, """\
schedules:
  - name: nightly
    cron: "0 2 * * *"
    timezone: Europe/Berlin
    configs: [fast.yaml]
    suites: [tiny.yaml, two_part.yaml]
    repeats: 3
    labels: {gpu: h100, slots: 8}
""")
    (row,) = load_schedules(path)
    assert row.name == "nightly" and row.repeats == 3 and row.timezone == "Europe/Berlin"
    assert row.configs == (str(files["fast"].resolve()),)
    assert row.suites == (str(files["tiny"].resolve()), str(files["two_part"].resolve()))
    assert row.labels == {"gpu": "h100", "slots": "8"}
    assert row.source == str(path.resolve())


@pytest.mark.parametrize(("body", "message"), [
    ("  - name: a\n    cron: '0 2 * * *'\n    configs: [fast.yaml]\n    suites: [tiny.yaml]\n"
     "    repeat: 2\n", r"schedules.yaml:6: schedules\[0\]\.repeat: unknown key"),
    ("  - name: a\n    cron: '0 25 * * *'\n    configs: [fast.yaml]\n    suites: [tiny.yaml]\n",
     r"invalid cron expression '0 25 \* \* \*'"),
    ("  - name: a\n    cron: '0 2 * *'\n    configs: [fast.yaml]\n    suites: [tiny.yaml]\n",
     r"5 fields .* or 6 .* got 4"),
    ("  - name: a\n    cron: '0 2 * * *'\n    timezone: Mars/Olympus\n    configs: [fast.yaml]\n"
     "    suites: [tiny.yaml]\n", r"unknown time zone 'Mars/Olympus'"),
    ("  - name: a\n    cron: '0 2 * * *'\n    configs: [missing.yaml]\n    suites: [tiny.yaml]\n",
     r"schedules.yaml:4: schedules\[0\]\.configs\[0\]: file 'missing.yaml' not found"),
    ("  - name: a\n    cron: '0 2 * * *'\n    configs: [fast.yaml]\n    suites: [tiny.yaml]\n"
     "  - name: a\n    cron: '0 3 * * *'\n    configs: [fast.yaml]\n    suites: [tiny.yaml]\n",
     r"schedule name 'a' is used twice"),
    ("  - name: a\n    cron: '0 2 31 2 *'\n    configs: [fast.yaml]\n    suites: [tiny.yaml]\n",
     r"cron expression '0 2 31 2 \*' never fires"),  # was saved with no next run
    ("  - name: a\n    cron: '0 2 * * *'\n    timezone: Mars/Olympus\n    configs: [fast.yaml]\n"
     "    suites: [tiny.yaml]\n", r"schedules\[0\]: unknown time zone"),  # not "invalid cron"
    ("  - name: a\n    cron: '0 2 * * *'\n    configs: [fast.yaml]\n    suites: [tiny.yaml]\n"
     "    repeats: 100000000\n", r"repeats: Input should be less than or equal to 100"),
])
def test_load_schedules_names_the_bad_value(files: dict[str, Path], body: str,
                                            message: str) -> None:
    path = _write(files["fast"].parent, "schedules:\n" + body)
    with pytest.raises(ConfigError, match=message):
        load_schedules(path)


def test_the_bisect_option_is_off_unless_a_schedule_enables_it(files: dict[str, Path]) -> None:
    path = _write(files["fast"].parent, """\
schedules:
  - {name: plain, cron: "0 2 * * *", configs: [fast.yaml], suites: [tiny.yaml]}
  - name: bisecting
    cron: "0 2 * * *"
    configs: [fast.yaml]
    suites: [tiny.yaml]
    bisect: {enabled: true, max_probes: 8, max_minutes: 90}
""")
    plain, bisecting = load_schedules(path)
    assert plain.bisect == ScheduleBisect(enabled=False, max_probes=12, max_minutes=None)
    assert bisecting.bisect == ScheduleBisect(enabled=True, max_probes=8, max_minutes=90.0)


@pytest.mark.parametrize(("option", "message"), [
    ("{enable: true}", r"schedules\[0\]\.bisect\.enable: unknown key"),
    ("{enabled: true, max_probes: 0}", r"schedules\[0\]\.bisect\.max_probes: .*greater than 0"),
    ("{enabled: true, max_minutes: -5}", r"schedules\[0\]\.bisect\.max_minutes: .*greater than 0"),
    ("true", r"schedules\[0\]\.bisect"),
])
def test_a_bad_bisect_option_is_refused_with_its_key(files: dict[str, Path], option: str,
                                                     message: str) -> None:
    path = _write(files["fast"].parent, "schedules:\n  - name: a\n    cron: '0 2 * * *'\n"
                  f"    configs: [fast.yaml]\n    suites: [tiny.yaml]\n    bisect: {option}\n")
    with pytest.raises(ConfigError, match=message):
        load_schedules(path)


def test_six_field_cron_has_seconds_first() -> None:
    trigger = build_trigger("*/2 * * * * *", "UTC")
    now = datetime(2026, 1, 1, 12, 0, 1, 500_000, tzinfo=UTC)
    assert trigger.get_next_fire_time(None, now) == datetime(2026, 1, 1, 12, 0, 2, tzinfo=UTC)


def test_slot_is_the_latest_fire_time_not_after_now() -> None:
    nightly = build_trigger("0 2 * * *", "Europe/Berlin")  # 01:00 UTC in winter
    late = datetime(2026, 1, 10, 9, 30, tzinfo=UTC)
    assert compute_slot(nightly, late) == datetime(2026, 1, 10, 1, 0, tzinfo=UTC)
    on_time = datetime(2026, 1, 10, 1, 0, tzinfo=UTC)
    assert compute_slot(nightly, on_time) == on_time
    every_two = build_trigger("*/2 * * * * *", "UTC")
    assert compute_slot(every_two, datetime(2026, 1, 1, 0, 0, 7, 300, tzinfo=UTC)) == \
        datetime(2026, 1, 1, 0, 0, 6, tzinfo=UTC)


def test_next_fire_follows_the_time_zone(files: dict[str, Path]) -> None:
    path = _write(files["fast"].parent, "schedules:\n  - name: a\n    cron: '0 2 * * *'\n"
                  "    timezone: America/New_York\n    configs: [fast.yaml]\n"
                  "    suites: [tiny.yaml]\n")
    (row,) = load_schedules(path)
    fire = compute_next_fire(row, datetime(2026, 7, 1, 12, 0, tzinfo=UTC))
    assert fire is not None and fire.astimezone(UTC) == datetime(2026, 7, 2, 6, 0, tzinfo=UTC)


def test_parse_labels_and_matching() -> None:
    offered = parse_labels("gpu=h100, zone=eu")
    assert offered == {"gpu": "h100", "zone": "eu"}
    assert labels_match({"gpu": "h100"}, offered)
    assert labels_match({}, offered)
    assert not labels_match({"gpu": "a100"}, offered)
    assert not labels_match({"gpu": "h100", "rack": "3"}, offered)
    with pytest.raises(ConfigError, match="'gpu' is not KEY=VALUE"):
        parse_labels("gpu")


def test_the_shipped_schedules_file_loads() -> None:
    rows = load_schedules(Path(__file__).resolve().parents[2] / "schedules.yaml")
    assert [row.name for row in rows] == ["nightly-sim", "nightly-h100"]
    assert rows[1].labels == {"gpu": "h100"} and rows[1].timezone == "Europe/Berlin"
    assert rows[1].bisect == ScheduleBisect(enabled=False, max_probes=12, max_minutes=120.0)
