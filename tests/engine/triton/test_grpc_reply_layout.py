"""grpc_common.reply_layout: an answer that passed its check, learnt as its bytes but for its raw
outputs' contents, so that the next answer of the same bytes is checked by compare; anything
else is parsed as before."""

from __future__ import annotations

from typing import Any

from engine.triton.transports.grpc_common import ReplyLayouts, check_answer, messages, reply_layout

OUTPUTS = (("OUT_A", "FP32"), ("OUT_B", "INT8"))


def reply(a: bytes = b"\0" * 8, b: bytes = b"\1\2", shape_a: tuple[int, ...] = (1, 2)) -> Any:
    r = messages().ModelInferResponse(model_name="m", model_version="1")
    for name, datatype, shape, blob in (("OUT_A", "FP32", shape_a, a), ("OUT_B", "INT8", (1, 2), b)):
        out = r.outputs.add()
        out.name, out.datatype = name, datatype
        out.shape.extend(shape)
        r.raw_output_contents.append(blob)
    return r


def framed(r: Any) -> bytes:
    body = r.SerializeToString()
    return b"\0" + len(body).to_bytes(4, "big") + body


def test_an_answer_of_the_same_layout_matches_and_gives_its_own_values() -> None:
    good = reply()
    assert check_answer(good, OUTPUTS) is None
    layout = reply_layout(framed(good), 5, ("OUT_A", "OUT_B"))
    assert layout is not None
    other = framed(reply(a=bytes(range(8)), b=b"\7\7"))
    assert layout.matches(other) and layout.outputs(other) == {"OUT_A": bytes(range(8)), "OUT_B": b"\7\7"}


def test_an_answer_of_the_same_size_but_another_layout_does_not_match() -> None:
    layouts = ReplyLayouts()
    good = reply()
    layouts.learn(framed(good), 5, good)
    assert layouts.known(framed(reply(b=b"\5\6"))) is not None
    turned = framed(reply(shape_a=(2, 1)))  # as long, the shape another
    assert len(turned) == len(framed(good)) and layouts.known(turned) is None
    assert layouts.known(framed(reply(a=b"\0" * 12))) is None  # another size: not learnt


def test_no_layout_where_raw_outputs_are_not_the_last_fields_or_not_one_per_output() -> None:
    good = reply()
    body = framed(good)
    assert reply_layout(body + b"\x0a\x01m", 5, ("OUT_A", "OUT_B")) is None  # model_name again, after them
    assert reply_layout(body, 5, ("OUT_A",)) is None
    assert reply_layout(body[:-1], 5, ("OUT_A", "OUT_B")) is None  # cut short
