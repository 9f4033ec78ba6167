"""Loading quality sets: the shipped one, bad lines with their line numbers, and suite versions."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from referencing.exceptions import Unresolvable

from tracker.inputs.suites import load_suite
from tracker.quality import QualitySetError, load_quality_set, score_output
from tracker.quality.scorers import find_violation
from tracker.quality.set_files import MAX_SET_BYTES

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "baselines" / "quality" / "basic.jsonl"


def test_the_shipped_set_loads_and_every_reference_answer_is_right() -> None:
    quality_set = load_quality_set(SHIPPED)
    assert quality_set.name == "basic" and len(quality_set.items) == 40
    assert {i.scorer for i in quality_set.items} == {"exact", "contains", "regex", "numeric",
                                                     "choice", "json"}
    for item in quality_set.items:
        reference = item.reference_answer
        assert reference is not None, item.id
        assert score_output(item, reference) == 1.0, item.id


def test_chat_short_runs_the_shipped_set() -> None:
    suite = load_suite(ROOT / "baselines" / "chat-short.yaml")
    assert suite.quality is not None and suite.quality.name == "mixed-1k"
    assert len(suite.quality.items) == 1000  # loaded whole; a run asks the sample, a gate all
    block = suite.suite.quality
    assert block is not None and block.max_tokens == 32 and block.sample == 200
    assert block.when == "once_per_night"


def _write(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "set.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


GOOD = '{"id": "a", "prompt": "2+2?", "expected": 4, "scorer": "numeric"}'


@pytest.mark.parametrize(("line", "message"), [
    ('{"id": "b", "prompt": "q", "expected": 4, "scorer": "numerc"}', r"set.jsonl:3: scorer: "),
    ('{"id": "b", "prompt": "q", "expected": "x", "scorer": "numeric"}',
     r"set.jsonl:3: .*needs a number \(got 'x'\)"),
    ('{"id": "b", "prompt": "q", "expected": "E", "scorer": "choice"}',
     r"set.jsonl:3: .*one of the letters ABCD \(got 'E'\)"),
    ('{"id": "b", "prompt": "q", "expected": "(", "scorer": "regex"}',
     r"set.jsonl:3: .*not a regular expression"),
    ('{"id": "b", "prompt": "q", "expected": {"anyOf": []}, "scorer": "json"}',
     r"set.jsonl:3: .*expected\.anyOf: \[\] should be non-empty$"),
    ('{"id": "b", "prompt": "q", "expected": {"properties": {"n": {"type": "int"}}}, "scorer": "json"}',
     r"set.jsonl:3: .*expected\.properties\.n\.type: 'int' is not valid under any of the given"),
    ('{"id": "b", "prompt": "q", "expected": {"$ref": "#/$defs/n"}, "scorer": "json"}',
     r"set.jsonl:3: .*expected: \$ref '#/\$defs/n' points to nothing in the schema"),
    ('{"id": "b", "prompt": "q", "expected": 1, "scorer": "numeric", "param": {}}',
     r"set.jsonl:3: param: unknown key; allowed: id, prompt"),
    ('{"id": "b", "prompt": "q", "expected": 1, "scorer": "numeric", "params": {"tol": 1}}',
     r"set.jsonl:3: .*tol"),
    ('{"id": "b", "prompt": "q", "expected": 5, "scorer": "numeric", "answer": "6"}',
     r"set.jsonl:3: answer '6' does not pass its own numeric scorer"),
    ('{"id": "a", "prompt": "q", "expected": 1, "scorer": "numeric"}',
     r"set.jsonl:3: id 'a' is already used on line 1"),
    ('{"id": "b", "prompt": "q", "expected": 1, "scorer": "numeric"', r"set.jsonl:3: not JSON"),
    ('["a"]', r"set.jsonl:3: each line must be a JSON object"),
    ("[" * 100_000 + "]" * 100_000, r"set.jsonl:3: JSON nested too deeply"),
])
def test_a_bad_line_names_the_file_line_and_fix(tmp_path: Path, line: str, message: str) -> None:
    path = _write(tmp_path, GOOD, "// a comment", line)
    with pytest.raises(QualitySetError, match=message):
        load_quality_set(path)


@pytest.fixture
def schema_host() -> Iterator[tuple[str, list[str]]]:
    """A real HTTP server on 127.0.0.1 serving a schema: its URL, and the paths requested."""
    requested: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            requested.append(self.path)
            body = b'{"type": "integer"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/schema+json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/n.json", requested
    server.shutdown()
    server.server_close()
    thread.join()


def test_a_remote_schema_ref_is_refused_and_never_fetched(
    tmp_path: Path, schema_host: tuple[str, list[str]]
) -> None:
    url, requested = schema_host
    line = json.dumps({"id": "b", "prompt": "q", "expected": {"$ref": url}, "scorer": "json"})
    with pytest.raises(QualitySetError, match=r"set.jsonl:1: .*\$ref 'http://127.0.0.1:\d+/n.json' "
                       r"points to nothing in the schema; a schema is never fetched"):
        load_quality_set(_write(tmp_path, line))
    with pytest.raises(Unresolvable):  # scoring, too, resolves only within the schema
        find_violation(1, {"$ref": url})
    assert requested == []


def test_a_set_over_the_size_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "huge.jsonl"
    with path.open("wb") as handle:  # sparse: no 64 MiB written to the disk
        handle.truncate(MAX_SET_BYTES + 1)
    with pytest.raises(QualitySetError, match=r"huge.jsonl: .* over the 64 MiB limit"):
        load_quality_set(path)


def test_an_empty_or_missing_set_is_refused(tmp_path: Path) -> None:
    with pytest.raises(QualitySetError, match="has no items"):
        load_quality_set(_write(tmp_path, "// nothing", ""))
    with pytest.raises(QualitySetError, match="quality set file not found"):
        load_quality_set(tmp_path / "missing.jsonl")


SUITE = """\
name: q
workloads:
  - name: w
    prompts: {source: fixed, text: hello}
    max_tokens: 4
    concurrency: 1
    num_requests: 1
"""


def test_the_quality_set_is_part_of_the_suite_version(tmp_path: Path) -> None:
    plain = tmp_path / "plain.yaml"
    plain.write_text(SUITE, encoding="utf-8")
    with_quality = tmp_path / "with.yaml"
    with_quality.write_text(SUITE + "quality: {path: set.jsonl}\n", encoding="utf-8")
    _write(tmp_path, GOOD)
    first = load_suite(with_quality)
    assert load_suite(plain).quality is None and first.quality is not None
    assert load_suite(plain).version != first.version
    assert load_suite(with_quality).version == first.version  # stable
    _write(tmp_path, GOOD.replace('"expected": 4', '"expected": 5'))
    assert load_suite(with_quality).version != first.version
