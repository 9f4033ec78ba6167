"""Write the result files tests/ingest reads: other tools' own output, with how each was made.

    python bench/peer_fixtures.py vllm                      # the vLLM schema fixture
    python bench/peer_fixtures.py aiperf --aiperf BIN       # run AIPerf against the simulator
    python bench/peer_fixtures.py llmd                      # the llm-d Benchmark Report v0.2
    python bench/peer_fixtures.py guidellm --guidellm BIN   # run GuideLLM against the simulator
    python bench/peer_fixtures.py inference-perf --inference-perf BIN   # and inference-perf

``vllm``: vLLM (and its torch/CUDA) does not install here, so the file is written from seeded
per-request values with ``vllm bench serve``'s own formulas and ``--save-result
--save-detailed --metric-percentiles 50,90,99`` keys (vllm/benchmarks/serve.py: numpy mean,
median, population std, linear percentiles; TPOT over requests with 2+ tokens; ITL every chunk
gap flattened). ``aiperf``: AIPerf (from PyPI, in its own venv; give its ``aiperf`` executable)
is run against ``tracker sim serve`` with a word-level tokenizer written on the spot (AIPerf's
``builtin`` one downloads tiktoken's table); its ``profile_export_aiperf.json`` and
``profile_export.jsonl`` are copied unchanged. Each fixture directory gets ORIGIN.md with the
exact command. ``guidellm``: GuideLLM 0.8.1 (from PyPI, in its own venv over the CPU build of
torch==2.13.0; give its ``guidellm`` executable) is run the same way, two concurrent benchmarks
(2 and 4 streams) with varied output lengths, and a word-level tokenizer over Faker's lorem words
(GuideLLM writes its synthetic prompts with Faker and cuts them with the tokenizer); its
benchmarks JSON is copied unchanged. ``inference-perf``: inference-perf 0.7.0 (from PyPI, in its
own Python 3.12 venv; no torch) runs two concurrent stages (2 and 4) over the completions API with
AIPerf's word-level tokenizer; its lifecycle reports (summary, per stage, per request without the
request and response bodies) and its llm-d partial reports are copied unchanged. ``llmd``: an llm-d
Benchmark Report v0.2 (llm-d-benchmark's workload/report/benchmark_report_v0_2.py) from seeded
per-request values, as llm-d-benchmark writes one for a ``vllm bench serve`` run: each Statistics
object's mean, population stddev and linear percentiles (numpy) in ms.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "ingest" / "fixtures"
TOKENIZER = """
import sys
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
words = ["[UNK]", *(f"w{i}" for i in range(2000))]
tok = Tokenizer(models.WordLevel(vocab={w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]").save_pretrained(sys.argv[1])
"""
GUIDELLM_TOKENIZER = """
import sys
from faker.providers.lorem.en_US import Provider
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
from transformers import PreTrainedTokenizerFast
words = ["[UNK]", ".", ",", *sorted({w.lower() for w in Provider.word_list})]
tok = Tokenizer(models.WordLevel(vocab={w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
tok.normalizer = normalizers.Lowercase()
tok.pre_tokenizer = pre_tokenizers.Whitespace()
PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]").save_pretrained(sys.argv[1])
"""


def _stats(prefix: str, values: list[float], out: dict[str, object]) -> None:
    data = np.asarray(values) * 1000.0
    out[f"mean_{prefix}_ms"] = float(np.mean(data))
    out[f"median_{prefix}_ms"] = float(np.median(data))
    out[f"std_{prefix}_ms"] = float(np.std(data))
    for p in (50, 90, 99):
        out[f"p{p}_{prefix}_ms"] = float(np.percentile(data, p))


def write_vllm(path: Path, seed: int = 7, requests: int = 24) -> None:
    rng = np.random.default_rng(seed)
    ttfts = [float(t) for t in rng.lognormal(np.log(0.05), 0.3, requests)]
    outputs = [int(n) for n in rng.integers(1, 40, requests)]
    itls = [[float(g) for g in rng.lognormal(np.log(0.012), 0.2, n - 1)] for n in outputs]
    inputs = [int(n) for n in rng.integers(100, 300, requests)]
    errors = [""] * requests
    errors[5] = "Traceback: aiohttp.ClientResponseError: 500, message='Internal Server Error'"
    ok = [i for i in range(requests) if not errors[i]]
    latencies = [ttfts[i] + sum(itls[i]) for i in ok]
    tpots = [(ttfts[i] + sum(itls[i]) - ttfts[i]) / (outputs[i] - 1) for i in ok if outputs[i] > 1]
    duration = 1.25 * max(latencies) * 4
    total_in, total_out = sum(inputs[i] for i in ok), sum(outputs[i] for i in ok)
    body: dict[str, object] = {
        "date": "20261130-221504", "endpoint_type": "openai-chat", "backend": "openai-chat",
        "label": None, "model_id": "meta-llama/Llama-3.1-8B-Instruct",
        "tokenizer_id": "meta-llama/Llama-3.1-8B-Instruct", "num_prompts": requests,
        "request_rate": "inf", "burstiness": 1.0, "max_concurrency": 4,
        "duration": duration, "completed": len(ok), "failed": requests - len(ok),
        "total_input_tokens": total_in, "total_output_tokens": total_out,
        "request_throughput": len(ok) / duration, "request_goodput": None,
        "output_throughput": total_out / duration,
        "total_token_throughput": (total_in + total_out) / duration,
        "max_output_tokens_per_s": 412.0, "max_concurrent_requests": 4,
    }
    _stats("ttft", [ttfts[i] for i in ok], body)
    _stats("tpot", tpots, body)
    _stats("itl", [g for i in ok for g in itls[i]], body)
    _stats("e2el", latencies, body)
    body.update(input_lens=inputs, output_lens=[outputs[i] if not errors[i] else 0
                                                for i in range(requests)],
                ttfts=[ttfts[i] if not errors[i] else 0.0 for i in range(requests)],
                itls=[itls[i] if not errors[i] else [] for i in range(requests)],
                generated_texts=["" if errors[i] else "w " * outputs[i] for i in range(requests)],
                errors=errors)
    path.write_text(json.dumps(body, indent=4) + "\n", encoding="utf-8")


LLMD_PERCENTILES = {"p0p1": 0.1, "p1": 1, "p5": 5, "p10": 10, "p25": 25, "p50": 50, "p75": 75,
                    "p90": 90, "p95": 95, "p99": 99, "p99p9": 99.9}


def _statistics(values: list[float], units: str, scale: float = 1.0) -> dict[str, object]:
    data = np.asarray(values, dtype=float) * scale
    stats: dict[str, object] = {"units": units, "mean": float(np.mean(data)),
                                "stddev": float(np.std(data)), "min": float(np.min(data)),
                                "max": float(np.max(data))}
    stats.update({k: float(np.percentile(data, p)) for k, p in LLMD_PERCENTILES.items()})
    return stats


def write_llmd(path: Path, seed: int = 11, requests: int = 32) -> None:
    """A v0.2 report of a closed-loop run at concurrency 4, 1 failed and 1 incomplete request."""
    rng = np.random.default_rng(seed)
    ttfts = rng.lognormal(np.log(0.08), 0.3, requests)
    outputs = rng.integers(8, 64, requests)
    gaps = [rng.lognormal(np.log(0.015), 0.2, n - 1) for n in outputs]
    inputs = rng.integers(200, 400, requests)
    ok = list(range(requests - 2))  # the last two: one failure, one incomplete
    latencies = [float(ttfts[i] + gaps[i].sum()) for i in ok]
    duration_s = round(1.2 * sum(latencies) / 4, 3)
    start = datetime(2026, 11, 30, 22, 10, tzinfo=UTC)
    end = (start + timedelta(seconds=duration_s)).replace(tzinfo=None)  # llm-d may omit the zone
    out_total, in_total = int(outputs[ok].sum()), int(inputs[ok].sum())
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {
        "version": "0.2",
        "run": {"uid": "6f1c2e0a-llmd-fixture", "eid": "exp-tracker-fixture", "cid": "kind-1",
                "time": {"start": start.isoformat(), "end": end.isoformat(),
                         "duration": f"PT{duration_s}S"}, "user": "bench"},
        "scenario": {"load": {
            "metadata": {"schema_version": "0.0.1", "cfg_id": "c4-chat"},
            "standardized": {"tool": "vllm-benchmark", "tool_version": "0.11.0", "stage": 1,
                             "input_seq_len": {"distribution": "uniform", "value": 300,
                                               "min": 200, "max": 399},
                             "output_seq_len": {"distribution": "uniform", "value": 36,
                                                "min": 8, "max": 63},
                             "concurrency": 4},
            "Native": {"args": {"max-concurrency": 4, "num-prompts": requests}}}},
        "results": {"request_performance": {"aggregate": {
            "requests": {"total": requests, "failures": 1, "incomplete": 1,
                         "input_length": _statistics([float(inputs[i]) for i in ok], "count"),
                         "output_length": _statistics([float(outputs[i]) for i in ok], "count")},
            "latency": {
                "time_to_first_token": _statistics([float(ttfts[i]) for i in ok], "ms", 1000.0),
                "time_per_output_token": _statistics(
                    [float(gaps[i].sum() / (outputs[i] - 1)) for i in ok], "ms/token", 1000.0),
                "normalized_time_per_output_token": _statistics(
                    [latencies[k] / float(outputs[i]) for k, i in enumerate(ok)], "s/token"),
                "inter_token_latency": _statistics(
                    [float(g) for i in ok for g in gaps[i]], "ms/token", 1000.0),
                "request_latency": _statistics(latencies, "s")},
            "throughput": {
                "output_token_rate": {"units": "token/s", "mean": out_total / duration_s},
                "input_token_rate": {"units": "token/s", "mean": in_total / duration_s},
                "total_token_rate": {"units": "token/s",
                                     "mean": (in_total + out_total) / duration_s},
                "requests_rate": {"units": "qps", "mean": len(ok) / duration_s}}}}},
    }
    path.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait(url: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"the simulator did not answer {url} within {timeout_s:g} s")


def _serve_sim() -> tuple[subprocess.Popen[bytes], int]:
    port = _free_port()
    sim = subprocess.Popen([sys.executable, "-m", "tracker", "sim", "serve", "--config",
                            str(ROOT / "configs" / "sim-default.yaml"), "--port", str(port)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait(f"http://127.0.0.1:{port}/v1/models")
    return sim, port


def run_aiperf(aiperf: Path, out: Path, requests: int, concurrency: int) -> str:
    sim, port = _serve_sim()
    try:
        with tempfile.TemporaryDirectory(prefix="aiperf-") as work:
            tokenizer, artifacts = Path(work) / "tokenizer", Path(work) / "artifacts"
            subprocess.run([str(aiperf.parent / "python"), "-c", TOKENIZER, str(tokenizer)],
                           check=True, capture_output=True)
            command = [str(aiperf), "profile", "--model", "sim/llama-3-8b-instruct",
                       "--tokenizer", str(tokenizer), "--url", f"http://127.0.0.1:{port}",
                       "--endpoint-type", "chat", "--streaming", "--concurrency",
                       str(concurrency), "--request-count", str(requests),
                       "--prompt-input-tokens-mean", "128", "--prompt-output-tokens-mean", "32",
                       "--use-server-token-count", "--random-seed", "7", "--ui-type", "none",
                       "--artifact-dir", str(artifacts)]
            subprocess.run(command, check=True, capture_output=True, timeout=300)
            out.mkdir(parents=True, exist_ok=True)
            for name in ("profile_export_aiperf.json", "profile_export.jsonl"):
                shutil.copyfile(artifacts / name, out / name)
    finally:
        sim.terminate()
        sim.wait(timeout=10)
    return " ".join(["aiperf", *command[1:]])


def run_guidellm(guidellm: Path, out: Path, requests: int) -> str:
    """GuideLLM against the simulator: concurrent 2 and 4 streams, ``requests`` each."""
    sim, port = _serve_sim()
    try:
        with tempfile.TemporaryDirectory(prefix="guidellm-") as work:
            tokenizer, result = Path(work) / "tokenizer", Path(work) / "benchmarks.json"
            subprocess.run([str(guidellm.parent / "python"), "-c", GUIDELLM_TOKENIZER,
                            str(tokenizer)], check=True, capture_output=True)
            command = [str(guidellm), "run", "--backend",
                       f"kind=openai_http,target=http://127.0.0.1:{port},"
                       "model=sim/llama-3-8b-instruct",
                       "--profile", "kind=concurrent,streams=2",
                       "--override", "profile.streams", "2,4",
                       "--constraint", f"kind=max_requests,count={requests}",
                       "--tokenizer", f"kind=huggingface_auto,model={tokenizer}",
                       "--data", "kind=synthetic_text,prompt_tokens=128,output_tokens=32,"
                       "output_tokens_stdev=12,output_tokens_min=4,output_tokens_max=64",
                       "--seed", "kind=static,value=7",
                       "--output", f"kind=json,path={result}", "--disable-console-interactive"]
            env = {**os.environ, "HF_HUB_OFFLINE": "1"}
            subprocess.run(command, check=True, capture_output=True, timeout=600, env=env)
            out.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(result, out / "benchmarks.json")
            shown = " ".join(["guidellm", *command[1:]]).replace(work, "$WORK")
    finally:
        sim.terminate()
        sim.wait(timeout=10)
    return shown.replace(str(port), "$PORT")


INFERENCE_PERF_CONFIG = """\
api: {type: completion, streaming: true}
data:
  type: random
  input_distribution: {min: 64, max: 192, mean: 128, std_dev: 32}
  output_distribution: {min: 4, max: 64, mean: 32, std_dev: 12}
load:
  type: concurrent
  stages: [{num_requests: REQUESTS, concurrency_level: 2}, {num_requests: REQUESTS, concurrency_level: 4}]
  num_workers: 1
server: {type: vllm, model_name: sim/llama-3-8b-instruct, base_url: "http://127.0.0.1:PORT",
         ignore_eos: true}
tokenizer: {pretrained_model_name_or_path: WORK/tokenizer}
report:
  request_lifecycle:
    summary: true
    per_stage: true
    per_request: true
    per_request_fields: {request: false, response: false, response_chunks: false}
    use_server_output_tokens: true
storage: {local_storage: {path: WORK/reports}}
"""
INFERENCE_PERF_FILES = ("summary_lifecycle_metrics.json", "stage_0_lifecycle_metrics.json",
                        "stage_1_lifecycle_metrics.json", "per_request_lifecycle_metrics.json",
                        "inference-perf.partial.stage_0.yaml", "inference-perf.partial.stage_1.yaml")


def run_inference_perf(binary: Path, out: Path, requests: int) -> str:
    """inference-perf against the simulator: two concurrent stages, ``requests`` each."""
    sim, port = _serve_sim()
    try:
        with tempfile.TemporaryDirectory(prefix="inference-perf-") as work:
            subprocess.run([str(binary.parent / "python"), "-c", TOKENIZER,
                            str(Path(work) / "tokenizer")], check=True, capture_output=True)
            config = (INFERENCE_PERF_CONFIG.replace("REQUESTS", str(requests))
                      .replace("PORT", str(port)).replace("WORK", work))
            (Path(work) / "config.yml").write_text(config, encoding="utf-8")
            command = [str(binary), "-c", str(Path(work) / "config.yml")]
            subprocess.run(command, check=True, capture_output=True, timeout=600, cwd=work,
                           env={**os.environ, "HF_HUB_OFFLINE": "1"})
            out.mkdir(parents=True, exist_ok=True)
            for name in INFERENCE_PERF_FILES:
                shutil.copyfile(Path(work) / "reports" / name, out / name)
            shown = " ".join(["inference-perf", *command[1:]]).replace(work, "$WORK")
            shown += "\n\n# $WORK/config.yml\n" + config.replace(work, "$WORK").replace(
                str(port), "$PORT")
    finally:
        sim.terminate()
        sim.wait(timeout=10)
    return shown


def _write_origin(tool: str, binary: Path, out: Path, how: str, command: str,
                  setup: str) -> None:
    version = subprocess.run([str(binary.parent / "pip"), "show", tool],
                             capture_output=True, text=True).stdout.split("\n")[1]
    (out / "ORIGIN.md").write_text(
        f"# {tool} fixture\n\nWritten by `python bench/peer_fixtures.py {how}` ({version}; "
        f"{setup}), "
        f"against `tracker sim serve --config configs/sim-default.yaml`. The exact command "
        f"($WORK: a temporary directory, $PORT: the simulator's port):\n\n```\n{command}\n"
        f"```\n\nWhat it wrote is {tool}'s own output, unchanged.\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("tool", choices=("vllm", "aiperf", "llmd", "guidellm", "inference-perf"))
    parser.add_argument("--aiperf", type=Path, help="the aiperf executable (its own venv)")
    parser.add_argument("--guidellm", type=Path, help="the guidellm executable (its own venv)")
    parser.add_argument("--inference-perf", type=Path,
                        help="the inference-perf executable (its own venv)")
    parser.add_argument("--requests", type=int, default=24)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    if args.tool == "vllm":
        write_vllm(FIXTURES / "vllm" / "bench_serve_detailed.json", requests=args.requests)
        print("wrote", FIXTURES / "vllm" / "bench_serve_detailed.json")
        return
    if args.tool == "llmd":
        write_llmd(FIXTURES / "llmd" / "report.json")
        print("wrote", FIXTURES / "llmd" / "report.json")
        return
    if args.tool == "guidellm":
        if args.guidellm is None:
            parser.error("guidellm needs --guidellm BIN (torch==2.13.0, then guidellm==0.8.1, "
                         "in a throw-away venv)")
        command = run_guidellm(args.guidellm, FIXTURES / "guidellm", args.requests)
        _write_origin("guidellm", args.guidellm, FIXTURES / "guidellm",
                      f"guidellm --guidellm BIN --requests {args.requests}", command,
                      "its venv: `pip install torch==2.13.0` (CPU), then `pip install "
                      "guidellm==0.8.1`")
        print("wrote", FIXTURES / "guidellm")
        return
    if args.tool == "inference-perf":
        if args.inference_perf is None:
            parser.error("inference-perf needs --inference-perf BIN (pip install "
                         "inference-perf==0.7.0 in a throw-away Python 3.12 venv)")
        out = FIXTURES / "inference_perf"
        command = run_inference_perf(args.inference_perf, out, args.requests)
        _write_origin("inference-perf", args.inference_perf, out,
                      f"inference-perf --inference-perf BIN --requests {args.requests}", command,
                      "its venv: Python 3.12, `pip install inference-perf==0.7.0`")
        print("wrote", out)
        return
    if args.aiperf is None:
        parser.error("aiperf needs --aiperf BIN (pip install aiperf in a throw-away venv)")
    command = run_aiperf(args.aiperf, FIXTURES / "aiperf", args.requests, args.concurrency)
    version = subprocess.run([str(args.aiperf.parent / "pip"), "show", "aiperf"],
                             capture_output=True, text=True).stdout.split("\n")[1]
    (FIXTURES / "aiperf" / "ORIGIN.md").write_text(
        f"# AIPerf fixture\n\nWritten by `python bench/peer_fixtures.py aiperf --aiperf BIN "
        f"--requests {args.requests} --concurrency {args.concurrency}` ({version}), against "
        f"`tracker sim serve --config configs/sim-default.yaml`. The exact AIPerf command:\n\n"
        f"```\n{command}\n```\n\nThe two files are AIPerf's own output, unchanged.\n",
        encoding="utf-8")
    print("wrote", FIXTURES / "aiperf")


if __name__ == "__main__":
    main()
