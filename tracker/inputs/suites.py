"""Baseline suites: named, fixed workloads whose prompts are generated from a seed or sampled
(seeded) from a dataset, a trace or a file of conversations (tracker.inputs.prompt_sources).

A suite's version is the sha256 of its canonical form and of the digest of every prompt it
generates, so two runs with the same suite version sent byte-identical requests. A data file's
sha256 is written into the canonical form (``prompts.sha256``), so a changed file is a new suite
version, and a queued run's stored suite pins the file it was queued with.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    field_validator,
    model_validator,
)

from tracker.errors import ConfigError
from tracker.inputs.adapters import AdapterMix, check_adapter_workload
from tracker.inputs.agentic import build_agentic_traffic, iter_agentic_fields
from tracker.inputs.configs import NAME_MAX_CHARS, NAME_PATTERN
from tracker.inputs.conversations import build_conversation_traffic
from tracker.inputs.datafiles import DataFile
from tracker.inputs.datasets import build_dataset_traffic
from tracker.inputs.prompt_sources import (
    MAX_CONCURRENCY,
    MAX_REQUESTS,
    AgenticPrompts,
    ConversationPrompts,
    DatasetPrompts,
    FileSource,
    FixedPrompt,
    OutputLengths,
    PromptSource,
    RequestTokens,
    SyntheticPrompts,
    TracePrompts,
)
from tracker.inputs.prompts import derive_seed, generate_words
from tracker.inputs.traces import build_trace_traffic
from tracker.inputs.traffic import MAX_PLANNED_S, Message, PlannedRequest, WorkloadTraffic
from tracker.inputs.yamlfile import read_yaml_mapping, validate_model
from tracker.quality.set_files import load_quality_set
from tracker.quality.sets import QualitySet

WORKLOAD_NAME_MAX_CHARS = 160  # of the store's 200: room for a run's suffixes
Concurrency = Annotated[int, Field(gt=0, le=MAX_CONCURRENCY)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


__all__ = ["AgenticPrompts", "ConversationPrompts", "DatasetPrompts", "FixedPrompt", "LoadedSuite",
           "OutputLengths", "PromptSource", "Suite", "SyntheticPrompts", "TracePrompts", "Workload",
           "build_loaded_suite", "generate_workload_traffic", "load_suite"]


class Slos(_Strict):
    """Service-level objectives in milliseconds (``vllm bench serve --goodput`` keys)."""

    ttft_ms: PositiveFloat | None = None
    tpot_ms: PositiveFloat | None = None
    e2el_ms: PositiveFloat | None = None

    @model_validator(mode="after")
    def _one_at_least(self) -> Slos:
        if self.ttft_ms is None and self.tpot_ms is None and self.e2el_ms is None:
            raise ValueError("give at least one of ttft_ms, tpot_ms, e2el_ms")
        return self


class Stage(_Strict):
    """One step of a staged workload: closed loop at ``concurrency`` or open loop at a rate."""

    concurrency: Concurrency | None = None
    request_rate: PositiveFloat | None = None  # requests per second, planned (open loop)
    burstiness: PositiveFloat = 1.0  # gamma shape of the gaps; 1 = Poisson
    max_concurrency: Concurrency | None = None  # open loop: the most requests in flight

    @model_validator(mode="after")
    def _one_shape(self) -> Stage:
        if (self.concurrency is None) == (self.request_rate is None):
            raise ValueError("give exactly one of concurrency (closed loop) or request_rate "
                             "(open loop)")
        if self.concurrency is not None and (self.max_concurrency is not None
                                             or self.burstiness != 1.0):
            raise ValueError("burstiness and max_concurrency apply to request_rate only")
        return self


class Sweep(_Strict):
    """Find the highest request rate that meets the workload's ``slos`` (capacity at SLO)."""

    start_rate: PositiveFloat = 1.0
    max_rate: PositiveFloat | None = None
    rates: list[PositiveFloat] | None = Field(default=None, min_length=1)  # fixed ladder
    refine_steps: NonNegativeInt = 3
    max_probes: PositiveInt = 12
    min_attainment: float = Field(default=0.95, gt=0.0, le=1.0)  # share meeting every SLO
    burstiness: PositiveFloat = 1.0
    max_concurrency: Concurrency | None = None


