"""The command line: every command's argument parsing and its thin glue, in one place.

``main`` builds the parser, dispatches, and is the one place errors become exit codes. Each
``*_command(s)`` module defines its command's arguments and imports its work lazily, so a
command starts without loading what it does not use.
"""
