"""LoRA adapters in the simulator: GPU slots, loading, least-recently-used eviction.

vLLM serves a batch with at most ``max_loras`` distinct adapters (its default: 1). A waiting
request whose adapter would be one too many is skipped this step and waits (the scheduler
admits the requests behind it that fit). Each adapter in a batch must be in one of the
``max_loras`` GPU slots: one that is not is loaded into a slot before the step runs
(``lora_load_s`` each, added to that step), evicting the least recently used adapter that no
running request uses. So with ``max_loras`` at least the adapters in use, each is loaded once
and stays. Below it, requests of the other adapters wait for a slot, batches are narrower, and
adapters are loaded again and again. A batch also costs ``lora_s_per_adapter`` per distinct
adapter in it (the LoRA kernels' work per adapter).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from tracker.inputs.configs import EngineArgs, SimulatorSettings

DEFAULT_MAX_LORAS = 1  # vLLM's


class LoraSlots:
    def __init__(self, max_loras: int, settings: SimulatorSettings) -> None:
        self.max_loras = max_loras
        self._load_s = settings.lora_load_s
        self._per_adapter_s = settings.lora_s_per_adapter
        self._resident: OrderedDict[str, None] = OrderedDict()  # least recently used first
        self._pending_loads = 0
        self.loads = 0  # since start

    @classmethod
    def from_engine(cls, engine: EngineArgs, settings: SimulatorSettings) -> LoraSlots | None:
        """The slots of a config that serves adapters, or None without ``enable_lora``."""
        if not engine.enable_lora:
            return None
        return cls(engine.max_loras or DEFAULT_MAX_LORAS, settings)

    def can_join(self, adapter: str | None, running: set[str]) -> bool:
        """Whether a request for ``adapter`` fits a batch whose adapters are ``running``."""
        return adapter is None or adapter in running or len(running) < self.max_loras

    def activate(self, adapter: str | None, running: set[str]) -> None:
        """Make ``adapter`` resident for the coming step (loading it when it is not), evicting
        the least recently used adapter no running request uses."""
        if adapter is None:
            return
        if adapter in self._resident:
            self._resident.move_to_end(adapter)
            return
        if len(self._resident) >= self.max_loras:
            idle = next((name for name in self._resident if name not in running), None)
            if idle is not None:
                del self._resident[idle]
        self._resident[adapter] = None
        self._pending_loads += 1
        self.loads += 1

    def compute_step_s(self, adapters: Iterable[str | None]) -> float:
        """The step's LoRA cost: the loads since the last step, and each distinct adapter of the
        batch."""
        distinct = {a for a in adapters if a is not None}
        loads, self._pending_loads = self._pending_loads, 0
        return loads * self._load_s + len(distinct) * self._per_adapter_s

    @property
    def resident(self) -> tuple[str, ...]:
        return tuple(self._resident)
