"""`sharpen doctor`: what a user checks first when something is wrong, and what a bug report carries
(checks.py makes the checks, report.py says what they found)."""
