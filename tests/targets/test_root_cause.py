"""A failed launch's root-cause line, on literal logs of vLLM 0.32 (the CPU build, run here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracker.targets.root_cause import find_root_cause, parse_program

FIXTURES = Path(__file__).parent / "fixtures"
# `vllm serve … --block-size 16` on the CPU build: the worker's traceback at line 74, then the
# engine core's and the API server's wrappers and a resource_tracker warning at the end
with open(FIXTURES / "vllm-0.32-cpu-block-size-16.log", encoding="utf-8", newline="") as _log:
    BLOCK_SIZE_16_LOG = _log.read()  # its progress bars' \r kept, as the launcher reads it
SWAP_SPACE_LOG = """\
Triton is installed, but doesn't include CPU backend. Disabling Triton.
usage: vllm [-h] [-v]
            {chat,complete,serve,launch,bench,collect-env,download-kernels,preload,run-batch,snapshot}
            ...
vllm: error: unrecognized arguments: --swap-space 4
"""
WRAPPERS_ONLY_LOG = """\
(APIServer pid=7) WARNING 12-02 07:33:16 [system_utils.py:255] Found ulimit of 20000: this can cause \
fd limit errors like `OSError: [Errno 24] Too many open files`
(Worker pid=9) WARNING 12-02 07:34:02 [utils.py:597] Failed to create oneDNN linear. \
Exception: could not create a primitive descriptor
RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
/usr/lib/python3.11/multiprocessing/resource_tracker.py:254: UserWarning: resource_tracker: There \
appear to be 1 leaked shared_memory objects to clean up at shutdown
"""
VALIDATION_LOG = """\
(APIServer pid=5) INFO 12-02 08:00:00 [api_utils.py:286] non-default args: {'max_model_len': 999999}
Traceback (most recent call last):
  File "/venv/bin/vllm", line 8, in <module>
pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig
  Value error, User-specified max_model_len (999999) is greater than the derived max_model_len \
(max_position_embeddings=2048 in model's config.json). [type=value_error]
    For further information visit https://errors.pydantic.dev/2.12/v/value_error
"""


def test_the_block_size_failure_names_the_workers_value_error_not_the_last_lines() -> None:
    cause = find_root_cause(BLOCK_SIZE_16_LOG)
    assert cause is not None
    assert cause.text == "ValueError: No common block size for 16 (CPU_ATTN: [MultipleOf(32)])."
    assert cause.line_number == 74
    tail = [line for line in BLOCK_SIZE_16_LOG.split("\n") if line][-3:]  # what was quoted before
    assert "Engine core initialization failed" in tail[0] and "UserWarning" in tail[1]


def test_a_tail_with_the_cause_70_lines_up_names_it_and_a_tail_without_it_the_wrapper() -> None:
    lines = BLOCK_SIZE_16_LOG.split("\n")
    cause = find_root_cause("\n".join(lines[74 - 70 - 1:]))
    assert cause is not None and cause.line_number == 71
    assert cause.text == "ValueError: No common block size for 16 (CPU_ATTN: [MultipleOf(32)])."
    wrapper = find_root_cause("\n".join(lines[-70:]))  # only the engine core's wrapper is left
    assert wrapper is not None and wrapper.text == (
        "RuntimeError: Worker failed with error 'No common block size for 16 (CPU_ATTN: "
        "[MultipleOf(32)]).', please check the stack trace above for the root cause")


def test_a_retired_flag_is_argparses_error_line() -> None:
    cause = find_root_cause(SWAP_SPACE_LOG)
    assert cause is not None
    assert (cause.line_number, cause.text) == \
        (5, "vllm: error: unrecognized arguments: --swap-space 4")


def test_warnings_are_skipped_and_a_wrapper_is_the_answer_only_when_nothing_else_is_there() -> None:
    cause = find_root_cause(WRAPPERS_ONLY_LOG)
    assert cause is not None and cause.line_number == 3
    assert cause.text.startswith("RuntimeError: Engine core initialization failed")


def test_a_validation_error_carries_the_line_that_says_what() -> None:
    cause = find_root_cause(VALIDATION_LOG)
    assert cause is not None and cause.line_number == 4
    assert cause.text.startswith("pydantic_core._pydantic_core.ValidationError: 1 validation error "
                                 "for ModelConfig: Value error, User-specified max_model_len (999999)")


def test_a_log_without_an_error_line_has_no_root_cause() -> None:
    assert find_root_cause("INFO 12-02 08:00:00 [x.py:1] loading\nKilled\n") is None
    assert find_root_cause("") is None


def test_the_root_cause_line_is_redacted() -> None:
    secret = "sk-proj-abcdefghijklmnopqrstuvwxyz0123"
    cause = find_root_cause(f"ValueError: bad header Authorization: Bearer {secret}\n")
    assert cause is not None and secret not in cause.text and "[redacted]" in cause.text


@pytest.mark.parametrize(("command", "program"), [
    (["taskset", "-c", "0", "/home/user/.cache/tracker/vllm/venv/bin/vllm", "serve"], "vllm"),
    (["taskset", "0x1", "vllm", "serve"], "vllm"),
    (["env", "-u", "HOME", "VLLM_CPU_KVCACHE_SPACE=1", "numactl", "--physcpubind=0", "-m", "0",
      "vllm", "serve"], "vllm"),
    (["nice", "-n", "5", "python3", "-m", "vllm.entrypoints.openai.api_server"], "python3"),
    (["vllm", "serve"], "vllm"),
    (["taskset", "-c", "0"], "taskset"),
])
def test_the_failed_program_is_the_one_behind_the_wrappers(command: list[str], program: str) -> None:
    assert parse_program(command) == program


def test_torchs_rank_prefix_is_left_out() -> None:
    log = ("[rank0]: Traceback (most recent call last):\n"
           "[rank0]:   File \"/venv/lib/python3.12/site-packages/vllm/worker.py\", line 9, in load\n"
           "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")
    cause = find_root_cause(log)
    assert cause is not None and cause.line_number == 3
    assert cause.text == "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
