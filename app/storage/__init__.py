"""What Sharpen keeps on disk: configuration, documents, drafts, traces, and how files are written."""
