"""A real llama.cpp ``llama-server`` on this machine, for the tests that need a real engine.

Run: .venv/bin/python bench/llama_server.py build        # ~10 minutes on 2 CPUs, once
     .venv/bin/python bench/llama_server.py serve --port 8080
     .venv/bin/python bench/llama_server.py check        # prompt tokens the server counted

``build`` fetches the ``llama-cpp-python`` sdist from PyPI (it vendors llama.cpp), builds only the
``llama-server`` target with cmake (Release, static, native, no tests/examples/UI/OpenSSL, -j2)
into a cache outside the repository (``$TRACKER_CACHE_DIR`` or ``~/.cache/tracker``, under
``llama-server/``), and writes a random-weights LLaMA model with the ``gguf`` package (4 layers,
d=128, a SentencePiece-style vocabulary of 4,096 pieces in which a word is 2-4 tokens).
Both steps are skipped when their output exists. ``serve`` runs the server in the foreground
with the flags the tests use. Nothing is downloaded at run time besides the sdist from PyPI.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import string
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

LLAMA_CPP_PYTHON = "0.3.36"
MODEL_ALIAS = "tracker-random-llama"
CONTEXT_TOKENS = 8192
BUILD_COMMAND = ".venv/bin/python bench/llama_server.py build"
_CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF", "-DGGML_NATIVE=ON",
    "-DLLAMA_BUILD_SERVER=ON", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF", "-DLLAMA_OPENSSL=OFF",
)


def cache_dir() -> Path:
    base = os.environ.get("TRACKER_CACHE_DIR") or Path.home() / ".cache" / "tracker"
    return Path(base).expanduser() / "llama-server"


def server_binary() -> Path:
    return cache_dir() / "build" / "bin" / "llama-server"


def find_server() -> Path | None:
    """The built llama-server, or None (build it with BUILD_COMMAND)."""
    binary = server_binary()
    return binary if binary.is_file() and os.access(binary, os.X_OK) else None


def _run(command: list[str], cwd: Path | None = None) -> None:
    print("+", " ".join(command), flush=True)
    subprocess.run(command, cwd=cwd, check=True)


def fetch_sources() -> Path:
    """The vendored llama.cpp tree of the llama-cpp-python sdist (downloaded once from PyPI)."""
    src = cache_dir() / "src"
    tree = src / f"llama_cpp_python-{LLAMA_CPP_PYTHON}" / "vendor" / "llama.cpp"
    if (tree / "CMakeLists.txt").is_file():
        return tree
    src.mkdir(parents=True, exist_ok=True)
    archive = src / f"llama_cpp_python-{LLAMA_CPP_PYTHON}.tar.gz"
    if not archive.is_file():
        _run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
              f"llama-cpp-python=={LLAMA_CPP_PYTHON}", "-d", str(src)])
    with tarfile.open(archive) as tar:
        tar.extractall(src, filter="data")
    return tree


def build_server(jobs: int = 2) -> Path:
    """llama-server, built once into the cache (skipped when the binary exists)."""
    found = find_server()
    if found is not None:
        print(f"llama-server already built: {found}")
        return found
    tree = fetch_sources()
    build = cache_dir() / "build"
    generator = ["-G", "Ninja"] if _has("ninja") else []
    _run(["cmake", "-S", str(tree), "-B", str(build), *generator, *_CMAKE_FLAGS])
    _run(["cmake", "--build", str(build), "--target", "llama-server", f"-j{jobs}"])
    return server_binary()


def _has(program: str) -> bool:
    return any((Path(d) / program).is_file() for d in os.environ.get("PATH", "").split(":") if d)


# --- the random-weights model -------------------------------------------------------------------

def build_vocabulary(size: int = 4096) -> list[str]:
    """SentencePiece-style pieces: control tokens, 256 byte tokens, characters, lower-case letter
    pairs (with and without the word-start mark ``▁``), then pieces that never occur in the
    prompts' lower-case words (capitalised pairs, digit runs), so a prompt word is two to four
    tokens: 640 words are about 2,050 tokens, as in the model chat-short first overflowed on.
    Every piece is two shorter ones merged; every piece decodes to visible text."""
    mark = "\u2581"
    pieces = ["<unk>", "<s>", "</s>", *(f"<0x{b:02X}>" for b in range(256))]
    lower, upper, digits = string.ascii_lowercase, string.ascii_uppercase, string.digits
    pieces += [mark, *lower, *upper, *digits, *".,:;!?'\"-()"]
    pieces += [mark + c for c in lower + upper + digits]
    pairs = [a + b for a in lower for b in lower]
    pieces += pairs + [mark + p for p in pairs]
    filler = [a + b for a in upper for b in lower] + [a + b for a in digits for b in digits]
    filler += [mark + p for p in filler] + [a + b + c for a in digits for b in digits
                                             for c in digits]
    return (pieces + filler)[:size]


def write_random_model(path: Path, *, seed: int = 0, layers: int = 4, embedding: int = 128,
                       heads: int = 4, feed_forward: int = 256, vocab_size: int = 4096) -> Path:
    """A LLaMA GGUF with random weights (a few MB); written atomically, skipped if present."""
    if path.is_file():
        return path
    import gguf  # the optional extra: pip install 'tracker[tokenizer]'
    import numpy as np

    pieces = build_vocabulary(vocab_size)
    rng = np.random.default_rng(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".part", delete=False) as part:
        temporary = Path(part.name)
    writer = gguf.GGUFWriter(str(temporary), "llama")
    _write_metadata(writer, gguf, pieces, layers=layers, embedding=embedding, heads=heads,
                    feed_forward=feed_forward)

    def weight(*shape: int) -> Any:
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    writer.add_tensor("token_embd.weight", weight(len(pieces), embedding))
    writer.add_tensor("output_norm.weight", np.ones(embedding, dtype=np.float32))
    writer.add_tensor("output.weight", weight(len(pieces), embedding))
    for i in range(layers):
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            writer.add_tensor(f"blk.{i}.{name}.weight", weight(embedding, embedding))
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(embedding, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(embedding, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", weight(feed_forward, embedding))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", weight(feed_forward, embedding))
        writer.add_tensor(f"blk.{i}.ffn_down.weight", weight(embedding, feed_forward))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    temporary.replace(path)
    return path


def _write_metadata(writer: Any, gguf: Any, pieces: list[str], *, layers: int, embedding: int,
                    heads: int, feed_forward: int) -> None:
    writer.add_name(MODEL_ALIAS)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_context_length(CONTEXT_TOKENS)
    writer.add_embedding_length(embedding)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(feed_forward)
    writer.add_head_count(heads)
    writer.add_head_count_kv(heads)
    writer.add_rope_dimension_count(embedding // heads)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(len(pieces))
    writer.add_tokenizer_model("llama")
    writer.add_token_list(pieces)
    writer.add_token_scores([0.0] * 3 + [0.0] * 256 + [-float(i) for i in range(len(pieces) - 259)])
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    types += [gguf.TokenType.BYTE] * 256
    types += [gguf.TokenType.UNUSED if p.startswith("<unused") else gguf.TokenType.NORMAL
              for p in pieces[259:]]
    writer.add_token_types(types)
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(True)
    writer.add_add_space_prefix(True)


def model_file() -> Path:
    return write_random_model(cache_dir() / f"{MODEL_ALIAS}.gguf")


def serve_command(binary: Path, model: Path, port: int, *, host: str = "127.0.0.1",
                  slots: int = 4, threads: int = 1) -> list[str]:
    """The flags the tests serve with: 8,192 tokens of context shared by ``slots`` slots."""
    return [str(binary), "-m", str(model), "--alias", MODEL_ALIAS, "--host", host,
            "--port", str(port), "-c", str(CONTEXT_TOKENS), "-np", str(slots), "--kv-unified",
            "-t", str(threads), "--metrics", "--no-webui"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as response:
            return bool(response.status == 200)
    except (OSError, ValueError):
        return False  # refused while starting, or 503 while the model loads


@contextlib.contextmanager
def running_server(log_path: Path, *, timeout_s: float = 120.0) -> Iterator[str]:
    """llama-server on a free port of 127.0.0.1, serving the random model: yields its URL once
    /health answers 200; stopped (SIGTERM, then SIGKILL) afterwards. Its output goes to
    ``log_path``."""
    binary = find_server()
    if binary is None:
        raise RuntimeError(f"llama-server is not built; run: {BUILD_COMMAND}")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    with log_path.open("wb") as log:
        process = subprocess.Popen(serve_command(binary, model_file(), port), stdout=log,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + timeout_s
            while not _healthy(url):
                if process.poll() is not None or time.monotonic() > deadline:
                    tail = log_path.read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"llama-server did not become healthy:\n{tail}")
                time.sleep(0.1)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


async def measure_workload(url: str, workload: Any, traffic: Any, model: str) -> list[Any]:
    """The measured requests' records of one workload sent as ``traffic`` (its first phase)."""
    from tracker.load.bodies import build_request_specs
    from tracker.load.generator import Endpoint, LoadGenerator
    from tracker.load.phases import WorkloadPhases, build_plan

    warmup, measured = build_request_specs(workload, traffic, model=model,
                                           supports_ignore_eos=True)
    phase = WorkloadPhases(workload, 0).next_phase()
    assert phase is not None
    plan = build_plan(workload, phase, warmup, measured)
    return list((await LoadGenerator(Endpoint(url), plan).run()).records)


