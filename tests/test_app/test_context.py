"""The document fitted to a model's context: nearest the cursor first, whole paragraphs, what was left out;
and, on the real embedded model, a draft that reads the document and one that does not."""

from __future__ import annotations

from app.domain.context import continued_reply, fit_context, suggested_rewrite_tokens
from app.domain.draft_request import DraftRequest
from app.orchestration.drafters import _after_held_back
from app.service import SharpenService
from app.storage.config import Config, ModelsSection
from app.storage.paths import sharpen_paths
from engines.events import Done, Event, GenerationStats, Token
from router.request import approximate_tokens


def words(text: str) -> int:
    """A stand-in tokenizer for the unit tests: one token a word."""
    return len(text.split())


def test_a_document_that_fits_is_given_whole() -> None:
    use = fit_context("Dear Sam,\n\nThanks.", "Best, Ana", 100, words)
    assert (use.before, use.after, use.complete, use.note()) == ("Dear Sam,\n\nThanks.", "Best, Ana", True, "")


def test_the_paragraphs_nearest_the_cursor_are_kept_whole() -> None:
    before = "".join(f"Paragraph {n} has five words.\n\n" for n in range(30))
    after = "".join(f"After {n} has five words too.\n\n" for n in range(30))
    use = fit_context(before, after, 60, words)
    assert before.endswith(use.before) and after.startswith(use.after)
    assert use.before.startswith("Paragraph ") and use.after.startswith("After 0")
    assert use.before.endswith("\n\n") and use.after.endswith("\n\n")
    assert words(use.before) + words(use.after) <= 60 - 8
    # The text after the cursor keeps a quarter of the budget, in whole paragraphs (two here).
    assert use.after == "After 0 has five words too.\n\nAfter 1 has five words too.\n\n"
    assert use.left_out_before == len(before) - len(use.before) > 0
    assert use.left_out_after == len(after) - len(use.after) > 0
    assert "characters before the cursor" in use.note() and "after it" in use.note()


def test_one_paragraph_too_long_by_itself_is_cut_at_a_word() -> None:
    before = " ".join(f"word{n}" for n in range(500))
    use = fit_context(before, "", 40, words)
    assert before.endswith(use.before) and use.before.startswith("word") and words(use.before) <= 32
    assert use.left_out_before > 0


def test_short_after_gives_its_share_to_before() -> None:
    before = "".join(f"Paragraph {n} has five words.\n\n" for n in range(30))
    use = fit_context(before, "Best, Ana", 60, words)
    assert use.after == "Best, Ana" and words(use.before) > 30


def test_the_rewrite_length_follows_the_instruction() -> None:
    assert suggested_rewrite_tokens("shorter", 100) < suggested_rewrite_tokens("", 100)
    assert suggested_rewrite_tokens("make it more concise", 100) == 60
    assert suggested_rewrite_tokens("expand on the budget", 100) > 150
    assert suggested_rewrite_tokens("more formal", 100) == 125
    assert suggested_rewrite_tokens("", 2) == 8


EMAIL = (
    "From: Priya Raman\nSubject: Planning session\n\nHi,\n\nCould you join the planning session on Wednesday "
    "afternoon? We will go through the roadmap.\n\nPriya\n\n---\n\nHi Priya,\n\n"
)


def test_an_ar_draft_goes_on_from_the_document_around_the_cursor(sharpen_home: object) -> None:
    """The real embedded AR model: the document up to the cursor is the start of its reply (read whole, in the
    prompt), the text after the cursor is in the request, and the reply does not repeat the blank line the
    document already ends with."""
    service = SharpenService(Config(), sharpen_paths())
    instruction = "Write a short reply declining the invitation politely."
    in_document = service.draft(
        DraftRequest("draft", instruction, before=EMAIL, after="\n\nBest,\nSam", tokens=48, engine="ar")
    )
    alone = service.draft(DraftRequest("draft", instruction, tokens=48, engine="ar"))
    text = in_document.text()
    alone.text()
    engine = service.engines.ar()
    document_tokens = engine.count_tokens(EMAIL.rstrip()) + engine.count_tokens("Best,\nSam")
    assert in_document.done is not None and alone.done is not None
    assert in_document.done.stats.prompt_tokens >= alone.done.stats.prompt_tokens + document_tokens
    assert text.strip() and not text.startswith("\n\n")
    assert in_document.context is not None and in_document.context.complete
    assert alone.context is None


