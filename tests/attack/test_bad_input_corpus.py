"""The bad-input corpus (tests/attack/corpus.py): every hostile input is refused with exit 2 and
exactly one ``error:`` line on stderr, no traceback, within 2 s, and nothing stored.

Most cases run in-process through ``tracker.cli.main.main`` (a case's time is its own, the
interpreter's start-up excluded); those that could hang or eat memory if their refusal
regressed, and a few more, run in a child process, which proves the property end to end.
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.attack.corpus import Case, build_corpus, iter_names
from tracker.cli.main import main

CASES = list(iter_names())
MAX_SECONDS = 2.0
CHILD_TIMEOUT_S = 30.0  # a regression hangs no longer than this
ALSO_IN_A_CHILD = ("config-alias-bomb", "vllm-completed-nan", "sharegpt-lone-surrogate",
                   "mooncake-timestamp-1e12ms", "suite-rate-tiny", "flag-runs-limit-negative",
                   "flag-bench-input-len-huge", "import-config-empty")


@dataclass(frozen=True, slots=True)
class Outcome:
    code: int | str | None
    stderr: str
    seconds: float


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Case]:
    return {case.name: case for case in build_corpus(tmp_path_factory.mktemp("corpus"))}


def run_in_process(case: Case, capsys: pytest.CaptureFixture[str]) -> Outcome:
    capsys.readouterr()
    started = time.perf_counter()
    try:
        code: int | str | None = main(list(case.argv))
    except SystemExit as stopped:  # argparse's exit for a bad flag
        code = stopped.code
    seconds = time.perf_counter() - started
    return Outcome(code, capsys.readouterr().err, seconds)


def run_in_child(case: Case) -> Outcome:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "tracker", *case.argv], capture_output=True,
                          text=True, timeout=CHILD_TIMEOUT_S, stdin=subprocess.DEVNULL)
    return Outcome(proc.returncode, proc.stderr, time.perf_counter() - started)


def check(case: Case, outcome: Outcome, limit_s: float) -> None:
    lines = outcome.stderr.splitlines()
    assert outcome.code == 2, f"{case.name}: exit {outcome.code}: {outcome.stderr[-2000:]}"
    assert len(lines) == 1 and lines[0].startswith("error: "), outcome.stderr[-2000:]
    assert "Traceback" not in outcome.stderr
    assert "internal error" not in lines[0]
    assert len(lines[0]) < 2000, lines[0][:200]
    assert outcome.seconds <= limit_s, f"{case.name}: {outcome.seconds:.2f} s"
    assert not case.db.exists(), f"{case.name}: the database was created"


@pytest.mark.parametrize("name", CASES)
def test_hostile_input_is_refused_in_one_line_with_exit_2(
    name: str, corpus: dict[str, Case], capsys: pytest.CaptureFixture[str]
) -> None:
    case = corpus[name]
    if case.child:
        outcome = run_in_child(case)
        # a child's time includes the interpreter's start (about 0.5 s on this machine)
        check(case, outcome, MAX_SECONDS + 1.0)
    else:
        check(case, run_in_process(case, capsys), MAX_SECONDS)


@pytest.mark.parametrize("name", ALSO_IN_A_CHILD)
def test_a_refusal_is_one_line_end_to_end(name: str, corpus: dict[str, Case]) -> None:
    case = corpus[name]
    check(case, run_in_child(case), MAX_SECONDS + 1.0)


def test_the_corpus_holds_150_hostile_inputs_or_more() -> None:
    assert len(CASES) >= 150
    kinds = {name.split("-")[0] for name in CASES}
    assert {"config", "suite", "sharegpt", "jsonl", "mooncake", "azure", "vllm", "aiperf",
            "guidellm", "inference", "llmd", "import", "flag"} <= kinds


def test_every_case_names_a_path_that_exists_when_it_should(corpus: dict[str, Case]) -> None:
    assert all(Path(part).exists() for case in corpus.values() for part in case.argv[1:2]
               if case.argv[0] == "import" and not case.name.startswith("import-missing"))
