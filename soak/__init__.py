"""The soak test: many concurrent sessions, random answers and faults, and what the processes hold over time.

``soak/server.py`` is the server under test (stdio or Streamable HTTP); ``soak/run.py`` drives it and judges the
run (``make soak DURATION=600``; ``tests/test_soak.py`` runs a short one in ``make test``).
"""
