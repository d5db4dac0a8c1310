"""Reports of a suite run: the terminal table, exports and the self-contained HTML page."""
