"""Write the traffic samples the shipped suites replay: seeded, made of the tracker's own words.

    .venv/bin/python baselines/traffic/generate.py [--out DIR]     (default: this folder)

No third-party data: every text is ``generate_words`` of a seed derived from ``SEED``, and every
length and time is drawn from the tracker's ``SplitMix64``, so running it twice writes the same
bytes (a test regenerates the files into a temporary folder and compares them with these):

- ``sharegpt-sample.json``: ShareGPT conversations (``dataset-chat``);
- ``conversations.jsonl``: OpenAI chat sessions of 3 to 6 turns behind shared system prompts
  (``multi-turn-chat``);
- ``mooncake-sample.jsonl``: a Mooncake-style trace whose rows share system-prompt blocks and
  continue earlier sessions (``trace-replay``);
- ``azure-sample.csv``: an Azure LLM inference trace (``TIMESTAMP,ContextTokens,GeneratedTokens``).
"""

from __future__ import annotations

import argparse
import json
import math
from datetime import datetime, timedelta
from pathlib import Path

from tracker.inputs.prompts import SplitMix64, derive_seed, generate_words

SEED = 20250614
BLOCK_TOKENS = 512
HERE = Path(__file__).resolve().parent


def draw_length(rng: SplitMix64, low: int, median: int, high: int) -> int:
    """A skewed length in [low, high]: most near ``median``, a long tail (integer arithmetic)."""
    a, b = rng.below(median - low + 1), rng.below(median - low + 1)
    tail = rng.below(high - median + 1) if rng.below(5) == 0 else 0
    return low + (a + b) // 2 + tail


def draw_gap_ms(rng: SplitMix64, mean_ms: float) -> int:
    """Poisson arrivals: an exponential gap, rounded to the millisecond."""
    unit = ((rng.next_u64() >> 11) + 1) * 2.0**-53  # (0, 1]
    return round(-math.log(unit) * mean_ms)


def text(*labels: str | int, words: int) -> str:
    return generate_words(derive_seed(SEED, *labels), words)


def build_sharegpt(count: int = 96) -> list[dict[str, object]]:
    rng = SplitMix64(derive_seed(SEED, "sharegpt"))
    items: list[dict[str, object]] = []
    for i in range(count):
        turns: list[dict[str, str]] = []
        for t in range(1 + rng.below(3)):
            turns.append({"from": "human",
                          "value": text("sharegpt", i, t, "q", words=draw_length(rng, 6, 40, 300))})
            turns.append({"from": "gpt",
                          "value": text("sharegpt", i, t, "a", words=draw_length(rng, 8, 70, 400))})
        items.append({"id": f"sample-{i:04d}", "conversations": turns})
    return items


def build_conversations(count: int = 40) -> list[dict[str, object]]:
    rng = SplitMix64(derive_seed(SEED, "conversations"))
    systems = [text("system", k, words=160 + 80 * k) for k in range(3)]
    sessions: list[dict[str, object]] = []
    for i in range(count):
        messages = [{"role": "system", "content": systems[rng.below(len(systems))]}]
        for t in range(3 + rng.below(4)):
            messages.append({"role": "user",
                             "content": text("chat", i, t, "q", words=draw_length(rng, 8, 30, 90))})
            messages.append({"role": "assistant",
                             "content": text("chat", i, t, "a", words=draw_length(rng, 12, 40, 120))})
        sessions.append({"messages": messages})
    return sessions


def build_mooncake(count: int = 240, mean_gap_ms: float = 125.0) -> list[dict[str, object]]:
    """Rows that open with one of four apps' system-prompt blocks, or continue an earlier row's
    session (its full blocks, then new ones), as Mooncake's traces do."""
    rng = SplitMix64(derive_seed(SEED, "mooncake"))
    apps = [[0], [1, 2], [3], [4, 5]]
    next_id, clock_ms = 6, 0
    sessions: list[list[int]] = []
    rows: list[dict[str, object]] = []
    for _ in range(count):
        clock_ms += draw_gap_ms(rng, mean_gap_ms)
        if sessions and rng.below(5) < 3:
            index = rng.below(len(sessions))
            prefix = sessions[index]
        else:
            index, prefix = len(sessions), list(apps[rng.below(len(apps))])
            sessions.append(prefix)
        fresh = 1 + rng.below(2)
        if len(prefix) + fresh > 6:  # the session is long enough: start it over
            prefix = sessions[index] = list(apps[rng.below(len(apps))])
        ids = [*prefix, *range(next_id, next_id + fresh)]
        next_id += fresh
        sessions[index] = ids[:-1]  # the last block is partial: a follow-up cannot share it
        rows.append({"timestamp": clock_ms,
                     "input_length": len(ids) * BLOCK_TOKENS - rng.below(BLOCK_TOKENS),
                     "output_length": draw_length(rng, 4, 32, 200), "hash_ids": ids})
    return rows


def build_azure(count: int = 240, mean_gap_ms: float = 100.0) -> list[str]:
    rng = SplitMix64(derive_seed(SEED, "azure"))
    clock = datetime(2023, 11, 16, 18, 0, 0)
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    for _ in range(count):
        clock += timedelta(microseconds=draw_gap_ms(rng, mean_gap_ms * 1000.0))
        stamp = clock.strftime("%Y-%m-%d %H:%M:%S.%f") + "0"  # the trace's seven digits
        lines.append(f"{stamp},{draw_length(rng, 16, 400, 2400)},{draw_length(rng, 1, 40, 300)}")
    return lines


def write_samples(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "sharegpt-sample.json": json.dumps(build_sharegpt(), indent=1) + "\n",
        "conversations.jsonl": "".join(json.dumps(s) + "\n" for s in build_conversations()),
        "mooncake-sample.jsonl": "".join(json.dumps(r) + "\n" for r in build_mooncake()),
        "azure-sample.csv": "\n".join(build_azure()) + "\n",
    }
    written = []
    for name, body in files.items():
        path = folder / name
        path.write_bytes(body.encode("utf-8"))
        written.append(path)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="folder to write (default: here)")
    for path in write_samples(parser.parse_args().out):
        print(f"wrote {path} ({path.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
