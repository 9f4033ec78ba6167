"""``tracker mcp``: serve the Model Context Protocol server over the chosen database
(``tracker.mcp``, docs/mcp.md). The SDK loads only for this command."""

from __future__ import annotations

import argparse

from tracker.errors import ExitCode


def cmd_mcp(args: argparse.Namespace) -> int:
    from tracker.mcp.serving import ServeOptions, serve
    from tracker.store.db import resolve_db_url

    options = ServeOptions(transport=args.transport, host=args.host, port=args.port,
                           allow_writes=args.allow_writes, trust_proxy_auth=args.trust_proxy_auth,
                           user_header=args.user_header)
    serve(resolve_db_url(args.db), options)
    return ExitCode.OK
