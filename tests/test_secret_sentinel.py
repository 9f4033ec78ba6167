"""No secret leaves the process: a sentinel key, echoed back by a real local gateway, is grepped
for in every exit of the tracker.

The gateway is a raw HTTP/1.1 server on 127.0.0.1 that answers in turn: a 401 whose body repeats
the Authorization header and a masked form of the key (as OpenAI's API and careless proxies do),
a stream whose ``error`` event names the key, a response whose broken header makes the client
raise an exception quoting the key, and a good stream (so there is something to measure). The key
lives in a variable whose name says nothing about secrets: only its use by the run makes it one.
The exits: the SQLite file (with its WAL), the run and gate JSON, stdout and stderr of every
command, the gate's Markdown and JUnit, the bisection's JSON, both export formats, a worker's
log file, every dashboard page under AppTest, and a webhook payload caught by a real receiver.
The gateway also echoes the key upper-cased (quality answers included), and the key is looked
for in any letter case.

``tracker bench`` gets its own gateway, with keys of no token shape at all (32 hex digits, a
UUID): its ``--json``, ``--save-requests`` and stderr, one and two load processes. And a launched
server (the simulator behind a command that first prints its key and ``HF_TOKEN``) must leave
neither in its log.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import pytest
from streamlit.testing.v1 import AppTest

from tests.dashboard.apptest import open_page, texts
from tests.local_http import WebhookReceiver
from tracker.dashboard.pages import PAGES, page
from tracker.redaction import register_secret
from tracker.scheduling.alerts import RegressionAlert, WebhookSettings, deliver_alerts
from tracker.store.db import open_store

KEY = "ttk9F3c2A7b41D0e8F6zQxW5"  # no known token shape: hidden because the run uses it
KEY_ENV = "TT_GATEWAY"
PIECES = (KEY, KEY[-6:], KEY[5:13], KEY[:8])  # whole, its tail, a middle, its head


def echo(auth: str, key: str = KEY) -> str:
    return (f"Incorrect API key provided: {key[:6]}****{key[-6:]}; you sent '{auth}' "
            f"(as {auth.upper()})")


def _sse(*events: dict[str, object]) -> bytes:
    body = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
    return body + b"data: [DONE]\n\n"


def _chunk(text: str) -> dict[str, object]:
    return {"choices": [{"index": 0, "delta": {"content": text}}]}


def _broken(key: str) -> bytes:
    """A head whose Content-Length is the key: the client's parser raises quoting it."""
    return f"HTTP/1.1 200 OK\r\nContent-Length: {key}\r\n\r\n".encode()


