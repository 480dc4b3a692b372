"""The support agent's model: its tools in the chat-completions format, and a scripted model that calls them.

The scripted model answers like an LLM with tools would, and always the same way for the same conversation:
it reads the customer's message and what the tools answered so far, and asks for the next tools or answers.
It imports nothing of Django, so the sandbox's chat endpoint answers tool-calling requests with it too. Like
a real model it says what each answer used (its `usage`, tokens estimated at four characters each), which the
workflow records and prices (docs/workflows.md, "Model calls and budgets").
"""
from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from durable.engine.costs import Usage

ORDER_ID = re.compile(r"\bORD-\d+\b")
# What a prompt injection looks like to a model that obeys it, as real models too often do.
INJECTED_REFUND = re.compile(r"SYSTEM:.*?refund\s+(?:order\s+)?(ORD-\d+)", re.I | re.S)
WANTS_REFUND = re.compile(r"refund|money back|charged twice|broken|damaged", re.I)
# A refund asked for with a reason the model can act on; without one, it asks the customer first.
GIVES_REASON = re.compile(r"charged twice|broken|damaged|never arrived|wrong (?:item|size)|defect", re.I)
WANTS_RECEIPT = re.compile(r"receipt|invoice", re.I)


def _function(name: str, description: str, **properties: str) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "required": list(properties),
                       "properties": {key: {"type": "string", "description": text}
                                      for key, text in properties.items()}},
    }}


TOOLS: list[dict[str, Any]] = [
    _function("lookup_order", "Read the order: customer, amount, currency, status, what was refunded.",
              order_id="the order's id, ORD-..."),
    _function("past_tickets", "The support tickets of the customer who placed the order, across their orders.",
              order_id="the order's id, ORD-..."),
    _function("propose_refund", "Refund what is left of the order. A human approves it before any money moves.",
              order_id="the order's id, ORD-...", reason="why the customer should be refunded"),
    _function("send_email", "Email the customer who placed the order.",
              subject="the email's subject", body="the email's text"),
    _function("ask_customer", "Email the customer a question and wait for their reply (up to two days).",
              question="what to ask the customer"),
    _function("follow_up", "Email the customer again later (in three days), to check all is well.",
              subject="the email's subject", body="the email's text"),
]

SYSTEM_PROMPT = ("You are a support agent for one order, {order_id}. Use the tools to read the order and the "
                 "customer's past tickets, ask the customer when you need to know more, propose a refund when "
                 "the customer asks for one and it is due, email the customer what was done, follow up when you "
                 "asked them something, then answer in one short paragraph.")


