"""The teacher's instruction sets, by name (app/tools/training_data.py builds them; the CLI offers them)."""

INSTRUCTION_SETS = ("templated", "open", "forms", "document", "rewrite")
