"""The scheduling commands through tracker.cli.main.main: what an operator types and reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracker.cli.main import main


def _cli(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _schedules_file(files: dict[str, Path]) -> Path:
    path = files["fast"].parent / "schedules.yaml"
    path.write_text("""\
schedules:
  - name: nightly
    cron: "30 2 * * *"
    timezone: Europe/Berlin
    configs: [fast.yaml]
    suites: [tiny.yaml, two_part.yaml]
    repeats: 2
    labels: {gpu: h100}
    bisect: {enabled: true, max_probes: 8, max_minutes: 90}
  - name: weekly
    cron: "0 4 * * 6"
    configs: [fast.yaml]
    suites: [tiny.yaml]
""", encoding="utf-8")
    return path


def test_schedule_add_list_run_now_and_queue(db_url: str, files: dict[str, Path],
                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = _schedules_file(files)
    code, out, err = _cli(capsys, "schedule", "add", "--file", path, "--db", db_url)
    assert code == 0, err
    assert "2 schedule(s) saved (nightly, weekly)" in out
    code, out, _ = _cli(capsys, "schedule", "list", "--db", db_url)
    assert code == 0
    nightly = next(line for line in out.splitlines() if line.startswith("nightly"))
    assert "30 2 * * * (Europe/Berlin)" in nightly and "1x2x2 = 4" in nightly
    assert "gpu=h100" in nightly and ("02:30:00 CET" in nightly or "02:30:00 CEST" in nightly)
    assert "on (8 probes, 90 min)" in nightly
    weekly = next(line for line in out.splitlines() if line.startswith("weekly"))
    assert " off " in weekly
    code, out, _ = _cli(capsys, "schedule", "run-now", "nightly", "--db", db_url)
    assert code == 0 and "queued request(s) 1, 2, 3, 4" in out
    code, out, _ = _cli(capsys, "queue", "--db", db_url)
    lines = out.splitlines()
    assert code == 0 and len(lines) == 6
    assert all(" queued " in line and "run-now" in line for line in lines[2:])
    assert "fast-sim x two-part" in out


def test_a_file_owns_its_schedules_and_remove_deletes_one(
        db_url: str, files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    path = _schedules_file(files)
    _cli(capsys, "schedule", "add", "--file", path, "--db", db_url)
    code, _, err = _cli(capsys, "schedule", "add", "adhoc", "--cron", "0 1 * * *", "--config",
                        files["fast"], "--suite", files["tiny"], "--db", db_url)
    assert code == 0, err
    path.write_text(path.read_text(encoding="utf-8").split("  - name: weekly")[0],
                    encoding="utf-8")
    code, out, _ = _cli(capsys, "schedule", "add", "--file", path, "--db", db_url)
    assert code == 0 and "removed weekly" in out
    code, _, err = _cli(capsys, "schedule", "add", "gated", "--cron", "0 3 * * *", "--config",
                        files["fast"], "--suite", files["tiny"], "--bisect",
                        "--bisect-max-probes", "6", "--bisect-max-minutes", "45", "--db", db_url)
    assert code == 0, err
    code, out, _ = _cli(capsys, "schedule", "list", "--db", db_url)
    listed = {line.split()[0]: line for line in out.splitlines()[2:]}
    assert "on (6 probes, 45 min)" in listed["gated"] and " off " in listed["adhoc"]
    _cli(capsys, "schedule", "remove", "gated", "--db", db_url)
    code, out, _ = _cli(capsys, "schedule", "remove", "adhoc", "--db", db_url)
    assert code == 0
    code, out, _ = _cli(capsys, "schedule", "list", "--db", db_url)
    assert [line.split()[0] for line in out.splitlines()[2:]] == ["nightly"]


@pytest.mark.parametrize(("args", "message"), [
    (("schedule", "add", "x", "--cron", "0 2 * * *"), "missing --config, --suite"),
    (("schedule", "add", "x", "--cron", "0 99 * * *", "--config", "{fast}", "--suite",
      "{tiny}"), "invalid cron expression"),
    (("schedule", "add", "x", "--cron", "0 2 * * *", "--config", "{fast}", "--suite",
      "{tiny}", "--labels", "gpu"), "'gpu' is not KEY=VALUE"),
    (("schedule", "add", "x", "--cron", "0 2 * * *", "--config", "{fast}", "--suite",
      "{tiny}", "--bisect-max-probes", "4"), "need --bisect"),
    (("schedule", "add", "x", "--cron", "0 2 * * *", "--config", "{fast}", "--suite",
      "{tiny}", "--bisect", "--bisect-max-probes", "0"), "bisect.max_probes"),
    (("schedule", "remove", "nope"), "schedule 'nope' not found"),
    (("schedule", "run-now", "nope"), "schedule 'nope' not found"),
    (("worker", "--heartbeat-s", "5", "--stale-after-s", "5"), "must be longer than"),
])
def test_bad_input_is_one_line_with_exit_code_2(
        sqlite_url: str, files: dict[str, Path], capsys: pytest.CaptureFixture[str],
        args: tuple[str, ...], message: str) -> None:
    filled = [a.format(fast=files["fast"], tiny=files["tiny"]) for a in args]
    code, _, err = _cli(capsys, *filled, "--db", sqlite_url)
    assert code == 2
    assert err.startswith("error: ") and message in err and err.count("\n") == 1
