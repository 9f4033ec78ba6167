"""One run: the target up, the suite's workloads in order, telemetry around them, quality after.
Each result goes to a sink as soon as it is measured. The runner knows no database."""
