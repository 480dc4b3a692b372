"""The demo: the claims-agent workflow and its clients for the sandbox downstreams."""