@dataclass
class EchoGateway:
    """Answers request N with mode N % 4: 401 echo, stream error event, broken header, success;
    or, ``rejecting``, every request with the 401 echo."""

    rejecting: bool = False
    port: int = 0
    count: int = 0
    seen_keys: set[str] = field(default_factory=set)

    def reply(self, path: str, auth: str, body: dict[str, object]) -> bytes:
        return self.answer(auth, body)

    def answer(self, auth: str, body: dict[str, object]) -> bytes:
        mode, self.count = 0 if self.rejecting else self.count % 4, self.count + 1
        if mode == 0:
            payload = json.dumps({"error": {"message": echo(auth), "type": "invalid_api_key"}})
            return _response("401 Unauthorized", "application/json", payload.encode())
        if mode == 2:  # the client's parser raises: "Content-Length is not a number: '<key>'"
            return _broken(KEY)
        if not body.get("stream"):
            text = f"42, as {KEY.upper()} asked"  # quotes the key: stored, shown, diffed
            answer = {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]}
            return _response("200 OK", "application/json", json.dumps(answer).encode())
        if mode == 1:
            error: dict[str, object] = {"error": {"message": f"quota exceeded for key {KEY}", "code": 429}}
            return _response("200 OK", "text/event-stream", _sse(_chunk("Hi"), error))
        usage: dict[str, object] = {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3}}
        return _response("200 OK", "text/event-stream",
                         _sse(_chunk("one "), _chunk("two "), _chunk("three"), usage))

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                headers = {k.strip().lower(): v.strip() for k, _, v in
                           (line.partition(":") for line in lines[1:] if line)}
                raw = await reader.readexactly(int(headers.get("content-length", "0")))
                auth = headers.get("authorization", "")
                self.seen_keys.add(auth.removeprefix("Bearer "))
                path = lines[0].split(" ")[1] if lines[0].count(" ") >= 2 else "/"
                reply = self.reply(path, auth, json.loads(raw) if raw else {})
                writer.write(reply)
                await writer.drain()
                if reply.endswith(b"\r\n\r\n") and b"Content-Length: " in reply \
                        and not reply.split(b"Content-Length: ")[1].split(b"\r")[0].isdigit():
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def _response(status: str, content_type: str, body: bytes) -> bytes:
    head = (f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n")
    return head.encode() + body


Gateway = TypeVar("Gateway", bound="EchoGateway")


def _serve(state: Gateway) -> Iterator[Gateway]:
    loop = asyncio.new_event_loop()
    ready = threading.Event()

    async def start() -> asyncio.Server:
        server = await asyncio.start_server(state.serve, "127.0.0.1", 0)
        state.port = server.sockets[0].getsockname()[1]
        ready.set()
        return server

    server = loop.run_until_complete(start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    ready.wait(5)
    yield state
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    server.close()
    loop.close()


@pytest.fixture
def gateway() -> Iterator[EchoGateway]:
    yield from _serve(EchoGateway())


@pytest.fixture
def rejecting_gateway() -> Iterator[EchoGateway]:
    yield from _serve(EchoGateway(rejecting=True))


CONFIG = """\
name: {name}
target:
  kind: openai
  model: {model}
  base_url: http://127.0.0.1:{port}
  api_key_env: TT_GATEWAY
"""

SUITE = """\
name: echoed
seed: 3
workloads:
  - name: chat
    prompts: {source: fixed, text: "hello there"}
    max_tokens: 4
    concurrency: 2
    num_requests: 8
quality:
  path: items.jsonl
  max_tokens: 8
"""

ITEMS = "\n".join(json.dumps({"id": f"q{i}", "prompt": f"What is {i} + 40?", "expected": i + 40,
                              "scorer": "numeric"}) for i in range(6)) + "\n"


@dataclass
class Exits:
    folder: Path
    url: str
    outputs: list[str] = field(default_factory=list)

    def tracker(self, *args: str, log: Path | None = None) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, KEY_ENV: KEY, "TRACKER_LOG_DIR": str(self.folder / "logs")}
        done = subprocess.run([sys.executable, "-m", "tracker", *args, "--db", self.url],
                              cwd=self.folder, env=env, capture_output=True, text=True,
                              timeout=300, check=False)
        self.outputs += [done.stdout, done.stderr]
        if log is not None:  # as an operator runs it: tracker worker >worker.log 2>&1
            log.write_text(done.stdout + done.stderr, encoding="utf-8")
        return done


def leaks(text: str, pieces: tuple[str, ...] = PIECES) -> list[str]:
    """The pieces of the key ``text`` holds, in any letter case."""
    folded = text.lower()
    return [piece for piece in pieces if piece.lower() in folded]


def test_a_key_echoed_by_the_gateway_reaches_no_exit(
        gateway: EchoGateway, rejecting_gateway: EchoGateway, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    for name, model, port in (("base", "gw-model", gateway.port),
                              ("head", "gw-model-2", rejecting_gateway.port)):
        (tmp_path / f"{name}.yaml").write_text(CONFIG.format(name=name, model=model, port=port))
    (tmp_path / "suite.yaml").write_text(SUITE)
    (tmp_path / "items.jsonl").write_text(ITEMS)
    exits = Exits(tmp_path, f"sqlite:///{tmp_path / 'tracker.db'}")

    run = exits.tracker("run", "--config", "base.yaml", "--suite", "suite.yaml", "--json",
                        "run.json", "--quiet")
    assert run.returncode in (0, 3), run.stderr
    gate = exits.tracker("gate", "--base", "base.yaml", "--head", "head.yaml", "--suite",
                         "suite.yaml", "--repeats", "1", "--markdown", "gate.md", "--junit",
                         "gate.xml", "--json", "gate.json", "--quiet")
    assert gate.returncode in (0, 1, 3), gate.stderr
    bisect = exits.tracker("bisect", "--base", "base.yaml", "--head", "head.yaml", "--suite",
                           "suite.yaml", "--max-rounds", "1", "--max-probes", "2", "--markdown",
                           "bisect.md", "--json", "bisect.json", "--quiet")
    assert bisect.returncode in (0, 1, 3), bisect.stderr
    for fmt in ("vllm", "llmd"):
        export = exits.tracker("export", "1", "--format", fmt, "--out", f"export-{fmt}.json")
        assert export.returncode == 0, export.stderr
    exits.tracker("schedule", "add", "nightly", "--cron", "0 3 * * *", "--config", "base.yaml",
                  "--config", "head.yaml", "--suite", "suite.yaml")
    exits.tracker("schedule", "run-now", "nightly")
    exits.tracker("worker", "--exit-when-empty", log=tmp_path / "worker.log")
    run_ids = [str(i) for i in range(1, 6)]
    for listing in (("runs",), *(("show", i) for i in run_ids), ("show", "1", "--json", "-")):
        exits.tracker(*listing)

    # the gateway did get the key, and echoed it in all three ways
    assert gateway.seen_keys == {KEY} and gateway.count >= 12
    failures = _stored_errors(exits.url)
    assert {"http_401", "stream_error", "bad_response"} <= failures

    pages = {spec.key: page_text(open_page(monkeypatch, exits.url, spec)) for spec in PAGES}
    pages |= {f"run {i}": page_text(open_page(monkeypatch, exits.url, page("run"), {"run": i}))
              for i in run_ids}
    bodies = _webhook_bodies(exits.url)

    files = [p for p in tmp_path.rglob("*") if p.is_file() and p.suffix not in (".yaml", ".jsonl")]
    assert {"tracker.db", "run.json", "gate.md", "gate.xml", "gate.json", "worker.log",
            "bisect.json", "export-vllm.json", "export-llmd.json"} <= {p.name for p in files}
    found = {str(p.relative_to(tmp_path)): leaks(p.read_bytes().decode("utf-8", "replace"))
             for p in files}
    found |= {f"output {i}": leaks(text) for i, text in enumerate(exits.outputs)}
    found |= {f"page {key}": leaks(text) for key, text in pages.items()}
    found |= {f"webhook {i}": leaks(body) for i, body in enumerate(bodies)}
    leaky = sorted(where for where, pieces in found.items() if pieces)
    assert not leaky, f"the key (or a piece of it) reached: {', '.join(leaky)}"
    assert "[redacted]" in (tmp_path / "run.json").read_text()  # the echo is there, hidden


def page_text(app: AppTest) -> str:
    """What a page shows: its text elements and every table's cells."""
    tables = [frame.value.to_csv() for frame in app.dataframe]
    return "\n".join([texts(app), *tables])


def _stored_errors(url: str) -> set[str]:
    from sqlalchemy import text
    engine = open_store(url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(text("SELECT DISTINCT error_class FROM request_records "
                                           "WHERE error_class IS NOT NULL")).all()
    finally:
        engine.dispose()
    return {row[0] for row in rows}


def _webhook_bodies(url: str) -> list[str]:
    """An alert whose text holds what the gateway said goes to a real local receiver."""
    alert = RegressionAlert(run_id=1, config="base@1", suite="echoed", metric="ttft_p99_s",
                            rel_change=0.2, config_diff=(f"said: {echo('Bearer ' + KEY)}",))
    os.environ[KEY_ENV] = KEY  # this process knows the key as the tracker's own processes do
    register_secret(KEY)
    engine = open_store(url)
    try:
        with WebhookReceiver() as receiver:
            deliver_alerts(engine, [alert], WebhookSettings(receiver.url, attempts=1))
    finally:
        engine.dispose()
        del os.environ[KEY_ENV]
    assert len(receiver.texts) == 1
    return receiver.texts


# --- tracker bench, with keys of no token shape ------------------------------------------------

HEX_KEY = "3b7e1f9a0c4d2e8b6a5f7c9d1e3b0a42"  # Azure-style: 32 hex digits
UUID_KEY = "7c2f9e4a-1b3d-4c8e-9a6f-2d5b8e1c7f03"


def pieces_of(key: str) -> tuple[str, ...]:
    return (key, key[-6:], key[5:13], key[:8])  # whole, its tail, a middle, its head


@dataclass
class BenchGateway(EchoGateway):
    """Echoes ``key`` (as sent and upper-cased) wherever ``tracker bench`` looks: /tokenize and
    /detokenize answer 400 quoting it, every other GET 401; chat request N, mode N % 4: a 401
    echo, a stream whose error event quotes it, a broken header holding it, a good stream whose
    text quotes it."""

    key: str = KEY

    def reply(self, path: str, auth: str, body: dict[str, object]) -> bytes:
        said = f"key {self.key} ({self.key.upper()}) refused; {echo(auth, self.key)}"
        if path.endswith(("/tokenize", "/detokenize")):
            payload = json.dumps({"error": {"message": f"tokenizer refused: {said}"}})
            return _response("400 Bad Request", "application/json", payload.encode())
        if not path.endswith("/chat/completions"):
            payload = json.dumps({"error": {"message": said, "type": "invalid_api_key"}})
            return _response("401 Unauthorized", "application/json", payload.encode())
        mode, self.count = self.count % 4, self.count + 1
        if mode == 0:
            payload = json.dumps({"error": {"message": said, "type": "invalid_api_key"}})
            return _response("401 Unauthorized", "application/json", payload.encode())
        if mode == 1:
            error: dict[str, object] = {"error": {"message": f"quota exceeded: {said}", "code": 429}}
            return _response("200 OK", "text/event-stream", _sse(_chunk("Hi"), error))
        if mode == 2:
            return _broken(self.key)
        usage: dict[str, object] = {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3}}
        return _response("200 OK", "text/event-stream",
                         _sse(_chunk("one "), _chunk(f"{self.key.upper()} "), _chunk("three"),
                              usage))


@pytest.mark.parametrize(("key", "workers"), [(HEX_KEY, 1), (HEX_KEY, 2), (UUID_KEY, 2),
                                              (KEY, 2)], ids=["hex", "hex-workers-2",
                                                              "uuid-workers-2", "plain-workers-2"])
def test_a_key_echoed_to_tracker_bench_reaches_none_of_its_outputs(
        key: str, workers: int, tmp_path: Path) -> None:
    for gateway in _serve(BenchGateway(key=key)):
        env = {**os.environ, KEY_ENV: key}
        done = subprocess.run(
            [sys.executable, "-m", "tracker", "bench", "--base-url",
             f"http://127.0.0.1:{gateway.port}", "--model", "gw-model", "--num-prompts", "12",
             "--max-concurrency", "4", "--random-input-len", "16", "--random-output-len", "4",
             "--api-key-env", KEY_ENV, "--timeout", "20", "--workers", str(workers),
             "--json", "bench.json", "--save-requests", "requests.jsonl"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
        assert gateway.seen_keys == {key} and gateway.count >= 12
    assert done.returncode in (0, 3), done.stderr
    report = json.loads((tmp_path / "bench.json").read_text())
    records = [json.loads(line) for line in
               (tmp_path / "requests.jsonl").read_text().splitlines()]
    # the echoes are there, hidden: the tokenizer's refusal, every kind of failed request
    assert "[redacted]" in report["environment"]["tokenizer_fallback"]
    assert {"http_401", "stream_error", "bad_response"} <= {r["error_class"] for r in records}
    assert all("[redacted]" in r["error"] for r in records if r["error"])
    assert "[redacted]" in done.stderr
    found = {name: leaks(text, pieces_of(key)) for name, text in (
        ("bench.json", (tmp_path / "bench.json").read_text()),
        ("requests.jsonl", (tmp_path / "requests.jsonl").read_text()),
        ("stdout", done.stdout), ("stderr", done.stderr))}
    assert not {name: hits for name, hits in found.items() if hits}, done.stderr


# --- a launched server's log ---------------------------------------------------------------

HF_VALUE = "Hq3vN8xT2mK7pL5wR9zC4bYd"  # HF_TOKEN: hidden because of its variable's name
# the launch command: say the key and the token (as a careless engine does), then be the simulator
SAY_THEN_SIM = (
    "import os, runpy, sys; key, hf = os.environ['TT_GATEWAY'], os.environ['HF_TOKEN']; "
    "print(f'api key {key} / {key.upper()} / HF_TOKEN={hf}', flush=True); "
    "print(f'warning: token {hf.upper()} masked {key[:6]}****{key[-6:]}', file=sys.stderr, "
    "flush=True); "
    "sys.argv = ['tracker.sim', *sys.argv[1:]]; "
    "runpy.run_module('tracker.sim', run_name='__main__', alter_sys=True)")

LAUNCHED = """name: launched
target:
  kind: vllm
  model: sim/launched
  api_key_env: TT_GATEWAY
  launch:
    command: {command}
    env_from: [TT_GATEWAY, HF_TOKEN]
    startup_timeout_s: 60
engine:
  block_size: 16
  max_num_seqs: 8
  extra_args: {{sim_decode_base_s: 0.001, sim_prefill_s_per_token: 0.00001, sim_noise: 0}}
"""

LAUNCHED_SUITE = """name: launched
seed: 3
workloads:
  - name: chat
    prompts: {source: fixed, text: "hello there"}
    max_tokens: 4
    concurrency: 2
    num_requests: 4
"""


@pytest.mark.parametrize("key", [KEY, UUID_KEY], ids=["plain", "uuid"])
def test_a_launched_server_that_prints_its_key_and_hf_token_leaves_neither_in_its_log(
        key: str, tmp_path: Path) -> None:
    command = json.dumps([sys.executable, "-c", SAY_THEN_SIM])
    (tmp_path / "launched.yaml").write_text(LAUNCHED.format(command=command))
    (tmp_path / "suite.yaml").write_text(LAUNCHED_SUITE)
    env = {**os.environ, KEY_ENV: key, "HF_TOKEN": HF_VALUE,
           "TRACKER_LOG_DIR": str(tmp_path / "logs")}
    done = subprocess.run(
        [sys.executable, "-m", "tracker", "run", "--config", "launched.yaml", "--suite",
         "suite.yaml", "--json", "run.json", "--quiet", "--db",
         f"sqlite:///{tmp_path / 'tracker.db'}"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    (log,) = (tmp_path / "logs").glob("*.log")
    said = log.read_text(encoding="utf-8")
    assert "api key [redacted] / [redacted] / HF_TOKEN=[redacted]" in said  # the line is there
    assert "warning: token [redacted] masked [redacted]" in said
    assert "tracker-sim" in said  # the server's own output goes on being logged
    files = [p for p in tmp_path.rglob("*") if p.is_file() and p.suffix != ".yaml"]
    found = {str(p.relative_to(tmp_path)): leaks(p.read_bytes().decode("utf-8", "replace"),
                                                 (*pieces_of(key), *pieces_of(HF_VALUE)))
             for p in files}
    found |= {"stdout": leaks(done.stdout), "stderr": leaks(done.stderr)}
    assert not {name: hits for name, hits in found.items() if hits}
