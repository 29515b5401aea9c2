"""The commands of `gpuscale-tui`, one module each (tui/cli.py parses the flags and calls them)."""
