"""Where the checkout and the shared test helpers are, for the tests that start
processes or read files by path (test files sit in folders that mirror tilefx/)."""

import os

TESTS = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(TESTS)
