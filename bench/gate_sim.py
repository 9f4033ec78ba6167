"""`tracker gate` on the embedded simulator: does it fail what it should, and only that?

Run: .venv/bin/python bench/gate_sim.py [--repeats 20] [--max-rounds 6] [--seed 1]
     [--earlier-runs 5]

Base is configs/sim-default.yaml (max_num_seqs 256, the simulator's 1 % run-to-run speed
noise); heads are written to a temporary directory:

- ``max_num_seqs 4``: a quarter of the suite's 16 concurrent streams get a batch slot, the
  rest queue: must exit 1;
- ``equal``: the base itself: must exit 0;
- ``swap_space 8``: an engine arg the simulator ignores (a config change with no effect):
  must exit 0 in at least 19 of ``--repeats`` seeded repeats.

Before the gates, the base is run ``--earlier-runs`` times (``tracker run``'s
``execute_suite``) into a store that every gate starts from a copy of, so the sequential gate
takes each row's run-to-run noise from those runs (``tracker.store.run_noise``) and may decide
after one round; ``--earlier-runs 0`` is a store without them (the noise from the rounds
alone, two rounds at least). Each gate is the sequential config gate on a small suite (48
requests at concurrency 16 per workload run), its runs numbered from the repeat's seed so
the simulator's run-to-run draws repeat; what the machine's own load adds does not. Prints
each gate's exit code and rounds (and the earlier runs behind its noise), then the count;
never asserts.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from tracker.gate.config_refs import load_config_ref
from tracker.gate.gating import (
    DEFAULT_MAX_ROUNDS,
    GateDesign,
    GateOptions,
    GateResult,
    run_config_gate,
)
from tracker.inputs.prompts import derive_seed
from tracker.inputs.suites import load_suite
from tracker.pipeline.execute import execute_suite
from tracker.store.db import open_store

ROOT = Path(__file__).resolve().parent.parent
BASE = ROOT / "configs" / "sim-default.yaml"
SUITE = """\
name: gate-sim-bench
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


def write_heads(directory: Path) -> dict[str, Path]:
    text = BASE.read_text(encoding="utf-8")
    heads = {
        "max_num_seqs 4": text.replace("max_num_seqs: 256", "max_num_seqs: 4"),
        "equal": text,
        "swap_space 8": text.replace("  block_size: 16\n", "  block_size: 16\n  swap_space: 8\n"),
    }
    paths = {}
    for index, (name, body) in enumerate(heads.items()):
        if name != "equal" and body == text:
            raise SystemExit(f"{BASE}: could not write the {name!r} head (its text changed?)")
        paths[name] = directory / f"head-{index}.yaml"
        paths[name].write_text(body, encoding="utf-8")
    (directory / "suite.yaml").write_text(SUITE, encoding="utf-8")
    return paths


def write_earlier_runs(directory: Path, count: int, seed: int) -> Path:
    """A store holding ``count`` completed runs of the base: each gate starts from a copy."""
    path = directory / "earlier.db"
    engine = open_store(f"sqlite:///{path}")
    try:
        for number in range(count):
            ordinal = derive_seed(seed, "earlier-run", number) % 2**31
            execute_suite(engine, load_config_ref(str(BASE)).loaded,
                          load_suite(directory / "suite.yaml"), run_ordinal=ordinal)
    finally:
        engine.dispose()
    return path


def play(directory: Path, head: Path, max_rounds: int, seed: int) -> tuple[GateResult, float]:
    path = directory / f"gate-{seed}.db"
    shutil.copyfile(directory / "earlier.db", path)
    engine = open_store(f"sqlite:///{path}")
    started = time.perf_counter()
    try:
        result = run_config_gate(engine, load_config_ref(str(BASE)), load_config_ref(str(head)),
                                 load_suite(directory / "suite.yaml"), GateDesign(max_rounds),
                                 GateOptions(), ordinal_seed=seed)
    finally:
        engine.dispose()
    return result, time.perf_counter() - started


def report(name: str, result: GateResult, elapsed_s: float) -> str:
    rounds = result.rounds.stop_reason if result.rounds is not None else "-"
    if result.rounds is not None and result.rounds.noise_runs is not None:
        rounds += f" (noise: {result.rounds.noise_runs} runs)"
    regressed = [f"{row.workload}/{row.metric}" for row in result.rows if row.regressed]
    return (f"  {name:<16} exit {result.exit_code}  {rounds:<48} {elapsed_s:5.1f} s"
            + (f"  regressed: {', '.join(regressed)}" if regressed else ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--max-rounds", type=int, default=DEFAULT_MAX_ROUNDS)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--earlier-runs", type=int, default=5,
                        help="base runs stored before the gates (0: none)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="gate-sim-") as name:
        directory = Path(name)
        heads = write_heads(directory)
        write_earlier_runs(directory, args.earlier_runs, args.seed)
        print(f"tracker gate on the simulator: base {BASE.relative_to(ROOT)}, sequential, "
              f"at most {args.max_rounds} rounds, {args.earlier_runs} earlier base runs stored")
        for head in ("max_num_seqs 4", "equal"):
            result, elapsed = play(directory, heads[head], args.max_rounds, args.seed)
            print(report(head, result, elapsed))
        passed, rounds = 0, []
        for repeat in range(args.repeats):
            seed = args.seed + 1000 + repeat
            result, elapsed = play(directory, heads["swap_space 8"], args.max_rounds, seed)
            print(report(f"swap_space #{repeat + 1}", result, elapsed))
            passed += result.exit_code == 0
            rounds.append(result.rounds.rounds if result.rounds is not None else 0)
        print(f"swap_space 8 (no effect): exit 0 in {passed} of {args.repeats} seeded repeats; "
              f"rounds per gate {rounds}, mean {sum(rounds) / max(1, len(rounds)):.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