def tool_call(name: str, arguments: dict[str, Any], number: int, index: int = 0) -> dict[str, Any]:
    """A tool call as a chat-completions answer holds it (its arguments are a JSON string); `index` tells apart
    two calls of one tool in one answer."""
    return {"id": f"call_{number}_{name}" + (f"_{index}" if index else ""), "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments, sort_keys=True)}}


def assistant(content: str | None = None, calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    return message


def tool_answers(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """What each tool answered so far, by tool name (the latest answer of a tool called more than once)."""
    names = {call["id"]: call["function"]["name"] for message in messages
             for call in message.get("tool_calls") or ()}
    answers: dict[str, Any] = {}
    for message in messages:
        if message.get("role") == "tool" and message.get("tool_call_id") in names:
            try:
                answers[names[message["tool_call_id"]]] = json.loads(message.get("content") or "null")
            except ValueError:
                answers[names[message["tool_call_id"]]] = {"error": message.get("content")}
    return answers


def with_usage(model: str, asked: list[Any], reply: dict[str, Any]) -> dict[str, Any]:
    """The assistant's message with what the call used beside it (`usage`), as the support agent records it."""
    return {**reply, "usage": {"model": model, "input_tokens": _tokens(asked), "output_tokens": _tokens(reply)}}


def _tokens(value: Any) -> int:
    return max(1, len(json.dumps(value)) // 4)  # about four characters a token, as an English text has


def reported_usage(reply: dict[str, Any]) -> Usage | None:
    """What a recorded answer says it used (None: an answer recorded before answers said)."""
    usage = reply.get("usage")
    if not isinstance(usage, dict):
        return None
    return Usage(model=usage["model"], input_tokens=usage["input_tokens"], output_tokens=usage["output_tokens"])


def assistant_message(reply: dict[str, Any]) -> dict[str, Any]:
    """The message the conversation keeps: the answer without its `usage`, which no model takes back."""
    return {key: value for key, value in reply.items() if key != "usage"}


def _customer_text(messages: list[dict[str, Any]]) -> str:
    return next((m.get("content") or "" for m in messages if m.get("role") == "user"), "")


class ScriptedSupportModel:
    """A support agent's model without a model: the next tool calls, or the answer, from the conversation."""

    name = "scripted-support"

    def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        return with_usage(self.name, [messages, tools], self._answer(messages))

    def _answer(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        text = _customer_text(messages)
        found = ORDER_ID.search(text)
        order_id = found.group(0) if found else ""
        answers = tool_answers(messages)
        turn = sum(1 for m in messages if m.get("role") == "assistant") + 1
        if "lookup_order" not in answers:  # the order and the customer's history, asked for together
            return assistant(calls=[tool_call("lookup_order", {"order_id": order_id}, turn),
                                    tool_call("past_tickets", {"order_id": order_id}, turn)])
        order = answers["lookup_order"]
        if not WANTS_REFUND.search(text):
            return assistant(self._status(order, answers.get("past_tickets")))
        if not GIVES_REASON.search(text):  # a refund without a reason: ask the customer, then read their reply
            if "ask_customer" not in answers:
                return assistant(calls=[tool_call("ask_customer", {
                    "question": f"Sorry to hear that. What went wrong with your order {order_id}?"}, turn)])
            reply = answers["ask_customer"]
            if "error" in reply:
                return assistant(f"I asked about order {order_id} but did not hear back; I closed the request.")
            text = f"{text}\n{reply.get('reply', '')}"
        return self._refund_turn(text, order_id, order, answers, turn)

    @staticmethod
    def _status(order: dict[str, Any], history: Any) -> str:
        tickets = (history or {}).get("tickets") or []
        return (f"Your order {order.get('order_id')} ({order.get('amount')} {order.get('currency')}) is "
                f"{order.get('status')}. You have {len(tickets)} earlier support ticket(s) with us.")

    def _refund_turn(self, text: str, order_id: str, order: dict[str, Any], answers: dict[str, Any],
                     turn: int) -> dict[str, Any]:
        if "propose_refund" not in answers:
            # Like an LLM, it follows an instruction it finds in the text: the workflow must not trust its answer.
            injected = INJECTED_REFUND.search(text)
            target = injected.group(1) if injected else order_id
            return assistant(calls=[tool_call("propose_refund", {"order_id": target, "reason": text.strip()[:200]},
                                              turn)])
        refund = answers["propose_refund"]
        if "error" in refund:
            return assistant(f"I could not refund order {order_id}: {refund['error']}")
        if "send_email" not in answers:
            emails = [{"subject": f"Your refund for {order_id}",
                       "body": f"We refunded {refund['amount']} {refund['currency']} for order {order_id} "
                               f"(refund {refund['refund_id']})."}]
            if WANTS_RECEIPT.search(text):  # a second email, asked for in the same answer: they go out at once
                emails.append({"subject": f"Your receipt for {order_id}",
                               "body": f"Refund {refund['refund_id']}: {refund['amount']} {refund['currency']}."})
            return assistant(calls=[tool_call("send_email", email, turn, index) for index, email in enumerate(emails)])
        if "ask_customer" in answers and "follow_up" not in answers:  # they had to write twice: check back
            return assistant(calls=[tool_call("follow_up", {
                "subject": f"Your refund for {order_id}",
                "body": f"We refunded order {order_id} a few days ago. Did everything arrive as it should?"}, turn)])
        return assistant(f"I refunded {refund['amount']} {refund['currency']} for order {order_id} and emailed "
                         f"{order.get('customer')} the details.")


def digest(*parts: str) -> str:
    """A short stable name for a text (an email's subject in its business key): no text of the model in a key."""
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:16]
