"""Imported first by every script: makes workflow/gicomm importable in any environment
(the project's .venv has it installed; a --sdm conda environment may not)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
