"""`gpuscale-tui model export`: the ViT image encoder as ONNX for Triton's ONNX Runtime backend."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("model", help="model utilities")
    msub = p.add_subparsers(dest="model_command", metavar="ACTION", parser_class=type(p), required=True)
    e = msub.add_parser("export", help="write the ViT-B/32 image encoder as ONNX for Triton's ONNX Runtime backend")
    e.add_argument("--arch", default="openclip_vit_b32", choices=("openclip_vit_b32", "vit_tiny"))
    e.add_argument("--weights", default=None, metavar="PATH", help="OpenCLIP checkpoint (default: random weights)")
    e.add_argument("--out", type=Path, default=Path("model_repository"), metavar="DIR")
    e.add_argument("--opset", type=int, default=17)


def run(args: argparse.Namespace) -> int:
    from engine.server.onnx_export import export_onnx

    path = export_onnx(args.arch, args.out, weights=args.weights, opset=args.opset, model_name=args.arch)
    note = "OpenCLIP weights" if args.weights else "random weights (throughput does not depend on weight values)"
    print(f"{path} ({note})")
    return 0
