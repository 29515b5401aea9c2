"""The complete recording as one JSON document: its metadata and every event, as recorded
(``Event.to_dict`` form), streamed so that an hour-long recording is not held in memory twice."""

from __future__ import annotations

import json
from typing import IO

from engine.record.reader import Recording

FORMAT = "gpuscale-tui recording export"


def write_json(recording: Recording, out: IO[str]) -> int:
    """Writes the document; returns the number of events."""
    head = {"format": FORMAT, "recording_schema": recording.schema, "metadata": recording.metadata}
    text = json.dumps(head, indent=1)
    out.write(text[: text.rindex("}")].rstrip() + ',\n "events": [')
    count = 0
    for _seq, _ts, _kind, data in recording.raw_rows():
        out.write("\n  " if count == 0 else ",\n  ")
        out.write(data)  # stored as JSON text already: written as is, not re-encoded
        count += 1
    out.write("\n ]\n}\n")
    return count
