"""Widgets: each renders one part of SessionState; none reads the clock or the engine."""
