"""Bad flags (issue 27, items 6, 11 and 12): refused by the parser or before the command's
modules load, in one ``error:`` line with exit 2, and nothing opened or stored."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("sqlalchemy", "tracker.store.db", "tracker.scheduling.worker", "tracker.gate.gating",
         "apscheduler", "aiohttp")
PROBE = """\
import sys
from tracker.cli.main import main
try:
    code = main(sys.argv[1:])
except SystemExit as stopped:
    code = stopped.code
loaded = [name for name in {heavy!r} if name in sys.modules]
print(code, ",".join(loaded) or "-")
"""
FLAG_ERRORS = {  # issue 27 item 11: schedule, gate, bisect and worker
    "worker --poll-s 0": ["worker", "--poll-s", "0"],
    "worker stale before heartbeat": ["worker", "--heartbeat-s", "10", "--stale-after-s", "5"],
    "scheduler --sync-interval-s nan": ["scheduler", "--sync-interval-s", "nan"],
    "schedule add without --cron": ["schedule", "add", "nightly"],
    "schedule add --bisect-max-probes 0": ["schedule", "add", "n", "--cron", "0 2 * * *",
                                           "--config", "c.yaml", "--suite", "s.yaml",
                                           "--bisect", "--bisect-max-probes", "0"],
    "gate with neither runs nor configs": ["gate"],
    "gate --confidence 2": ["gate", "--base-run", "1", "--head-run", "2", "--confidence", "2"],
    "bisect --max-probes 0": ["bisect", "--base", "a", "--head", "b", "--suite", "s",
                              "--max-probes", "0"],
}


@pytest.mark.parametrize("case", sorted(FLAG_ERRORS))
def test_a_flag_error_is_answered_before_the_commands_modules_load(tmp_path: Path,
                                                                   case: str) -> None:
    db = tmp_path / "t.db"
    proc = subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY),
                           *FLAG_ERRORS[case], "--db", str(db)], capture_output=True, text=True,
                          timeout=60)
    code, loaded = proc.stdout.split()
    assert code == "2", proc.stderr
    assert loaded == "-", f"{case}: loaded {loaded} before refusing"
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert not db.exists()


@pytest.mark.parametrize(("argv", "fragment"), [
    (["runs", "--limit", "-5"], "--limit: must be 1 or more (got -5)"),  # item 12
    (["queue", "--limit", "0"], "--limit: must be 1 or more"),
    (["worker", "--poll-s", "nan"], "--poll-s: must be a finite number of seconds > 0"),  # 12
    (["sim", "serve", "--config", "c.yaml", "--port", "70000"], "--port: must be a TCP port"),
    (["show", "99999999999999999999999"], "RUN_ID: must be a run id"),
])
def test_a_bad_flag_value_is_one_error_line_with_exit_2(
    argv: list[str], fragment: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tracker.cli.main import main

    db = ["--db", str(tmp_path / "t.db")] if argv[0] != "sim" else []
    with pytest.raises(SystemExit) as stopped:
        main([*argv, *db])
    assert stopped.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: tracker ") and fragment in lines[0]
    assert not (tmp_path / "t.db").exists()


def test_random_input_len_out_of_range_is_one_line_not_a_pydantic_dump(
    capsys: pytest.CaptureFixture[str]
) -> None:
    from tracker.cli.main import main

    code = main(["bench", "--base-url", "http://127.0.0.1:9", "--random-input-len",
                 "999999999", "--quiet"])
    assert code == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["error: tracker bench: --random-input-len: must be at most 2,000,000 "
                     "tokens (got 999999999); no model reads or writes that many"]


@pytest.mark.parametrize("name", ["", "   ", "c" * 100_000, "a\nb"])
def test_import_refuses_an_empty_or_absurd_config_name(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tracker.cli.main import main

    fixture = Path(__file__).parents[1] / "ingest" / "fixtures" / "vllm"
    code = main(["import", str(fixture / "bench_serve_detailed.json"), "--config", name,
                 "--db", str(tmp_path / "t.db")])
    assert code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --config ")
    assert not (tmp_path / "t.db").exists()
