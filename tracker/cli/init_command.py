"""``tracker init DIR``: a starter set of configs, suites and a schedule to edit (like ``asv
quickstart``).

The files are the shipped ones (package data, ``tracker.inputs.package_data``), copied as they are
into ``DIR/configs/``, ``DIR/baselines/`` and ``DIR/schedules.yaml``. An existing file is never
overwritten: every destination is checked before the first is written.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tracker.errors import ExitCode, UsageError
from tracker.inputs.package_data import shipped_baselines, shipped_configs
from tracker.redaction import say


@dataclass(frozen=True, slots=True)
class StarterFile:
    folder: Callable[[], Path]  # the shipped package folder it comes from
    source: str  # relative to that folder
    target: str  # relative to DIR
    what: str


STARTER_FILES = (
    StarterFile(shipped_configs, "sim-default.yaml", "configs/sim-default.yaml",
                "the built-in simulator: no GPU, no network, no keys"),
    StarterFile(shipped_configs, "vllm-llama3-8b.yaml", "configs/vllm-llama3-8b.yaml",
                "a vLLM server already running on 127.0.0.1:8000 (attached, checked against it)"),
    StarterFile(shipped_configs, "vllm-launch-llama3-8b.yaml",
                "configs/vllm-launch-llama3-8b.yaml",
                "a vLLM server the tracker launches itself (vllm installed, a GPU)"),
    StarterFile(shipped_configs, "taotoken-example.yaml", "configs/taotoken-example.yaml",
                "an OpenAI-compatible gateway; the key is read from $TAOTOKEN_API_KEY"),
    StarterFile(shipped_baselines, "chat-short.yaml", "baselines/chat-short.yaml",
                "TTFT-sensitive chat, then its quality set"),
    StarterFile(shipped_baselines, "quality/mixed-1k.jsonl", "baselines/quality/mixed-1k.jsonl",
                "the 1,000-item quality set chat-short asks"),
    StarterFile(shipped_baselines, "batch-throughput.yaml", "baselines/batch-throughput.yaml",
                "high concurrency, long outputs: output tokens/s"),
    StarterFile(shipped_baselines, "multi-turn-chat.yaml", "baselines/multi-turn-chat.yaml",
                "chat sessions behind shared system prompts: TTFT of later turns"),
    StarterFile(shipped_baselines, "traffic/conversations.jsonl",
                "baselines/traffic/conversations.jsonl", "the conversations it replays"),
    StarterFile(shipped_baselines, "trace-replay.yaml", "baselines/trace-replay.yaml",
                "a Mooncake-style and an Azure-style trace at their recorded times"),
    StarterFile(shipped_baselines, "traffic/mooncake-sample.jsonl",
                "baselines/traffic/mooncake-sample.jsonl", "the Mooncake-style trace"),
    StarterFile(shipped_baselines, "traffic/azure-sample.csv",
                "baselines/traffic/azure-sample.csv", "the Azure-style trace"),
    StarterFile(shipped_configs, "init/schedules.yaml", "schedules.yaml",
                "a nightly schedule on the simulator (vLLM and gateway ones commented out)"),
)
NEXT_COMMANDS = (  # (command, when): each exits 0 in a new directory, the doctor's once a vLLM runs
    ("tracker run --config configs/sim-default.yaml --suite baselines/chat-short.yaml", ""),
    ("tracker doctor --config configs/vllm-llama3-8b.yaml",
     "once a vLLM serves its model on 127.0.0.1:8000"),
    ("tracker schedule add --file schedules.yaml", ""),
    ("tracker dashboard", ""),
)


def _sources() -> list[tuple[Path, StarterFile]]:
    found = []
    for starter in STARTER_FILES:
        source = starter.folder() / starter.source
        if not source.is_file():
            raise UsageError(f"{source}: a shipped starter file is missing from this "
                             "installation; reinstall the tracker")
        found.append((source, starter))
    return found


def _check_free(directory: Path) -> None:
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"tracker init {directory}: not a directory; give a new or an existing "
                         "directory")
    for starter in STARTER_FILES:
        target = directory / starter.target
        if target.exists() or target.is_symlink():
            raise UsageError(f"tracker init {directory}: {target} already exists and is never "
                             "overwritten; move it away, or give another directory")


def copy_starter_files(directory: Path) -> list[StarterFile]:
    """Copy every starter file into ``directory``. None is written if any already exists."""
    sources = _sources()
    _check_free(directory)
    for source, starter in sources:
        target = directory / starter.target
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
    return [starter for _, starter in sources]


def cmd_init(directory: str) -> int:
    root = Path(directory)
    written = copy_starter_files(root)
    width = max(len(starter.target) for starter in written)
    say(f"wrote {len(written)} files to edit in {root}:")
    for starter in written:
        say(f"  {starter.target:<{width}}  {starter.what}")
    say("next:")
    say(f"  cd {root}")
    width = max(len(command) for command, _ in NEXT_COMMANDS)
    for command, when in NEXT_COMMANDS:
        say(f"  {command:<{width}}  # {when}" if when else f"  {command}")
    return ExitCode.OK
