"""Nightly scheduling: schedules, the run queue, the scheduler, runner workers and alerts.

``schedules`` (the schedules.yaml model) → ``scheduler`` fires slots into the queue
(``tracker.store.run_queue``) → ``worker`` claims and runs them through the runner and the store →
``alerts`` tells a webhook about the regressions a run opened.
"""
