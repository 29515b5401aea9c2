#!/usr/bin/env bash
# Pack what a lent GPU machine lacks (it has torch, numpy, aiohttp, rich, nvidia-ml-py, psutil,
# scipy, but no nvidia-pytriton): the tritonserver binary, its libraries, the Python backend and
# the stub for that machine's Python (3.12). Writes .carry/triton.tar.xz (git-ignored, ~27 MB).
set -euo pipefail
cd "$(dirname "$0")/.."
PYVER=${STUB_PYTHON:-3.12}
SP=$(.venv/bin/python -c 'import pytriton, pathlib; print(pathlib.Path(pytriton.__file__).parent.parent)')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/site/pytriton/tritonserver/python_backend_stubs" .carry
cp -a "$SP/pytriton/tritonserver/"{bin,backends,caches} "$tmp/site/pytriton/tritonserver/"
cp -a "$SP/pytriton/tritonserver/python_backend_stubs/$PYVER" "$tmp/site/pytriton/tritonserver/python_backend_stubs/"
rm -rf "$tmp/site/pytriton/tritonserver/backends/python/__pycache__"
touch "$tmp/site/pytriton/__init__.py"   # only the data is needed: find_spec must see a package
cp -a "$SP/nvidia_pytriton.libs" "$tmp/site/"
rm -f "$tmp/site/nvidia_pytriton.libs/"libpython3-*   # used by nothing we run
tar -C "$tmp" -cJf .carry/triton.tar.xz site
ls -la .carry/triton.tar.xz
