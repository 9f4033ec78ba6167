"""Production traces replayed at their recorded times: Mooncake JSONL and the Azure CSV.

- ``mooncake``: one ``{"timestamp": ms, "input_length": N, "output_length": M, "hash_ids":
  [..]}`` a line. Each hash id is a block of ``block_tokens`` tokens (default 512) whose text is
  the same wherever the id repeats, so prefix sharing is replayed: the block of id ``h`` is
  ``generate_words(seed_h, block_tokens)``, ``seed_h`` keyed on (suite seed, ``h``) only
  (tracker.inputs.word_text), the last block cut to what ``input_length`` leaves, and a row
  longer than its blocks ends with words of its own. A row with more ids than its
  ``input_length`` fills is refused (the block size is wrong).
- ``azure``: the Azure LLM inference trace CSV, a header naming ``TIMESTAMP, ContextTokens,
  GeneratedTokens`` (other columns ignored). ``TIMESTAMP`` is a date-time (``2023-11-16
  18:15:46.6805900``, UTC unless it says otherwise) or seconds. Rows share no content.

- ``sessions``: agentic sessions, one request a line (tracker.inputs.session_traces).

Rows must be in time order. The replay starts ``start_offset_s`` into the trace. The first
``warmup_requests`` rows there are the warm-up (sent first, untimed), the next ``num_requests``
are measured, each planned at ``arrival_s`` = its time after the first measured row's, times
``time_scale``. A trace shorter than that is an error that says how many rows it has.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from tracker.errors import ConfigError
from tracker.inputs.datafiles import DataFile, bad_field, parse_json_line
from tracker.inputs.dataset_sampling import OutputDraws
from tracker.inputs.prompt_sources import MAX_REQUEST_TOKENS, TracePrompts
from tracker.inputs.prompts import derive_seed
from tracker.inputs.traffic import MAX_PLANNED_S, Message, PlannedRequest, WorkloadTraffic

AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
MAX_TIMESTAMP_S = 1e12  # a row's time on the trace's clock: 31,700 years (epoch time is 1.7e9)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class TraceRow:
    line: int
    timestamp_us: int  # on the trace's clock (integers: differences are exact)
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] = ()


def parse_token_count(value: Any, where: str, field: str) -> int:
    """A row's token count: a positive integer up to ``MAX_REQUEST_TOKENS``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise bad_field(where, field, "must be a positive integer", value,
                        "fix the row (a request has at least one token)")
    if value > MAX_REQUEST_TOKENS:
        raise bad_field(where, field, f"must be at most {MAX_REQUEST_TOKENS:,} tokens", value,
                        "fix the row (no model reads or writes that many)")
    return value


