"""The dashboard's logic: page registry, cached queries, charts, diffs and the launcher.

The Streamlit scripts live in ``dashboard/`` at the repository root and stay thin: they call
into this package, which reads only through ``tracker.store.queries`` and draws with Plotly.
"""
