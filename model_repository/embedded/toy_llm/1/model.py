"""A stand-in LLM for streaming load: a decoupled model that answers each prompt with one word per response.

execute() checks each request and hands it to one decode thread, which runs steps over every
sequence in flight: a step multiplies their states by a random matrix (numpy) and waits out
``step_base_ms + step_per_sequence_ms x sequences``, so a step costs more as more sequences share
it, as a batched decode step does; then each sequence gets its next word, and a sequence that has
all its words gets its last one with the final flag. A prompt that is not text (not UTF-8, or no
word of letters: the load engine's random digits) is refused with an error and the final flag.
"""

import json
import queue
import re
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils

WORD = re.compile(r"[^\W\d_]{2,}")  # two or more letters
VOCABULARY = ("the", "a", "model", "token", "stream", "of", "and", "to", "in", "load", "server",
              "answer", "is", "one", "each", "step", "word", "time", "first", "next")


def prompt_problem(value):
    """One line on why ``value`` is not a text prompt, or None."""
    data = value if isinstance(value, bytes) else str(value).encode()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return f"PROMPT is not UTF-8 text ({data[:8].hex(' ')}...)"
    if not WORD.search(text):
        return f"PROMPT holds no word of letters ({text[:20]!r}): not text"
    return None


class Sequence:
    __slots__ = ("sender", "left", "index", "state")

    def __init__(self, sender, tokens, state):
        self.sender = sender
        self.left = tokens
        self.index = 0
        self.state = state


class TritonPythonModel:
    def initialize(self, args):
        params = json.loads(args["model_config"]).get("parameters", {})

        def setting(key, default):
            return float(params.get(key, {}).get("string_value", default))

        self.default_tokens = int(setting("output_tokens", 16))
        self.most_tokens = int(setting("max_output_tokens", 4096))
        self.base_s = setting("step_base_ms", 2) / 1000
        self.per_sequence_s = setting("step_per_sequence_ms", 0.25) / 1000
        width = int(setting("width", 64))
        rng = np.random.default_rng(0)
        self.weights = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)
        self.width = width
        self.incoming = queue.SimpleQueue()
        self.running = True
        self.thread = threading.Thread(target=self.decode, name="toy_llm-decode", daemon=True)
        self.thread.start()

    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            prompt = pb_utils.get_input_tensor_by_name(request, "PROMPT").as_numpy().reshape(-1)
            problem = prompt_problem(prompt[0]) if prompt.size == 1 else f"PROMPT holds {prompt.size} elements, not 1"
            tokens = self.default_tokens
            asked = pb_utils.get_input_tensor_by_name(request, "MAX_TOKENS")
            if problem is None and asked is not None:
                tokens = int(asked.as_numpy().reshape(-1)[0])
                if not 1 <= tokens <= self.most_tokens:
                    problem = f"MAX_TOKENS is {tokens}, outside [1, {self.most_tokens}]"
            if problem is not None:
                sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError(problem)),
                            flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                continue
            seed = sum(bytes(prompt[0])) if isinstance(prompt[0], bytes) else 0
            state = np.random.default_rng(seed).standard_normal(self.width).astype(np.float32)
            self.incoming.put(Sequence(sender, tokens, state))
        return None

    def decode(self):
        active = []
        while self.running:
            if not active:
                try:
                    active.append(self.incoming.get(timeout=0.1))
                except queue.Empty:
                    continue
            while True:
                try:
                    active.append(self.incoming.get_nowait())
                except queue.Empty:
                    break
            started = time.perf_counter()
            states = np.tanh(np.stack([s.state for s in active]) @ self.weights)
            words = np.abs(states).argmax(axis=1) % len(VOCABULARY)
            rest = self.base_s + self.per_sequence_s * len(active) - (time.perf_counter() - started)
            if rest > 0:
                time.sleep(rest)
            still = []
            for seq, state, word in zip(active, states, words, strict=True):
                seq.state = state
                seq.left -= 1
                response = pb_utils.InferenceResponse(output_tensors=[
                    pb_utils.Tensor("TOKEN", np.array([VOCABULARY[int(word)].encode()], dtype=np.object_)),
                    pb_utils.Tensor("INDEX", np.array([seq.index], dtype=np.int32)),
                ])
                seq.index += 1
                if seq.left <= 0:
                    seq.sender.send(response, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                else:
                    seq.sender.send(response)
                    still.append(seq)
            active = still

    def finalize(self):
        self.running = False
        self.thread.join(timeout=5)
