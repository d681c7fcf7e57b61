"""Costs of a model never measured, carried from one that was by the two files' work (router/kernel_costs.py):
the router's estimate for a pulled model before `sharpen calibrate` has seen it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from app.service import SharpenService
from app.storage.config import load_config, set_value
from app.storage.paths import sharpen_paths
from engines.cpu_info import cpu_info
from models.gguf_header import read_gguf_header
from models.tensor_mix import mix_of, read_tensor_mix
from router.cost_measurement import QUICK
from router.kernel_costs import (
    AMX,
    AVX512,
    AVX512_FIRST,
    AVX512_SECOND,
    FORMER_TABLE,
    KernelCost,
    machine_table,
    named_table,
    table_for,
)
from router.profile import ArCosts, DiffusionCosts, ModelSize, scaled_ar, scaled_diffusion

MEASURED_AR = ArCosts("small", 400.0, 0.010, 2e-6, decode_work=1e8, row_work=1e8, vocab=50_000, context_work=30 * 576)
MEASURED_DRAFT = DiffusionCosts(
    "small-draft",
    0.008,
    0.001,
    pass_s_per_context=1e-5,
    pass_s_per_row_context=1e-6,
    cache="block",
    sampler_s_per_row=0.0002,
    decode_work=1e8,
    row_work=2e8,
    vocab=50_000,
    context_work=30 * 576,
    batch_work=1.5e8,
)


def test_a_model_s_mix_counts_the_matrices_it_multiplies(tiny_llama_path: Path) -> None:
    header = read_gguf_header(tiny_llama_path)
    mix = read_tensor_mix(tiny_llama_path)
    matrices = [t for t in header.tensors if len(t.shape) == 2]
    tied = not any(t.name == "output.weight" for t in matrices)
    counted = [t for t in matrices if tied or t.name != "token_embd.weight"]
    assert mix.total == sum(t.shape[0] * t.shape[1] for t in counted)
    assert (mix.layers, mix.width, mix.vocab) == (2, 64, 49152)
    # An untied embedding is looked up, not multiplied: only the output matrix counts.
    untied = mix_of([("token_embd.weight", (256, 1000), "Q8_0"), ("output.weight", (256, 1000), "Q6_K")], 1, 256, 1000)
    assert untied.parameters == (("Q6_K", 256_000),)
    tied_mix = mix_of([("token_embd.weight", (576, 1000), "Q8_0")], 1, 576, 1000)
    assert tied_mix.parameters == (("Q8_0", 576_000),)


def test_work_weighs_each_type_by_its_kernel_cost_and_each_layer_by_its_own() -> None:
    one = mix_of([("a.weight", (256, 100), "Q8_0"), ("b.weight", (256, 100), "Q6_K")], 1, 256, 100)
    two = replace(one, layers=2)
    for table in (AMX, AVX512_FIRST, AVX512_SECOND, AVX512):
        work = table.work(one)
        assert work.decode == pytest.approx(
            25_600 * (table.cost("Q8_0").decode + table.cost("Q6_K").decode) + table.layer_decode
        )
        assert work.row == pytest.approx(
            25_600 * (table.cost("Q8_0").row + table.cost("Q6_K").row) + 256 * table.layer_row_per_width
        )
        assert work.batch == pytest.approx(
            25_600 * (table.cost("Q8_0").batch_cost + table.cost("Q6_K").batch_cost) + table.layer_batch
        )
        assert table.work(two).decode - work.decode == pytest.approx(table.layer_decode)
        assert table.work(two).batch - work.batch == pytest.approx(table.layer_batch)
        assert min(table.layer_decode, table.layer_batch, table.layer_row_per_width) > 0
        assert table.cost("NOT_A_TYPE") == table.unknown
        assert table.cost("Q8_0") == KernelCost(1.0, 1.0, 1.0), "the unit both tables count in"


def test_a_batched_pass_s_fixed_part_is_weighed_apart_from_one_row_s() -> None:
    """llama.cpp runs a pass of many rows through other kernels than one row's: on AMX, Q4_K's batched fixed part
    costs more than its one row (LLaDA-8B's passes), Q8_0's no more; a type never measured apart takes one
    row's."""
    assert AMX.cost("Q4_K").batch_cost > AMX.cost("Q4_K").decode
    assert AMX.cost("Q8_0").batch_cost <= AMX.cost("Q8_0").decode
    assert KernelCost(0.7, 1.2).batch_cost == 0.7
    q4_k = mix_of([("a.weight", (4096, 4096), "Q4_K")], 1, 4096, 1000)
    q8_0 = replace(q4_k, parameters=(("Q8_0", 4096 * 4096),))
    assert AMX.work(q4_k).batch / AMX.work(q4_k).decode > AMX.work(q8_0).batch / AMX.work(q8_0).decode


def test_each_cpu_class_has_its_own_table() -> None:
    """The kernels weigh the types differently with AMX and without: Q5_0's batched rows cost several times
    Q8_0's through AMX tiles, about as much without them."""
    assert table_for(frozenset({"avx512f", "amx_tile", "amx_int8"})) is AMX
    assert table_for(frozenset({"avx512f", "avx512_bf16"})) is AVX512
    assert table_for(frozenset()) is AVX512, "no /proc/cpuinfo: the class without AMX"
    assert AMX.cost("Q5_0").row > 2 * AVX512.cost("Q5_0").row
    assert machine_table() is table_for(cpu_info().flags)
    assert named_table(AVX512.name) is AVX512 and named_table(AMX.name) is AMX
    # A refitted table ships under a new name: a profile counted by the first keeps being carried by it.
    for kept in (AVX512_FIRST, AVX512_SECOND):
        assert kept.name != AVX512.name and named_table(kept.name) is kept
    assert named_table("") is FORMER_TABLE, "a profile from before the tables were per class"


def test_a_model_s_costs_are_carried_by_the_table_its_measured_model_was_counted_with() -> None:
    """A profile counted by one table is never mixed with another's figures (a profile copied from another
    machine, or written before the tables were per class)."""
    mix = mix_of([("a.weight", (896, 4864), "Q5_0")], 24, 896, 151936)
    target = ModelSize("q5", 0, 0, "none", mix)
    for table in (AMX, AVX512_FIRST, AVX512_SECOND, AVX512):
        scaled = scaled_ar(replace(MEASURED_AR, kernels=table.name), target)
        assert scaled is not None and scaled.kernels == table.name
        assert scaled.decode_work == pytest.approx(table.work(mix).decode)
        assert scaled.seconds_per_token == pytest.approx(0.010 * table.work(mix).decode / 1e8)
    assert target.work("") == FORMER_TABLE.work(mix)
    assert ModelSize("folder", 0, 0).work(AMX.name) is None, "a checkpoint folder: no mix"


def test_ar_costs_follow_one_row_s_work_and_the_prompt_rate_each_further_row_s() -> None:
    mix = mix_of([("a.weight", (4096, 30_000), "Q4_K")], 32, 4096, 150_000)
    target = ModelSize("big", 0, 0, "none", mix)
    work = AMX.work(mix)
    scaled = scaled_ar(replace(MEASURED_AR, kernels=AMX.name), target)
    assert scaled is not None and not scaled.measured and scaled.scaled_from == "small" and scaled.model == "big"
    assert scaled.seconds_per_token == pytest.approx(0.010 * work.decode / 1e8)
    # A token's attention to each position of context follows the layers' width.
    assert scaled.seconds_per_context_token == pytest.approx(2e-6 * 32 * 4096 / (30 * 576))
    assert scaled.context_work == 32 * 4096
    old = scaled_ar(replace(MEASURED_AR, kernels=AMX.name, seconds_per_context_token=0.0, context_work=0.0), target)
    assert old is not None and old.seconds_per_context_token == 0.0, "a profile from before the context term"
    assert scaled.prompt_tokens_per_s == pytest.approx(400.0 * 1e8 / work.row)
    assert scaled_ar(MEASURED_AR, replace(target, mix=None)) is None
    assert scaled_ar(replace(MEASURED_AR, decode_work=0.0), target) is None, "measured before work was recorded"


def test_diffusion_costs_scale_the_pass_by_work_and_the_sampler_by_the_vocabulary() -> None:
    mix = mix_of([("a.weight", (576, 9_000), "Q4_K")], 60, 576, 150_000)
    target = ModelSize("big-draft", 0, 0, "dual", mix)
    work = AMX.work(mix)
    measured = replace(MEASURED_DRAFT, kernels=AMX.name)
    scaled = scaled_diffusion(measured, target, "cpu")
    assert scaled is not None and not scaled.measured and scaled.cache == "dual"
    # A pass's fixed part follows a batched pass's fixed work, not one row's.
    assert scaled.pass_base_s == pytest.approx(0.008 * work.batch / 1.5e8) and scaled.batch_work == work.batch
    older = scaled_diffusion(replace(measured, batch_work=0.0), target, "cpu")
    assert older is not None and older.pass_base_s == pytest.approx(0.008 * work.decode / 1e8), "before batch work"
    assert scaled.pass_s_per_position == pytest.approx(0.001 * work.row / 2e8)
    # The cost of the context a pass attends to follows the layers' width (here twice the measured model's).
    assert scaled.pass_s_per_context == pytest.approx(2e-5) and scaled.pass_s_per_row_context == pytest.approx(2e-6)
    assert scaled.sampler_s_per_row == pytest.approx(0.0006)
    assert scaled.threshold_passes_per_token == 1.0, "a model's parallelism is its own"


def test_a_draft_model_never_measured_is_estimated_from_the_one_that_was(
    tiny_cacheable_path: Path, tiny_dream_path: Path
) -> None:
    paths = sharpen_paths()
    set_value(paths.config_file, "models.draft", str(tiny_cacheable_path))
    service = SharpenService(load_config(paths.config_file), paths)
    measured = service.calibrations.calibrate(QUICK, lambda _fraction, _label: None)
    assert measured.diffusion.decode_work > 0 and measured.diffusion.vocab == 49152
    assert measured.ar.decode_work > 0 and measured.ar.row_work > 0 and measured.ar.context_work > 0
    service.use_model("draft", str(tiny_dream_path), force=True)
    profile, _ = service.routing.cost_profile()
    draft = profile.diffusion
    assert not draft.measured and draft.scaled_from == tiny_cacheable_path.name
    size = service.routing.model_size("draft")
    assert size is not None and size.shift_rows == draft.shift_rows == 1, "Dream's logits are shifted"
    work = size.work(measured.diffusion.kernels)
    assert work is not None and measured.diffusion.kernels == machine_table().name
    assert measured.diffusion.batch_work > 0 and measured.ar.decode_work > 0
    fixed = measured.diffusion.pass_base_s * work.batch / measured.diffusion.batch_work
    assert draft.pass_base_s == pytest.approx(fixed)
    assert service.calibrations.needed() == ["diffusion"], "still measured quickly before its first draft"
