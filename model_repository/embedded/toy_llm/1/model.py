"""A stand-in LLM for streaming load: a decoupled model that answers each prompt with one word per response.

execute() checks each request and hands it to one decode thread, which runs steps over every
sequence in flight. With ``decoder`` numpy (the CPU variant) a step multiplies their states by a
random matrix and waits out ``step_base_ms + step_per_sequence_ms x sequences``, so a step costs
more as more sequences share it, as a batched decode step does. With ``decoder`` torch (the GPU
variant; on the instance's GPU, else the CPU) a step is a small transformer decoder's with random
weights: each sequence's last token is embedded, goes through ``layers`` blocks (attention over
that sequence's earlier keys and values, then an MLP) and the next token is the argmax of the
logits, so a step's work grows with the sequences in flight and their lengths. Then each
sequence gets its next word (INDEX counts them from 0), and a sequence that has all its words gets
its last one with the final flag. A prompt that is not text (not UTF-8, or no
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
    __slots__ = ("sender", "left", "index", "state", "slot")

    def __init__(self, sender, tokens, state):
        self.sender = sender
        self.left = tokens
        self.index = 0
        self.state = state  # numpy: the state vector; torch: the last token
        self.slot = None  # torch: its key/value cache slot


class TorchDecoder:
    """A small decoder with random weights (seed 0), one batched step over the sequences in flight.

    Each sequence holds a slot of the key/value cache (``slots`` x ``context`` positions per block,
    on the device); a step writes its keys and values at the sequence's position (modulo
    ``context``: attention over its last ``context`` tokens) and attends over what its slot holds.
    A step is the same few kernels per block whatever the batch, as a batched decode step is."""

    def __init__(self, device, width, layers, vocabulary, slots, context):
        import torch

        self.torch = torch
        torch.backends.cuda.matmul.allow_tf32 = False  # float32 as written
        torch.backends.cudnn.allow_tf32 = False
        self.device = device
        self.width = width
        self.vocabulary = vocabulary
        self.context = context
        g = torch.Generator().manual_seed(0)

        def weight(*shape):
            return (torch.randn(*shape, generator=g) / shape[0] ** 0.5).to(device)

        self.embed = weight(vocabulary, width) * width ** 0.5
        self.blocks = [(weight(width, 3 * width), weight(width, width), weight(width, 4 * width), weight(4 * width, width))
                       for _ in range(layers)]
        self.out = weight(width, vocabulary)
        self.keys = torch.zeros(layers, slots, context, width, device=device)
        self.values = torch.zeros(layers, slots, context, width, device=device)
        self.free = list(range(slots))

    def start(self, prompt):
        """A sequence's first token (from its prompt's bytes)."""
        return int(sum(prompt) % self.vocabulary)

    def take_slot(self):
        return self.free.pop() if self.free else None

    def release(self, slot):
        self.free.append(slot)

    def step(self, tokens, slots, positions):
        """The next token of each sequence (its last token, cache slot, and position)."""
        torch = self.torch
        nn = torch.nn.functional
        with torch.inference_mode():
            x = self.embed[torch.tensor(tokens, device=self.device)]  # (B, width)
            slot = torch.tensor(slots, device=self.device)
            pos = torch.tensor(positions, device=self.device)
            at = pos % self.context
            mask = torch.arange(self.context, device=self.device)[None, :] > pos[:, None]  # not yet written
            for b, (qkv, proj, up, down) in enumerate(self.blocks):
                q, k, v = (nn.layer_norm(x, (self.width,)) @ qkv).split(self.width, dim=1)
                self.keys[b, slot, at] = k
                self.values[b, slot, at] = v
                scores = torch.einsum("bd,btd->bt", q, self.keys[b, slot]) / self.width ** 0.5
                attention = scores.masked_fill(mask, float("-inf")).softmax(dim=1)
                x = x + torch.einsum("bt,btd->bd", attention, self.values[b, slot]) @ proj
                x = x + nn.gelu(nn.layer_norm(x, (self.width,)) @ up) @ down
            return (nn.layer_norm(x, (self.width,)) @ self.out).argmax(dim=1).tolist()  # waits for the device


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
        self.decoder = None
        if params.get("decoder", {}).get("string_value", "numpy") == "torch":
            import torch

            on_gpu = args["model_instance_kind"] == "GPU" and torch.cuda.is_available()
            device = torch.device(f"cuda:{args['model_instance_device_id']}" if on_gpu else "cpu")
            self.decoder = TorchDecoder(device, width, int(setting("layers", 2)), int(setting("vocabulary", 4096)),
                                        int(setting("slots", 128)), int(setting("context", 64)))
        rng = np.random.default_rng(0)
        self.weights = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)
        self.width = width
        self.incoming = queue.SimpleQueue()
        self.waiting = []  # torch: sequences that found no free cache slot, seated at a later step
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
            data = bytes(prompt[0]) if isinstance(prompt[0], bytes) else str(prompt[0]).encode()
            if self.decoder is not None:
                self.incoming.put(Sequence(sender, tokens, self.decoder.start(data)))
                continue
            state = np.random.default_rng(sum(data)).standard_normal(self.width).astype(np.float32)
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
            if self.decoder is not None:
                active = self.seated(active)
                states = self.decoder.step([s.state for s in active], [s.slot for s in active],
                                           [s.index for s in active])
                words = [token % len(VOCABULARY) for token in states]
            else:
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
                    if seq.slot is not None:
                        self.decoder.release(seq.slot)
                    seq.sender.send(response, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                else:
                    seq.sender.send(response)
                    still.append(seq)
            active, self.waiting = still + self.waiting, []

    def seated(self, active):
        """The sequences that hold a cache slot (one is given to each newcomer while any is free);
        the others wait in the queue for a later step."""
        seated = []
        for seq in active:
            if seq.slot is None:
                seq.slot = self.decoder.take_slot()
                if seq.slot is None:
                    self.waiting.append(seq)
                    continue
            seated.append(seq)
        return seated

    def finalize(self):
        self.running = False
        self.thread.join(timeout=5)
