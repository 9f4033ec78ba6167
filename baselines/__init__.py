"""Package data of the tracker (installed as tracker._baselines); not code."""