def parse_mooncake_row(record: Mapping[str, Any], where: str, line: int,
                       block_tokens: int) -> TraceRow:
    stamp = record.get("timestamp")
    if isinstance(stamp, bool) or not isinstance(stamp, int | float) or not stamp >= 0 \
            or not stamp <= MAX_TIMESTAMP_S * 1000:
        raise bad_field(where, "timestamp", "must be a number of milliseconds from 0 to "
                        f"{MAX_TIMESTAMP_S * 1000:.0e}", stamp, "fix the row")
    inputs = parse_token_count(record.get("input_length"), where, "input_length")
    outputs = parse_token_count(record.get("output_length"), where, "output_length")
    ids = record.get("hash_ids", [])
    if not isinstance(ids, list) or not all(isinstance(h, int) and not isinstance(h, bool)
                                            and h >= 0 for h in ids):
        raise bad_field(where, "hash_ids", "must be a list of integers >= 0", ids, "fix the row")
    needed = -(-inputs // block_tokens)
    if len(ids) > needed:
        raise ConfigError(f"{where}: hash_ids: {len(ids)} blocks of {block_tokens} tokens are "
                          f"more than input_length {inputs} fills ({needed}); set "
                          "prompts.block_tokens to the block size the trace was made with")
    return TraceRow(line, round(stamp * 1000), inputs, outputs, tuple(ids))


def read_mooncake(file: DataFile, block_tokens: int) -> Iterator[TraceRow]:
    for number, text in file.lines():
        if text.strip():
            where = f"{file.path}:{number}"
            record = parse_json_line(text, where, "a Mooncake trace row")
            yield parse_mooncake_row(record, where, number, block_tokens)


def parse_azure_time(text: str, where: str) -> int:
    """Microseconds since the epoch."""
    value = text.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        if math.isfinite(seconds):
            if not abs(seconds) <= MAX_TIMESTAMP_S:
                raise bad_field(where, "TIMESTAMP", f"must be at most {MAX_TIMESTAMP_S:.0e} "
                                "seconds", text, "fix the row")
            return round(seconds * 1_000_000)
    head, dot, fraction = value.partition(".")
    digits = "".join(c for c in fraction if c.isdigit())
    zone = fraction[len(digits):]
    try:
        moment = datetime.fromisoformat(head + (dot + digits[:6] if digits else "") + zone)
    except ValueError:
        raise bad_field(where, "TIMESTAMP", "must be a date-time like 2023-11-16 "
                        "18:15:46.6805900, or seconds", text, "fix the row") from None
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // timedelta(microseconds=1)


def _azure_int(text: str, where: str, field: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise bad_field(where, field, "must be a positive integer", text, "fix the row") from None
    return parse_token_count(value, where, field)


def _csv_rows(reader: Any, file: DataFile) -> Iterator[list[str]]:
    """The reader's rows. A row the csv module refuses (a cell over its 128 KiB limit, a NUL)
    is a ConfigError naming the line."""
    while True:
        try:
            row = next(reader, None)
        except csv.Error as exc:
            raise ConfigError(f"{file.path}:{reader.line_num}: not a CSV row ({exc}); fix the "
                              "row (an Azure trace's cells are a time and two counts)") from None
        if row is None:
            return
        yield row


def read_azure(file: DataFile) -> Iterator[TraceRow]:
    reader = csv.reader(text for _, text in file.lines())
    rows = _csv_rows(reader, file)
    header = next(rows, None)
    names = [name.strip() for name in header or ()]
    missing = [c for c in AZURE_COLUMNS if c not in names]
    if missing:
        raise ConfigError(f"{file.path}:1: the header lacks {', '.join(missing)}; an Azure "
                          f"trace's first row names the columns {', '.join(AZURE_COLUMNS)}")
    at = [names.index(c) for c in AZURE_COLUMNS]
    for row in rows:
        if not any(cell.strip() for cell in row):
            continue
        where = f"{file.path}:{reader.line_num}"
        if len(row) < len(names):
            raise ConfigError(f"{where}: {len(row)} columns, the header has {len(names)}; fix "
                              "the row")
        yield TraceRow(reader.line_num, parse_azure_time(row[at[0]], where),
                       _azure_int(row[at[1]], where, AZURE_COLUMNS[1]),
                       _azure_int(row[at[2]], where, AZURE_COLUMNS[2]))


def read_trace(file: DataFile, source: TracePrompts) -> Iterator[TraceRow]:
    """The rows in file order. A row earlier than the one before it is a ConfigError."""
    rows = read_mooncake(file, source.block_tokens) if source.format == "mooncake" \
        else read_azure(file)
    field = "timestamp" if source.format == "mooncake" else "TIMESTAMP"
    previous: TraceRow | None = None
    for row in rows:
        if previous is not None and row.timestamp_us < previous.timestamp_us:
            gap_s = (previous.timestamp_us - row.timestamp_us) / 1e6
            raise ConfigError(f"{file.path}:{row.line}: {field}: {gap_s:g} s earlier than the "
                              f"row on line {previous.line}; a trace must be in time order: "
                              f"sort the file by {field}")
        previous = row
        yield row


def select_rows(rows: Iterator[TraceRow], source: TracePrompts, total: int,
                where: str) -> list[TraceRow]:
    """The ``total`` rows from ``start_offset_s`` on. It reads the whole file (every row is
    checked, and the file's sha256 needs every byte)."""
    chosen: list[TraceRow] = []
    first: int | None = None
    count = 0
    for row in rows:
        count += 1
        first = row.timestamp_us if first is None else first
        if row.timestamp_us - first >= source.start_offset_s * 1e6 and len(chosen) < total:
            chosen.append(row)
    if len(chosen) < total:
        after = f" from start_offset_s {source.start_offset_s:g}" if source.start_offset_s else ""
        if count == 0:
            raise ConfigError(f"{where}: the trace holds no rows; check the file and its format")
        raise ConfigError(f"{where}: the trace has {len(chosen)} rows{after} (of {count}), but "
                          f"the workload replays {total} (warm-up included); lower num_requests "
                          "or warmup_requests, or start_offset_s")
    return chosen


def build_trace_prompts(rows: Sequence[TraceRow], seed: int, name: str,
                        block_tokens: int) -> list[str]:
    """Each row's prompt of exactly ``input_tokens`` words: its hash ids' blocks (equal ids,
    equal text, and the last cut to fit), then words of its own (the one place a trace prompt is
    made, so an exact-length tokenizer can replace it)."""
    from tracker.inputs.word_text import compute_keyed_seeds, generate_word_runs

    ids = sorted({h for row in rows for h in row.hash_ids})
    position = {h: i for i, h in enumerate(ids)}
    lasts = [row.input_tokens - (len(row.hash_ids) - 1) * block_tokens for row in rows]
    cuts: dict[int, set[int]] = {}
    for row, last in zip(rows, lasts, strict=True):
        if row.hash_ids and last < block_tokens:
            cuts.setdefault(position[row.hash_ids[-1]], set()).add(last)
    blocks, cut = generate_word_runs(
        compute_keyed_seeds(derive_seed(seed, "trace-block"), ids), [block_tokens] * len(ids), cuts)
    fills, _ = generate_word_runs(
        compute_keyed_seeds(derive_seed(seed, name, "trace-row"), [row.line for row in rows]),
        [row.input_tokens - len(row.hash_ids) * block_tokens for row in rows])
    prompts: list[str] = []
    for row, last, fill in zip(rows, lasts, fills, strict=True):
        parts = [blocks[position[h]] for h in row.hash_ids]
        if parts and last < block_tokens:
            parts[-1] = cut[position[row.hash_ids[-1]], last]
        if fill:
            parts.append(fill)
        prompts.append(" ".join(parts))
    return prompts


def _check_span(file: DataFile, measured: Sequence[TraceRow], origin_us: int,
                time_scale: float) -> None:
    """Refuse a replay planned to run longer than ``MAX_PLANNED_S`` (a row years late)."""
    if not measured:
        return
    last = measured[-1]
    span_s = (last.timestamp_us - origin_us) / 1e6 * time_scale
    if span_s > MAX_PLANNED_S:
        raise ConfigError(f"{file.path}:{last.line}: the row is planned {span_s:.3g} s after the "
                          f"replay's first measured row (time_scale {time_scale:g}), past the "
                          f"limit of {MAX_PLANNED_S} s (31 days) for one workload; fix the row's "
                          "time, or lower time_scale")


def build_trace_traffic(file: DataFile, source: TracePrompts, *, seed: int, name: str,
                        warmup: int, total: int, max_tokens: int) -> WorkloadTraffic:
    """``total`` requests (the first ``warmup`` untimed) at the trace's times, or a session
    trace's ``total`` sessions."""
    if source.format == "sessions":
        from tracker.inputs.session_traces import build_session_trace_traffic

        return build_session_trace_traffic(file, source, seed=seed, name=name, warmup=warmup,
                                           total=total, max_tokens=max_tokens)
    rows = select_rows(read_trace(file, source), source, total, str(file.path))
    prompts = build_trace_prompts(rows, seed, name, source.block_tokens)
    origin = rows[min(warmup, len(rows) - 1)].timestamp_us
    _check_span(file, rows[warmup:], origin, source.time_scale)
    draws = OutputDraws(source.output_tokens, max_tokens, derive_seed(seed, name, "output"))
    return WorkloadTraffic(requests=tuple(
        PlannedRequest((Message("user", prompt),), max_tokens=draws.next(row.output_tokens),
                       arrival_s=None if i < warmup else
                       (row.timestamp_us - origin) / 1e6 * source.time_scale,
                       requested_input_tokens=row.input_tokens)
        for i, (row, prompt) in enumerate(zip(rows, prompts, strict=True))))
