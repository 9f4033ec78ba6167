"""Bisection over a config diff's fields: the search on literal judges (known culprits), then
``tracker bisect`` and ``tracker gate --bisect`` on the simulator."""

from __future__ import annotations

import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session

from tests.waiting import wait_for
from tracker.analysis import Outcome, Verdict
from tracker.bisection.plan import (
    BisectOutcome,
    BudgetSpent,
    ProbeJudgement,
    ProbeOutcome,
    compute_share,
    search_culprits,
)
from tracker.bisection.probes import BisectBudget, build_probe_config, compute_failing_row
from tracker.cli.main import main
from tracker.errors import UsageError
from tracker.gate.gating import GateOutcome, GateResult, GateRow
from tracker.inputs.configs import load_config
from tracker.results import compute_run_source
from tracker.store.bisections import fetch_bisections
from tracker.store.db import open_store
from tracker.store.runs import fetch_run, fetch_runs

FIELDS = ("engine.a", "engine.b", "engine.c", "engine.d", "engine.e")


def _judge(regresses: Callable[[frozenset[str]], ProbeOutcome],
           asked: list[tuple[str, ...]]) -> Callable[[tuple[str, ...], int], ProbeJudgement]:
    def judge(fields: tuple[str, ...], number: int) -> ProbeJudgement:
        asked.append(fields)
        return ProbeJudgement(regresses(frozenset(fields)), "literal")
    return judge


def _one_culprit(culprit: str) -> Callable[[frozenset[str]], ProbeOutcome]:
    return lambda applied: (ProbeOutcome.REGRESSED if culprit in applied
                            else ProbeOutcome.CLEAN)


@pytest.mark.parametrize("culprit", FIELDS)
def test_one_guilty_field_among_five_is_named_in_at_most_six_probes(culprit: str) -> None:
    asked: list[tuple[str, ...]] = []
    found = search_culprits(FIELDS, _judge(_one_culprit(culprit), asked), None)
    assert found.outcome is BisectOutcome.FOUND
    assert [c.fields for c in found.culprits] == [(culprit,)]
    assert len(found.probes) == len(asked) <= 6
    assert len(set(asked)) == len(asked)  # no probe run twice


def test_two_fields_that_regress_only_together_are_named_as_a_pair() -> None:
    asked: list[tuple[str, ...]] = []
    together = {"engine.b", "engine.d"}
    found = search_culprits(FIELDS, _judge(lambda applied: ProbeOutcome.REGRESSED
                                           if together <= applied else ProbeOutcome.CLEAN,
                                           asked), None)
    assert found.outcome is BisectOutcome.FOUND
    assert [c.fields for c in found.culprits] == [("engine.b", "engine.d")]
    assert found.culprits[0].interaction
    assert ("engine.b", "engine.d") in asked  # the pair alone was probed, for its share


def test_an_unresolved_probe_is_recorded_and_the_search_goes_around_it() -> None:
    def regresses(applied: frozenset[str]) -> ProbeOutcome:
        if "engine.b" in applied and "engine.a" not in applied:
            return ProbeOutcome.FAILED  # b needs a (a dependent pair)
        return ProbeOutcome.REGRESSED if "engine.c" in applied else ProbeOutcome.CLEAN

    asked: list[tuple[str, ...]] = []
    found = search_culprits(FIELDS[:3], _judge(regresses, asked), None)
    assert [c.fields for c in found.culprits] == [("engine.c",)]
    assert ProbeOutcome.FAILED in [p.judgement.outcome for p in found.probes]
    assert found.outcome is BisectOutcome.FOUND


def test_a_spent_budget_gives_the_smallest_set_known_to_regress() -> None:
    asked: list[tuple[str, ...]] = []
    inner = _judge(_one_culprit("engine.e"), asked)

    def judge(fields: tuple[str, ...], number: int) -> ProbeJudgement:
        if number > 2:
            raise BudgetSpent("--max-probes 2")
        return inner(fields, number)

    found = search_culprits(FIELDS, judge, None)
    assert found.outcome is BisectOutcome.NARROWED
    assert found.culprits[0].fields == ("engine.c", "engine.d", "engine.e")
    assert found.stop_reason == "budget spent after 2 probes (--max-probes 2)"


