"""Load a checkpoint folder into a DiffusionTransformer: device, dtype, bitsandbytes, placement.

The module is built on the meta device (no memory), then every parameter is read from the safetensors
shards under its real name, converted and put on its device one at a time, so peak memory stays near
the loaded size. Quantized runs replace the transformer blocks' linear layers with bitsandbytes NF4
(double quantization) or int8 layers; bitsandbytes quantizes each weight as it reaches its device.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn

from engines.diffusion.hf.placement import Placement, plan_placement
from engines.diffusion.load_settings import DiffusionLoadSettings
from engines.errors import EngineError
from models.hf_checkpoint import CheckpointInfo
from models.transformer import DiffusionTransformer, Rotary
from models.transformer_spec import expected_tensors

QUANTIZATIONS = ("none", "nf4", "int8")
# bitsandbytes' int8 matmul warns on every call that it casts fp32 inputs to fp16: it is how it works.
warnings.filterwarnings("ignore", message="MatMul8bitLt: inputs will be cast", category=UserWarning)
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


class TorchSetupError(EngineError):
    """The load settings ask for something this machine or this install cannot do."""


@dataclass(frozen=True)
class LoadedModel:
    model: DiffusionTransformer
    device: torch.device
    dtype: torch.dtype
    quantization: str
    placement: Placement


def resolve_device(requested: str) -> torch.device:
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(requested)
    except RuntimeError as error:
        raise TorchSetupError(f"diffusion.device {requested!r} is not a device torch knows ({error})") from error
    if device.type == "cuda" and not torch.cuda.is_available():
        raise TorchSetupError(
            f"diffusion.device is {requested!r} but torch {torch.__version__} sees no CUDA device; "
            'set diffusion.device = "cpu" (or "auto"), or install a CUDA build of torch'
        )
    if device.type not in {"cpu", "cuda"}:
        raise TorchSetupError(f"diffusion.device {requested!r}: Sharpen's torch backend runs on cpu or cuda")
    return device


def resolve_dtype(requested: str, device: torch.device) -> torch.dtype:
    if requested == "auto":
        if device.type == "cpu":
            return torch.float32
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    if requested not in DTYPES:
        raise TorchSetupError(f"diffusion.dtype must be one of auto, {', '.join(DTYPES)}; got {requested!r}")
    if device.type == "cpu" and requested != "fp32":
        raise TorchSetupError(
            f"diffusion.dtype {requested!r} is for CUDA; on the CPU the torch backend computes in fp32 "
            '(set diffusion.dtype = "auto" or "fp32", or use diffusion.quantization to save memory)'
        )
    return DTYPES[requested]


def check_quantization(quantization: str, device: torch.device) -> None:
    """Raise TorchSetupError unless bitsandbytes can run this quantization on this device."""
    if quantization not in QUANTIZATIONS:
        raise TorchSetupError(f"diffusion.quantization must be one of {', '.join(QUANTIZATIONS)}; got {quantization!r}")
    if quantization == "none":
        return
    try:
        import bitsandbytes  # noqa: F401
    except ImportError as error:
        raise TorchSetupError(
            f"diffusion.quantization = {quantization!r} needs bitsandbytes, which is not installed "
            f"({error}); install Sharpen's torch extra: pip install -e '.[torch]'"
        ) from error
    # A one-layer probe: bitsandbytes' backends differ by device and build, and a failure deep in a
    # multi-gigabyte load is worse than a clear refusal now.
    weight = torch.linspace(-1, 1, 64 * 64).reshape(64, 64)
    try:
        layer = quantized_linear(quantization, weight, None, torch.float32, device)
        result = layer(torch.ones(1, 64, device=device))
        if not torch.isfinite(result).all():
            raise RuntimeError("the probe layer returned non-finite values")
    except Exception as error:  # bitsandbytes raises many types for "this device is not supported"
        raise TorchSetupError(
            f"bitsandbytes cannot run {quantization} layers on {device} here ({type(error).__name__}: {error}); "
            'set diffusion.quantization = "none", or use a GGUF quantization through llama.cpp'
        ) from error


def quantized_linear(
    quantization: str, weight: torch.Tensor, bias: torch.Tensor | None, compute: torch.dtype, device: torch.device
) -> nn.Module:
    # bitsandbytes' CPU backend logs a warning when it cannot fetch an optional kernel from the Hub,
    # which Sharpen never lets it do; its own kernels run instead.
    logging.getLogger("bitsandbytes.backends.cpu.ops").setLevel(logging.ERROR)
    import bitsandbytes as bnb

    out_features, in_features = weight.shape
    layer: nn.Module
    if quantization == "nf4":
        layer = bnb.nn.Linear4bit(
            in_features,
            out_features,
            bias=bias is not None,
            compute_dtype=compute,
            compress_statistics=True,  # double quantization
            quant_type="nf4",
            device="meta",
        )
        layer.weight = bnb.nn.Params4bit(
            weight.to(compute), requires_grad=False, compress_statistics=True, quant_type="nf4"
        )
    else:
        layer = bnb.nn.Linear8bitLt(
            in_features, out_features, bias=bias is not None, has_fp16_weights=False, threshold=0.0, device="meta"
        )
        layer.weight = bnb.nn.Int8Params(weight.to(compute), requires_grad=False, has_fp16_weights=False)
    if bias is not None:
        layer.bias = nn.Parameter(bias.to(compute), requires_grad=False)
    return layer.to(device)


class ShardReader:
    """Reads tensors by name from a checkpoint's safetensors shards, opening each shard once."""

    def __init__(self, info: CheckpointInfo, stack: ExitStack) -> None:
        from safetensors import safe_open

        self._info = info
        self._handles: dict[str, Any] = {}
        for name in info.files:
            self._handles[name] = stack.enter_context(safe_open(str(info.path / name), framework="pt", device="cpu"))

    def get(self, name: str) -> torch.Tensor:
        entry = self._info.tensors[name]
        return self._handles[entry.file].get_tensor(name)


