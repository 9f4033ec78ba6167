"""`tracker gate` on a busy host: how often it fails a real regression and passes an equal config
with a busy loop on every core, beside the same on a quiet machine (the reference, same run).

The host: one bounded busy loop per core (``tests/cpu_hog.py``), as a GPU host running an
engine's CPU threads or a shared CI machine has. The gates: ``configs/sim-default.yaml`` against
the same with ``max_num_seqs: 2`` (a real regression for the suite's four-user workload), and
against itself (no change), on ``baselines/chat-short.yaml``, each in a fresh database. Prints
a table of exit codes, rounds and rows judged within the client's timing error; ``--tests``
also runs the named pytest tests under the hog. Printed, never asserted.

    .venv/bin/python bench/gate_under_load.py [--regressions 5] [--equal 20] [--quiet-reference]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.cpu_hog import count_cores, cpu_hog  # noqa: E402

CONFIG = REPO / "configs" / "sim-default.yaml"
SUITE = REPO / "baselines" / "chat-short.yaml"
TESTS = (
    "tests/gate/test_bisect.py::test_bisect_names_the_cut_max_num_seqs_alone_among_five_changes",
    "tests/gate/test_gate_runs_apart.py",
    "tests/demo/test_story.py",
    "tests/gate/test_bisect.py::test_ctrl_c_while_probing_stores_the_bisection_as_interrupted",
    "tests/gate/test_gate_under_load.py",
)


def run_gate(head: Path, directory: Path) -> dict[str, object]:
    """One `tracker gate` in a fresh database: its exit code, rounds, and timing-error rows."""
    out = directory / f"gate-{time.monotonic_ns()}.json"
    started = time.monotonic()
    env = {**os.environ, "PYTHONPATH": str(REPO)}  # this checkout's tracker, whatever is installed
    done = subprocess.run([sys.executable, "-m", "tracker", "gate", "--base", str(CONFIG),
                           "--head", str(head), "--suite", str(SUITE), "--db",
                           str(directory / f"{out.stem}.db"), "--quiet", "--json", str(out)],
                          capture_output=True, text=True, cwd=directory, env=env, check=False)
    seconds = time.monotonic() - started
    if not out.exists():
        return {"code": done.returncode, "rounds": None, "timing": 0, "bound": 0,
                "seconds": seconds, "error": done.stderr.strip()[-200:]}
    verdict = json.loads(out.read_text(encoding="utf-8"))
    rows = verdict["rows"]
    return {"code": done.returncode, "rounds": verdict["rounds"]["rounds"],
            "timing": sum(1 for row in rows if row.get("within_timing_error")),
            "bound": sum(1 for row in rows if "client-bound" in (row.get("note") or "")),
            "seconds": seconds, "error": None}


def run_series(label: str, head: Path, tries: int, directory: Path) -> list[dict[str, object]]:
    results = []
    for number in range(1, tries + 1):
        result = run_gate(head, directory)
        results.append(result)
        print(f"  {label} {number}/{tries}: exit {result['code']}, rounds {result['rounds']}, "
              f"{result['bound']} rows with client-bound runs, {result['timing']} within the "
              f"timing error, {result['seconds']:.0f} s"
              + (f" ({result['error']})" if result["error"] else ""), flush=True)
    return results


def summarize(title: str, series: dict[str, list[dict[str, object]]]) -> None:
    print(f"\n{title}")
    print(f"{'gate':<34} {'tries':>5}  exit codes        rounds (mean)  seconds (mean)")
    for label, results in series.items():
        codes = collections.Counter(int(str(r["code"])) for r in results)
        rounds = [int(str(r["rounds"])) for r in results if r["rounds"] is not None]
        seconds = [float(str(r["seconds"])) for r in results]
        shown = ", ".join(f"{code}: {count}" for code, count in sorted(codes.items()))
        print(f"{label:<34} {len(results):>5}  {shown:<17} "
              f"{sum(rounds) / max(1, len(rounds)):>6.1f}        "
              f"{sum(seconds) / max(1, len(seconds)):>6.0f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--regressions", type=int, default=5)
    parser.add_argument("--equal", type=int, default=20)
    parser.add_argument("--quiet-reference", action="store_true",
                        help="also run the same gates without the hog (the reference)")
    parser.add_argument("--tests", action="store_true", help="also run the issue's tests")
    parser.add_argument("--hog", type=int, default=None,
                        help="busy loops to start (default: one per core)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as temp:
        directory = Path(temp)
        head = directory / "max-num-seqs-2.yaml"
        head.write_text(CONFIG.read_text(encoding="utf-8").replace(
            "max_num_seqs: 256", "max_num_seqs: 2"), encoding="utf-8")
        if args.quiet_reference:
            print("quiet host (reference):")
            quiet = {"max_num_seqs 256 -> 2 (quiet)": run_series("regression", head,
                                                                  args.regressions, directory),
                     "same config (quiet)": run_series("equal", CONFIG, args.equal, directory)}
            summarize("quiet host", quiet)
        loops = args.hog or count_cores()
        print(f"busy host: {loops} busy loops on {count_cores()} cores:")
        with cpu_hog(seconds=6 * 3600, processes=loops):
            busy = {"max_num_seqs 256 -> 2 (busy)": run_series("regression", head,
                                                               args.regressions, directory),
                    "same config (busy)": run_series("equal", CONFIG, args.equal, directory)}
            if args.tests:
                env = {**os.environ, "PYTHONPATH": str(REPO)}
                done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p",
                                       "no:cacheprovider", *TESTS], cwd=REPO, env=env,
                                      check=False)
                print(f"the issue's tests under the hog: pytest exit {done.returncode}")
        summarize("busy host", busy)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
