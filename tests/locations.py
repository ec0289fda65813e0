"""Where the suite's files are, for a test in any folder of tests/ (tests/ is on sys.path)."""

from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
DATA = TESTS / "data"
