"""Making the data for Sharpen's own small diffusion model (issue: the embedded default diffusion model)."""
