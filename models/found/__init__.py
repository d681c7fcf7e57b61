"""Models a writer already has: GGUF files in Ollama's store, LM Studio's folders and the Hugging Face cache,
found by reading those stores (never writing into them) and used where they lie."""
