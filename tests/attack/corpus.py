"""A corpus of hostile inputs: each case a command line, with the files it names written under a
temporary folder, that the tracker must refuse with exit 2 and one ``error:`` line, fast, and
without creating the database it names (nothing is stored when an input is refused).

The cases cover configs, suites, datasets, traces, every importer's files and flags. A case with
``child`` set may hang or eat memory if the refusal regresses (a FIFO, ``/dev/zero``, an alias
bomb): the test runs it in a child process with a timeout instead of in-process.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.inputs.test_yamlfile import LAUGHS
from tests.simconfigs import FAST_SIM

FIXTURES = Path(__file__).resolve().parents[1] / "ingest" / "fixtures"
BOMB = LAUGHS  # nine levels of nine aliases: 9**9 strings
DEEP_YAML = "a: " + "[" * 5000 + "]" * 5000 + "\n"
DEEP_BLOCK_YAML = "".join(f"{' ' * i}k{i}:\n" for i in range(5000)) + " " * 5000 + "k: 1\n"
SUITE = """\
name: s
workloads:
  - name: w
    prompts: {prompts}
    max_tokens: 8
    {shape}
    num_requests: {num}
"""


@dataclass(frozen=True, slots=True)
class Case:
    name: str
    argv: tuple[str, ...]
    db: Path  # the database the case names: it must not exist afterwards
    child: bool = False  # run in a child process (a regression could hang or eat memory)


class Corpus:
    """Writes each case's files into a folder of its own and collects the cases."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.cases: list[Case] = []
        self.config = root / "good-config.yaml"
        self.config.write_text(FAST_SIM, encoding="utf-8")
        self.suite = root / "good-suite.yaml"
        self.suite.write_text(SUITE.format(prompts="{source: synthetic, input_tokens: 8}",
                                           shape="concurrency: 1", num=2), encoding="utf-8")

    def folder(self, name: str) -> Path:
        path = self.root / name
        path.mkdir()
        return path

    def add(self, name: str, argv: list[str], *, child: bool = False) -> None:
        db = self.root / f"{name}.db"
        resolved = tuple(str(db) if part == "{db}" else part for part in argv)
        self.cases.append(Case(name, resolved, db, child))

    def config_case(self, name: str, text: str | bytes) -> None:
        path = self.folder(name) / "config.yaml"
        _write(path, text)
        self.add(name, ["run", "--config", str(path), "--suite", str(self.suite), "--db", "{db}"])

    def suite_case(self, name: str, text: str | bytes, files: dict[str, str | bytes] | None = None
                   ) -> None:
        folder = self.folder(name)
        for file, content in (files or {}).items():
            _write(folder / file, content)
        path = folder / "suite.yaml"
        _write(path, text)
        self.add(name, ["run", "--config", str(self.config), "--suite", str(path), "--db", "{db}"])

    def import_case(self, name: str, files: dict[str, str | bytes], target: str,
                    extra: tuple[str, ...] = (), *, child: bool = False) -> None:
        folder = self.folder(name)
        for file, content in files.items():
            _write(folder / file, content)
        self.add(name, ["import", str(folder / target), "--config", "c", *extra, "--db", "{db}"],
                 child=child)


def _write(path: Path, content: str | bytes) -> None:
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8", errors="surrogatepass")


def _fixture(*parts: str) -> Any:
    return json.loads(FIXTURES.joinpath(*parts).read_text(encoding="utf-8"))


def _set(body: Any, path: str, value: Any) -> Any:
    """A deep copy of ``body`` with the value at the dotted ``path`` (``[0]`` an index) set."""
    out = copy.deepcopy(body)
    node = out
    keys = [int(k) if k.isdigit() else k for k in path.replace("[", ".").replace("]", "")
            .split(".")]
    for key in keys[:-1]:
        node = node[key]
    node[keys[-1]] = value
    return out


class Raw:
    """A JSON value written as-is (NaN, Infinity, a 31-digit integer)."""

    def __init__(self, text: str) -> None:
        self.text = text


def _dumps(body: Any) -> str:
    raws: dict[str, str] = {}

    def swap(value: Any) -> Any:
        if isinstance(value, Raw):
            key = f"__raw_{len(raws)}__"
            raws[key] = value.text
            return key
        if isinstance(value, dict):
            return {k: swap(v) for k, v in value.items()}
        if isinstance(value, list):
            return [swap(v) for v in value]
        return value

    text = json.dumps(swap(body))
    for key, raw in raws.items():
        text = text.replace(f'"{key}"', raw)
    return text


