"""`tracker gate` on the simulator: fails for a change that slows it, passes for one that
does not matter; stored runs; the three reports; exit codes 0 / 1 / 2 / 3."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.simconfigs import gate_sim
from tracker.cli.main import main
from tracker.targets.launcher import find_free_port

# run_noise 0: no run draws a speed factor of its own, so base and head differ by their config
# alone (and the outcome by the config and the machine's load, never by a run's draw).
BASE = gate_sim("gate-sim")
SLOW = BASE.replace("max_num_seqs: 16", "max_num_seqs: 4")  # a quarter of the batch at 16 users
HARMLESS = BASE.replace("block_size: 16", "block_size: 16\n  swap_space: 8")

SUITE = """\
name: gate-small
seed: 3
workloads:
  - name: busy
    prompts: {source: synthetic, input_tokens: 32}
    max_tokens: 16
    ignore_eos: true
    concurrency: 16
    num_requests: 48
    warmup_requests: 4
"""


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    paths = {}
    for name, text in (("base", BASE), ("slow", SLOW), ("harmless", HARMLESS),
                       ("suite", SUITE)):
        paths[name] = tmp_path / f"{name}.yaml"
        paths[name].write_text(text, encoding="utf-8")
    paths["db"] = tmp_path / "gate.db"
    paths["dir"] = tmp_path
    return paths


def _gate(files: dict[str, Path], head: str, *extra: str, repeats: int | None = 2) -> int:
    design = [] if repeats is None else ["--repeats", str(repeats)]
    return main(["gate", "--base", str(files["base"]), "--head", str(files[head]),
                 "--suite", str(files["suite"]), *design, "--db", str(files["db"]), "--quiet",
                 *extra])


def test_the_sequential_gate_stops_after_the_first_round_of_a_clear_regression(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    out = files["dir"] / "gate.json"
    assert _gate(files, "slow", "--json", str(out), repeats=None) == 1
    markdown = capsys.readouterr().out
    rounds = json.loads(out.read_text(encoding="utf-8"))["rounds"]
    assert rounds["sequential"] and rounds["max_rounds"] == 6 and rounds["rounds"] <= 4
    assert f"**rounds** sequential: decided after {rounds['rounds']} of 6 rounds" in markdown
    ttft_row = next(line for line in markdown.splitlines() if "| TTFT median |" in line)
    assert "❌ regression" in ttft_row


def test_the_sequential_gate_passes_an_equal_config_and_says_how_many_rounds(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert _gate(files, "base", "--max-rounds", "6", "--json", "-", repeats=None) == 0
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["outcome"] == "pass" and verdict["config_diff"] == []
    rounds = verdict["rounds"]
    assert rounds["max_rounds"] == 6 and 1 <= rounds["rounds"] <= 6
    assert rounds["stop_reason"] in (f"decided after {rounds['rounds']} of 6 rounds",
                                     "max rounds reached (6)")
    assert len(verdict["base"]["run_ids"]) == len(verdict["head"]["run_ids"]) == rounds["rounds"]
    assert not any(row["regressed"] for row in verdict["rows"])
    # no server counters were scraped: the prefix-cache hit rate is no row, not "not measured"
    assert "prefix_cache_hit_rate" not in {row["metric"] for row in verdict["rows"]}


def test_gate_fails_when_max_num_seqs_is_cut_at_high_concurrency(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    out_dir = files["dir"]
    code = _gate(files, "slow", "--markdown", str(out_dir / "gate.md"),
                 "--junit", str(out_dir / "gate.xml"), "--json", str(out_dir / "gate.json"))
    assert code == 1
    markdown = capsys.readouterr().out
    assert markdown.startswith("## tracker gate: ❌ regression")
    assert "| `engine.max_num_seqs` | `16` | `4` |" in markdown
    ttft_row = next(line for line in markdown.splitlines() if "| TTFT median |" in line)
    assert "❌ regression" in ttft_row
    assert (out_dir / "gate.md").read_text(encoding="utf-8") == markdown
    verdict = json.loads((out_dir / "gate.json").read_text(encoding="utf-8"))
    assert verdict["schema"] == "tracker.gate.gating/1"
    assert (verdict["outcome"], verdict["exit_code"]) == ("regression", 1)
    assert verdict["config_diff"] == [{"path": "engine.max_num_seqs", "old": 16, "new": 4}]
    ttft = next(r for r in verdict["rows"] if r["metric"] == "ttft_median_s")["verdict"]
    assert ttft["regressed"] and ttft["rel_change"] > 0.5 and ttft["ci"][0] > 0
    assert len(verdict["base"]["run_ids"]) == len(verdict["head"]["run_ids"]) == 2
    suite = ET.parse(out_dir / "gate.xml").getroot().find("testsuite")
    assert suite is not None and int(suite.get("failures", "0")) >= 1
    failed = [case.get("name") for case in suite.iter("testcase")
              if case.find("failure") is not None]
    assert "ttft_median_s" in failed


def test_gate_passes_for_a_change_that_does_not_matter(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    # four runs a side: with two, one unlucky burst of load on a busy machine that hits both
    # head runs and neither base run is indistinguishable from a regression. A gate at 95 %
    # raises a false alarm on 5 % of harmless changes by design, so this test asks for 99.5 %:
    # it should fail by chance once in 200 CI runs, not once in 20.
    assert _gate(files, "harmless", "--json", "-", "--confidence", "0.995", repeats=4) == 0
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["outcome"] == "pass"
    # ABBA: base first in rounds 1 and 3, head first in rounds 2 and 4 (ids in running order)
    base_ids, head_ids = verdict["base"]["run_ids"], verdict["head"]["run_ids"]
    assert [base_ids[0] < head_ids[0], base_ids[1] < head_ids[1], base_ids[2] < head_ids[2],
            base_ids[3] < head_ids[3]] == [True, False, True, False]
    assert verdict["config_diff"] == [{"path": "engine.swap_space", "old": "(default)",
                                       "new": 8.0}]
    # the whole gate holds one false-alarm budget: no row is a regression for the family
    assert not any(row["regressed"] for row in verdict["rows"])


def test_gate_compares_stored_runs(files: dict[str, Path],
                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert _gate(files, "slow", "--json", "-") == 1
    verdict = json.loads(capsys.readouterr().out)
    base_ids, head_ids = verdict["base"]["run_ids"], verdict["head"]["run_ids"]
    args = ["gate", "--db", str(files["db"]), "--json", "-"]
    args += [part for run_id in base_ids for part in ("--base-run", str(run_id))]
    args += [part for run_id in head_ids for part in ("--head-run", str(run_id))]
    assert main(args) == 1
    again = json.loads(capsys.readouterr().out)
    assert again["interleaved"] is False
    assert again["config_diff"] == verdict["config_diff"]
    # swapped, one run each: the bigger batch gives TTFT back but costs decode time per
    # token, a real trade-off that the gate reports row by row
    swapped = ["gate", "--db", str(files["db"]), "--quiet", "--base-run", str(head_ids[0]),
               "--head-run", str(base_ids[0])]
    assert main(swapped) == 1
    rows = {line.split(" | ")[1]: line for line in capsys.readouterr().out.splitlines()
            if line.startswith("| busy |")}
    assert "✅ improvement" in rows["TTFT median"]
    assert "❌ regression" in rows["TPOT median"]


def test_gate_could_not_measure_when_the_head_target_is_down(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    dead = files["dir"] / "dead.yaml"
    dead.write_text(f"name: dead\ntarget:\n  kind: openai\n  model: m\n"
                    f"  base_url: http://127.0.0.1:{find_free_port()}\n", encoding="utf-8")
    code = main(["gate", "--base", str(files["base"]), "--head", str(dead), "--suite",
                 str(files["suite"]), "--repeats", "1", "--db", str(files["db"]), "--quiet"])
    assert code == 3
    out = capsys.readouterr().out
    assert "could not measure" in out


@pytest.mark.parametrize(("extra", "message"), [
    ([], "give either --base"),
    (["--base", "a.yaml"], "go together"),
    (["--base-run", "1"], "at least one --base-run and one --head-run"),
    (["--base-run", "1", "--head-run", "2", "--min-effect", "ttft=0.1"], "--min-effect ttft=0.1"),
    (["--base-run", "1", "--head-run", "2", "--confidence", "2"], "--confidence"),
    (["--base-run", "1", "--head-run", "2", "--repeats", "3"], "stored runs"),
    (["--base", "a.yaml", "--head", "b.yaml", "--suite", "s.yaml", "--max-rounds", "0"],
     "--max-rounds: must be 1 or more (got 0)"),
])
def test_gate_usage_errors_exit_2(extra: list[str], message: str, files: dict[str, Path],
                                  capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = main(["gate", "--db", str(files["db"]), *extra])
    except SystemExit as stopped:  # a flag's type refused the value (argparse's exit)
        code = int(stopped.code or 0)
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1, err


def test_gate_refuses_runs_of_different_suites(files: dict[str, Path],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    other = files["dir"] / "other-suite.yaml"
    other.write_text(SUITE.replace("seed: 3", "seed: 4").replace("num_requests: 48",
                                                                 "num_requests: 8"),
                     encoding="utf-8")
    for suite in (files["suite"], other):
        main(["run", "--config", str(files["base"]), "--suite", str(suite), "--db",
              str(files["db"]), "--quiet"])
    capsys.readouterr()
    assert main(["gate", "--db", str(files["db"]), "--base-run", "1", "--head-run", "2"]) == 2
    assert "different suites" in capsys.readouterr().err


def test_earlier_base_runs_give_the_noise_so_a_clear_regression_is_decided_early(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """With the noise known, one round can decide a row; the gate takes a second only while a
    row with a large change is still undecided (so the report explains the headline)."""
    for _ in range(3):
        assert main(["run", "--config", str(files["base"]), "--suite", str(files["suite"]),
                     "--db", str(files["db"]), "--quiet"]) == 0
    capsys.readouterr()
    out = files["dir"] / "gate.json"
    assert _gate(files, "slow", "--json", str(out), repeats=None) == 1
    markdown = capsys.readouterr().out
    verdict = json.loads(out.read_text(encoding="utf-8"))
    rounds = verdict["rounds"]
    assert rounds["noise_runs"] == 3 and rounds["rounds"] <= 2
    assert rounds["max_rounds"] == 3  # the default cap where the noise is known already
    assert (f"**rounds** sequential: decided after {rounds['rounds']} of 3 rounds; run-to-run "
            "noise from 3 earlier runs of the base") in markdown
    for row in verdict["rows"]:  # every large change the worse way is decided or bounded
        v = row["verdict"]
        if v is None or v["rel_change"] is None or row["metric"] == "gpu_memory_peak_bytes":
            continue
        worse = v["rel_change"] if v["lower_is_better"] else -v["rel_change"]
        if worse >= 2 * v["min_effect"]:
            assert v["outcome"] == "regression" or "conditional power" in v["reason"], row
    assert "pooled with 3 earlier runs" in json.loads(out.read_text(encoding="utf-8"))[
        "rows"][0]["verdict"]["method"]


def test_without_earlier_base_runs_the_noise_comes_from_the_rounds_alone(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--config", str(files["slow"]), "--suite", str(files["suite"]),
                 "--db", str(files["db"]), "--quiet"]) == 0  # of the head: not the base's
    capsys.readouterr()
    assert _gate(files, "slow", "--json", "-", repeats=None) == 1
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["rounds"]["noise_runs"] is None and verdict["rounds"]["rounds"] >= 2
    assert "looks 2..6" in verdict["rows"][0]["verdict"]["method"]
