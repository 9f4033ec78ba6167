"""``tracker export RUN --format vllm|llmd``: one workload of a stored run as ``vllm bench
serve``'s ``--save-result --save-detailed`` JSON, or as an llm-d Benchmark Report v0.2
(``tracker.ingest.llmd.render_llmd_report``) (docs/export.md), so it can go where
those files go. ``tracker import`` reads either back.

The keys are vLLM's, and the values are the tracker's (same definitions: docs/import-formats.md's
vLLM table read backwards). Per-request arrays come from the stored records. A latency not
measured is null.
"""

from __future__ import annotations

import argparse
from typing import Any

from tracker.cli.output import reading, write_json
from tracker.errors import ExitCode, UsageError
from tracker.reports.load_report import render_stats_ms
from tracker.results import RunResult, WorkloadResult


def cmd_export(args: argparse.Namespace) -> int:
    from tracker.store.runs import fetch_run

    with reading(args.db) as session:
        run = fetch_run(session, args.run_id)
    workload = _chosen(run, args.workload)
    if args.format == "llmd":
        from tracker.ingest.llmd import render_llmd_report

        write_json(args.out, render_llmd_report(run, workload), "--out")
        return ExitCode.OK
    write_json(args.out, render_vllm_result(run, workload), "--out")
    return ExitCode.OK


def _chosen(run: RunResult, name: str | None) -> WorkloadResult:
    names = [w.name for w in run.workloads]
    if name is None and len(names) == 1:
        return run.workloads[0]
    found = [w for w in run.workloads if w.name == name]
    if not found:
        raise UsageError(f"run {run.run_id}: --workload must be one of {', '.join(names) or '(none)'}"
                         f" (got {name!r}); an exported file holds one workload")
    return found[0]


def render_vllm_result(run: RunResult, workload: WorkloadResult) -> dict[str, Any]:
    s = workload.summary
    records = workload.records
    body: dict[str, Any] = {
        "date": workload.ended_at.strftime("%Y%m%d-%H%M%S"),
        "label": f"tracker run {run.run_id} ({run.config.name}@{run.config.version[:12]})",
        "model_id": run.config_body.get("target", {}).get("model"),
        "num_prompts": workload.num_requests, "max_concurrency": workload.concurrency,
        "duration": s.duration_s, "completed": s.completed, "failed": s.failed,
        "total_input_tokens": s.total_input_tokens, "total_output_tokens": s.total_output_tokens,
        "request_throughput": s.request_throughput_per_s,
        "output_throughput": s.output_throughput_tokens_per_s,
        "total_token_throughput": s.total_token_throughput_tokens_per_s,
        # vLLM's readers ignore a key they do not know; `tracker import` reads this one back
        "tracker": {"run_id": run.run_id, "workload": workload.name, "simulated": run.simulated,
                    "config": run.config.name, "suite": run.suite.name},
    }
    for key in ("ttft", "tpot", "itl", "e2el"):
        body.update(render_stats_ms(key, getattr(s, key)))
    if records:
        body.update(
            input_lens=[r.input_tokens or 0 for r in records],
            output_lens=[r.output_tokens or 0 if r.ok else 0 for r in records],
            ttfts=[r.ttft_s or 0.0 if r.ok else 0.0 for r in records],
            itls=[list(r.itl_s) if r.ok else [] for r in records],
            errors=["" if r.ok else f"{r.error_class}: {r.error or ''}" for r in records])
    return body
