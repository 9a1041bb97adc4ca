"""The log scanner's readers, one per tool family: each owns its state and the catalogue
handlers (``handler = ...``) of its tool's report and context lines."""
