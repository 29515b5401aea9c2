"""Multi-turn sessions (load.turns > 1, the chat transports): a session is one user of the
concurrency, one connection's conversation. Its first turn sends a prompt as the user's message;
each next turn sends the conversation so far, the server's own answer to the last turn appended
as the assistant's message, and a new user message (the next prompt); after load.turns turns the
user starts a new conversation. A turn that fails ends its conversation (the next starts anew).

The user's think time between turns is load.think_time_s (the load worker's, for every request
of concurrency mode: engine/load/worker.py's ``after``). Each request is built at send time (the conversation is only known then), from the body the sweep
made for its prompt. Standard library only: load workers import it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from engine.net.http1 import Endpoint, encode_request


@dataclass(frozen=True)
class Session:
    """What every conversation of a sweep shares (pickled to the load workers)."""

    turns: int
    endpoint: Endpoint
    path: str  # under the URL's /v1
    headers: dict[str, str]
    bodies: tuple[bytes, ...]  # each prompt's single-turn body (its "messages": one user message)


class Conversation:
    """One user's conversation on one connection (kept across its reconnects)."""

    __slots__ = ("messages", "session", "turn", "_docs")

    def __init__(self, session: Session) -> None:
        self.session = session
        self.messages: list[dict[str, str]] = []
        self.turn = 0  # turns answered in this conversation
        self._docs: dict[int, dict[str, Any]] = {}

    def request(self, index: int) -> bytes:
        """The request for prompt ``index`` as this conversation's next turn."""
        doc = self._docs.get(index)
        if doc is None:
            doc = self._docs[index] = json.loads(self.session.bodies[index])
        self.messages.append(doc["messages"][-1])
        body = json.dumps({**doc, "messages": self.messages}).encode()
        return encode_request("POST", self.session.endpoint, self.session.path, self.session.headers, body)

    def answered(self, text: str | None) -> None:
        """The turn's answer (None: it failed): appended, or the conversation ends."""
        self.turn += 1
        if text is None or self.turn >= self.session.turns:
            self.messages, self.turn = [], 0
        else:
            self.messages.append({"role": "assistant", "content": text})
