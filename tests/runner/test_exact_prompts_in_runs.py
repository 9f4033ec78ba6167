"""A run's prompts are cut to exact lengths in the model's tokenizer once the target is up, and
the run records which tokenizer that was, or why words were used; against real HTTP servers on
ephemeral ports and a real tokenizer.json."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import yaml

from tests.scripted_server import Reply, scripted_servers, token_stream
from tests.simconfigs import FAST_SIM
from tests.targets.test_tokenizers import write_bpe_tokenizer
from tracker.inputs.configs import ServingConfig, build_loaded_config
from tracker.inputs.suites import LoadedSuite, Suite, build_loaded_suite
from tracker.results import QualityResult, RunStatus, WorkloadResult
from tracker.runner.progress import ProgressPrinter
from tracker.runner.suite_runner import SIM_TOKENIZER, SuiteRunner


class Sink:
    def __init__(self) -> None:
        self.environment: dict[str, object] = {}
        self.workloads: list[WorkloadResult] = []
        self.status: RunStatus | None = None

    def begin(self, *, started_at: Any, simulated: bool, environment: dict[str, object]) -> int:
        self.environment = dict(environment)
        return 1

    def save_workload(self, position: int, result: WorkloadResult) -> None:
        self.workloads.append(result)

    def save_quality(self, result: QualityResult) -> None:
        raise AssertionError("no quality set in these suites")

    def finish(self, status: RunStatus, reason: str | None, ended_at: Any) -> None:
        self.status = status


def small_suite(input_tokens: int = 40) -> LoadedSuite:
    suite = Suite.model_validate({"name": "s", "seed": 5, "workloads": [{
        "name": "w", "endpoint_type": "chat", "max_tokens": 4, "concurrency": 2,
        "num_requests": 6, "warmup_requests": 0,
        "prompts": {"source": "synthetic", "input_tokens": input_tokens}}]})
    return build_loaded_suite(suite, "-")


def openai_config(url: str, tokenizer: Path | None = None) -> Any:
    target: dict[str, Any] = {"kind": "openai", "base_url": url, "model": "m"}
    if tokenizer is not None:
        target["tokenizer"] = str(tokenizer)
    return build_loaded_config(ServingConfig.model_validate({"name": "remote", "target": target}),
                               "-")


def answer(index: int, body: dict[str, Any]) -> Reply:
    return token_stream(4, ttft_s=0.0, itl_s=0.0)


async def test_a_runs_prompts_are_exact_in_the_configs_tokenizer_json(tmp_path: Path) -> None:
    from tokenizers import Tokenizer

    bpe = write_bpe_tokenizer(tmp_path / "tokenizer.json")
    counted = Tokenizer.from_file(str(bpe))
    suite, sink = small_suite(40), Sink()
    async with scripted_servers() as make:
        server = await make(answer)
        outcome = await SuiteRunner(openai_config(server.url, bpe), suite, sink).run()
    assert outcome.status is RunStatus.COMPLETED and len(server.served) == 6
    users = [s.body["messages"][-1]["content"] for s in server.served]
    assert {len(counted.encode(u, add_special_tokens=False).ids) for u in users} == {40}
    word_prompts = [r.messages[-1].content for r in suite.traffic["w"].requests]
    assert sorted(users) != sorted(word_prompts)  # the word prompts are longer in this BPE
    assert str(sink.environment["tokenizer"]).startswith("tokenizer.json tokenizer.json sha256:")
    assert sink.environment["tokenizer_fallback"] is None
    assert sink.environment["sent_prompts_digest"] != suite.prompts_digest


async def test_a_target_without_a_tokenizer_runs_in_words_and_says_why() -> None:
    suite, sink, stream = small_suite(), Sink(), io.StringIO()
    async with scripted_servers() as make:
        server = await make(answer)  # serves no /tokenize: HTTP 404
        outcome = await SuiteRunner(openai_config(server.url), suite, sink,
                                    ProgressPrinter(stream)).run()
    assert outcome.status is RunStatus.COMPLETED
    sent = sorted(s.body["messages"][-1]["content"] for s in server.served)
    assert sent == sorted(r.messages[-1].content for r in suite.traffic["w"].requests)
    assert sink.environment["tokenizer"] == "words"
    fallback = str(sink.environment["tokenizer_fallback"])
    assert "404" in fallback and "\n" not in fallback
    assert sink.environment["sent_prompts_digest"] == suite.prompts_digest
    assert "prompt lengths are in words, not the model's tokenizer" in stream.getvalue()


async def test_the_embedded_simulator_counts_in_words_and_is_not_asked() -> None:
    suite, sink, stream = small_suite(), Sink(), io.StringIO()
    config = build_loaded_config(ServingConfig.model_validate(yaml.safe_load(FAST_SIM)), "-")
    outcome = await SuiteRunner(config, suite, sink, ProgressPrinter(stream)).run()
    assert outcome.status is RunStatus.COMPLETED
    assert sink.environment["tokenizer"] == SIM_TOKENIZER
    assert "prompt lengths" not in stream.getvalue()
