"""What an agent reads instead of guessing: the metric registry and the reference pages.

``tracker://metrics`` is the registry (``tracker.metrics``) as JSON: every metric's unit,
direction and definition, which ones the gate compares and which the nightly watch follows.
``tracker://docs/<page>.md`` are the pages of ``docs/`` of the checkout this tracker runs from
(a wheel ships no docs: then only the registry is listed). Every text passes the one redaction.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracker.errors import NotFoundError
from tracker.inputs.package_data import find_checkout_folder
from tracker.mcp.shapes import to_json
from tracker.metrics import COMPARED_METRICS, REGISTRY
from tracker.pipeline.watch import WATCHED_METRICS

METRICS_URI = "tracker://metrics"
DOCS_PREFIX = "tracker://docs/"


@dataclass(frozen=True, slots=True)
class ResourceSpec:
    uri: str
    name: str
    description: str
    mime_type: str


def list_resources(docs: Path | None = None) -> list[ResourceSpec]:
    found = [ResourceSpec(METRICS_URI, "metrics", "The metric registry: every metric's unit, "
                          "direction (lower or higher is better) and definition; which the gate "
                          "compares and which the nightly watch follows.", "application/json")]
    for page in doc_pages(docs):
        found.append(ResourceSpec(f"{DOCS_PREFIX}{page.name}", f"docs/{page.name}",
                                  first_line(page), "text/markdown"))
    return found


def doc_pages(docs: Path | None = None) -> list[Path]:
    folder = docs if docs is not None else find_checkout_folder("docs")
    return [] if folder is None else sorted(folder.glob("*.md"))


def first_line(page: Path) -> str:
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.strip():
            return line.lstrip("# ").strip()
    return page.name


def read_resource(uri: str, docs: Path | None = None) -> tuple[str, str]:
    """The text and MIME type of ``uri``. NotFoundError names the ones there are."""
    if uri == METRICS_URI:
        return json.dumps(to_json(registry_json()), ensure_ascii=False, indent=1), \
            "application/json"
    pages = {f"{DOCS_PREFIX}{page.name}": page for page in doc_pages(docs)}
    page = pages.get(uri)
    if page is None:
        known = ", ".join([METRICS_URI, *pages]) if len(pages) < 30 else \
            f"{METRICS_URI} and {len(pages)} docs pages"
        raise NotFoundError(f"resource {uri!r} does not exist; the resources are {known} "
                            "(resources/list)")
    return to_json(page.read_text(encoding="utf-8")), "text/markdown"


def registry_json() -> dict[str, Any]:
    compared = {metric.name for metric in COMPARED_METRICS}
    return {
        "units": "SI: seconds (s), bytes, tokens/s, req/s, fraction (0..1), count; every tool "
                 "answers in these units and names the unit with each value",
        "metrics": [{"name": m.name, "unit": m.unit, "direction": m.direction.value,
                     "description": m.description, "latency": m.latency,
                     "statistic": m.statistic, "bit_constant": m.bit_constant,
                     "configured_by": list(m.configured_by),
                     "compared_by_gate": m.name in compared,
                     "watched_nightly": m.name in WATCHED_METRICS}
                    for m in REGISTRY.values()],
    }
