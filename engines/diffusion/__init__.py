"""Masked-diffusion drafting: a backend-free refinement sampler and the backends that feed it logits."""
