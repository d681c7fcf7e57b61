#!/usr/bin/env bash
# The optional llama.cpp device check (bench/gpu_check.sh is the one that fits a short call): on a machine
# with an NVIDIA GPU, CUDA and PyTorch but no internet, with .device/ carried from bench/gpu_prepare.sh.
# Builds llama-cpp-python with CUDA for this GPU only, then runs bench/gpu_llama_check.py: AR and
# block-causal diffusion on a 135M stand-in fully offloaded, and the torch backend on CUDA; prints tokens/s
# and the ratios. About 6 to 9 minutes, most of it the CUDA build.
#   bash bench/gpu_llama_check.sh [gpu_llama_check.py's flags]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
work="$(mktemp -d)"
tar -xzf .device/llama-cpp-src.tar.gz -C "$work"
started=$(date +%s)
# For this GPU only: one architecture's kernels build in a fraction of the time of the default list.
CMAKE_ARGS="-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=native" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
  python3 -m pip wheel --quiet --no-deps --no-build-isolation --no-cache-dir "$work"/llama_cpp_python-*/ -w "$work/wheel"
echo "llama-cpp-python built with CUDA in $(( $(date +%s) - started )) s"
python3 -m pip install --quiet --no-deps --no-index --no-compile --target "$work/site" "$work"/wheel/*.whl .device/wheels/*.whl
export PYTHONPATH="$work/site:$root" PYTHONUNBUFFERED=1
python3 bench/gpu_llama_check.py --tokenizer .device/smollm2-tokenizer.json.gz "$@"
