"""tracker: a continuous performance-regression tracker for LLM inference serving."""

__version__ = "0.1.0"