def test_a_reply_less_the_white_space_the_document_holds() -> None:
    """The document's closing white space is left for the model to write; the draft is what follows it."""
    stats = GenerationStats(prompt_tokens=1, reused_tokens=0, trimmed_tokens=0, generated_tokens=3,
                            time_to_first_token_s=None, total_s=0.1, finish_reason="eos")  # fmt: skip
    streamed: list[Event] = [Token("\n", 1, 0), Token("\nDear", 2, 1), Token(" Sam", 3, 2), Done("\n\nDear Sam", stats)]
    assert [text_of(e) for e in _after_held_back(iter(streamed), "\n\n")] == ["Dear", " Sam", "Dear Sam"]
    other: list[Event] = [Token(" Hi", 1, 0), Done(" Hi", stats)]
    assert [text_of(e) for e in _after_held_back(iter(other), "\n\n")] == [" Hi", " Hi"]


def text_of(event: Event) -> str:
    assert isinstance(event, Token | Done)
    return event.text


def test_a_continued_reply_gives_the_text_after_the_cursor_in_the_request() -> None:
    laid_out = continued_reply("Decline politely.", "Hi Priya,\n\nThanks for the invite. ", "\n\nBest,\nSam\n")
    assert laid_out.reply_start == "Hi Priya,\n\nThanks for the invite."
    assert laid_out.held_back == " "
    assert laid_out.request.startswith("Decline politely.") and laid_out.request.endswith("Best,\nSam)")
    assert continued_reply("Decline politely.", "Hi,", "  \n").request == "Decline politely."


def test_the_router_counts_the_document_and_says_so(sharpen_home: object) -> None:
    service = SharpenService(Config(), sharpen_paths())
    plain = service.draft(DraftRequest("draft", "a reply", tokens=128))
    document = "The quarterly report is attached.\n\n" * 40
    in_document = service.draft(DraftRequest("draft", "a reply", before=document, tokens=128))
    assert "tokens of the document around the cursor" in in_document.route.reason
    assert str(approximate_tokens(document)) in in_document.route.reason
    for engine, estimate in in_document.route.estimates.items():
        assert estimate.seconds > plain.route.estimates[engine].seconds


def test_a_short_text_after_the_cursor_is_kept_whole_beside_a_long_one_before() -> None:
    """A letter's sign-off after the cursor must survive a long letter before it."""
    before = "".join(f"Paragraph {n} has five words.\n\n" for n in range(100))
    use = fit_context(before, "\n\nBest,\nAna\n", 200, words)
    assert use.after == "\n\nBest,\nAna\n" and use.left_out_after == 0
    assert use.left_out_before > 0 and before.endswith(use.before)


def test_an_ar_draft_into_one_paragraph_longer_than_the_context_still_runs(sharpen_home: object) -> None:
    service = SharpenService(Config(), sharpen_paths())
    paragraph = " ".join(f"The committee met on day {n} and agreed on the budget." for n in range(400))
    reply = service.draft(DraftRequest("draft", "Summarise the decision.", before=paragraph, tokens=24, engine="ar"))
    assert reply.text()
    assert reply.context is not None and reply.context.left_out_before > 0
    assert paragraph.endswith(reply.context.before)
    assert reply.done is not None and reply.done.stats.prompt_tokens + 24 <= service.engines.ar().context_length


def test_a_continuation_without_fim_says_the_text_after_was_not_seen(sharpen_home: object) -> None:
    """SmolLM2 declares no FIM tokens: an empty instruction continues the text before the cursor, and the
    reply says the text after it was left out."""
    # Writing on the complete model itself, so the continuation can be held against its own completion.
    service = SharpenService(Config(models=ModelsSection(write="smollm2-135m-instruct")), sharpen_paths())
    reply = service.draft(
        DraftRequest("draft", before="Dear Sam, thanks for", after="\n\nBest, Ana", tokens=6, engine="ar")
    )
    assert reply.text() == service.complete("Dear Sam, thanks for", max_tokens=6).text()
    assert reply.context is not None and reply.context.left_out_after == len("\n\nBest, Ana")