NAN, INF, HUGE, BIG_INT = Raw("NaN"), Raw("Infinity"), 1e300, Raw("1" + "0" * 30)
BAD_NUMBERS: dict[str, Any] = {"string": "12abc", "nan": NAN, "inf": INF, "1e300": HUGE,
                               "1e30int": BIG_INT, "negative": -5, "list": [1, 2],
                               "object": {"a": 1}}


# --- configs and suites ----------------------------------------------------------------------


def _configs(c: Corpus) -> None:
    sim = FAST_SIM
    cases: dict[str, str | bytes] = {
        "empty": "", "list": "- a\n- b\n", "scalar": "just text\n", "invalid-yaml": "a: [1, 2\n",
        "tab-indent": "name: x\n\ttarget: 1\n", "alias-bomb": BOMB, "deep-flow": DEEP_YAML,
        "deep-block": DEEP_BLOCK_YAML, "recursive-alias": "a: &a [*a]\n",
        "unknown-key": sim + "bogus: 1\n",
        "block-size": sim.replace("block_size: 16", "block_size: 12"),
        "max-num-seqs-negative": sim.replace("max_num_seqs: 8", "max_num_seqs: -8"),
        "max-num-seqs-string": sim.replace("max_num_seqs: 8", "max_num_seqs: eight"),
        "max-num-seqs-nan": sim.replace("max_num_seqs: 8", "max_num_seqs: .nan"),
        "max-num-seqs-inf": sim.replace("max_num_seqs: 8", "max_num_seqs: .inf"),
        "max-num-seqs-list": sim.replace("max_num_seqs: 8", "max_num_seqs: [8]"),
        "int-5000-digits": sim.replace("max_num_seqs: 8", "max_num_seqs: " + "9" * 5000),
        "bad-date": sim + "created: 2001-13-45\n",
        "name-100k": sim.replace("name: fast-sim", "name: " + "n" * 100_000),
        "nul-byte": sim.replace("name: fast-sim", "name: fast\x00sim"),
        "lone-surrogate": sim.replace("name: fast-sim", 'name: "fast\\ud800sim"'),
        "not-utf8": b"name: \xff\xfe\n",
        "over-1mib": "# " + "x" * (1024 * 1024 + 10) + "\n",
        "literal-key": sim.replace("  model: sim/test-model\n",
                                   "  model: sim/test-model\n  api_key: sk-live0123456789abcdef\n"),
        "kind-unknown": sim.replace("kind: sim", "kind: quantum"),
        "simulator-negative": sim.replace("decode_base_s: 0.001", "decode_base_s: -1"),
    }
    for name, text in cases.items():
        c.config_case(f"config-{name}", text)
    c.add("config-empty-path", ["run", "--config", "", "--suite", str(c.suite), "--db", "{db}"])
    c.add("config-directory", ["run", "--config", str(c.root), "--suite", str(c.suite),
                               "--db", "{db}"])
    c.add("config-missing", ["run", "--config", str(c.root / "nope.yaml"), "--suite",
                             str(c.suite), "--db", "{db}"])
    c.add("config-dev-zero", ["run", "--config", "/dev/zero", "--suite", str(c.suite),
                              "--db", "{db}"], child=True)


def _suite(shape: str = "concurrency: 1", num: int | str = 2,
           prompts: str = "{source: synthetic, input_tokens: 8}") -> str:
    return SUITE.format(prompts=prompts, shape=shape, num=num)


def _suites(c: Corpus) -> None:
    cases = {
        "rate-tiny": _suite("request_rate: 0.0000001"),
        "rate-zero": _suite("request_rate: 0"),
        "rate-nan": _suite("request_rate: .nan"),
        "rate-string": _suite("request_rate: fast"),
        "stage-rate-tiny": _suite("stages: [{request_rate: 0.0000001}]"),
        "sweep-rate-tiny": _suite("sweep: {start_rate: 0.000000001}\n    slos: {ttft_ms: 500}"),
        "sweep-rates-tiny": _suite("sweep: {rates: [0.0000001]}\n    slos: {ttft_ms: 500}"),
        "num-requests-negative": _suite(num=-1),
        "num-requests-huge": _suite(num="1" + "0" * 30),
        "num-requests-string": _suite(num="many"),
        "two-shapes": _suite("concurrency: 1\n    request_rate: 2"),
        "no-shape": _suite(""),
        "concurrency-zero": _suite("concurrency: 0"),
        "timeout-negative": _suite("concurrency: 1\n    request_timeout_s: -1"),
        "timeout-nan": _suite("concurrency: 1\n    request_timeout_s: .nan"),
        "temperature-nan": _suite("concurrency: 1\n    temperature: .nan"),
        "input-tokens-huge": _suite(prompts="{source: synthetic, input_tokens: 999999999}"),
        "max-tokens-huge": _suite().replace("max_tokens: 8", "max_tokens: 999999999"),
        "unknown-source": _suite(prompts="{source: magic}"),
        "unknown-key": _suite() + "bogus: 1\n",
        "no-workloads": "name: s\nworkloads: []\n",
        "workloads-mapping": "name: s\nworkloads: {a: 1}\n",
        "name-100k": _suite().replace("name: w", "name: " + "w" * 100_000),
        "alias-bomb": BOMB, "deep": DEEP_YAML, "empty": "",
        "dataset-missing": _suite(prompts="{source: dataset, path: nope.json, format: sharegpt}"),
    }
    for name, text in cases.items():
        c.suite_case(f"suite-{name}", text)


