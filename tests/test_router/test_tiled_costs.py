"""Passes whose matrices run through ggml's tiled k-quant kernels (router/kernel_costs.py TILED_FROM): on a CPU
without AMX a Q6_K or Q5_K matrix costs whole tiles of 16 rows from 8 rows on, and its weights are unpacked
once per window of 256 rows. The figures behind these tests: LLaDA-8B's shape at Q4_K_M, cut to 2 layers,
block passes on an AMD EPYC (training/NOTES.md): 4 rows 56 ms, 8 rows 155, 16 rows 166, 24 rows 253, 32 rows
262."""

from __future__ import annotations

from dataclasses import replace

import pytest

from models.tensor_mix import TensorMix
from router.cost import estimate_diffusion, pass_seconds
from router.kernel_costs import AMX, AVX512, AVX512_SECOND, TILE_ROWS, TILE_WINDOW, TILED_FROM, KernelTable
from router.profile import ArCosts, DiffusionCosts, ModelSize, scaled_ar, scaled_diffusion
from router.request import DiffusionPlan

# The embedded pair as a calibration on that machine recorded it (run 8 in docs/benchmarks.md).
MEASURED = DiffusionCosts(
    "sharpen-draft",
    0.01228,
    0.001651,
    pass_s_per_context=1.71e-6,
    pass_s_per_row_context=1.15e-6,
    cache="block",
    decode_work=2.485e8,
    row_work=2.347e8,
    vocab=49152,
    context_work=17280,
    batch_work=2.923e8,
)
MEASURED_AR = ArCosts(
    "sharpen-write", 728.7, 0.007545, 2.34e-6, decode_work=2.485e8, row_work=2.347e8, context_work=17280
)
# Block passes of LLaDA-8B's shape at Q4_K_M after a 192-token prompt, fastest of 5, ms by rows, at 2 and 10
# layers (training/NOTES.md).
# (Rows past a multiple of 4 are left out: Q4_K's repacking kernels run them one at a time, which the
# router does not model; Sharpen's blocks are multiples of 4.)
MEASURED_PASSES: dict[int, dict[int, float]] = {
    2: {4: 56, 8: 155, 16: 166, 24: 253, 32: 262},
    10: {4: 150, 8: 348, 16: 411, 24: 657, 32: 711},
}


def llada_8b_q4_k_m(layers: int) -> TensorMix:
    """LLaDA-8B's matrices at Q4_K_M: the output and half the layers' value and down projections in Q6_K."""
    width, ffn, vocab = 4096, 12288, 126464
    q6_k = vocab * width + (layers + 1) // 2 * (width * width + width * ffn)
    q4_k = layers * (4 * width * width + 3 * width * ffn) - (layers + 1) // 2 * (width * width + width * ffn)
    return TensorMix((("Q4_K", q4_k), ("Q6_K", q6_k)), layers, width, vocab)


def block_passes(table: KernelTable, mix: TensorMix) -> DiffusionCosts:
    costs = scaled_diffusion(replace(MEASURED, kernels=table.name), ModelSize("llada", 0, 0, "block", mix), "cpu")
    assert costs is not None
    return costs


def ms(rows: int, costs: DiffusionCosts) -> float:
    return pass_seconds(rows, costs, 192) * 1000


def relative_to_16_rows(passes: dict[int, float]) -> list[float]:
    return [passes[rows] / passes[16] for rows in sorted(passes)]


@pytest.mark.parametrize("layers", sorted(MEASURED_PASSES))
def test_from_8_rows_a_q6_k_matrix_costs_whole_tiles_of_16_rows(layers: int) -> None:
    """Each row count's pass against the 16-row one as measured, within 20%: 8 rows cost nearly what 16 do, 24
    nearly what 32 do. The line before tiles put the 8-row pass at 0.6 of the 16-row one (measured: 0.93)."""
    measured = MEASURED_PASSES[layers]
    costs = block_passes(AVX512, llada_8b_q4_k_m(layers))
    assert costs.unpack_s > 0 and costs.tiled_s_per_tile_row > 0
    estimated = relative_to_16_rows({rows: ms(rows, costs) for rows in measured})
    assert estimated == pytest.approx(relative_to_16_rows(measured), rel=0.2)
    line = block_passes(AVX512_SECOND, llada_8b_q4_k_m(layers))
    assert line.unpack_s == 0
    by_the_line = relative_to_16_rows({rows: ms(rows, line) for rows in measured})
    assert by_the_line != pytest.approx(relative_to_16_rows(measured), rel=0.2)


