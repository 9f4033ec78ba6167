"""LoRA adapters: the ones a config serves (``engine.lora_modules``, name -> path) and the way a
suite's workload shares its requests among them (``adapters``). Pure.

A request asks for an adapter the way vLLM expects: its ``model`` field is the adapter's name
(the name in ``--lora-modules name=path``). A workload without ``adapters`` asks for the base
model. Two ways to share the requests out, each reproducible byte for byte:

- ``shares: {sql: 3, chat: 1}``: fixed shares, dealt in proportion and interleaved (smooth
  weighted round-robin over the names in sorted order, so the YAML's key order changes nothing).
- ``names: [a, b, c, d]`` with ``distribution: uniform`` or ``zipf`` (``zipf_s``, the first name
  the most popular): seeded draws (``seed``), as traffic over many adapters arrives.

The warm-up requests come first in the plan and ask for adapters too (they warm what they
touch). ``compute_adapter_plan`` gives each request's adapter. The run splits a workload's
records by it (``tracker.load.adapter_results``).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Mapping
from itertools import accumulate
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, model_validator

from tracker.errors import ConfigError
from tracker.inputs.prompts import SplitMix64, derive_seed

ADAPTER_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
ADAPTER_NAME_MAX_CHARS = 40  # in the results' names: "<workload>/adapter-<name>"
ADAPTER_RESULT_INFIX = "/adapter-"
_NAME = re.compile(ADAPTER_NAME_PATTERN)
_UNIT = 2.0**-53


def check_adapter_name(name: str) -> str | None:
    """Why ``name`` cannot name an adapter (None: it can)."""
    if not _NAME.fullmatch(name):
        return (f"adapter name {name!r} must be letters, digits, '.', '_' or '-', starting with "
                "a letter or digit (it is the request's model and part of the results' names)")
    if len(name) > ADAPTER_NAME_MAX_CHARS:
        return f"adapter name {name[:20]!r}... is longer than {ADAPTER_NAME_MAX_CHARS} characters"
    return None


def check_lora_modules(modules: dict[str, str]) -> dict[str, str]:
    """``engine.lora_modules``: adapter name -> path (or id) of its weights, at least one."""
    if not modules:
        raise ValueError("lists no adapter; give name: path pairs, e.g. {sql: /adapters/sql}, "
                         "or remove it")
    for name, path in modules.items():
        problem = check_adapter_name(name)
        if problem is not None:
            raise ValueError(problem)
        if not path.strip() or path.startswith("-"):
            raise ValueError(f"{name}: the adapter's path must be a directory or id (not empty, "
                             f"not starting with '-'; got {path!r})")
    return modules


class AdapterMix(BaseModel):
    """A workload's ``adapters``: exactly one of ``shares`` or ``names``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    shares: dict[str, PositiveFloat] | None = Field(default=None, min_length=1)
    names: list[str] | None = Field(default=None, min_length=1)
    distribution: Literal["uniform", "zipf"] | None = None  # with names; None: uniform
    zipf_s: PositiveFloat | None = None  # with distribution: zipf; None: 1.0
    seed: int | None = None  # with names; None: 0

    @model_validator(mode="after")
    def _one_way(self) -> AdapterMix:
        if (self.shares is None) == (self.names is None):
            raise ValueError("give exactly one of shares (fixed shares, e.g. {sql: 3, chat: 1}) "
                             "or names (drawn from distribution: uniform or zipf)")
        drawn = [k for k in ("distribution", "zipf_s", "seed") if getattr(self, k) is not None]
        if self.shares is not None and drawn:
            raise ValueError(f"{drawn[0]} applies to names (drawn adapters); fixed shares are "
                             "dealt, not drawn: remove it")
        if self.zipf_s is not None and self.distribution != "zipf":
            raise ValueError("zipf_s applies to distribution: zipf only")
        for name in self.adapter_names:
            problem = check_adapter_name(name)
            if problem is not None:
                raise ValueError(problem)
        if self.names is not None and len(set(self.names)) != len(self.names):
            raise ValueError("names lists an adapter twice; list each once")
        return self

    @property
    def adapter_names(self) -> tuple[str, ...]:
        """Every adapter the mix may ask for, sorted."""
        return tuple(sorted(self.shares or ())) if self.names is None else tuple(sorted(self.names))


