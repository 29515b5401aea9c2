"""Reading one OpenAI answer, a streamed one chunk by chunk or a whole one, and checking it: what
each chunk carries (text, a finish_reason, usage, or an error object), and what the whole answer
must hold (some text, a finish_reason on the last choice, usage that is sane). Standard library
only: load workers import it.

Usage is the server's own count of tokens (``prompt_tokens``, ``completion_tokens``): integers
within 0..MAX_TOKENS, and completion tokens consistent with what was streamed (no fewer than a
quarter of the chunks that carried text: a chunk is one token or a few, never four chunks a
token) and with max_tokens (no more than asked for). Where a server gives no usage, the answer's
words are counted instead, and the level says so ("words, not tokens").
"""

from __future__ import annotations

from typing import Any

MAX_TOKENS = 1 << 24  # a token count past this is not a count
CHUNKS_PER_TOKEN = 4  # more text chunks than this per completion token: the usage is not this answer's


class Answer:
    """What one answer has carried so far. ``chat``: chat completions (text under
    ``message``/``delta``), else completions (text under ``text``)."""

    __slots__ = ("cached_tokens", "chat", "chunks", "error", "finish", "input_tokens", "output_tokens", "problem",
                 "texts", "words", "word_open")

    def __init__(self, chat: bool, keep_text: bool = False) -> None:
        self.chat = chat
        self.texts: list[str] | None = [] if keep_text else None  # the text itself (a multi-turn session's answer)
        self.chunks = 0  # chunks (or choices) that carried text
        self.words = 0  # words of the text, counted across chunk edges
        self.word_open = False  # the text so far ends inside a word
        self.finish: str | None = None  # the last finish_reason seen
        self.input_tokens: int | None = None  # usage.prompt_tokens
        self.output_tokens: int | None = None  # usage.completion_tokens
        self.cached_tokens: int | None = None  # usage.prompt_tokens_details.cached_tokens (None: not given)
        self.error: str | None = None  # the server's words in an error object
        self.problem: str | None = None  # the first malformed thing found

    def take(self, value: Any, streamed: bool) -> bool:
        """One chunk (streamed) or the whole answer's JSON; True when it carried text."""
        if not isinstance(value, dict):
            self.problem = self.problem or "a chunk that is not a JSON object"
            return False
        if "error" in value:
            self.error = self.error or error_words(value["error"])
            return False
        choices = value.get("choices")
        if not isinstance(choices, list):
            self.problem = self.problem or "an answer without a choices list"
            return False
        texted = False
        for choice in choices:
            if not isinstance(choice, dict):
                self.problem = self.problem or "a choice that is not a JSON object"
                return False
            text = self._text(choice, streamed)
            if text is None:
                return False
            if text:
                texted = True
                self._count_words(text)
                if self.texts is not None:
                    self.texts.append(text)
            reason = choice.get("finish_reason")
            if reason is not None:
                if not isinstance(reason, str):
                    self.problem = self.problem or f"a finish_reason that is not a string: {str(reason)[:40]}"
                    return False
                self.finish = reason
        if texted:
            self.chunks += 1
        usage = value.get("usage")
        if usage is not None:
            self._usage(usage)
        return texted

    def _text(self, choice: dict, streamed: bool) -> str | None:
        """The choice's text ("" when it carries none); None (and a problem) when it is not text."""
        if self.chat:
            part = choice.get("delta" if streamed else "message")
            if part is None and streamed:
                return ""
            if not isinstance(part, dict):
                self.problem = self.problem or f"a choice without {'delta' if streamed else 'message'}"
                return None
            text = part.get("content")
            reasoning = part.get("reasoning_content")  # a reasoning model's tokens come first, under this
            text = (text or "") + (reasoning or "") if isinstance(reasoning, str) else text
        else:
            text = choice.get("text")
        if text is None:
            return ""
        if not isinstance(text, str):
            self.problem = self.problem or f"text that is not a string: {str(text)[:40]}"
            return None
        return text

    def _count_words(self, text: str) -> None:
        n = len(text.split())
        if n and self.word_open and not text[0].isspace():
            n -= 1  # the first word goes on the one the last chunk ended in
        self.words += n
        self.word_open = not text[-1].isspace()

    def _usage(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            self.problem = self.problem or "usage that is not a JSON object"
            return
        for key in ("prompt_tokens", "completion_tokens"):
            n = usage.get(key)
            if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= MAX_TOKENS:
                self.problem = self.problem or f"usage.{key} = {str(n)[:40]}, not a count within 0..{MAX_TOKENS}"
                return
        self.input_tokens, self.output_tokens = usage["prompt_tokens"], usage["completion_tokens"]
        # optional: the server's prompt tokens from its prefix cache; a value out of range is left out, not a fault
        details = usage.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        if isinstance(cached, int) and not isinstance(cached, bool) and 0 <= cached <= self.input_tokens:
            self.cached_tokens = cached

    def verdict(self, max_tokens: int | None) -> str | None:
        """What is wrong with the whole answer (one line), or None."""
        if self.problem is not None:
            return self.problem
        # tokens that render as nothing (an end-of-text token generated under ignore_eos) make an
        # answer the server counted and finished; with neither, there was no answer
        if self.chunks == 0 and not (self.output_tokens and self.finish is not None):
            return "an answer with no text"
        if self.finish is None:
            return "no finish_reason on the last choice: the answer was cut short"
        out = self.output_tokens
        if out is not None:
            if self.chunks > CHUNKS_PER_TOKEN * max(out, 1):
                return f"usage.completion_tokens = {out} for {self.chunks} chunks of text: not this answer's count"
            if max_tokens is not None and out > max_tokens:
                return f"usage.completion_tokens = {out}, more than the max_tokens asked ({max_tokens})"
        return None


def error_words(error: Any) -> str:
    """An OpenAI error object's message, on one line (the server's words)."""
    if isinstance(error, dict):
        message = error.get("message")
        text = str(message) if message is not None else str(error)
    else:
        text = str(error)
    return " ".join(text.split())[:200] or "an error with no message"
