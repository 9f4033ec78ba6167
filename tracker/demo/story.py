"""The demo's story on the simulator: a config's tuning walk, then a change that regresses.

One config name (``demo-chat``) goes through the versions in ``configs/demo/`` (the files in
order, the last being the change that regresses), each run ``WALK_RUNS`` times on the demo suite,
so its series has levels. Each run is a real simulator run stored like any other, and after each
the nightly watch replays the series it extends and stores the new change points with their
attribution, as a worker does (``tracker.pipeline.watch.watch_run``). The regressing version runs
night after night until the watch has caught its TTFT p99 and throughput regressions
(``STORY_METRICS``, ``MAX_CHANGE_RUNS`` nights at most).

The simulator runs at ``TIME_SCALE`` of its usual step times (``walk.scale_timings``) so the
whole story takes about a minute. The stored versions carry those timings.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from tracker.demo.walk import scale_timings
from tracker.errors import ConfigError, MeasurementError
from tracker.inputs.configs import LoadedConfig, load_config
from tracker.inputs.package_data import shipped_configs
from tracker.inputs.suites import LoadedSuite, load_suite
from tracker.pipeline.execute import execute_suite
from tracker.pipeline.watch import watch_run
from tracker.results import RunResult, RunStatus
from tracker.store.regressions import RegressionRecord

DEMO_FOLDER = "demo"
TIME_SCALE = 0.5  # of the simulator's step times: ~2 s a run, and still steady run to run
# Runs of each version of the walk. The change-point test needs at least min_segment (5) runs on
# each side of a change, and with six a level stands out from its neighbours at alpha 0.005.
WALK_RUNS = 6
MAX_CHANGE_RUNS = 10  # nights the regressing version runs at most before the demo gives up


@dataclass(frozen=True, slots=True)
class DemoVersion:
    label: str  # the file's stem, e.g. "2-awq"
    config: LoadedConfig


@dataclass(frozen=True, slots=True)
class DemoStory:
    """What the demo runs: the walk's versions in order, the change that regresses, the suite."""

    walk: tuple[DemoVersion, ...]
    change: DemoVersion
    suite: LoadedSuite

    @property
    def config_name(self) -> str:
        return self.change.config.config.name


@dataclass(frozen=True, slots=True)
class VersionRuns:
    version: DemoVersion
    runs: tuple[RunResult, ...]

    @property
    def run_ids(self) -> tuple[int, ...]:
        return tuple(run.run_id for run in self.runs)


@dataclass(frozen=True, slots=True)
class DemoHistory:
    """What the demo stored: the runs of each version, and every record the watch opened."""

    versions: tuple[VersionRuns, ...]  # the walk's, then the change's
    records: tuple[RegressionRecord, ...]  # in the order the watch stored them

    @property
    def good(self) -> VersionRuns:
        """The last version before the change: the gate's base."""
        return self.versions[-2]

    @property
    def bad(self) -> VersionRuns:
        return self.versions[-1]

    @property
    def runs(self) -> tuple[RunResult, ...]:
        return tuple(run for version in self.versions for run in version.runs)

    @property
    def caught(self) -> tuple[RegressionRecord, ...]:
        """The regressions (worse direction) whose new level starts on a run of the change."""
        return tuple(record for record in self.records
                     if record.regressed is True and record.run_id in self.bad.run_ids)


HEADLINE_METRIC = "ttft_p99_s"  # the regression the story opens on
# the regressions the story runs until the watch catches (the tail latency and the throughput)
STORY_METRICS = (HEADLINE_METRIC, "output_throughput_tokens_per_s")

# (the version, its run as stored, the records the watch opened after it)
RunListener = Callable[[DemoVersion, RunResult, list[RegressionRecord]], None]


def shipped_demo() -> tuple[list[Path], Path]:
    """The demo config's versions in order (the change that regresses last) and its suite."""
    folder = shipped_configs() / DEMO_FOLDER
    configs = sorted(folder.glob("[0-9]*.yaml"))
    suite = folder / "suite.yaml"
    if len(configs) < 2 or not suite.is_file():
        raise ConfigError(f"{folder}: the demo's configs or suite.yaml are missing; reinstall "
                          "the tracker")
    return configs, suite


def load_demo(time_scale: float = TIME_SCALE) -> DemoStory:
    paths, suite_path = shipped_demo()
    versions = [DemoVersion(path.stem, scale_timings(load_config(path), time_scale))
                for path in paths]
    names = sorted({version.config.config.name for version in versions})
    if len(names) != 1:
        raise ConfigError(f"{suite_path.parent}: the demo's configs must be versions of one "
                          f"config (one name), found {', '.join(names)}; reinstall the tracker")
    return DemoStory(tuple(versions[:-1]), versions[-1], load_suite(suite_path))


def run_night(engine: Engine, version: DemoVersion, suite: LoadedSuite
              ) -> tuple[RunResult, list[RegressionRecord]]:
    """One run, then the nightly watch over every series it extends (as a worker does)."""
    run = execute_suite(engine, version.config, suite)
    if run.status is not RunStatus.COMPLETED:
        reason = f" ({run.status_reason})" if run.status_reason else ""
        raise MeasurementError(f"demo: {version.label}: run {run.run_id} is {run.status.value}"
                               f"{reason}; the story needs completed runs (see `tracker show "
                               f"{run.run_id}`)")
    with Session(engine) as session, session.begin():
        records = watch_run(session, run.config.name, run.suite.name,
                            [workload.name for workload in run.workloads])
    return run, records


def build_history(engine: Engine, story: DemoStory, on_run: RunListener | None = None,
                  *, walk_runs: int = WALK_RUNS, max_change_runs: int = MAX_CHANGE_RUNS
                  ) -> DemoHistory:
    """Run the walk, then the change until the watch catches its TTFT p99 and throughput
    regressions (``STORY_METRICS``, though any caught regression will do after
    ``max_change_runs`` nights). Raise MeasurementError when nothing is caught by then."""
    versions: list[VersionRuns] = []
    records: list[RegressionRecord] = []

    def night(version: DemoVersion) -> RunResult:
        run, found = run_night(engine, version, story.suite)
        records.extend(found)
        if on_run is not None:
            on_run(version, run, found)
        return run

    for version in story.walk:
        versions.append(VersionRuns(version, tuple(night(version) for _ in range(walk_runs))))
    bad: list[RunResult] = []
    history = DemoHistory((*versions, VersionRuns(story.change, ())), tuple(records))
    while len(bad) < max_change_runs:
        bad.append(night(story.change))
        history = DemoHistory((*versions, VersionRuns(story.change, tuple(bad))), tuple(records))
        caught = {record.series.metric for record in history.caught}
        if caught.issuperset(STORY_METRICS):
            return history  # the tail and the throughput; the median is usually caught first
    if history.caught:
        return history
    raise MeasurementError(
        f"demo: the nightly watch did not catch {story.change.label} after {len(bad)} runs "
        f"(runs {bad[0].run_id}-{bad[-1].run_id}); the machine may be too busy for steady "
        "timings: run `tracker demo` again when it is quieter")