# --- datasets and traces --------------------------------------------------------------------


def _dataset_suite(fmt: str, file: str = "d.data") -> str:
    return _suite(prompts=f"{{source: dataset, path: {file}, format: {fmt}}}", num=1)


def _datasets(c: Corpus) -> None:
    sharegpt: dict[str, str | bytes] = {
        "lone-surrogate": '[{"conversations": [{"from": "human", "value": "hi \\ud800 there"}]}]',
        "not-array": '{"conversations": []}', "truncated": '[{"conversations": [',
        "not-utf8": b'[{"conversations": [{"from": "human", "value": "\xff"}]}]',
        "conversations-string": '[{"conversations": "hello"}]',
        "value-number": '[{"conversations": [{"from": "human", "value": 5}]}]',
        "role-unknown": '[{"conversations": [{"from": "martian", "value": "hi"}]}]',
        "deep": "[" * 100_000 + "]" * 100_000, "empty": "",
        "item-list": "[[1, 2]]",
    }
    for name, text in sharegpt.items():
        c.suite_case(f"sharegpt-{name}", _dataset_suite("sharegpt"), {"d.data": text})
    jsonl: dict[str, str | bytes] = {
        "lone-surrogate": '{"prompt": "a \\udfff b"}\n',
        "not-object": "[1, 2]\n", "prompt-empty": '{"prompt": ""}\n',
        "output-negative": '{"prompt": "hi", "output_tokens": -3}\n',
        "output-string": '{"prompt": "hi", "output_tokens": "many"}\n',
        "output-nan": '{"prompt": "hi", "output_tokens": NaN}\n',
        "deep-line": "[" * 100_000 + "\n",
    }
    for name, text in jsonl.items():
        c.suite_case(f"jsonl-{name}", _dataset_suite("jsonl"), {"d.data": text})
    chat = {
        "lone-surrogate": '{"messages": [{"role": "user", "content": "\\ud83d"}]}\n',
        "content-number": '{"messages": [{"role": "user", "content": 7}]}\n',
        "role-unknown": '{"messages": [{"role": "robot", "content": "x"}]}\n',
    }
    for name, text in chat.items():
        c.suite_case(f"chat-{name}", _dataset_suite("openai-chat"), {"d.data": text})
    c.suite_case("dataset-is-directory", _dataset_suite("jsonl", "."), {})


def _mooncake(rows: list[str]) -> str:
    return "".join(row + "\n" for row in rows)