class Workload(_Strict):
    """One workload, whose load shape is exactly one of concurrency, request_rate, stages, sweep
    (a trace's is the trace itself, with an optional max_concurrency). For conversations the
    shape counts sessions: concurrency is the sessions in flight, request_rate the sessions
    started per second, and num_requests the sessions measured."""

    # room in the store's 200-character column for what a run appends ("/turns-2+", "@c64")
    name: str = Field(pattern=NAME_PATTERN, max_length=WORKLOAD_NAME_MAX_CHARS)
    prompts: PromptSource
    endpoint_type: Literal["chat", "completions", "messages"] = "chat"  # messages: Anthropic API
    max_tokens: RequestTokens
    ignore_eos: bool = False  # sent only to targets that support it (vLLM, the simulator)
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    concurrency: Concurrency | None = None  # closed loop
    request_rate: PositiveFloat | None = None  # open loop, requests per second
    burstiness: PositiveFloat = 1.0
    max_concurrency: Concurrency | None = None
    stages: list[Stage] | None = Field(default=None, min_length=1)  # run in order
    sweep: Sweep | None = None
    slos: Slos | None = None  # goodput for any shape; required by sweep
    num_requests: Annotated[int, Field(gt=0, le=MAX_REQUESTS)]  # per stage and sweep probe
    warmup_requests: Annotated[int, Field(ge=0, le=MAX_REQUESTS)] = 0  # first; not measured
    request_timeout_s: PositiveFloat = 600.0
    adapters: AdapterMix | None = None  # LoRA adapters the requests ask for (inputs.adapters)

    @model_validator(mode="after")
    def _adapters_fit(self) -> Workload:
        problem = None if self.adapters is None else check_adapter_workload(
            self.name, self.prompts.source, self.adapters)
        if problem is not None:
            raise ValueError(f"adapters: {problem}")
        return self

    @model_validator(mode="after")
    def _one_shape(self) -> Workload:
        shapes = [k for k in ("concurrency", "request_rate", "stages", "sweep")
                  if getattr(self, k) is not None]
        if isinstance(self.prompts, TracePrompts):
            return self._trace_shape(shapes)
        if len(shapes) != 1:
            raise ValueError("give exactly one load shape: concurrency, request_rate, stages "
                             f"or sweep (got {', '.join(shapes) or 'none'})")
        if self.request_rate is None and (self.burstiness != 1.0
                                          or self.max_concurrency is not None):
            raise ValueError("burstiness and max_concurrency apply to request_rate only "
                             "(stages and sweep have their own)")
        if self.sweep is not None and self.slos is None:
            raise ValueError("a sweep needs slos (e.g. slos: {ttft_ms: 500, tpot_ms: 50})")
        if self.stages is not None:
            labels = [stage.model_dump_json() for stage in self.stages]
            if len(set(labels)) != len(labels):
                raise ValueError("two stages have the same shape; each stage must differ")
        return self

    @model_validator(mode="after")
    def _rates_end_in_time(self) -> Workload:
        """A planned rate so low that the workload would run past ``MAX_PLANNED_S`` is a typo."""
        sweep = self.sweep
        rates = [("request_rate", self.request_rate)]
        rates += [(f"stages[{i}].request_rate", stage.request_rate)
                  for i, stage in enumerate(self.stages or ())]
        if sweep is not None:
            rates += [("sweep.start_rate", sweep.start_rate)]
            rates += [(f"sweep.rates[{i}]", rate) for i, rate in enumerate(sweep.rates or ())]
        total = self.num_requests + self.warmup_requests
        for where, rate in rates:
            if rate is not None and total / rate > MAX_PLANNED_S:
                raise ValueError(
                    f"{where}: {rate:g} requests per second plans {total} requests over "
                    f"{total / rate / 86_400:,.0f} days, past the limit of "
                    f"{MAX_PLANNED_S // 86_400} days for one workload; raise the rate (or "
                    "lower num_requests, or use concurrency)")
        return self

    def _trace_shape(self, shapes: list[str]) -> Workload:
        if shapes:
            raise ValueError(f"a trace sets its own arrival times: remove {', '.join(shapes)} "
                             "(max_concurrency may cap the requests in flight)")
        if self.burstiness != 1.0:
            raise ValueError("burstiness does not apply to a trace (its times are recorded)")
        return self


class QualityBlock(_Strict):
    """A fixed quality set asked at temperature 0 after the workloads (tracker.quality).

    ``when``: ``once_per_night`` (the default) asks it once per config version and suite a UTC
    day and lets later runs of that day reuse those answers (quality does not depend on load).
    ``every_run`` asks it in every run. ``sample`` is a seeded subset of that many items
    (``seed``) for a cheap nightly. ``tracker gate`` asks the whole set unless
    ``--quality-sample``."""

    path: str = Field(min_length=1)  # a JSONL file, relative to the suite file
    max_tokens: RequestTokens = 32
    concurrency: Concurrency = 8
    request_timeout_s: PositiveFloat = 60.0
    when: Literal["every_run", "once_per_night"] = "once_per_night"
    sample: PositiveInt | None = None
    seed: int = 0


