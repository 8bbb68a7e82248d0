"""gicomm: reproducibility pipeline for GPU-initiated communication measurements.

The package behind the Snakemake workflow: configuration and its validation, sweep expansion, the
host probe, raw-record reading, tidy tables, figures and the HTML report. Snakemake scripts in
workflow/scripts/ are thin entry points into these modules.
"""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SCHEMA_DIR = REPO_ROOT / "workflow" / "schemas"
CONFIG_DIR = REPO_ROOT / "config"