def compute_adapter_plan(mix: AdapterMix, total: int) -> tuple[str, ...]:
    """The adapter of each of ``total`` requests in plan order (warm-up first)."""
    if mix.shares is not None:
        return _deal(mix.shares, total)
    assert mix.names is not None
    s = mix.zipf_s or 1.0
    weights = [1.0 / (rank ** s) if mix.distribution == "zipf" else 1.0
               for rank in range(1, len(mix.names) + 1)]
    bounds = list(accumulate(weights))
    rng = SplitMix64(derive_seed(mix.seed or 0, "adapters", *mix.names))
    plan = []
    for _ in range(total):
        point = (rng.next_u64() >> 11) * _UNIT * bounds[-1]
        plan.append(mix.names[min(bisect.bisect_right(bounds, point), len(bounds) - 1)])
    return tuple(plan)


def _deal(shares: dict[str, float], total: int) -> tuple[str, ...]:
    """Smooth weighted round-robin: each turn every name gains its share, and the one with the
    most goes next and gives back the sum. Over a cycle each name gets its share, spread out."""
    names = sorted(shares)
    weight_sum = sum(shares.values())
    current = dict.fromkeys(names, 0.0)
    plan = []
    for _ in range(total):
        for name in names:
            current[name] += shares[name]
        chosen = max(names, key=lambda n: (current[n], -names.index(n)))
        current[chosen] -= weight_sum
        plan.append(chosen)
    return tuple(plan)


def compute_adapter_result_name(phase: str, adapter: str) -> str:
    """``<phase>/adapter-<name>``: the result of a phase's requests for one adapter."""
    return f"{phase}{ADAPTER_RESULT_INFIX}{adapter}"


STORED_NAME_MAX_CHARS = 200  # the store's workload-name column
PHASE_SUFFIX_ROOM = 30  # what a stage or a sweep probe appends ("@12.5rps-b0.5-max64")


def check_adapter_workload(workload_name: str, source: str, mix: AdapterMix) -> str | None:
    """Why a workload cannot share its requests out this way (None: it can): a conversation's
    turns all go to one model, and every result name must fit the store."""
    if source in ("conversations", "agentic"):
        return (f"adapters apply to single requests; a {source} workload's turns all go to one "
                "model: give the adapters to a workload of single requests")
    longest = max(len(name) for name in mix.adapter_names)
    room = STORED_NAME_MAX_CHARS - PHASE_SUFFIX_ROOM - len(ADAPTER_RESULT_INFIX) - longest
    if len(workload_name) > room:
        return (f"with adapter names of up to {longest} characters the per-adapter results' "
                f"names would not fit the store: shorten the workload name to {room} characters "
                "or the adapter names")
    return None


def check_adapters_served(workloads: Iterable[tuple[str, AdapterMix | None]],
                          lora_modules: Mapping[str, str] | None, config_path: str) -> None:
    """Refuse (``ConfigError``) a workload that asks for an adapter the config's
    ``engine.lora_modules`` does not serve, before anything runs. A config without
    ``lora_modules`` (an attached server that loads its adapters itself) is not checked."""
    if lora_modules is None:
        return
    for name, mix in workloads:
        missing = [a for a in (mix.adapter_names if mix is not None else ()) if a not in lora_modules]
        if missing:
            raise ConfigError(
                f"workload {name}: asks for LoRA adapter {missing[0]}, which {config_path} does "
                f"not serve (engine.lora_modules: {', '.join(sorted(lora_modules))}); add it "
                "there or remove it from the workload's adapters")