def _traces(c: Corpus) -> None:
    row = '{{"timestamp": {t}, "input_length": {i}, "output_length": {o}, "hash_ids": {h}}}'

    def ok(t: object = 0, i: object = 8, o: object = 4, h: object = "[]") -> str:
        return row.format(t=t, i=i, o=o, h=h)

    mooncake = {
        "timestamp-1e12ms": [ok(0), ok(10 ** 12)], "timestamp-1e306": [ok(0), ok("1e306")],
        "timestamp-nan": [ok("NaN"), ok(1)], "timestamp-inf": [ok(0), ok("Infinity")],
        "timestamp-string": [ok('"soon"'), ok(1)], "timestamp-negative": [ok(-5), ok(1)],
        "input-zero": [ok(0, i=0), ok(1)], "input-1e30": [ok(0, i="1" + "0" * 30), ok(1)],
        "output-float": [ok(0, o=2.5), ok(1)], "hash-ids-string": [ok(0, h='"abc"'), ok(1)],
        "hash-ids-too-many": [ok(0, h=list(range(50))), ok(1)],
        "out-of-order": [ok(100), ok(1)], "not-json": ["{timestamp: 1", ok(1)],
        "deep-row": ["[" * 100_000, ok(1)],
    }
    suite = _suite(prompts="{source: trace, path: t.jsonl, format: mooncake, block_tokens: 8}",
                   shape="", num=2)
    for name, rows in mooncake.items():
        c.suite_case(f"mooncake-{name}", suite, {"t.jsonl": _mooncake(rows)})
    scaled = _suite(prompts="{source: trace, path: t.jsonl, format: mooncake, block_tokens: 8, "
                    "time_scale: 1000000000000}", shape="", num=2)
    c.suite_case("mooncake-time-scale-huge", scaled, {"t.jsonl": _mooncake([ok(0), ok(1000)])})
    header = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
    azure = {
        "cell-200kb": header + "2023-11-16 18:15:46.6805900,8," + "9" * 200_000 + "\n",
        "timestamp-1e306": header + "0,8,4\n1e306,8,4\n",
        "timestamp-year-99999": header + "99999-01-01 00:00:00,8,4\n",
        "timestamp-garbage": header + "yesterday,8,4\n",
        "years-apart": header + "2023-11-16 18:15:46,8,4\n2999-11-16 18:15:46,8,4\n",
        "no-header": "2023-11-16 18:15:46,8,4\n2023-11-16 18:15:47,8,4\n",
        "context-negative": header + "0,-8,4\n1,8,4\n",
        "context-huge": header + "0,99999999999999999999,4\n1,8,4\n",
        "short-row": header + "0,8\n1,8,4\n",
        "nul-byte": header + "0,8\x00,4\n1,8,4\n",
    }
    azure_suite = _suite(prompts="{source: trace, path: t.csv, format: azure}", shape="", num=2)
    for name, text in azure.items():
        c.suite_case(f"azure-{name}", azure_suite, {"t.csv": text})


# --- imported files -------------------------------------------------------------------------


def _vllm(c: Corpus) -> None:
    base = _fixture("vllm", "bench_serve_detailed.json")
    mutations: dict[str, Any] = {
        **{f"completed-{k}": ("completed", v) for k, v in BAD_NUMBERS.items()},
        **{f"duration-{k}": ("duration", v) for k, v in BAD_NUMBERS.items()},
        "mean-ttft-negative": ("mean_ttft_ms", -5.0), "mean-ttft-nan": ("mean_ttft_ms", NAN),
        "mean-ttft-string": ("mean_ttft_ms", "fast"), "p99-ttft-inf": ("p99_ttft_ms", INF),
        "total-input-1e30": ("total_input_tokens", BIG_INT),
        "failed-negative": ("failed", -3), "num-prompts-1e30": ("num_prompts", BIG_INT),
        "date-9999": ("date", "99991231-235959"), "date-year-1": ("date", "00010101-000001"),
        "date-number": ("date", 20261130), "max-concurrency-1e300": ("max_concurrency", HUGE),
        "max-concurrency-string": ("max_concurrency", "four"),
        "max-concurrency-negative": ("max_concurrency", -4),
        "ttfts-string": ("ttfts", ["x"] * 24), "ttfts-negative": ("ttfts", [-1.0] * 24),
        "ttfts-nan": ("ttfts", [NAN] * 24), "itls-inf": ("itls", [[INF]] * 24),
        "itls-string": ("itls", [["x"]] * 24), "itls-object": ("itls", {"a": 1}),
        "output-lens-1e30": ("output_lens", [BIG_INT] * 24),
    }
    for name, (key, value) in mutations.items():
        c.import_case(f"vllm-{name}", {"r.json": _dumps(_set(base, key, value))}, "r.json")
    long_rate = _set(_set(base, "max_concurrency", None), "request_rate", "r" * 100_000)
    c.import_case("vllm-workload-name-100k", {"r.json": _dumps(long_rate)}, "r.json")
    c.import_case("vllm-list", {"r.json": "[1, 2]"}, "r.json")
    c.import_case("vllm-truncated", {"r.json": _dumps(base)[:300]}, "r.json")
    c.import_case("vllm-deep", {"r.json": "[" * 100_000 + "]" * 100_000}, "r.json")


