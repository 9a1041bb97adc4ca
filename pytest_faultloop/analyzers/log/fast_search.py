"""Keyword search at native speed for multi-GB logs.

Python's ``re`` tries every branch of an alternation at almost every position (a few MB/s on
a keyword list); pydantic-core (a dependency already) embeds Rust's ``regex`` crate, whose
literal prefilters scan at memory speed. ``SchemaValidator.isinstance_python`` runs an
unanchored search and answers a bool.
"""

from __future__ import annotations

from pydantic_core import SchemaValidator, core_schema


class FastPattern:
    """``contains(text)``: does the (Rust syntax) pattern occur anywhere in ``text``?"""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self._validator = SchemaValidator(
            core_schema.str_schema(pattern=pattern, regex_engine="rust-regex")
        )

    def contains(self, text: str) -> bool:
        return self._validator.isinstance_python(text)
