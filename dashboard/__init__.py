"""Package data of the tracker (installed as tracker._dashboard_app); not code."""
