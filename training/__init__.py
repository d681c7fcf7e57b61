"""Everything that makes Sharpen's own diffusion drafters (README.md): the teacher and its data, the LoRA and
from-scratch training loops, their logs and the GPU trip. It lives in the checkout and is not installed with
Sharpen; the product (app, engines, router, models, ui) imports nothing from it."""
