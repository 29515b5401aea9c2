"""`gpuscale-tui data from-images`: a folder of photos as an input-data file (perf_analyzer's
--input-data JSON) for --input-data."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("data", help="input-data files (perf_analyzer's --input-data JSON) for --input-data")
    dsub = p.add_subparsers(dest="data_command", metavar="ACTION", parser_class=type(p), required=True)
    d = dsub.add_parser("from-images", help="one entry per photo (JPEG/PNG) of a folder: decoded, resized, "
                                            "centre-cropped and normalised as OpenCLIP's FP32 CHW (needs [data]), "
                                            "or with --raw each file's bytes as a BYTES element")
    d.add_argument("folder", type=Path, metavar="FOLDER", help="a folder of JPEG or PNG photos (file-name order)")
    d.add_argument("--input", required=True, metavar="NAME", help="the model's input the photos go to (e.g. image)")
    d.add_argument("--out", type=Path, required=True, metavar="FILE", help="the JSON file to write")
    d.add_argument("--size", type=int, default=224, metavar="PIXELS", help="side of the square crop (default: 224)")
    d.add_argument("--raw", action="store_true",
                   help="each file's bytes as one BYTES element, for a model that decodes JPEGs itself")


def run(args: argparse.Namespace) -> int:
    from engine.triton.input_images import images_document

    document = images_document(args.folder, args.input, size=args.size, raw=args.raw)
    text = json.dumps(document, separators=(",", ":"))
    partial = args.out.with_name(f".{args.out.name}.partial")
    try:
        partial.write_text(text)
        partial.replace(args.out)
    finally:
        partial.unlink(missing_ok=True)
    what = "raw bytes (BYTES)" if args.raw else f"FP32 [3, {args.size}, {args.size}], OpenCLIP-normalised"
    print(f"{args.out}: {len(document['data'])} entries for input {args.input!r}, {what}")
    return 0
