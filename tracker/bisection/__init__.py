"""Bisection: which changed config field made the head regress (plan, probes)."""
