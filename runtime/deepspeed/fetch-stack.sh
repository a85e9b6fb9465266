#!/usr/bin/env bash
# Downloads the deepspeed backend's Python stack for a GPU host that has torch and transformers but
# no registry: DeepSpeed (sdist), Accelerate and DeepSpeed's dependencies as wheels for Python 3.12
# x86_64 (about 6 MB). Run on a machine that reaches PyPI; carry the folder to the GPU host and
# run install-stack.sh there. Usage: fetch-stack.sh [DEST=.alst/wheels] [DEEPSPEED_VERSION=0.19.8]
set -euo pipefail
dest=${1:-.alst/wheels}; ver=${2:-0.19.8}
mkdir -p "$dest"
pip download -q --no-deps -d "$dest" "deepspeed==$ver" "accelerate==1.15.0"
pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
  -d "$dest" hjson py-cpuinfo msgpack pydantic einops ninja psutil nvidia-ml-py
ls "$dest"
