"""The writing cases (training/writing_cases.py's kinds and training/writing_clauses.py's lists of things to
say, made by the project's own code) as pairs the diffusion drafter learns from, laid out as the drafter
serves a draft into a document (app/orchestration/drafters.py's DiffusionDrafter.document_prompt), so that
what it learns is what it is asked."""

from __future__ import annotations

from app.domain.draft_request import DraftRequest
from app.orchestration.drafters import DiffusionDrafter
from training.data import Pair
from training.writing_cases import WritingCase, writing_cases
from training.writing_clauses import clause_cases

# Ids of their own, past any seed of the teacher's sets (1000000 a seed), for the stable held-out split.
WRITING_FIRST_ID = 90_000_000


def drafter_request(case: WritingCase) -> str:
    """A case's request as the drafter lays it out for the engine (a draft with no conversation before it)."""
    request = DraftRequest("draft", case.instruction, before=case.before, after=case.after)
    laid_out = DiffusionDrafter.document_prompt(request, case.before, case.after)
    assert isinstance(laid_out, str)  # no history: the request alone
    return laid_out


def writing_pairs(count: int, seed: int = 0) -> list[Pair]:
    """`count` cases, half of the kinds and half lists of things to say, as instruction -> draft pairs: the
    draft is the text that belongs at the cursor."""
    made = writing_cases(count - count // 2, seed=seed) + clause_cases(count // 2, seed=seed)
    return [Pair(WRITING_FIRST_ID + index, drafter_request(case), case.target) for index, case in enumerate(made)]


def writing_count(share: float, others: int) -> int:
    """How many writing cases make `share` of a training set that has `others` pairs besides."""
    if not 0 <= share < 1:
        raise ValueError(f"the writing share must be at least 0 and below 1, not {share}")
    return round(others * share / (1 - share))