def test_below_8_rows_and_through_amx_kernels_a_pass_is_one_line() -> None:
    tiled = block_passes(AVX512, llada_8b_q4_k_m(2))
    steps = [ms(rows + 1, tiled) - ms(rows, tiled) for rows in range(1, TILED_FROM - 1)]
    assert steps == pytest.approx([steps[0]] * len(steps))
    amx = block_passes(AMX, llada_8b_q4_k_m(2))
    assert amx.unpack_s == 0, "with AMX these types run through AMX tiles (ggml-cpu/amx), not the tiled kernels"
    steps = [ms(rows + 1, amx) - ms(rows, amx) for rows in (6, 7, 8, 15, 16, 17, 255, 256)]
    assert steps == pytest.approx([steps[0]] * len(steps))


def test_each_window_of_256_rows_unpacks_the_weights_again() -> None:
    costs = block_passes(AVX512, llada_8b_q4_k_m(2))
    jump = ms(TILE_WINDOW + 1, costs) - ms(TILE_WINDOW, costs)
    assert jump == pytest.approx(costs.unpack_s * 1000 + next_tile_ms(costs) + line_row_ms(costs), rel=1e-6)
    within_a_tile = ms(TILE_WINDOW + 2, costs) - ms(TILE_WINDOW + 1, costs)
    assert within_a_tile == pytest.approx(line_row_ms(costs), rel=1e-6)


def next_tile_ms(costs: DiffusionCosts) -> float:
    return TILE_ROWS * costs.tiled_s_per_tile_row * 1000


def line_row_ms(costs: DiffusionCosts) -> float:
    """A further row's cost besides the tiled matrices: the other types' rows and attention to the context."""
    return (costs.pass_s_per_position - costs.tiled_s_per_position + costs.pass_s_per_row_context * 192) * 1000


def test_a_model_without_tiled_types_keeps_its_line() -> None:
    q8_0 = TensorMix((("Q8_0", 1_500_000_000),), 28, 1536, 151936)
    costs = block_passes(AVX512, q8_0)
    assert (costs.tiled_base_s, costs.tiled_s_per_position, costs.unpack_s, costs.tiled_s_per_tile_row) == (0,) * 4
    assert AVX512.work(q8_0) == AVX512_SECOND.work(q8_0), "the embedded models' types kept their figures"


def test_tiled_costs_slow_down_with_the_rest_of_the_pass() -> None:
    costs = block_passes(AVX512, llada_8b_q4_k_m(2))
    slower = costs.slower(2.0)
    for rows in (4, 8, 16, 24, 300):
        assert pass_seconds(rows, slower, 192) == pytest.approx(2 * pass_seconds(rows, costs, 192))


def test_a_block_causal_draft_counts_a_settled_block_riding_along_in_the_pass_it_rides() -> None:
    """Blocks of 4 alone stay below 8 rows; with the settled block riding along, a window's first pass decodes
    8, which the tiled kernels take."""
    costs = block_passes(AVX512, llada_8b_q4_k_m(2))
    plan = DiffusionPlan(128, 4, None, "blocks")
    tiled = estimate_diffusion(256, 192, 0, plan, costs).seconds
    riding_as_a_line = estimate_diffusion(256, 192, 0, plan, replace(costs, unpack_s=0.0)).seconds
    # 64 windows, each with one pass of 4 + 4 rows: the tiles' change to an 8-row pass, 64 times over.
    change = pass_seconds(8, costs, 0) - pass_seconds(8, replace(costs, unpack_s=0.0), 0)
    assert tiled - riding_as_a_line == pytest.approx(64 * change, rel=1e-6)


def test_a_prompt_s_tokens_run_through_whole_tiles() -> None:
    mix = llada_8b_q4_k_m(32)
    work = AVX512.work(mix)
    scaled = scaled_ar(replace(MEASURED_AR, kernels=AVX512.name), ModelSize("llada", 0, 0, "none", mix))
    assert scaled is not None
    assert work.prompt_row < work.row, "a Q6_K row costs less in a tile than one at a time"
    rate = MEASURED_AR.prompt_tokens_per_s * MEASURED_AR.row_work
    assert scaled.prompt_tokens_per_s == pytest.approx(rate / work.prompt_row)
