"""The PR gate: does head regress against base? ``gating`` runs or reads both sides and asks
``tracker.analysis`` for each verdict. ``config_refs`` names a config by file, git ref or stored
version."""
