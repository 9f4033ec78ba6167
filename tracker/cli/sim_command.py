"""``tracker sim serve``: the embedded simulator in the foreground, for a kind: sim config."""

from __future__ import annotations

from tracker.errors import ConfigError, ExitCode
from tracker.inputs.configs import load_config
from tracker.redaction import say


def cmd_sim_serve(config_path: str, host: str, port: int) -> int:
    from tracker.sim.server import serve_forever

    loaded = load_config(config_path)
    if loaded.config.target.kind != "sim":
        raise ConfigError(f"{config_path}: target.kind: the simulator serves only kind 'sim' "
                          f"configs (got {loaded.config.target.kind!r})")

    def ready(base_url: str) -> None:
        say(f"simulator for {loaded.config.name} ({loaded.config.target.model}) on {base_url} "
            "(OpenAI-compatible; Ctrl-C stops)")

    serve_forever(loaded.config, host, port, on_ready=ready)
    return ExitCode.OK
