"""What serves a request: the engines, the models, each engine's drafter, the draft settings and calibration."""