def test_an_empty_diff_names_no_field() -> None:
    found = search_culprits((), _judge(_one_culprit("engine.a"), []), None)
    assert found.outcome is BisectOutcome.NARROWED and not found.culprits
    assert "do not differ" in found.stop_reason


def test_a_one_field_diff_needs_no_probe() -> None:
    found = search_culprits(("engine.a",), _judge(_one_culprit("engine.a"), []), None)
    assert [c.fields for c in found.culprits] == [("engine.a",)] and not found.probes


def test_the_share_is_the_log_ratio_of_the_two_changes_with_the_corners_interval() -> None:
    from tracker.analysis import compare_samples
    from tracker.metrics import REGISTRY

    metric = REGISTRY["ttft_median_s"]
    base = [[1.0 + 0.01 * i for i in range(40)]] * 3
    whole = compare_samples(base, [[2.0 * v for v in run] for run in base], metric)
    half = compare_samples(base, [[2.0**0.5 * v for v in run] for run in base], metric)
    share, interval = compute_share(half, whole)
    assert share == pytest.approx(0.5, abs=0.02)
    assert interval is not None and interval[0] <= share <= interval[1]
    assert compute_share(None, whole) == (None, None)


def test_a_budget_below_one_probe_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="--max-probes: must be >= 1"):
        BisectBudget(0)


def test_a_probe_takes_the_heads_values_of_its_fields_only(tmp_path: Path) -> None:
    (tmp_path / "b.yaml").write_text(BASE, encoding="utf-8")
    (tmp_path / "h.yaml").write_text(ONE_CULPRIT, encoding="utf-8")
    base, head = load_config(tmp_path / "b.yaml"), load_config(tmp_path / "h.yaml")
    probe = build_probe_config(base, head, ["engine.max_num_seqs", "engine.swap_space",
                                            "engine.extra_args.disable_log_requests"], "probe 1")
    engine = probe.config.engine
    assert probe.config.name == "bisect-sim.probe"  # not a point of the base's series
    assert (engine.max_num_seqs, engine.swap_space, engine.max_model_len) == (4, 8.0, 1024)
    assert engine.extra_args == {"disable_log_requests": True}
    back = build_probe_config(head, base, ["engine.swap_space"], "probe 2")
    assert back.config.engine.swap_space is None  # unset in the base: removed


# --- on the simulator --------------------------------------------------------------------------
# run_noise and noise 0: runs differ by their config and the machine's load alone. The KV cache:
# a 4 GiB accelerator, 2 GiB of weights; 16 streams of 288 tokens need 4608 tokens of cache.

BASE = """\
name: bisect-sim
target:
  kind: sim
  model: sim/test-model
  simulator: {seed: 1, prefill_s_per_token: 0.00004, decode_base_s: 0.004,
              decode_per_seq_s: 0.0002, decode_s_per_kv_gib: 0.0, run_noise: 0.0, noise: 0.0,
              gpu_memory_gib: 4, model_params_b: 1}
engine:
  max_num_seqs: 16
  max_model_len: 1024
  kv_cache_dtype: fp8
  gpu_memory_utilization: 0.7
"""
# five fields; only max_num_seqs (16 -> 4 at 16 streams) slows it (0.7 -> 0.65 holds less GPU
# memory: the gate judges the memory peak too, and less is no regression)
ONE_CULPRIT = (BASE.replace("max_num_seqs: 16", "max_num_seqs: 4")
               .replace("max_model_len: 1024", "max_model_len: 2048")
               .replace("gpu_memory_utilization: 0.7", "gpu_memory_utilization: 0.65")
               + "  swap_space: 8\n  extra_args: {disable_log_requests: true}\n")
# fp8 -> auto doubles the KV bytes per token, 0.7 -> 0.58 shrinks the cache: either alone leaves
# room for the 16 streams (13104 or 5242 fp8 tokens, 6552 auto), together (2621) it does not
PAIR = (BASE.replace("kv_cache_dtype: fp8", "kv_cache_dtype: auto")
        .replace("gpu_memory_utilization: 0.7", "gpu_memory_utilization: 0.58")
        + "  swap_space: 8\n")
