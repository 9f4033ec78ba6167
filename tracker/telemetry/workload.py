"""Both samplers around one workload: the GPU's from before the first request, the server's
from the end of the warm-up (its counters are the measured requests' alone). Both stop after the
last request.

The GPU sampler is a thread (NVML calls block), and the server scraper is a task on the runner's
loop. Neither can fail the workload: whatever they could not measure comes back with a reason.
"""

from __future__ import annotations

import asyncio

from tracker.load.generator import Endpoint
from tracker.results import GpuTelemetry, ServerTelemetry
from tracker.telemetry import TelemetrySettings
from tracker.telemetry.gpu import GpuSampler
from tracker.telemetry.server_metrics import ServerScraper


class WorkloadTelemetry:
    def __init__(self, endpoint: Endpoint, settings: TelemetrySettings,
                 gpu_skip_reason: str | None = None) -> None:
        self.gpu = GpuSampler(settings.gpu_sample_hz, nvml=settings.nvml,
                              indices=settings.gpu_indices, skip_reason=gpu_skip_reason)
        self.server = ServerScraper(endpoint, settings.server_scrape_interval_s)

    async def start(self) -> None:
        """Before the workload's first request (its warm-up's)."""
        await asyncio.to_thread(self.gpu.start)  # nvmlInit may take a moment

    async def warmed(self) -> None:
        """The warm-up has ended (the load generator's ``on_warmed``): the server's first scrape."""
        await self.server.start()

    async def stop(self, *, complete: bool = True) -> tuple[GpuTelemetry, ServerTelemetry]:
        """Stop both. ``complete`` False (a cut-short workload) skips the final scrape."""
        server = await self.server.stop(final_scrape=complete)
        gpu = await asyncio.to_thread(self.gpu.stop)
        return gpu, server