def _parameter_groups(model: nn.Module) -> Iterator[tuple[str, nn.Module, list[str]]]:
    for module_name, module in list(model.named_modules()):
        names = [name for name, _ in module.named_parameters(recurse=False)]
        if names:
            yield module_name, module, names


def load_transformer(info: CheckpointInfo, settings: DiffusionLoadSettings) -> LoadedModel:
    """The checkpoint loaded as `settings` ask: device, dtype, quantization ("auto", which only a catalogue
    entry can settle, is none here), GPU memory and offload."""
    if settings.quantization == "auto":
        settings = replace(settings, quantization="none")
    device = resolve_device(settings.device)
    dtype = resolve_dtype(settings.dtype, device)
    check_quantization(settings.quantization, device)
    spec = info.spec
    placement = plan_placement(spec, device, dtype, settings)
    names = expected_tensors(spec)
    with torch.device("meta"):
        model = DiffusionTransformer(spec)
    with ExitStack() as stack:
        reader = ShardReader(info, stack)
        for module_name, module, parameters in _parameter_groups(model):
            target = placement.device_for(module_name)
            tensors = {p: reader.get(names[f"{module_name}.{p}"][0]) for p in parameters}
            quantize = (
                settings.quantization != "none" and isinstance(module, nn.Linear) and module_name.startswith("blocks.")
            )
            if quantize:
                layer = quantized_linear(settings.quantization, tensors["weight"], tensors.get("bias"), dtype, target)
                model.set_submodule(module_name, layer)
                continue
            for parameter, tensor in tensors.items():
                module._parameters[parameter] = nn.Parameter(tensor.to(device=target, dtype=dtype), requires_grad=False)
    model.rotary = Rotary(spec.head_dim, spec.rope_theta).to(placement.device_for("rotary"))
    model.eval()
    if placement.is_split:
        from accelerate import dispatch_model

        model = dispatch_model(model, device_map=placement.device_map(), main_device=device)
    return LoadedModel(model=model, device=device, dtype=dtype, quantization=settings.quantization, placement=placement)