# two fields: the gate's --bisect test needs a probe or two, not five
TWO = BASE.replace("max_num_seqs: 16", "max_num_seqs: 4") + "  swap_space: 8\n"
HARMLESS = BASE + "  swap_space: 8\n  extra_args: {disable_log_requests: true}\n"
# max_model_len 16384 only fits with the bigger cache: alone, the simulator refuses to start
DEPENDENT = (BASE.replace("max_num_seqs: 16", "max_num_seqs: 4")
             .replace("max_model_len: 1024", "max_model_len: 16384")
             .replace("gpu_memory_utilization: 0.7", "gpu_memory_utilization: 0.9"))

SUITE = """\
name: bisect-small
seed: 3
workloads:
  - name: busy
    prompts: {source: synthetic, input_tokens: 256}
    max_tokens: 32
    ignore_eos: true
    concurrency: 16
    num_requests: 32
    warmup_requests: 4
"""


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    paths = {}
    for name, text in (("base", BASE), ("one", ONE_CULPRIT), ("pair", PAIR),
                       ("two", TWO), ("harmless", HARMLESS), ("dependent", DEPENDENT), ("suite", SUITE)):
        paths[name] = tmp_path / f"{name}.yaml"
        paths[name].write_text(text, encoding="utf-8")
    paths["db"] = tmp_path / "bisect.db"
    paths["dir"] = tmp_path
    return paths


def _bisect(files: dict[str, Path], head: str, *extra: str) -> tuple[int, dict[str, object]]:
    out = files["dir"] / f"{head}.json"
    code = main(["bisect", "--base", str(files["base"]), "--head", str(files[head]),
                 "--suite", str(files["suite"]), "--db", str(files["db"]), "--quiet",
                 "--json", str(out), *extra])
    return code, json.loads(out.read_text(encoding="utf-8"))


def _culprits(verdict: dict[str, object]) -> list[list[str]]:
    bisect = verdict["bisect"]
    assert isinstance(bisect, dict)
    return [[f["path"] for f in c["fields"]] for c in bisect["culprits"]]


