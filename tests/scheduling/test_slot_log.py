"""A fired slot says so: one line on the scheduler's output (the schedule, the slot, what was
queued), while APScheduler's own messages stay at WARNING."""

from __future__ import annotations

import re
import signal
import threading
from pathlib import Path

from tests.scheduling.conftest import spawn_tracker

EVERY_2_S = "*/2 * * * * *"
FIRED = re.compile(r"schedule every2: slot (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC fired: "
                   r"queued 1 request\(s\) \((\d+)\)")


def test_a_fired_slot_prints_one_line_with_the_schedule_the_slot_and_the_requests(
        sqlite_url: str, files: dict[str, Path]) -> None:
    schedules = files["fast"].parent / "schedules.yaml"
    schedules.write_text(f"schedules:\n  - name: every2\n    cron: '{EVERY_2_S}'\n"
                         "    configs: [fast.yaml]\n    suites: [tiny.yaml]\n", encoding="utf-8")
    process = spawn_tracker("scheduler", "--db", sqlite_url, "--schedules", schedules,
                            "--sync-interval-s", "1")
    seen: list[str] = []
    deadline = threading.Timer(30.0, process.send_signal, (signal.SIGTERM,))  # no line: stop
    deadline.start()
    try:
        assert process.stdout is not None
        for line in process.stdout:  # the first slot fires within 2 s of the start
            seen.append(line)
            if FIRED.search(line):
                break
    finally:
        deadline.cancel()
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    fired = [match for line in seen if (match := FIRED.search(line))]
    assert len(fired) == 1, f"no fired line in {seen}"
    assert int(fired[0].group(1)[-2:]) % 2 == 0  # the slot is the cron's, not the firing's instant
    assert "apscheduler" not in err.lower()  # its INFO chatter ("Added job", "Running job") stays off
