"""Screens: the views (live, sweep, probe, log) and the dialogs over them."""
