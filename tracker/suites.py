"""Baseline suites: named, fixed workloads whose prompts are generated from a seed.

A suite's version is the sha256 of its canonical form and of the digest of every prompt it
generates, so two runs with the same suite version sent byte-identical requests.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    model_validator,
)

from tracker.config import NAME_PATTERN
from tracker.prompts import derive_seed, generate_words
from tracker.yamlfile import read_yaml_mapping, validate_model


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SyntheticPrompts(_Strict):
    """Seeded prompts of ``input_tokens`` words each, unique per request."""

    source: Literal["synthetic"]
    input_tokens: PositiveInt
    system_prompt_tokens: NonNegativeInt = 0  # a fixed system prompt shared by every request


class FixedPrompt(_Strict):
    """One prompt sent by every request (the hand-written load script's shape)."""

    source: Literal["fixed"]
    text: str = Field(min_length=1)
    system_prompt: str | None = None


PromptSource = Annotated[SyntheticPrompts | FixedPrompt, Field(discriminator="source")]


class Workload(_Strict):
    name: str = Field(pattern=NAME_PATTERN)
    prompts: PromptSource
    endpoint_type: Literal["chat", "completions"] = "chat"
    max_tokens: PositiveInt
    ignore_eos: bool = False  # sent only to targets that support it (vLLM, the simulator)
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    concurrency: PositiveInt
    num_requests: PositiveInt
    warmup_requests: NonNegativeInt = 0  # run first at the same concurrency; not measured
    request_timeout_s: PositiveFloat = 600.0


class Suite(_Strict):
    name: str = Field(pattern=NAME_PATTERN)
    description: str = ""
    seed: int = 0
    workloads: list[Workload] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_names(self) -> Suite:
        seen: set[str] = set()
        for workload in self.workloads:
            if workload.name in seen:
                raise ValueError(f"workload name {workload.name!r} is used twice; names must differ")
            seen.add(workload.name)
        return self


@dataclass(frozen=True, slots=True)
class WorkloadPrompts:
    system: str | None
    users: tuple[str, ...]  # warm-up prompts first, then one per measured request


@dataclass(frozen=True, slots=True)
class LoadedSuite:
    suite: Suite
    version: str  # sha256 of the canonical form and the prompts digest
    canonical: Mapping[str, Any]
    prompts_digest: str
    prompts: Mapping[str, WorkloadPrompts]
    path: str

    @property
    def short_version(self) -> str:
        return self.version[:12]


def generate_workload_prompts(seed: int, workload: Workload) -> WorkloadPrompts:
    total = workload.warmup_requests + workload.num_requests
    source = workload.prompts
    if isinstance(source, FixedPrompt):
        return WorkloadPrompts(source.system_prompt, (source.text,) * total)
    system = None
    if source.system_prompt_tokens:
        system = generate_words(derive_seed(seed, "system", source.system_prompt_tokens),
                                source.system_prompt_tokens)
    users = tuple(
        generate_words(derive_seed(seed, workload.name, "user", i), source.input_tokens)
        for i in range(total)
    )
    return WorkloadPrompts(system, users)


def compute_prompts_digest(prompts: Mapping[str, WorkloadPrompts]) -> str:
    digest = hashlib.sha256()
    for name, item in prompts.items():
        digest.update(name.encode("utf-8") + b"\x00")
        digest.update((item.system or "").encode("utf-8") + b"\x00")
        for user in item.users:
            digest.update(user.encode("utf-8") + b"\x00")
    return digest.hexdigest()


def build_loaded_suite(suite: Suite, path: str) -> LoadedSuite:
    canonical = suite.model_dump(mode="json", exclude_defaults=True, exclude={"description"})
    canonical["name"] = suite.name
    prompts = {w.name: generate_workload_prompts(suite.seed, w) for w in suite.workloads}
    prompts_digest = compute_prompts_digest(prompts)
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    version = hashlib.sha256(f"{text}\n{prompts_digest}".encode()).hexdigest()
    return LoadedSuite(suite, version, canonical, prompts_digest, prompts, path)


def load_suite(path: str | Path) -> LoadedSuite:
    file = Path(path)
    data, lines = read_yaml_mapping(file, "suite")
    suite = validate_model(Suite, data, file, lines)
    return build_loaded_suite(suite, str(file))
