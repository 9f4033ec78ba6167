"""Package data of the tracker (installed as tracker._configs); not code."""
