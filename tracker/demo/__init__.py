"""The demo's content on the simulator: ``walk`` runs a tuning walk of configs, ``story`` builds
the demo's history (the walk, then a change that regresses, caught by the nightly watch)."""
