"""``tracker doctor``: its command line and wiring. The checks live in tracker.targets.doctor."""

from __future__ import annotations

import argparse

from tracker.errors import UsageError
from tracker.eventloop import run_async
from tracker.inputs.configs import load_config
from tracker.redaction import say
from tracker.targets.doctor import DoctorTarget, render_diagnosis, run_doctor
from tracker.targets.vllm_install import check_vllm_engine


def resolve_target(args: argparse.Namespace) -> DoctorTarget:
    if args.config:
        if args.base_url or args.model:
            raise UsageError("doctor: give --config, or --base-url with --model, not both")
        loaded = load_config(args.config)
        check_vllm_engine(loaded)  # a flag or value the vLLM refuses: exit 2, whatever else
        target = loaded.config.target
        if target.base_url is None:
            raise UsageError(
                f"{args.config}: target has no base_url: doctor checks a running endpoint; a "
                f"kind '{target.kind}' config without one is started by `tracker run` itself")
        return DoctorTarget(target.base_url, target.model, target.api_key_env, args.timeout)
    if not args.base_url or not args.model:
        raise UsageError("doctor: give --config FILE, or --base-url URL --model ID "
                         "[--api-key-env VAR]")
    return DoctorTarget(args.base_url, args.model, args.api_key_env, args.timeout)


def cmd_doctor(args: argparse.Namespace) -> int:
    diagnosis = run_async(run_doctor(resolve_target(args)))
    say(render_diagnosis(diagnosis))
    return diagnosis.exit_code