class TelemetryBlock(_Strict):
    """How often GPU and server telemetry are sampled while each workload runs."""

    gpu_sample_hz: float = Field(default=10.0, gt=0, le=1000)
    server_scrape_interval_s: float = Field(default=0.5, ge=0.01, le=3600)


class Suite(_Strict):
    name: str = Field(pattern=NAME_PATTERN, max_length=NAME_MAX_CHARS)
    description: str = ""
    seed: int = 0
    workloads: list[Workload] = Field(min_length=1)
    quality: QualityBlock | None = None
    telemetry: TelemetryBlock | None = None
    workers: int | Literal["auto"] = 1  # load-generator processes (tracker.load.workers);
    # not part of the version (UNVERSIONED); the run's environment records it

    @field_validator("workers", mode="before")
    @classmethod
    def _workers(cls, value: object) -> object:
        if value == "auto" or (isinstance(value, int) and not isinstance(value, bool)
                               and value >= 1):
            return value
        raise ValueError("must be a whole number of load-generator processes, 1 or more, or "
                         "auto (more processes when one turns out client-bound)")

    @model_validator(mode="after")
    def _unique_names(self) -> Suite:
        seen: set[str] = set()
        for workload in self.workloads:
            if workload.name in seen:
                raise ValueError(f"workload name {workload.name!r} is used twice; names must differ")
            seen.add(workload.name)
        return self


@dataclass(frozen=True, slots=True)
class LoadedSuite:
    suite: Suite
    version: str  # sha256 of the canonical form and the prompts digest
    canonical: Mapping[str, Any]
    prompts_digest: str
    traffic: Mapping[str, WorkloadTraffic]  # per workload: what it sends, warm-up first
    path: str
    quality: QualitySet | None = None  # the loaded quality.path; its version is in ``version``
    data_files: Mapping[str, str] = field(default_factory=dict)  # workload -> its file's sha256

    @property
    def short_version(self) -> str:
        return self.version[:12]


def generate_workload_traffic(seed: int, workload: Workload, base: Path = Path(".")
                              ) -> WorkloadTraffic:
    """What a workload sends, warm-up first (seeded: byte-identical). A data file's path is
    relative to ``base`` (the suite file's folder)."""
    return _generate(seed, workload, base, "prompts.path")[0]


def _generate(seed: int, workload: Workload, base: Path, key: str
              ) -> tuple[WorkloadTraffic, str | None]:
    """(the traffic, the data file's sha256 or None)."""
    source = workload.prompts
    if isinstance(source, SyntheticPrompts | FixedPrompt):
        return _generate_words(seed, workload, source), None
    if isinstance(source, AgenticPrompts):
        return build_agentic_traffic(source, seed=seed, name=workload.name,
                                     total=workload.warmup_requests + workload.num_requests,
                                     max_tokens=workload.max_tokens), None
    what = {"dataset": "dataset", "trace": "trace", "conversations": "conversations"}
    file = DataFile(base / source.path, what[source.source], key)
    total = workload.warmup_requests + workload.num_requests
    common: dict[str, Any] = {"seed": seed, "name": workload.name, "total": total,
                              "max_tokens": workload.max_tokens}
    if isinstance(source, DatasetPrompts):
        traffic = build_dataset_traffic(file, source, **common)
    elif isinstance(source, ConversationPrompts):
        traffic = build_conversation_traffic(file, source, **common)
    else:
        traffic = build_trace_traffic(file, source, warmup=workload.warmup_requests, **common)
    _check_pin(file, source, key)
    return traffic, file.sha256


def _check_pin(file: DataFile, source: FileSource, key: str) -> None:
    if source.sha256 is not None and source.sha256 != file.sha256:
        raise ConfigError(f"{file.path}: its sha256 is {file.sha256}, not the {source.sha256} "
                          f"that {key.replace('.path', '.sha256')} pins: the file changed; "
                          "restore it, or remove or update the pin (a new suite version)")


def _generate_words(seed: int, workload: Workload, source: SyntheticPrompts | FixedPrompt
                    ) -> WorkloadTraffic:
    total = workload.warmup_requests + workload.num_requests
    if isinstance(source, FixedPrompt):
        return _flat(source.system_prompt, (source.text,) * total, None)
    system = None
    if source.system_prompt_tokens:
        system = generate_words(derive_seed(seed, "system", source.system_prompt_tokens),
                                source.system_prompt_tokens)
    users = tuple(
        generate_words(derive_seed(seed, workload.name, "user", i), source.input_tokens)
        for i in range(total)
    )
    return _flat(system, users, source.system_prompt_tokens + source.input_tokens)


def _flat(system: str | None, users: tuple[str, ...], requested: int | None) -> WorkloadTraffic:
    opening = (Message("system", system),) if system else ()
    return WorkloadTraffic(requests=tuple(
        PlannedRequest((*opening, Message("user", user)), requested_input_tokens=requested)
        for user in users))


