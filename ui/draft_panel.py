"""The panel under the editor where a draft refines, pass by pass, until it is inserted or dropped.

The panel owns the draft: its thread worker asks the service for the reply (routing reads files: never on
the UI thread) and runs it; the panel takes the worker's messages and keeps the draft's state (refining,
ready, cancelled, failed) and its candidates: the same request asked again, or asked of the other engine. It
says who writes the draft and why, with both engines' estimates, and labels each candidate with its engine,
its time and its speed. The app asks it for the finished text and tells it to cancel or close; it reports
progress for the status bar through the callback the app gives it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Label

from app.domain.draft_request import DraftRequest
from app.domain.figures import ENGINE_LABELS, other_engine
from app.errors import SharpenError
from app.service import SharpenService
from app.storage.draft_history import PastDraft
from engines.cancel import CancelToken
from engines.events import DiffusionStats, Done, GenerationStats, Pass, Token
from engines.trace import Trace
from router.request import Route
from ui.bindings import key_label
from ui.draft_labels import candidates_strip, route_line
from ui.draft_run import DraftEnded, DraftRun, Failed, Finished, PassReady, Routed, TextStreamed
from ui.refinement import RefinementView

# Status bar fields to change (StatusInfo.with_changes's keywords).
StatusReport = Callable[..., None]


class DraftPanel(Vertical):
    DEFAULT_CSS = """
    DraftPanel { height: 40%; min-height: 6; border: round $accent; display: none; overflow: hidden; }
    DraftPanel > VerticalScroll { height: 1fr; }
    DraftPanel.open { display: block; }
    DraftPanel #draft-hint { color: $text-muted; }
    DraftPanel #draft-route { width: 1fr; max-height: 2; color: $text-muted; text-style: italic; display: none; }
    DraftPanel #draft-candidates { display: none; }
    DraftPanel #draft-candidates.shown, DraftPanel #draft-route.shown { display: block; }
    """

    def __init__(self, service: SharpenService, report: StatusReport, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.service = service
        self.report = report
        self.run: DraftRun | None = None
        # Every candidate of the request in the panel (`run` is the one shown).
        self.candidates: list[DraftRun] = []
        # What the draft was asked for ("Draft: ..."): the title, less the length once routed.
        self.label = ""
        self.title = ""
        # The trace of the draft shown last (either engine's), for playback.
        self.last_trace: Trace | None = None

    def compose(self) -> ComposeResult:
        # Plain text: an instruction or a draft may hold anything that looks like markup ("[/INST]").
        yield Label("", id="draft-title", markup=False)
        yield Label("", id="draft-candidates", markup=False)
        yield Label("", id="draft-route", markup=False)
        with VerticalScroll():
            yield RefinementView(id="draft-view")
        yield Label("", id="draft-hint", markup=False)

    @property
    def view(self) -> RefinementView:
        return self.query_one("#draft-view", RefinementView)

    @property
    def refining(self) -> bool:
        return self.run is not None and self.run.state == "refining"

    # ----- the draft's life ----------------------------------------------------------------------

    def start(self, request: DraftRequest, label: str, *, another: bool = False) -> None:
        """Open the panel on a request, then route and refine it in a thread worker; `another` keeps the
        candidates already there (the same request asked again)."""
        selection = request.selection if request.kind == "infill" else ""
        run = DraftRun(None, CancelToken(), selection, request)
        self.candidates = [*self.candidates, run] if another else [run]
        self.run = run
        self.label = label
        self.open(label)
        self._show_candidates()
        self.report(
            engine="",
            model="",
            reason="",
            state="drafting",
            passes=0,
            planned_passes=None,
            tokens=0,
            tokens_per_s=0.0,
            elapsed_s=0.0,
        )
        self.run_worker(lambda: self._refine(run, request), thread=True, group="draft", exit_on_error=False)

    def another_candidate(self) -> bool:
        """Ask the shown draft's request again, sampled with a new seed; False if there is no request to ask."""
        run = self.run
        if run is None or run.request is None:
            return False
        if self.refining:
            self.notify("this candidate is still refining: esc cancels it")
            return True
        self.start(self.service.candidate(run.request, len(self.candidates)), self.label, another=True)
        return True

    def other_engine(self) -> bool:
        """Ask the shown draft's request of the other engine, as a candidate beside it (or show the candidate that
        engine already wrote of it); False if there is no request to ask."""
        run = self.run
        if run is None or run.request is None or run.engine is None:
            return False
        if self.refining:
            self.notify("this candidate is still refining: esc cancels it")
            return True
        other = other_engine(run.engine)
        if run.reply is not None and other not in run.reply.route.estimates:  # its model is not present
            self.notify(f"no {ENGINE_LABELS[other]} model is configured: f2 chooses one")
            return True
        asked = replace(run.request, engine=other)
        written = [
            number
            for number, candidate in enumerate(self.candidates)
            if candidate.engine == other
            and candidate.state == "ready"
            and candidate.request is not None
            and replace(candidate.request, engine=other) == asked
        ]
        if written:
            self.flip(written[0] - self.candidates.index(run))
            self.notify(f"candidate {written[0] + 1} is {ENGINE_LABELS[other]}'s draft of this request")
            return True
        self.start(asked, self.label, another=True)
        return True

    def show_past(self, past: PastDraft, trace: Trace | None) -> None:
        """Open the panel on a draft from the history, ready to insert (and to play back, if it was kept with its
        trace)."""
        stats = GenerationStats(0, 0, 0, 0, None, 0.0, "eos")
        run = DraftRun(None, CancelToken(), past=past, past_trace=trace, state="ready", done=Done(past.text, stats))
        self.candidates, self.run = [run], run
        asked = past.instruction or ("a rewrite" if past.kind == "infill" else "what belongs here")
        self.open(f"Past draft · {past.created[:16].replace('T', ' ')} · {past.engine} · {asked[:60]}")
        self._draw(run)
        self._show_candidates()
        self.last_trace = trace  # a draft kept without one has none: F5 must not replay an older draft instead
        self.hint(self._ready_hint(run))

    def flip(self, step: int) -> bool:
        """Show the previous (-1) or next (+1) candidate; False if there is none that way, or one refines."""
        if self.run is None or self.refining or self.run not in self.candidates:
            return False
        index = self.candidates.index(self.run) + step
        if not 0 <= index < len(self.candidates):
            return False
        run = self.candidates[index]
        self.run = run
        self._draw(run)
        self._show_candidates()
        self.hint(self._ready_hint(run) if run.state == "ready" else f"{run.state} · esc closes")
        if run.reply is not None:
            self._show_route_line(run.reply.route, run.advice)
            figures = run.figures
            route = run.reply.route
            status: dict[str, Any] = {"engine": route.engine, "model": run.reply.model, "reason": route.reason}
            if figures is not None:
                status |= {"tokens": figures.tokens, "elapsed_s": figures.seconds, "tokens_per_s": figures.tokens_per_s}
                status |= {"passes": figures.steps} if figures.engine == "diffusion" else {}
            self.report(**status)
        trace = run.trace()
        if trace is not None:
            self.last_trace = trace
        return True

    def _draw(self, run: DraftRun) -> None:
        passes = run.passes
        self.view.current = passes[-1] if passes else None
        self.view.streamed = "" if passes else run.done.text if run.done is not None else ""
        self.query_one("#draft-title", Label).update(self._title())

    def _title(self) -> str:
        if len(self.candidates) < 2 or self.run not in self.candidates:
            return self.title
        return f"{self.title} · candidate {self.candidates.index(self.run) + 1} of {len(self.candidates)}"

    def _show_candidates(self) -> None:
        """The candidates side by side, each labelled with its engine, its time and its speed (from two on)."""
        strip = self.query_one("#draft-candidates", Label)
        several = len(self.candidates) > 1 and self.run in self.candidates
        strip.set_class(several, "shown")
        if several:
            assert self.run is not None
            states = [candidate.label_state() for candidate in self.candidates]
            strip.update(candidates_strip(states, self.candidates.index(self.run)))

    def _show_route_line(self, route: Route | None, advice: Route | None = None) -> None:
        line = self.query_one("#draft-route", Label)
        line.set_class(route is not None, "shown")
        if route is not None:
            line.update(route_line(route, advice, key_label(self.service.config.keys, "other_engine")))

    def _ready_hint(self, run: DraftRun) -> str:
        keys = self.service.config.keys
        hint = f"{key_label(keys, 'accept_draft')} inserts · {key_label(keys, 'dismiss')} drops"
        if run.passes:
            hint += f" · {key_label(keys, 'playback')} plays the passes back"
        elif run.trace() is not None:
            hint += f" · {key_label(keys, 'playback')} plays it back token by token"
        if run.request is not None:
            hint += f" · {key_label(keys, 'another_candidate')} another candidate"
        if len(self.candidates) > 1:
            flip = f"{key_label(keys, 'previous_candidate')} / {key_label(keys, 'next_candidate')}"
            hint += f" · {flip} flip"
        context = run.reply.context if run.reply is not None else None
        if context is not None and not context.complete:
            hint += f" · {context.left_out_before + context.left_out_after:,} characters of the document left out"
        return hint

    def _refine(self, run: DraftRun, request: DraftRequest) -> None:
        """In the worker thread: route the request, run the reply, posting what the panel should show."""
        text, count = "", 0
        try:
            if self.service.measures_first():
                self.app.call_from_thread(self.hint, "measuring this machine first (once, a few seconds)…")
            reply = self.service.draft(request, cancel=run.cancel)
            advice = self._advice(request) if reply.route.rule == "forced" else None
            self.post_message(Routed(run, reply, advice))
            for event in reply:
                if isinstance(event, Pass):
                    if not run.frame_queued:
                        run.frame_queued = True
                        self.post_message(PassReady(run))
                elif isinstance(event, Token):
                    text, count = text + event.text, count + 1
                    self.post_message(TextStreamed(run, text, count, reply.elapsed_s))
                else:
                    self.post_message(Finished(run, event))
        except SharpenError as error:
            self.post_message(Failed(run, str(error)))
        except Exception as error:  # a bug, or a file routing could not read: the panel must not stay "refining"
            self.log.error(f"draft failed: {error!r}")
            self.post_message(Failed(run, f"the draft failed unexpectedly ({type(error).__name__}: {error})"))

    def _advice(self, request: DraftRequest) -> Route | None:
        """In the worker thread: what the router would choose for a request whose engine the writer chose."""
        try:
            return self.service.draft_route(replace(request, engine=None))
        except SharpenError:
            return None

    def cancel(self) -> bool:
        """Esc: stop a refining draft, or close a finished one. False if there is no draft."""
        run = self.run
        if run is None:
            return False
        if run.state == "refining":
            run.cancel.cancel()
            self.hint("cancelling…")
            return True
        self.close()
        return True

    def finished_text(self) -> tuple[DraftRun, str] | None:
        """The draft that is ready to insert, and its text; None if there is none."""
        run = self.run
        if run is None or run.state != "ready" or run.done is None:
            return None
        return run, run.done.text

    def on_unmount(self) -> None:
        for run in self.candidates:
            run.cancel.cancel()

    # ----- the worker's messages -----------------------------------------------------------------

    @on(Routed)
    def _show_route(self, message: Routed) -> None:
        run, reply = message.run, message.reply
        run.reply, run.advice = reply, message.advice
        if run is not self.run:
            return
        self.title = f"{self.label} · {reply.tokens} tokens"
        self.query_one("#draft-title", Label).update(self._title())
        route = reply.route
        self._show_route_line(route, message.advice)
        self._show_candidates()
        self.report(engine=route.engine, model=route.model, reason=route.reason, planned_passes=reply.planned_passes)

    @on(PassReady)
    def _show_pass(self, message: PassReady) -> None:
        run = message.run
        if run is not self.run:
            return
        run.frame_queued = False
        event = run.passes[-1]
        self.view.current = event
        settled = len(event.masked) - sum(event.masked)
        self.report(
            passes=event.index + 1,
            planned_passes=event.planned_passes,
            tokens=settled,
            elapsed_s=event.elapsed_s,
            tokens_per_s=settled / event.elapsed_s if event.elapsed_s > 0 else 0.0,
        )

    @on(TextStreamed)
    def _show_text(self, message: TextStreamed) -> None:
        if message.run is not self.run:
            return
        self.view.streamed = message.text
        self.report(
            tokens=message.tokens,
            elapsed_s=message.elapsed_s,
            tokens_per_s=message.tokens / message.elapsed_s if message.elapsed_s > 0 else 0.0,
        )

    @on(Finished)
    def _finish(self, message: Finished) -> None:
        run = message.run
        if run is not self.run:
            return
        run.done = message.done
        if run.passes:
            self.view.current = run.passes[-1]
        else:
            self.view.streamed = message.done.text
        trace = run.trace()
        if trace is not None:
            self.last_trace = trace
        stats = message.done.stats
        # An AR draft keeps the pass count it showed (none); a diffusion draft reports its own.
        report: dict[str, Any] = {"passes": stats.passes} if isinstance(stats, DiffusionStats) and stats.passes else {}
        if stats.finish_reason == "cancelled":
            run.state = "cancelled"
            self.hint("cancelled · esc closes")
        else:
            run.state = "ready"
            self.hint(self._ready_hint(run))
            context = run.reply.context if run.reply is not None else None
            if context is not None and context.note():
                self.notify(context.note(), severity="warning", timeout=8)
            checked = run.reply.checked if run.reply is not None else None
            if checked is not None and checked.note():
                self.notify(checked.note(), severity="warning" if checked.missing else "information", timeout=8)
        self._show_candidates()
        self.post_message(DraftEnded(run))
        self.report(
            state="cancelled" if run.state == "cancelled" else "draft ready",
            tokens=stats.generated_tokens,
            elapsed_s=stats.total_s,
            tokens_per_s=stats.generated_tokens / stats.total_s if stats.total_s > 0 else 0.0,
            **report,
        )

    @on(Failed)
    def _fail(self, message: Failed) -> None:
        self.notify(message.error, severity="error", timeout=10)
        if message.run is not self.run:
            return
        message.run.state = "failed"
        self.hint("failed · esc closes")
        self._show_candidates()
        self.report(state="draft failed")

    # ----- drawing -------------------------------------------------------------------------------

    def open(self, title: str) -> None:
        self.view.current = None
        self.view.streamed = ""
        self.title = title
        self.query_one("#draft-title", Label).update(self._title())
        self._show_route_line(None)
        self.hint("refining… esc cancels")
        self.add_class("open")

    def hint(self, text: str) -> None:
        self.query_one("#draft-hint", Label).update(text)

    def close(self) -> None:
        self.run = None
        self.candidates = []
        self.remove_class("open")
        self.report(state="ready")