def _aiperf(c: Corpus) -> None:
    base = _fixture("aiperf", "profile_export_aiperf.json")
    records = FIXTURES.joinpath("aiperf", "profile_export.jsonl").read_text(encoding="utf-8")
    first = json.loads(records.splitlines()[0])
    mutations: dict[str, Any] = {
        "ttft-avg-string": ("time_to_first_token.avg", "fast"),
        "ttft-avg-negative": ("time_to_first_token.avg", -46.0),
        "ttft-p99-nan": ("time_to_first_token.p99", NAN),
        "ttft-count-1e30": ("time_to_first_token.count", BIG_INT),
        "request-count-negative": ("completed_request_count.avg", -24.0),
        "completed-1e30": ("completed_request_count", {"avg": BIG_INT}),
        "duration-inf": ("benchmark_duration.avg", INF),
        "start-after-end": ("start_time", "2027-01-01T00:00:00"),
        "start-garbage": ("start_time", "yesterday"), "end-9999": ("end_time", "9999-12-31T23:59:59"),
        "start-number": ("start_time", 12), "concurrency-string": (
            "input_config.phases[0].concurrency", "four"),
        "concurrency-1e300": ("input_config.phases[0].concurrency", HUGE),
        "input-config-list": ("input_config", [1, 2]),
        "endpoint-string": ("input_config.endpoint", "http://x"),
        "phases-string": ("input_config.phases", "profiling"),
        "total-isl-1e30": ("total_isl.avg", BIG_INT),
    }
    for name, (key, value) in mutations.items():
        c.import_case(f"aiperf-{name}", {"profile_export_aiperf.json": _dumps(_set(base, key, value))},
                      "profile_export_aiperf.json")
    good = _dumps(base)
    record_mutations = {
        "record-ttft-string": ("metrics.time_to_first_token.value", "fast"),
        "record-ttft-negative": ("metrics.time_to_first_token.value", -5.0),
        "record-start-string": ("metadata.request_start_ns", "soon"),
        "record-itl-inf": ("metrics.inter_chunk_latency.value", [INF]),
        "record-itl-string": ("metrics.inter_chunk_latency.value", "fast"),
        "record-osl-1e30": ("metrics.output_sequence_length.value", BIG_INT),
        "record-start-1e30": ("metadata.request_start_ns", BIG_INT),
    }
    for name, (key, value) in record_mutations.items():
        lines = json.dumps(first) + "\n" + _dumps(_set(first, key, value)) + "\n"
        c.import_case(f"aiperf-{name}", {"profile_export_aiperf.json": good,
                                         "profile_export.jsonl": lines},
                      "profile_export_aiperf.json")


def _guidellm(c: Corpus) -> None:
    base = _fixture("guidellm", "benchmarks.json")
    bench = "benchmarks[0]"
    ok = f"{bench}.requests.successful[0]"
    mutations: dict[str, Any] = {
        "benchmarks-object": ("benchmarks", {"a": 1}),
        "benchmark-string": ("benchmarks[0]", "x"),
        "window-start-nan": (f"{bench}.scheduler_metrics.measure_start_time", NAN),
        "window-start-1e300": (f"{bench}.scheduler_metrics.measure_start_time", -HUGE),
        "window-end-1e300": (f"{bench}.scheduler_metrics.measure_end_time", HUGE),
        "window-year-9999": (f"{bench}.scheduler_metrics.measure_end_time", 253402300000.0),
        "successful-negative": (f"{bench}.metrics.request_totals.successful", -5),
        "successful-1e30": (f"{bench}.metrics.request_totals.successful", BIG_INT),
        "errored-string": (f"{bench}.metrics.request_totals.errored", "none"),
        "ttft-negative": (f"{ok}.time_to_first_token_ms", -13.7),
        "ttft-nan": (f"{ok}.time_to_first_token_ms", NAN),
        "ttft-string": (f"{ok}.time_to_first_token_ms", "fast"),
        "latency-inf": (f"{ok}.request_latency", INF),
        "output-tokens-1e30": (f"{ok}.output_tokens", BIG_INT),
        "start-string": (f"{ok}.request_start_time", "soon"),
        "token-total-1e30": (f"{bench}.metrics.prompt_token_count.successful.total_sum",
                             1e30),
        "rate-mean-nan": (f"{bench}.metrics.requests_per_second.successful.mean", NAN),
        "streams-1e300": (f"{bench}.config.strategy.streams", HUGE),
        "strategy-name-100k": (f"{bench}.config.strategy.type_", "t" * 100_000),
        "requests-list": (f"{bench}.requests", [1, 2]),
    }
    for name, (key, value) in mutations.items():
        c.import_case(f"guidellm-{name}", {"b.json": _dumps(_set(base, key, value))}, "b.json")


