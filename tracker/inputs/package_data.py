"""The configs, suites and quality sets shipped with the tracker, read as package data.

They live at the repository root (``configs/``, ``baselines/``) and are installed as the packages
``tracker._configs`` and ``tracker._baselines``, so ``tracker demo`` and ``tracker init`` find
them from any directory, in a checkout, an editable install or a wheel.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from tracker.errors import ConfigError


def find_checkout_folder(name: str) -> Path | None:
    """``name`` (``configs``, ``migrations``) of the source checkout this tracker runs from (a
    ``pyproject.toml`` beside the package), else None. An editable install maps the package data
    to the checkout it was made from, so another checkout on ``PYTHONPATH`` would read that one's."""
    root = Path(__file__).resolve().parents[2]
    folder = root / name
    return folder if (root / "pyproject.toml").is_file() and folder.is_dir() else None


def _folder(package: str) -> Path:
    checkout = find_checkout_folder(package.removeprefix("tracker._"))
    if checkout is not None:
        return checkout
    try:
        folder = Path(str(resources.files(package)))
    except ModuleNotFoundError:
        folder = Path("/nonexistent")
    if not folder.is_dir():
        raise ConfigError(f"the tracker's shipped {package.removeprefix('tracker._')} are "
                          "missing from this installation; reinstall the tracker "
                          "(pip install tracker, or pip install -e . in a checkout)")
    return folder


def shipped_configs() -> Path:
    """``configs/``: the example serving configs (and ``walk/``, the simulator's tuning walk)."""
    return _folder("tracker._configs")


def shipped_baselines() -> Path:
    """``baselines/``: the baseline suites (and ``quality/``, their quality sets)."""
    return _folder("tracker._baselines")


def shipped_quality_sets() -> Path:
    return shipped_baselines() / "quality"
