"""Multi-turn sessions from a file of conversations (ShareGPT JSON or OpenAI chat JSONL).

Each sampled conversation becomes a ``PlannedSession``: its system prompt and its user turns,
each with the recorded answer (sent back as history under ``history: recorded``) and its
``max_tokens`` (the recorded answer's length by default). ``num_requests`` and
``warmup_requests`` count sessions, and the workload's ``concurrency`` is the sessions in flight.
The load generator sends a session's turns one after another, each request carrying the whole
history, ``think_time_s`` after the previous answer.

Filters: ``min_turns`` skips shorter conversations, ``max_turns`` cuts longer ones, and
``max_input_tokens`` skips a session whose last request (system prompt, every question and
the recorded answers before the last) would be longer, in the tracker's word tokens.
"""

from __future__ import annotations

from collections.abc import Callable

from tracker.inputs.datafiles import DataFile
from tracker.inputs.dataset_sampling import OutputDraws, describe_filters, sample_items
from tracker.inputs.datasets import DatasetItem, read_dataset
from tracker.inputs.prompt_sources import ConversationPrompts
from tracker.inputs.prompts import derive_seed
from tracker.inputs.traffic import PlannedSession, PlannedTurn, WorkloadTraffic
from tracker.inputs.word_tokenizer import count_tokens

FILTERS = ("min_turns", "max_turns", "max_input_tokens")


def cut_conversation(item: DatasetItem, source: ConversationPrompts) -> DatasetItem:
    """The item with at most ``max_turns`` turns."""
    if source.max_turns is None or len(item.turns) <= source.max_turns:
        return item
    return DatasetItem(item.line, item.turns[: source.max_turns], item.system)


def count_session_tokens(item: DatasetItem) -> int:
    """The last request's input: system prompt, every question, every answer but the last."""
    total = count_tokens(item.system or "") + sum(count_tokens(t.user) for t in item.turns)
    return total + sum(count_tokens(t.answer or "") for t in item.turns[:-1])


def _keeps(source: ConversationPrompts) -> Callable[[DatasetItem], bool]:
    def keep(item: DatasetItem) -> bool:
        if len(item.turns) < source.min_turns:
            return False
        limit = source.max_input_tokens
        return limit is None or count_session_tokens(cut_conversation(item, source)) <= limit
    return keep


def build_session(item: DatasetItem, draws: OutputDraws) -> PlannedSession:
    """The one place a session is made from a conversation (an exact-length tokenizer may
    replace it)."""
    return PlannedSession(
        turns=tuple(PlannedTurn(turn.user, turn.answer, draws.next(turn.output_tokens))
                    for turn in item.turns),
        system=item.system)


def build_conversation_traffic(file: DataFile, source: ConversationPrompts, *, seed: int,
                               name: str, total: int, max_tokens: int) -> WorkloadTraffic:
    """``total`` sessions (warm-up first) from a seeded sample of the file's conversations."""
    items = sample_items(read_dataset(file, source.format), _keeps(source), total,
                         derive_seed(seed, name, "sample"), str(file.path),
                         describe_filters(source, FILTERS))
    draws = OutputDraws(source.output_tokens, max_tokens, derive_seed(seed, name, "output"))
    sessions = tuple(build_session(cut_conversation(item, source), draws) for item in items)
    return WorkloadTraffic(sessions=sessions, history=source.history,
                           think_time_s=source.think_time_s)
