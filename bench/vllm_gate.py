"""The gate and the bisection on a real vLLM (bench/vllm_server.py), pinned, as a user runs them.

Run: .venv/bin/python bench/vllm_gate.py [--same 5] [--skip gate,same,bisect] [--max-rounds 3]

Three checks, each through ``tracker`` itself, every config a launch of the built vLLM on the
random model with ``launch.cpus`` the first CPU (the tracker keeps its client on the others):

  gate    base max_num_seqs 8, head 1, eight streams: must exit 1 (a regression)
  same    the base against itself, ``--same`` times: must exit 0 each time, no improvement row
  bisect  head = base with max_num_seqs 8 -> 1, max_num_batched_tokens 2048 -> 4096 and
          enable_prefix_caching true -> false: must name engine.max_num_seqs

Each run launches its own server (about a minute on one core), so ``gate`` costs 4 to 12
launches, ``same`` up to 12 a time and ``bisect`` the gate's plus its probes'. Prints one line per
check (exit code, rounds, the decided rows, the culprits) and the time each took; the Markdown
reports stay in the work directory it names. Printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.vllm_server import BUILD_COMMAND, find_build, launch_config, split_cpus  # noqa: E402
from tracker.cli.main import main as tracker_main  # noqa: E402

EIGHT_STREAMS = """\
name: vllm-gate-eight-streams
seed: 5
workloads:
  - name: eight-users
    prompts: {source: synthetic, input_tokens: 128}
    max_tokens: 16
    ignore_eos: true
    concurrency: 8
    num_requests: 32
    warmup_requests: 2
"""

BASE_ENGINE = {"max_num_seqs": 8, "max_num_batched_tokens": 2048, "enable_prefix_caching": True}
BISECT_HEAD = {"max_num_seqs": 1, "max_num_batched_tokens": 4096, "enable_prefix_caching": False}


def write(path: Path, body: dict[str, Any] | str) -> Path:
    path.write_text(body if isinstance(body, str) else yaml.safe_dump(body), encoding="utf-8")
    return path


def summarise(verdict: dict[str, Any]) -> str:
    rows = []
    for row in verdict["rows"]:
        v = row["verdict"]
        if v is None or not (v["regressed"] or v["improved"]):
            continue
        word = "regressed" if v["regressed"] else "IMPROVED"
        rows.append(f"{row['metric']} {v['rel_change']:+.1%} {word}")
    rounds = verdict.get("rounds") or {}
    text = f"rounds {rounds.get('rounds')} ({rounds.get('stop_reason')}); decided: " \
           + (", ".join(rows) or "none")
    bisect = verdict.get("bisect")
    if bisect is not None:
        culprits = [" + ".join(f["path"] for f in c["fields"]) for c in bisect["culprits"]]
        text += f"; bisect {bisect['outcome']}: {', '.join(culprits) or 'none'} " \
                f"({len(bisect['probes'])} probes, row {bisect['metric']})"
    return text


def gate(work: Path, tag: str, base: Path, head: Path, suite: Path, max_rounds: int,
         command: str = "gate") -> tuple[int, dict[str, Any], float]:
    out = work / f"{tag}.json"
    started = time.monotonic()
    code = tracker_main([command, "--base", str(base), "--head", str(head), "--suite", str(suite),
                         "--db", f"sqlite:///{work / 'gate.db'}", "--max-rounds",
                         str(max_rounds), "--json", str(out), "--markdown",
                         str(work / f"{tag}.md"), "--quiet"])
    return code, json.loads(out.read_text(encoding="utf-8")), time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--same", type=int, default=5, help="same-config gates to run")
    parser.add_argument("--max-rounds", type=int, default=3)
    parser.add_argument("--skip", default="", help="comma-separated: gate, same, bisect")
    args = parser.parse_args(argv)
    if find_build() is None:
        print(f"vLLM is not built: {BUILD_COMMAND}")
        return 2
    server_cpu, _ = split_cpus()
    cpus = None if server_cpu is None else [server_cpu]
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    work = Path(tempfile.mkdtemp(prefix="vllm-gate-"))
    os.environ.setdefault("TRACKER_LOG_DIR", str(work / "logs"))
    print(f"work directory: {work} (server CPUs {cpus}, the client on the others)")
    suite = write(work / "suite.yaml", EIGHT_STREAMS)
    base = write(work / "base.yaml", launch_config(cpus=cpus, engine=BASE_ENGINE,
                                                   name="vllm-gate"))
    lines = []
    if "gate" not in skip:
        head = write(work / "head.yaml", launch_config(cpus=cpus, engine={**BASE_ENGINE,
                                                                          "max_num_seqs": 1},
                                                       name="vllm-gate"))
        code, verdict, took = gate(work, "gate", base, head, suite, args.max_rounds)
        lines.append(f"gate max_num_seqs 8 -> 1: exit {code} in {took:.0f} s; "
                     + summarise(verdict))
        print(lines[-1], flush=True)
    if "same" not in skip:
        for number in range(1, args.same + 1):
            code, verdict, took = gate(work, f"same-{number}", base, base, suite, args.max_rounds)
            lines.append(f"same config {number}/{args.same}: exit {code} in {took:.0f} s; "
                         + summarise(verdict))
            print(lines[-1], flush=True)
    if "bisect" not in skip:
        head = write(work / "bisect-head.yaml", launch_config(cpus=cpus, engine=BISECT_HEAD,
                                                              name="vllm-gate"))
        code, verdict, took = gate(work, "bisect", base, head, suite, args.max_rounds,
                                   command="bisect")
        lines.append(f"bisect over 3 fields: exit {code} in {took:.0f} s; " + summarise(verdict))
        print(lines[-1], flush=True)
    print("\n" + "\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