def _inference_perf(c: Corpus) -> None:
    folder = FIXTURES / "inference_perf"
    names = [p.name for p in folder.iterdir() if p.suffix in (".json", ".yaml")]
    good = {n: folder.joinpath(n).read_text(encoding="utf-8") for n in names}
    stage = json.loads(good["stage_0_lifecycle_metrics.json"])
    per_request = json.loads(good["per_request_lifecycle_metrics.json"])

    def case(name: str, changes: dict[str, str], target: str = "stage_0_lifecycle_metrics.json",
             *, child: bool = False) -> None:
        c.import_case(f"inference-perf-{name}", {**good, **changes}, target, child=child)

    mutations = {
        "duration-string": ("benchmark_time_seconds", "long"),
        "duration-nan": ("benchmark_time_seconds", NAN),
        "duration-1e300": ("benchmark_time_seconds", HUGE),
        "count-negative": ("successes.count", -24), "count-1e30": ("successes.count", BIG_INT),
        "failures-negative": ("failures.count", -1),
        "concurrency-1e300": ("load_summary.concurrency", HUGE),
        "throughput-inf": ("successes.throughput.requests_per_sec", INF),
        "kept-nan": ("successes.latency.time_to_first_token.mean", NAN),
        "prompt-total-1e30": ("successes.prompt_tokens.total", 1e30),
    }
    for name, (key, value) in mutations.items():
        case(name, {"stage_0_lifecycle_metrics.json": _dumps(_set(stage, key, value))})
    row_mutations = {
        "row-start-string": ("[0].start_time", "soon"),
        "row-start-1e306": ("[0].start_time", 1e306),
        "row-chunk-inf": ("[0].info.response_metrics.chunk_times", [INF]),
        "row-tokens-1e30": ("[0].info.response_metrics.server_usage.completion_tokens",
                            BIG_INT),
    }
    for name, (key, value) in row_mutations.items():
        changed = _set({"rows": per_request}, "rows" + key, value)["rows"]
        case(name, {"per_request_lifecycle_metrics.json": _dumps(changed)})
    case("rows-object", {"per_request_lifecycle_metrics.json": '{"a": 1}'})
    case("stage-999999999", {"stage_999999999_lifecycle_metrics.json": good[
        "stage_1_lifecycle_metrics.json"]}, "stage_999999999_lifecycle_metrics.json", child=True)
    partial = "inference-perf.partial.stage_0.yaml"
    case("partial-alias-bomb", {partial: BOMB}, child=True)
    case("partial-deep", {partial: DEEP_YAML}, child=True)
    case("partial-deep-block", {partial: DEEP_BLOCK_YAML}, child=True)
    case("partial-year-9999", {partial: good[partial].replace("2026-12-01T15:50:09",
                                                              "9999-12-31T23:59:59")})
    case("partial-end-before-start", {partial: good[partial].replace(
        "2026-12-01T15:50:09", "2020-12-01T15:50:09")})


def _llmd(c: Corpus) -> None:
    base = _fixture("llmd", "report.json")
    agg = "results.request_performance.aggregate"
    mutations: dict[str, Any] = {
        "start-garbage": ("run.time.start", "yesterday"),
        "start-number": ("run.time.start", 5),
        "start-year-9999": ("run.time.start", "9999-12-31T23:00:00+00:00"),
        "duration-huge": ("run.time", {"start": "2026-11-30T22:10:00+00:00",
                                       "duration": "P99999999999D"}),
        "end-year-9999": ("run.time.end", "9999-12-31T23:59:59"),
        "total-1e30": (f"{agg}.requests.total", BIG_INT),
        "total-negative": (f"{agg}.requests.total", -32),
        "total-string": (f"{agg}.requests.total", "many"),
        "failures-nan": (f"{agg}.requests.failures", NAN),
        "units-unknown": (f"{agg}.latency.time_to_first_token.units", "parsecs"),
        "ttft-mean-nan": (f"{agg}.latency.time_to_first_token.mean", NAN),
        "ttft-mean-string": (f"{agg}.latency.time_to_first_token.mean", "fast"),
        "ttft-p99-negative": (f"{agg}.latency.time_to_first_token.p99", -1.0),
        "input-mean-1e300": (f"{agg}.requests.input_length.mean", HUGE),
        "concurrency-1e300": ("scenario.load.standardized.concurrency", HUGE),
        "rate-inf": (f"{agg}.throughput", {"requests_rate": {"units": "qps", "mean": INF}}),
        "run-list": ("run", [1]),
        "latency-list": (f"{agg}.latency", [1]),
    }
    for name, (key, value) in mutations.items():
        c.import_case(f"llmd-{name}", {"r.json": _dumps(_set(base, key, value))}, "r.json")
    yaml_body = 'version: "0.2"\nrun: {time: {start: 2026-11-30T22:10:00Z}}\n'
    c.import_case("llmd-yaml-alias-bomb", {"r.yaml": yaml_body + BOMB}, "r.yaml", ("--format",
                                                                                   "llmd"),
                  child=True)
    c.import_case("llmd-yaml-deep", {"r.yaml": yaml_body + DEEP_YAML}, "r.yaml",
                  ("--format", "llmd"), child=True)
    c.import_case("llmd-yaml-invalid", {"r.yaml": "version: '0.2'\nrun: [1\n"}, "r.yaml",
                  ("--format", "llmd"))