def test_bisect_names_the_cut_max_num_seqs_alone_among_five_changes(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, verdict = _bisect(files, "one")
    assert code == 1 and len(verdict["config_diff"]) == 5  # type: ignore[arg-type]
    bisect = verdict["bisect"]
    assert isinstance(bisect, dict)
    assert bisect["outcome"] == "found" and _culprits(verdict) == [["engine.max_num_seqs"]]
    assert len(bisect["probes"]) <= 6
    culprit = bisect["culprits"][0]
    low, high = culprit["share_interval"]
    assert low <= culprit["share"] <= high and 0.5 < culprit["share"] < 1.5
    markdown = capsys.readouterr().out
    assert "### Bisection: culprit found" in markdown
    assert "| `engine.max_num_seqs` | `16` → `4` |" in markdown
    # every probe is a stored run linked to the bisection, with its base controls
    engine = open_store(f"sqlite:///{files['db']}")
    try:
        with Session(engine) as session:
            [stored] = fetch_bisections(session, run_ids=verdict["head"]["run_ids"])  # type: ignore[index]
            runs = fetch_runs(session, limit=1000)
            source = {run.run_id: compute_run_source(fetch_run(session, run.run_id).environment)
                      for run in runs}
    finally:
        engine.dispose()
    assert stored.bisection_id == bisect["bisection_id"] and stored.outcome == "found"
    assert stored.culprits[0]["fields"] == ["engine.max_num_seqs"]
    probe_runs = {probe: [r for n, role, r in stored.runs if n == probe and role == "probe"]
                  for probe in range(1, len(bisect["probes"]) + 1)}
    assert all(probe_runs.values())
    assert {r for _, _, r in stored.runs} == {run.run_id for run in runs}  # every run linked
    # kept apart from the configs' history: the gate's own runs and the bisection's
    assert {source[r] for _, role, r in stored.runs if role in ("base", "head")} == {"gate"}
    assert {source[r] for _, role, r in stored.runs if role in ("control", "probe")} == {"bisect"}


def test_bisect_names_two_fields_that_regress_only_together_as_a_pair(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, verdict = _bisect(files, "pair")
    assert code == 1
    assert _culprits(verdict) == [["engine.gpu_memory_utilization", "engine.kv_cache_dtype"]]
    bisect = verdict["bisect"]
    assert isinstance(bisect, dict) and bisect["culprits"][0]["interaction"] is True
    assert "(together)" in capsys.readouterr().out


def test_bisect_of_a_change_that_does_not_regress_runs_no_probe(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, verdict = _bisect(files, "harmless", "--confidence", "0.995")
    assert code == 0
    bisect = verdict["bisect"]
    assert isinstance(bisect, dict)
    assert bisect["outcome"] == "no_regression" and bisect["probes"] == []
    assert "nothing to bisect" in capsys.readouterr().out


def test_a_probe_whose_target_fails_to_start_does_not_stop_the_bisection(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    # 0.7 -> 0.9 holds 29 % more GPU memory, a regression of its own; allowed here (the
    # tolerance of the exact memory comparison) so that max_num_seqs is the one culprit
    code, verdict = _bisect(files, "dependent", "--min-effect", "gpu_memory_peak_bytes=0.3")
    assert code == 1 and _culprits(verdict) == [["engine.max_num_seqs"]]
    bisect = verdict["bisect"]
    assert isinstance(bisect, dict)
    failed = [p for p in bisect["probes"] if p["outcome"] == "failed"]
    assert failed and all("engine.max_model_len" in p["fields"] for p in failed)
    assert "max seq len (16384)" in failed[0]["reason"]


def test_gate_with_bisect_shows_the_culprit_table_in_its_markdown(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    report = files["dir"] / "gate.md"
    code = main(["gate", "--base", str(files["base"]), "--head", str(files["two"]), "--suite",
                 str(files["suite"]), "--db", str(files["db"]), "--quiet", "--bisect",
                 "--markdown", str(report)])
    assert code == 1
    markdown = report.read_text(encoding="utf-8")
    assert markdown.startswith("## tracker gate: ❌ regression")
    table = markdown.split("### Bisection: culprit found", 1)[1]
    assert ("| field | base → head | share of the regression [interval] | alone vs base "
            "[interval] |") in table
    rows = [line for line in table.splitlines() if line.startswith("| `engine.")]
    assert len(rows) == 1 and rows[0].startswith("| `engine.max_num_seqs` | `16` → `4` | ")
    assert "probes</summary>" in table


def test_gate_bisect_refuses_stored_runs_and_a_zero_budget(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gate", "--db", str(files["db"]), "--base-run", "1", "--head-run", "2",
                 "--bisect"]) == 2
    assert "--bisect runs probes of configs" in capsys.readouterr().err
    assert main(["gate", "--db", str(files["db"]), "--base-run", "1", "--head-run", "2",
                 "--max-probes", "3"]) == 2
    assert "the budget of --bisect" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stopped:  # the flag's type refuses it (argparse's exit)
        main(["bisect", "--base", str(files["base"]), "--head", str(files["one"]),
              "--suite", str(files["suite"]), "--db", str(files["db"]), "--max-probes", "0"])
    assert stopped.value.code == 2
    assert "--max-probes: must be 1 or more (got 0)" in capsys.readouterr().err
    assert main(["bisect", "--base", str(files["base"]), "--head", str(files["one"]),
                 "--suite", str(files["suite"]), "--db", str(files["db"]),
                 "--markdown", str(files["dir"] / "missing" / "b.md")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_a_refused_probe_config_is_invalid_and_no_probe_starts_past_the_budget(
        files: dict[str, Path]) -> None:
    from tracker.bisection.probes import ProbeRunner
    from tracker.gate.config_refs import ConfigSide
    from tracker.gate.gating import GateDesign, GateOptions
    from tracker.inputs.suites import load_suite

    gateway = files["dir"] / "gateway.yaml"  # kind openai needs base_url, and no simulator
    gateway.write_text("name: bisect-sim\ntarget:\n  kind: openai\n  model: sim/test-model\n"
                       "  base_url: http://127.0.0.1:9\n", encoding="utf-8")
    base, head = load_config(files["base"]), load_config(gateway)
    engine = open_store(f"sqlite:///{files['db']}")
    clock = iter([0.0, 30.0, 61.0, 62.0]).__next__
    try:
        runner = ProbeRunner(engine, ConfigSide("base", base), ConfigSide("head", head),
                             load_suite(files["suite"]), GateDesign(2), GateOptions(),
                             ("busy", "ttft_median_s"), BisectBudget(3, max_minutes=1.0),
                             clock=clock)
        refused = runner(("target.kind",), 1)
        assert refused.outcome is ProbeOutcome.INVALID and not refused.probe_run_ids
        assert refused.reason.startswith("probe 1: target: kind 'openai' needs base_url")
        assert runner(("target.kind", "target.simulator"), 2).outcome is ProbeOutcome.INVALID
        with pytest.raises(BudgetSpent, match="--max-minutes 1"):
            runner(("target.kind", "target.base_url"), 3)
        with pytest.raises(BudgetSpent, match="--max-probes 3"):
            runner(("target.kind",), 4)
    finally:
        engine.dispose()
    assert not runner.runs  # nothing ran


def _default_sigint() -> None:
    """Ctrl-C as a terminal delivers it, even when this test runs as a background job of a
    non-interactive shell (which starts its children with SIGINT ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_while_probing_stores_the_bisection_as_interrupted(files: dict[str, Path]) -> None:
    """A real ``tracker bisect`` process, SIGINT once its first probe run is stored."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "tracker", "bisect", "--base", str(files["base"]), "--head",
         str(files["one"]), "--suite", str(files["suite"]), "--db", str(files["db"]), "--quiet"],
        cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=_default_sigint)
    try:
        wait_for(lambda: _probe_runs(files["db"]) > 0, timeout_s=90, what="a probe run")
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, err
    engine = open_store(f"sqlite:///{files['db']}")
    try:
        with Session(engine) as session:
            [stored] = fetch_bisections(session)
    finally:
        engine.dispose()
    assert stored.outcome == "interrupted" and stored.stop_reason.startswith("interrupted after")
    assert f"bisection {stored.bisection_id} stored as interrupted" in err
    assert len(stored.probes) == int(stored.stop_reason.split()[2])  # the probes judged so far
    assert {role for _, role, _ in stored.runs} >= {"base", "head"}  # the gate's runs linked


def _probe_runs(db: Path) -> int:
    """Probe runs stored so far, read-only (the other process owns the database)."""
    try:
        with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)) as connection:
            return int(connection.execute(
                "SELECT count(*) FROM runs JOIN config_versions ON config_versions.id = "
                "runs.config_version_id WHERE config_versions.name LIKE '%.probe'").fetchone()[0])
    except sqlite3.Error:  # not created or not migrated yet
        return 0


SIXTEEN_STREAMS = SUITE.replace("num_requests: 32", "num_requests: 64")  # 16 streams


def test_bisect_explains_the_collapse_not_the_memory_gpu_memory_utilization_asks_for(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Five fields: max_num_seqs 256 -> 4 at 16 streams (a collapse) beside
    gpu_memory_utilization 0.90 -> 0.92 (2 % more memory, exactly as asked). The memory is shown
    as configured and fails nothing; the bisection explains the collapse."""
    sim_default = (Path(__file__).resolve().parents[2] / "configs" / "sim-default.yaml")
    base = sim_default.read_text(encoding="utf-8")
    head = (base.replace("max_num_seqs: 256", "max_num_seqs: 4")
            .replace("gpu_memory_utilization: 0.9", "gpu_memory_utilization: 0.92")
            .replace("max_model_len: 8192", "max_model_len: 4096")
            .replace("block_size: 16", "block_size: 32")
            .replace("enable_prefix_caching: false", "enable_prefix_caching: true"))
    paths = {"head": tmp_path / "head.yaml", "suite": tmp_path / "suite.yaml"}
    paths["head"].write_text(head, encoding="utf-8")
    paths["suite"].write_text(SIXTEEN_STREAMS, encoding="utf-8")
    out = tmp_path / "bisect.json"
    code = main(["bisect", "--base", str(sim_default), "--head", str(paths["head"]), "--suite",
                 str(paths["suite"]), "--db", str(tmp_path / "fresh.db"), "--quiet", "--json",
                 str(out)])
    verdict = json.loads(out.read_text(encoding="utf-8"))
    assert code == 1 and len(verdict["config_diff"]) == 5
    assert _culprits(verdict) == [["engine.max_num_seqs"]]
    memory = next(row for row in verdict["rows"] if row["metric"] == "gpu_memory_peak_bytes")
    assert memory["as_configured"] == "engine.gpu_memory_utilization: 0.9 → 0.92"
    assert memory["regressed"] is False and memory["verdict"]["rel_change"] > 0.0
    bisect = verdict["bisect"]
    regressed = [row for row in verdict["rows"] if row["regressed"]]
    # the worst change the gate is sure of (each interval's end nearest no change), a p99 its
    # runs cannot resolve (fewer than 100 requests a run) only when nothing else regressed
    def resolved(row: dict[str, Any]) -> bool:
        verdict = row["verdict"]
        per_run = verdict["base_count"] / verdict["base_runs"]
        return verdict["statistic"] != "p99" or per_run * 0.01 >= 1.0

    worst = max(regressed, key=lambda row: (resolved(row), min(abs(math.log1p(end))
                                                               for end in row["verdict"]["ci"])))
    assert (bisect["workload"], bisect["metric"]) == (worst["workload"], worst["metric"])
    markdown = capsys.readouterr().out
    assert "⚙️ as configured (engine\\.gpu\\_memory\\_utilization\\: 0\\.9 → 0\\.92)" in markdown


def _regressed_row(metric: str, change: float, ci: tuple[float, float],
                   statistic: str = "median") -> GateRow:
    verdict = Verdict(Outcome.REGRESSION, change, ci, 0.001, statistic, True, 1.0, 1.0 + change,
                      96, 96, 3, 3, 0.02, 0.99, "t over runs", "worse")
    return GateRow("eight-users", metric, metric, "s", verdict, regressed=True)


def test_the_bisection_explains_the_change_the_gate_is_sure_of_not_the_widest_guess() -> None:
    """What the real vLLM gave (max_num_seqs 8 -> 1, 32 requests a run): TTFT median +1025 %
    [+177 %, +4,000 %] and TTFT p99 +1075 % [+110 %, +9,600 %]. The p99 of 32 values is the
    larger guess and the weaker evidence; its probes, judged at a stricter level, stayed
    undecided. The bisection follows the median."""
    median = _regressed_row("ttft_median_s", 10.25, (1.77, 40.0))
    p99 = _regressed_row("ttft_p99_s", 10.75, (1.10, 96.0), "p99")
    throughput = _regressed_row("request_throughput_per_s", -0.789, (-0.97, -0.005))
    result = GateResult(GateOutcome.REGRESSION, 1, "base", "head", "suite@0", (1, 3), (2, 4),
                        False, (), (p99, median, throughput), (), True)
    chosen = compute_failing_row(result)
    assert chosen is not None and chosen.metric == "ttft_median_s"


def test_a_p99_the_runs_cannot_resolve_is_followed_only_when_nothing_else_regressed() -> None:
    """The second bisection on the real vLLM: the p99 of 32 requests a run had the tighter
    interval (+1066 % [+383 %, +2,714 %]) than the median (+1024 % [+276 %, +3,259 %]), and its
    probes, near each run's largest value, stayed undecided. A row the runs resolve wins."""
    median = _regressed_row("ttft_median_s", 10.24, (2.76, 32.6))
    p99 = _regressed_row("ttft_p99_s", 10.66, (3.83, 27.1), "p99")

    def gate(*rows: GateRow) -> GateResult:
        return GateResult(GateOutcome.REGRESSION, 1, "base", "head", "suite@0", (1, 3), (2, 4),
                          False, (), rows, (), True)

    chosen = compute_failing_row(gate(p99, median))
    assert chosen is not None and chosen.metric == "ttft_median_s"
    alone = compute_failing_row(gate(p99))
    assert alone is not None and alone.metric == "ttft_p99_s"