async def _check(url: str) -> None:
    """Prints what llama-server counted for `tracker bench --random-input-len 256` on
    completions and for chat-short, with prompts in words and in the server's tokenizer."""
    from tracker.cli.bench_command import BenchArgs, build_workload
    from tracker.inputs.suites import Suite, build_loaded_suite, load_suite
    from tracker.load.generator import Endpoint
    from tracker.targets.exact_prompts import adapt_suite_traffic
    from tracker.targets.model_tokenizer import open_tokenizer

    bench = build_workload(BenchArgs(url, endpoint_type="completions", random_input_len=256,
                                     random_output_len=16, num_prompts=24, max_concurrency=4,
                                     ignore_eos=True))
    suites = [build_loaded_suite(Suite(name="bench", workloads=[bench]), "-"),
              load_suite(ROOT / "baselines" / "chat-short.yaml")]
    for suite in suites:
        async with open_tokenizer(Endpoint(url), MODEL_ALIAS) as tokenizer:
            started = time.perf_counter()
            exact = await adapt_suite_traffic(suite.traffic, suite.suite.workloads, tokenizer)
            built_s = time.perf_counter() - started
        print(f"{suite.suite.name}: tokenizer {exact.tokenizer} (adds {exact.special_tokens} "
              f"to a completion), prompts built in {built_s:.2f} s")
        for workload in suite.suite.workloads:
            for label, traffic in (("words", suite.traffic), ("exact", exact.traffic)):
                records = await measure_workload(url, workload, traffic[workload.name],
                                                 MODEL_ALIAS)
                counts = sorted({r.input_tokens for r in records if r.ok})
                failed = [r for r in records if not r.ok]
                first = f"; first: {failed[0].error[:100]}" if failed else ""
                print(f"  {workload.name} {label}: {len(records) - len(failed)}/{len(records)} "
                      f"ok, usage.prompt_tokens {counts[:1]}..{counts[-1:]}, requested "
                      f"{traffic[workload.name].requests[0].requested_input_tokens}{first}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="build llama-server and write the model (once)")
    build.add_argument("--jobs", type=int, default=2)
    serve = commands.add_parser("serve", help="serve the random model in the foreground")
    serve.add_argument("--port", type=int, default=8080)
    commands.add_parser("check", help="print the prompt tokens llama-server counts for the "
                        "word prompts and the exact ones (bench, chat-short)")
    args = parser.parse_args(argv)
    if args.command == "build":
        print(f"llama-server: {build_server(args.jobs)}\nmodel: {model_file()}")
        return 0
    if args.command == "check":
        with tempfile.TemporaryDirectory() as scratch, \
                running_server(Path(scratch) / "llama-server.log") as url:
            asyncio.run(_check(url))
        return 0
    binary = find_server()
    if binary is None:
        print(f"llama-server is not built; run: {BUILD_COMMAND}", file=sys.stderr)
        return 2
    os.execv(binary, serve_command(binary, model_file(), args.port))


if __name__ == "__main__":
    sys.exit(main())