def _import_files(c: Corpus) -> None:
    c.import_case("import-empty", {"r.json": ""}, "r.json")
    c.import_case("import-binary", {"r.json": b"\x89PNG\r\n\x1a\n\x00\xff"}, "r.json")
    c.import_case("import-unknown-keys", {"r.json": '{"hello": 1}'}, "r.json")
    c.add("import-missing", ["import", str(c.root / "nope.json"), "--config", "c",
                             "--db", "{db}"])
    c.add("import-directory", ["import", str(c.root), "--config", "c", "--db", "{db}"])
    c.add("import-dev-zero", ["import", "/dev/zero", "--config", "c", "--db", "{db}"],
          child=True)
    fifo = c.folder("import-fifo") / "r.json"
    os.mkfifo(fifo)
    c.add("import-fifo", ["import", str(fifo), "--config", "c", "--db", "{db}"], child=True)
    sparse = c.folder("import-sparse-1gib") / "r.json"
    with sparse.open("wb") as handle:
        handle.truncate(1 << 30)
    c.add("import-sparse-1gib", ["import", str(sparse), "--config", "c", "--db", "{db}"],
          child=True)
    vllm = str(FIXTURES / "vllm" / "bench_serve_detailed.json")
    c.add("import-config-empty", ["import", vllm, "--config", "", "--db", "{db}"])
    c.add("import-config-blank", ["import", vllm, "--config", "   ", "--db", "{db}"])
    c.add("import-config-100k", ["import", vllm, "--config", "c" * 100_000, "--db", "{db}"])
    c.add("import-config-newline", ["import", vllm, "--config", "a\nb", "--db", "{db}"])
    c.add("import-suite-100k", ["import", vllm, "--config", "c", "--suite", "s" * 100_000,
                                "--db", "{db}"])
    c.add("import-format-bogus", ["import", vllm, "--config", "c", "--format", "bogus",
                                  "--db", "{db}"])
    c.add("import-wrong-format", ["import", vllm, "--config", "c", "--format", "guidellm",
                                  "--db", "{db}"])


# --- flags ----------------------------------------------------------------------------------


