"""The tools around durable's runtime: benchmark, fault drill, scale-out harness, sandbox downstreams, demo.

Only the standalone project installs this app (`durable.tools` in INSTALLED_APPS); production
code never imports it (tests/test_layering.py). Its management commands live here too.
"""
