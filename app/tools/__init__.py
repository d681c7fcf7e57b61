"""Commands beside the writing: the doctor and the embedded drafter's training data."""
