"""``tracker bench``'s terminal text: ``vllm bench serve``'s result block, plus the load lines."""

from __future__ import annotations

from tracker.reports.load_report import render_load_lines
from tracker.results import LatencyStats, WorkloadResult


def _line(label: str, value: str) -> str:
    return f"{label:<40}{value:>12}"


def _latency_lines(title: str, key: str, stats: LatencyStats | None) -> list[str]:
    if stats is None:
        return []
    return [f"{'-' * 15}{title:^22}{'-' * 15}",
            _line(f"Mean {key} (ms):", f"{stats.mean_s * 1000:.2f}"),
            _line(f"Median {key} (ms):", f"{stats.median_s * 1000:.2f}"),
            _line(f"P99 {key} (ms):", f"{stats.p99_s * 1000:.2f}")]


def render_bench_text(model: str, result: WorkloadResult) -> str:
    s = result.summary
    lines = [f"{' Serving Benchmark Result ':=^52}",
             _line("Model:", model),
             _line("Successful requests:", str(s.completed)),
             _line("Failed requests:", str(s.failed)),
             _line("Benchmark duration (s):", f"{s.duration_s:.2f}"),
             _line("Total input tokens:", str(s.total_input_tokens)),
             _line("Total generated tokens:", str(s.total_output_tokens)),
             _line("Request throughput (req/s):", f"{s.request_throughput_per_s or 0:.2f}"),
             _line("Output token throughput (tok/s):",
                   f"{s.output_throughput_tokens_per_s or 0:.2f}")]
    if s.goodput_req_per_s is not None:
        lines.append(_line("Request goodput (req/s):", f"{s.goodput_req_per_s:.2f}"))
    for title, key, stats in (("Time to First Token", "TTFT", s.ttft),
                              ("TTFT from planned start", "TTFT", s.scheduled_ttft),
                              ("Time per Output Token", "TPOT", s.tpot),
                              ("Inter-token Latency", "ITL", s.itl),
                              ("End-to-end Latency", "E2EL", s.e2el)):
        lines.extend(_latency_lines(title, key, stats))
    lines.append("=" * 52)
    if s.errors:
        lines.append("errors: " + ", ".join(f"{k} x{v}" for k, v in sorted(s.errors.items())))
    if s.client is not None and s.client.cpu_fraction is not None:
        lines.append(f"client: {s.client.cpu_fraction:.0%} CPU of one core"
                     + (f", send lag p99 {s.client.send_lag_p99_s * 1000:.2f} ms"
                        if s.client.send_lag_p99_s is not None else ""))
    lines.extend(render_load_lines([result]))
    return "\n".join(lines)
