"""Which models exist, where their files are, and what a model file says about itself."""
