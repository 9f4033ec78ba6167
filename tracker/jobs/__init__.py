"""Jobs end to end: inputs → runner → store. ``execute`` runs one suite against one config and
stores it; ``walk`` is the simulator's tuning walk; ``demo`` builds the demo's history."""
