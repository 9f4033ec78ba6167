"""``tracker doctor``: its command line and wiring; the checks live in tracker.targets.doctor."""

from __future__ import annotations

import argparse

from tracker.errors import UsageError
from tracker.eventloop import run_async
from tracker.inputs.configs import load_config
from tracker.targets.doctor import DoctorTarget, render_diagnosis, run_doctor

COMMAND = "doctor"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    doctor = sub.add_parser(
        COMMAND, help="preflight an OpenAI-compatible endpoint: name the cause and fix of "
                      "each failure (exit 0 only when a chat completion returns choices)")
    doctor.add_argument("--config", metavar="FILE", help="serving config with target.base_url")
    doctor.add_argument("--base-url", metavar="URL", help="API root, e.g. https://taotoken.net/api")
    doctor.add_argument("--model", metavar="ID", help="model id to ask for")
    doctor.add_argument("--api-key-env", metavar="VAR",
                        help="NAME of the environment variable holding the key")
    doctor.add_argument("--timeout", type=float, default=20.0, metavar="S",
                        help="seconds per request (default: 20)")


def resolve_target(args: argparse.Namespace) -> DoctorTarget:
    if args.config:
        if args.base_url or args.model:
            raise UsageError("doctor: give --config, or --base-url with --model, not both")
        target = load_config(args.config).config.target
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
    print(render_diagnosis(diagnosis))
    return diagnosis.exit_code
