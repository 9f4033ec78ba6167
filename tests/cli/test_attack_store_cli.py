"""Bad paths, ids and database files reaching `show`/`runs` and the result writers: one clear
`error:` line with the cause and the fix, the right exit code, never exit 70 or a traceback."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_main import SMALL_SUITE
from tests.simconfigs import FAST_SIM
from tracker.cli.main import main


def _cli(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    try:
        code = main([str(arg) for arg in args])
    except SystemExit as stopped:  # argparse's exit for a bad flag value
        code = int(stopped.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture
def stored(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A SQLite file with one completed run (id 1)."""
    (tmp_path / "sim.yaml").write_text(FAST_SIM, encoding="utf-8")
    (tmp_path / "suite.yaml").write_text(SMALL_SUITE, encoding="utf-8")
    db = tmp_path / "t.db"
    code, _, err = _cli(capsys, "run", "--config", tmp_path / "sim.yaml", "--suite",
                        tmp_path / "suite.yaml", "--db", db, "--quiet")
    assert code == 0, err
    return db


@pytest.mark.parametrize("flag", ["--json"])
def test_a_result_file_that_is_a_directory_is_exit_2_in_one_line(
    stored: Path, capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    folder = stored.parent / "reports"
    folder.mkdir()
    code, _, err = _cli(capsys, "show", "1", "--db", stored, flag, folder)
    line = _one_error_line(err)
    assert code == 2 and "is a directory" in line and str(folder) in line
    assert os.listdir(folder) == []


def test_show_of_a_run_id_past_64_bits_is_no_such_run(
    stored: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _cli(capsys, "show", "99999999999999999999999", "--db", stored)
    line = _one_error_line(err)
    # the flag's type refuses it before the store is opened (the store refuses it as "not found")
    assert code == 2 and "must be a run id from 1 to 9223372036854775807 (got " \
        "99999999999999999999999)" in line


def test_a_garbled_page_is_one_line_naming_the_file_and_the_fix(
    stored: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    garbled = stored.with_name("garbled.db")
    shutil.copy(stored, garbled)
    with garbled.open("r+b") as handle:  # every page past the schema's, half overwritten
        for page in range(2, garbled.stat().st_size // 4096):
            handle.seek(page * 4096 + 100)
            handle.write(b"\xa5" * 300)
    for command in (["runs"], ["show", "1"]):
        code, _, err = _cli(capsys, *command, "--db", garbled)
        line = _one_error_line(err)
        assert code == 2 and str(garbled) in line and "damaged" in line and ".recover" in line


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory nobody here can write: a read-only mount for root, else its mode bits."""
    folder = tmp_path / "ro"
    folder.mkdir()
    if os.geteuid() != 0:
        yield folder
        folder.chmod(0o755)
        return
    if shutil.which("mount") is None or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(folder)],
            capture_output=True).returncode != 0:
        pytest.skip("running as root and cannot mount a tmpfs to make a read-only directory")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def _make_read_only(folder: Path) -> None:
    if os.geteuid() == 0:
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
    else:
        for path in folder.iterdir():
            path.chmod(0o444)
        folder.chmod(0o555)


def test_a_read_only_database_can_be_read_and_a_write_says_why_not(
    stored: Path, read_only_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = read_only_dir / "t.db"
    shutil.copy(stored, db)
    _make_read_only(read_only_dir)
    code, out, err = _cli(capsys, "runs", "--db", db)
    assert code == 0 and "fast-sim@" in out, err
    code, out, err = _cli(capsys, "show", "1", "--db", db)
    assert code == 0 and "fast-sim" in out, err
    config, suite = stored.parent / "sim.yaml", stored.parent / "suite.yaml"
    code, _, err = _cli(capsys, "run", "--config", config, "--suite", suite, "--db", db,
                        "--quiet")
    line = _one_error_line(err)
    assert code == 3 and "read-only" in line and "write permission" in line


# A full disk under the writer: a file-size limit makes every write past 4 KiB fail (EFBIG), as
# ENOSPC would, in a child process so the test's own files are not limited.
WRITE_WHEN_FULL = """\
import resource, sys
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
from tracker.cli.output import write_json
from tracker.errors import TrackerError
try:
    write_json(sys.argv[1], {"rows": ["x" * 100] * 1000})
except TrackerError as exc:
    print(f"error: {exc}", file=sys.stderr)
    sys.exit(exc.exit_code)
"""


def test_a_result_file_on_a_full_disk_is_exit_3_and_leaves_no_temporary_file(
    tmp_path: Path
) -> None:
    target = tmp_path / "out.json"
    full = subprocess.run([sys.executable, "-c", WRITE_WHEN_FULL, str(target)],
                          capture_output=True, text=True, timeout=60)
    line = _one_error_line(full.stderr)
    assert full.returncode == 3 and str(target) in line and "free space" in line
    assert os.listdir(tmp_path) == []  # neither out.json nor .out.json.*.tmp
