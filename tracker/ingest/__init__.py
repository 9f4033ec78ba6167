"""Other tools' result files as tracker runs: ``vllm bench serve``, GuideLLM, AIPerf.

A stage between ``inputs`` and the results: it reads a file and returns ``tracker.results``
values, and the store saves them (``tracker.store.imported_runs``). docs/import-formats.md maps
each tool's fields onto the tracker's.
"""

from tracker.ingest.sniff import load_imported, sniff_format
from tracker.ingest.source import FORMATS, ImportedRun, ImportFormatError

__all__ = ["FORMATS", "ImportFormatError", "ImportedRun", "load_imported", "sniff_format"]
