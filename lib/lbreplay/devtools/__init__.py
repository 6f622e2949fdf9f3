"""Checks of the code base itself (layering, sizes), run by ``make lint`` and the test suite."""