BENCH = ["bench", "--base-url", "http://127.0.0.1:9", "--quiet"]
FLAGS: dict[str, list[str]] = {
    "runs-limit-negative": ["runs", "--limit", "-5", "--db", "{db}"],
    "runs-limit-zero": ["runs", "--limit", "0", "--db", "{db}"],
    "runs-limit-string": ["runs", "--limit", "ten", "--db", "{db}"],
    "queue-limit-negative": ["queue", "--limit", "-1", "--db", "{db}"],
    "worker-poll-nan": ["worker", "--poll-s", "nan", "--exit-when-empty", "--db", "{db}"],
    "worker-poll-negative": ["worker", "--poll-s", "-1", "--exit-when-empty", "--db", "{db}"],
    "worker-poll-inf": ["worker", "--poll-s", "inf", "--exit-when-empty", "--db", "{db}"],
    "worker-heartbeat-nan": ["worker", "--heartbeat-s", "nan", "--exit-when-empty",
                             "--db", "{db}"],
    "worker-stale-before-heartbeat": ["worker", "--heartbeat-s", "10", "--stale-after-s", "5",
                                      "--exit-when-empty", "--db", "{db}"],
    "scheduler-misfire-nan": ["scheduler", "--misfire-grace-s", "nan", "--db", "{db}"],
    "scheduler-sync-zero": ["scheduler", "--sync-interval-s", "0", "--db", "{db}"],
    "scheduler-poll-zero": ["scheduler", "--poll-s", "0", "--db", "{db}"],
    "schedule-add-repeats-zero": ["schedule", "add", "n", "--cron", "0 2 * * *", "--config",
                                  "c.yaml", "--suite", "s.yaml", "--repeats", "0", "--db", "{db}"],
    "schedule-add-missing": ["schedule", "add", "n", "--db", "{db}"],
    "schedule-add-both": ["schedule", "add", "n", "--file", "s.yaml", "--db", "{db}"],
    "schedule-add-budget-without-bisect": ["schedule", "add", "n", "--cron", "0 2 * * *",
                                           "--config", "c.yaml", "--suite", "s.yaml",
                                           "--bisect-max-probes", "3", "--db", "{db}"],
    "schedule-add-probes-zero": ["schedule", "add", "n", "--cron", "0 2 * * *", "--config",
                                 "c.yaml", "--suite", "s.yaml", "--bisect",
                                 "--bisect-max-probes", "0", "--db", "{db}"],
    "sim-port-70000": ["sim", "serve", "--config", "{config}", "--port", "70000"],
    "sim-port-negative": ["sim", "serve", "--config", "{config}", "--port", "-1"],
    "dashboard-port-99999": ["dashboard", "--port", "99999", "--db", "{db}"],
    "bench-input-len-huge": [*BENCH, "--random-input-len", "999999999"],
    "bench-input-len-zero": [*BENCH, "--random-input-len", "0"],
    "bench-output-len-negative": [*BENCH, "--random-output-len", "-1"],
    "bench-num-prompts-negative": [*BENCH, "--num-prompts", "-1"],
    "bench-max-concurrency-zero": [*BENCH, "--max-concurrency", "0"],
    "bench-request-rate-nan": [*BENCH, "--request-rate", "nan"],
    "bench-request-rate-tiny": [*BENCH, "--request-rate", "0.0000001"],
    "bench-burstiness-zero": [*BENCH, "--burstiness", "0"],
    "bench-timeout-nan": [*BENCH, "--timeout", "nan"],
    "bench-duration-negative": [*BENCH, "--duration", "-5", "--max-concurrency", "2"],
    "bench-workers-zero": [*BENCH, "--workers", "0"],
    "bench-warmup-negative": [*BENCH, "--warmup", "-1"],
    "gate-confidence-high": ["gate", "--base-run", "1", "--head-run", "2", "--confidence",
                             "1.5", "--db", "{db}"],
    "gate-confidence-nan": ["gate", "--base-run", "1", "--head-run", "2", "--confidence",
                            "nan", "--db", "{db}"],
    "gate-max-rounds-zero": ["gate", "--base", "a.yaml", "--head", "b.yaml", "--suite", "s.yaml",
                             "--max-rounds", "0", "--db", "{db}"],
    "gate-repeats-negative": ["gate", "--base", "a.yaml", "--head", "b.yaml", "--suite",
                              "s.yaml", "--repeats", "-1", "--db", "{db}"],
    "gate-max-probes-zero": ["gate", "--base-run", "1", "--head-run", "2", "--bisect",
                             "--max-probes", "0", "--db", "{db}"],
    "gate-nothing": ["gate", "--db", "{db}"],
    "gate-runs-and-configs": ["gate", "--base-run", "1", "--head-run", "2", "--base", "a.yaml",
                              "--db", "{db}"],
    "gate-min-effect-garbage": ["gate", "--base-run", "1", "--head-run", "2", "--min-effect",
                                "garbage", "--db", "{db}"],
    "bisect-max-probes-zero": ["bisect", "--base", "a.yaml", "--head", "b.yaml", "--suite",
                               "s.yaml", "--max-probes", "0", "--db", "{db}"],
    "bisect-max-minutes-nan": ["bisect", "--base", "a.yaml", "--head", "b.yaml", "--suite",
                               "s.yaml", "--max-minutes", "nan", "--db", "{db}"],
    "bisect-confidence-zero": ["bisect", "--base", "a.yaml", "--head", "b.yaml", "--suite",
                               "s.yaml", "--confidence", "0", "--db", "{db}"],
    "show-not-a-number": ["show", "abc", "--db", "{db}"],
    "show-negative": ["show", "-1", "--db", "{db}"],
    "export-format-bogus": ["export", "1", "--format", "bogus", "--db", "{db}"],
    "unknown-command": ["frobnicate"],
    "unknown-flag": ["runs", "--bogus", "--db", "{db}"],
    "no-command": [],
}


SERVES = ("scheduler", "sim", "dashboard")  # accepted by mistake, these would serve forever


def _flags(c: Corpus) -> None:
    for name, argv in FLAGS.items():
        c.add(f"flag-{name}", [str(c.config) if part == "{config}" else part for part in argv],
              child=bool(argv) and argv[0] in SERVES)


BUILDERS: tuple[Callable[[Corpus], None], ...] = (
    _configs, _suites, _datasets, _traces, _vllm, _aiperf, _guidellm, _inference_perf, _llmd,
    _import_files, _flags)


def build_corpus(root: Path) -> list[Case]:
    """Every case, its files written under ``root`` (which must be empty)."""
    corpus = Corpus(root)
    for build in BUILDERS:
        build(corpus)
    names = [case.name for case in corpus.cases]
    assert len(names) == len(set(names)), "two cases share a name"
    return corpus.cases


def iter_names() -> Iterator[str]:
    """The case names without writing the files (for pytest's ids)."""
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="tracker-corpus-"))
    try:
        yield from (case.name for case in build_corpus(root))
    finally:
        shutil.rmtree(root, ignore_errors=True)
