"""The dimension registry: one entry per verdict field, in the verdict's order, each entry's
labels its field's, its pass predicate and failure text agreeing, its part in the LLM judge's
instructions."""

from __future__ import annotations

import re
from typing import get_args

import pytest

from pytest_faultloop.models import DimensionLabels, Verdict
from pytest_faultloop.models.analysis import FR_SCOPES
from pytest_faultloop.scoring.dimensions import (
    DIMENSION_NAMES,
    DIMENSIONS,
    Dimension,
    dimension_named,
)
from pytest_faultloop.scoring.judges.llm import JUDGE_SYSTEM_PROMPT, LlmJudgeAnswer
from pytest_faultloop.scoring.pass_rule import PassRule


def test_the_registry_and_the_verdict_name_the_same_dimensions_in_order() -> None:
    assert list(DIMENSION_NAMES) == list(DimensionLabels.model_fields)
    for model in (Verdict, LlmJudgeAnswer):
        assert [f for f in model.model_fields if f in DIMENSION_NAMES] == list(DIMENSION_NAMES)


@pytest.mark.parametrize("entry", DIMENSIONS, ids=DIMENSION_NAMES)
def test_each_entry_takes_the_labels_its_verdict_field_does(entry: Dimension) -> None:
    assert entry is dimension_named(entry.name)
    assert entry.values == get_args(DimensionLabels.model_fields[entry.name].annotation)


@pytest.mark.parametrize("accept_partial", [False, True])
@pytest.mark.parametrize("fr_scope", FR_SCOPES)
def test_the_failure_text_names_exactly_the_labels_that_pass(
    accept_partial: bool, fr_scope: str
) -> None:
    rule = PassRule(accept_partial=accept_partial, fr_scope=fr_scope)  # type: ignore[arg-type]
    for entry in DIMENSIONS:
        passing = {v for v in entry.values if rule.passes(entry.name, v)}
        assert set(re.split(r", | or ", rule.expected(entry.name))) == passing, entry.name


def test_every_dimension_has_its_part_in_the_llm_judges_instructions() -> None:
    for entry in DIMENSIONS:
        assert f'- "{entry.name}": {entry.prompt}\n' in JUDGE_SYSTEM_PROMPT


def test_an_unknown_dimension_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(KeyError, match="unknown dimension 'category'; expected one of restart_"):
        dimension_named("category")
    with pytest.raises(KeyError, match="category"):
        Verdict.model_validate(
            dict.fromkeys(DIMENSION_NAMES, "N/A") | {"notes": "", "judge": "x"}
        ).value("category")
