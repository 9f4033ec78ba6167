"""`tracker diff`: files, git refs and stored versions; secrets never shown."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from tracker.cli.main import main
from tracker.inputs.config_diff import compute_config_diff
from tracker.inputs.configs import load_config
from tracker.store.db import open_store
from tracker.store.runs import save_config_version

BASE = """\
name: prod
target:
  kind: vllm
  model: meta-llama/Llama-3.1-8B-Instruct
  base_url: http://127.0.0.1:8000
  api_key_env: PROD_KEY
engine:
  max_num_seqs: 256
  block_size: 16
"""
HEAD = BASE.replace("max_num_seqs: 256", "max_num_seqs: 128\n  kv_cache_dtype: fp8")


@pytest.fixture
def configs(tmp_path: Path) -> tuple[Path, Path]:
    base, head = tmp_path / "base.yaml", tmp_path / "head.yaml"
    base.write_text(BASE, encoding="utf-8")
    head.write_text(HEAD, encoding="utf-8")
    return base, head


def test_diff_of_two_files_lists_changed_engine_args(configs: tuple[Path, Path],
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", str(configs[0]), str(configs[1])]) == 0
    out = capsys.readouterr().out
    assert "engine.max_num_seqs" in out and "256 → 128" in out
    assert "engine.kv_cache_dtype" in out and "(default) → fp8" in out
    assert "2 differences" in out
    assert "block_size" not in out  # unchanged keys are not listed


def test_identical_configs_say_so(configs: tuple[Path, Path],
                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", str(configs[0]), str(configs[0])]) == 0
    assert "no difference" in capsys.readouterr().out


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_diff_reads_a_git_ref_like_main_colon_path(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "configs").mkdir()
    config = tmp_path / "configs" / "prod.yaml"
    config.write_text(BASE, encoding="utf-8")

    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                       cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    git("add", "configs/prod.yaml")
    git("commit", "-q", "-m", "base")
    config.write_text(HEAD, encoding="utf-8")  # the PR's working copy
    monkeypatch.chdir(tmp_path)
    assert main(["diff", "main:configs/prod.yaml", "configs/prod.yaml"]) == 0
    out = capsys.readouterr().out
    assert "base: main:configs/prod.yaml (prod@" in out
    assert "256 → 128" in out


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_bad_git_ref_is_a_config_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=tmp_path, check=True)
    monkeypatch.chdir(tmp_path)
    assert main(["diff", "main:configs/nope.yaml", "main:configs/nope.yaml"]) == 2
    err = capsys.readouterr().err
    assert "git show main:configs/nope.yaml" in err and "check the revision" in err


def test_diff_reads_stored_versions_by_prefix(configs: tuple[Path, Path], tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "t.db"
    engine = open_store(f"sqlite:///{db}")
    base, head = load_config(configs[0]), load_config(configs[1])
    with Session(engine) as session, session.begin():
        save_config_version(session, base)
        save_config_version(session, head)
    engine.dispose()
    code = main(["diff", base.version[:10], f"prod@{head.version[:8]}", "--db", str(db)])
    assert code == 0
    out = capsys.readouterr().out
    assert f"prod@{base.short_version}" in out and "256 → 128" in out


def test_an_unknown_reference_names_the_three_forms(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", "nowhere.yaml", "nowhere.yaml"]) == 2
    assert "git ref" in capsys.readouterr().err


def test_a_config_holding_a_secret_is_refused_without_showing_it(
        configs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    secret = "sk-abcdefghijklmnopqrstuvwxyz012345"
    leaky = tmp_path / "leaky.yaml"
    leaky.write_text(BASE.replace("  block_size: 16", f"  extra_args:\n    foo: {secret}"),
                     encoding="utf-8")
    assert main(["diff", str(configs[0]), str(leaky)]) == 2
    captured = capsys.readouterr()
    assert secret not in captured.out + captured.err
    assert "value hidden" in captured.err


def test_values_that_look_like_secrets_are_hidden_in_a_diff() -> None:
    changes = compute_config_diff({"target": {"auth_token": "abc"}, "x": "Bearer abc.def"},
                                  {"target": {"auth_token": "xyz"}, "x": "Bearer zzz.yyy"})
    assert {(c.path, c.old, c.new) for c in changes} == {
        ("target.auth_token", "(hidden)", "(hidden)"), ("x", "(hidden)", "(hidden)")}


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_git_ref_starting_with_a_dash_is_refused_not_passed_as_an_option(
        configs: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=tmp_path, check=True)
    monkeypatch.chdir(tmp_path)
    # `git show --output=FILE` would write FILE; the ref must never reach git as an option
    assert main(["diff", "--", "--output=written.txt:x.yaml", str(configs[0])]) == 2
    err = capsys.readouterr().err
    assert "must not start with '-'" in err and err.count("\n") == 1
    assert not (tmp_path / "written.txt:x.yaml").exists()


def _commit(tmp_path: Path, name: str, text: str) -> None:
    (tmp_path / name).write_text(text, encoding="utf-8")
    for args in (["init", "-q", "-b", "main"], ["add", name], ["commit", "-q", "-m", "c"]):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                       cwd=tmp_path, check=True, capture_output=True)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_an_alias_bomb_in_a_git_ref_is_refused_naming_the_ref(
        configs: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    levels = ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"] + [
        f"{b}: &{b} [{', '.join([f'*{a}'] * 9)}]" for a, b in zip("abcdefgh", "bcdefghi",
                                                                 strict=True)]
    _commit(tmp_path, "bomb.yaml", "\n".join(levels) + "\n")
    monkeypatch.chdir(tmp_path)
    assert main(["diff", "main:bomb.yaml", str(configs[0])]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: main:bomb.yaml:") and err.count("\n") == 1
    assert "values once aliases are expanded" in err and "tracker-diff-" not in err


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_huge_file_in_a_git_ref_is_refused_before_it_is_parsed(
        configs: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    _commit(tmp_path, "big.yaml", "name: x\ndescription: '" + "x" * (2 * 1024 * 1024) + "'\n")
    monkeypatch.chdir(tmp_path)
    assert main(["diff", "main:big.yaml", str(configs[0])]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: main:big.yaml: the file is 2097176 bytes, over the limit")


def test_a_secret_inside_a_list_is_hidden_in_a_diff() -> None:
    token = "hf_" + "a1" * 15
    changes = compute_config_diff({"c": ["vllm", "serve"]}, {"c": ["sh", "-c", f"T={token} x"]})
    assert [(c.path, c.old, c.new) for c in changes] == [
        ("c", ["vllm", "serve"], ["sh", "-c", "T=[redacted] x"])]
