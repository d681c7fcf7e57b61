#!/usr/bin/env bash
# The GPU check in one command: diffusion drafts under each cache mode against AR at LLaDA-8B's, SDAR-8B's
# and a 1.5B shape, random bf16 weights made on the GPU, through bench/gpu_check.py. Needs only a Python
# with CUDA torch: nothing to download, nothing to build, nothing carried beyond this checkout. Keeps to
# 5 minutes by its own estimate; the table goes to $OUT/gpu_check.md (or --out). --cpu: tiny shapes here.
#   bash bench/gpu_check.sh [--cpu] [gpu_check.py's flags]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-python3}"
if [ "${1:-}" != --cpu ] && command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
fi
# -I: none of the caller's site customisation or user packages; the checkout's models/ is found by the script.
exec timeout 290 "$python" -I "$root/bench/gpu_check.py" "$@"
