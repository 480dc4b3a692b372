"""The ready commands the demo hands a newcomer: bin/demo prints them, the README shows them (a test keeps both alike)."""
from __future__ import annotations

import json
import shlex
from typing import Any

TOKEN_VARIABLE = "DURABLE_TOKEN"
CLAIMS = {  # the sandbox's orders (durable/tools/sandbox/state.py) and what each one's customer wrote
    "ORD-1002": "I was charged twice for ORD-1002, please refund",
    "ORD-1003": "ORD-1003 arrived broken, please refund",
}


def start_body(order_id: str) -> dict[str, Any]:
    """What intake POSTs to /api/runs/ to start the claims agent on the order."""
    return {"workflow": "claims-agent", "business_key": order_id,
            "input": {"order_id": order_id, "customer_message": CLAIMS[order_id]}}


def start_command(base_url: str, order_id: str) -> str:
    """One line a shell runs as it is, once $DURABLE_TOKEN holds intake's token."""
    return (f"curl -s -X POST {base_url}api/runs/ -H \"Authorization: Token ${TOKEN_VARIABLE}\" "
            f"-H 'Content-Type: application/json' -d {shlex.quote(json.dumps(start_body(order_id)))}")


def token_command(token: str) -> str:
    return f"export {TOKEN_VARIABLE}={token}"
