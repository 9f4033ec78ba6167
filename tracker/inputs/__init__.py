"""What a run is asked to do, read and validated at the boundary (no network, no store).

``yamlfile`` (YAML within limits, errors with file and line) feeds ``configs`` (serving configs,
versioned by content) and ``suites`` (baseline suites, with ``prompts`` and ``tokenizer``).
``config_diff`` says what differs between two configs.
"""
