"""The teacher's instruction sets, by name (training/teacher.py builds them; the CLI offers them)."""

INSTRUCTION_SETS = ("templated", "open", "forms", "document", "rewrite")