def compute_prompts_digest(traffic: Mapping[str, WorkloadTraffic]) -> str:
    """sha256 over every byte a suite will send. A workload of single-turn requests that share
    one system prompt hashes as it always has (so upgrading the tracker keeps suite versions).
    Anything richer (per-request lengths, arrivals, sessions) hashes each request's fields and
    texts in turn (streamed: a trace's hundred megabytes are never one string)."""
    digest = hashlib.sha256()
    for name, item in traffic.items():
        digest.update(name.encode("utf-8") + b"\x00")
        simple = _simple_form(item)
        if simple is not None:
            system, users = simple
            digest.update((system or "").encode("utf-8") + b"\x00")
            for user in users:
                digest.update(user.encode("utf-8") + b"\x00")
        else:
            _update_rich(digest, item)
    return digest.hexdigest()


def _simple_form(traffic: WorkloadTraffic) -> tuple[str | None, list[str]] | None:
    """(shared system prompt, user prompts) when the traffic is that and nothing more."""
    if traffic.sessions:
        return None
    systems: set[str | None] = set()
    users: list[str] = []
    for request in traffic.requests:
        if request.max_tokens is not None or request.arrival_s is not None:
            return None
        *opening, last = request.messages
        if last.role != "user" or len(opening) > 1 or (opening and opening[0].role != "system"):
            return None
        systems.add(opening[0].content if opening else None)
        users.append(last.content)
    return (systems.pop(), users) if len(systems) == 1 else None


def _update_rich(digest: Any, traffic: WorkloadTraffic) -> None:
    """Each value as JSON on a line, each text as its byte length and bytes (unambiguous)."""
    def fields(*values: Any) -> None:
        digest.update(json.dumps(values, separators=(",", ":")).encode("utf-8") + b"\n")

    def text(value: str | None) -> None:
        data = b"" if value is None else value.encode("utf-8")
        digest.update(b"%d:" % len(data) if value is not None else b"-:")
        digest.update(data)

    fields("traffic", traffic.history, traffic.think_time_s, len(traffic.requests),
           len(traffic.sessions))
    for request in traffic.requests:
        fields(request.max_tokens, request.arrival_s, [m.role for m in request.messages])
        for message in request.messages:
            text(message.content)
    for session in traffic.sessions:
        fields(len(session.turns))
        text(session.system)
        if session.arrival_s is not None:  # a session trace's start
            fields("arrival", session.arrival_s)
        for turn in session.turns:
            fields(turn.max_tokens)
            text(turn.user)
            text(turn.recorded_answer)
            if session.agentic:  # tool calls, think times, branches (tracker.inputs.agentic)
                for item in iter_agentic_fields(turn):
                    if isinstance(item, tuple):
                        fields(*item)
                    else:
                        text(item)


UNVERSIONED = frozenset({"workers"})  # how the load is sent, not what: kept in the canonical
# form (a queued run sends it the same way) and out of the version (runs on 1 or 4 workers compare)


def build_loaded_suite(suite: Suite, path: str, quality: QualitySet | None = None) -> LoadedSuite:
    canonical = suite.model_dump(mode="json", exclude_defaults=True, exclude={"description"})
    canonical["name"] = suite.name
    traffic: dict[str, WorkloadTraffic] = {}
    files: dict[str, str] = {}
    for i, workload in enumerate(suite.workloads):
        traffic[workload.name], sha256 = _generate(
            suite.seed, workload, Path(path).parent, f"workloads[{i}].prompts.path in {path}")
        if sha256 is not None:  # the file's content is part of the version
            files[workload.name] = canonical["workloads"][i]["prompts"]["sha256"] = sha256
    prompts_digest = compute_prompts_digest(traffic)
    versioned = {key: value for key, value in canonical.items() if key not in UNVERSIONED}
    if "quality" in versioned:  # how often it is asked is not what is asked
        versioned["quality"] = {k: v for k, v in versioned["quality"].items() if k != "when"}
    text = json.dumps(versioned, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    if quality is not None:  # a changed quality set is a changed suite
        text = f"{text}\nquality:{quality.version}"
    version = hashlib.sha256(f"{text}\n{prompts_digest}".encode()).hexdigest()
    return LoadedSuite(suite, version, canonical, prompts_digest, traffic, path, quality, files)


def load_suite(path: str | Path) -> LoadedSuite:
    file = Path(path)
    data, lines = read_yaml_mapping(file, "suite")
    suite = validate_model(Suite, data, file, lines)
    quality = load_quality_set(file.parent / suite.quality.path) if suite.quality else None
    return build_loaded_suite(suite, str(file), quality)
