"""Bringing a serving config to life as an endpoint: attach, launch vLLM, or start the simulator.

``resolve`` (open_target, the key from the environment) → ``launcher`` (a vLLM server started and
always stopped) with its ``supervisor`` (the server dies with its tracker). ``doctor`` is the
preflight of a gateway.
"""
