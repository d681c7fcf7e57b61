"""Recordings of a refinement trace: an asciicast (`.cast`), an animated SVG (`.svg`) or a GIF (`.gif`).

Each pass is one frame, drawn from the frame model the TUI draws with (frames.py):
masks as dim placeholders, this pass's commits coloured by confidence, settled text plain. The text is
laid out on a grid of `width` columns (wrapped as the editor wraps it) and `height` rows,
the last of which says which pass this is; a text taller than the grid scrolls to keep this pass's commits
in view. Frames follow each other at `speed` passes a second and the last is held `hold_s` seconds.

- `.cast`: asciicast v2 (asciinema's format): a JSON header line, then one `[time, "o", data]` event a
  pass that clears the screen and redraws it with ANSI colours (the rich styles the TUI uses).
- `.svg`: one self-contained SVG whose frames are `<g>` groups shown in turn by CSS `@keyframes` (no
  script, so it plays in a browser and in a GitHub README), looping.
- `.gif`: a frame a pass, drawn with PIL in a monospace font (DejaVu Sans Mono where the system has it,
  otherwise PIL's own scalable font, each character placed on the grid).

Files are written atomically.

The parts: frames.py (what each pass shows, in which colours: the TUI draws from it too), screens.py (the
frames laid out on the grid), cast.py, svg.py and gif.py (one format each) and export.py (the format a path
names).
"""
