"""Every renderer of a result for people and programs: runs, load summaries, telemetry, config
diffs, ad-hoc benches and gate verdicts. The edge: seconds become milliseconds here."""
