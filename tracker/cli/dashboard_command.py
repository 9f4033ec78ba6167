"""``tracker dashboard``: serve the Streamlit app over the chosen database."""

from __future__ import annotations

import argparse


def cmd_dashboard(args: argparse.Namespace) -> int:
    from tracker.dashboard.launch import run_dashboard  # streamlit loads only for this command
    from tracker.store.db import resolve_db_url

    run_dashboard(resolve_db_url(args.db), args.port, host=args.host,
                  trust_proxy_auth=args.trust_proxy_auth, user_header=args.user_header)
