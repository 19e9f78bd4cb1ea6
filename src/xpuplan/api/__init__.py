"""The HTTP API (FastAPI): ``create_app()`` from :mod:`xpuplan.api.app`, served by ``xpuplan serve``.

A front end like the CLI: it parses a request, calls a job of :mod:`xpuplan.jobs` and returns the
job's typed result as JSON (the same JSON as ``--json``). No planning or arithmetic happens here.
FastAPI is an optional dependency (``pip install 'xpuplan[api]'``); nothing outside this package
imports it.
"""
