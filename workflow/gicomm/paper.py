"""The paper's experiments, figures and tables as the pipeline names them (no heavy imports: the
Snakefile reads this when it loads)."""

from __future__ import annotations

# Every experiment of the paper, in the paper's order, with the figures and tables it backs.
PAPER_EXPERIMENTS: dict[str, str] = {
    "one_op": "Table 3",
    "ordering": "Table 4",
    "inline_payload": "Figure 3",
    "completion_scope": "Figure 4, Tables 7 and 8",
    "sm_clock": "Figure 5, Table 6",
    "loaded_rtt": "Figure 6, Table 11",
    "proxy_msgrate": "Figure 7, Tables 9 and 10",
    "goodput": "Figures 8 and 11, Table 12",
    "gpu_msgrate": "Tables 5 and 13",
    "kernel_cost": "Figure 9, Table 14",
    "connection_scaling": "Figure 10, Table 16",
    "timer_selfcheck": "timer self-check (guards every campaign)",
}
FIGURE_IDS: tuple[str, ...] = tuple(f"fig{n:02d}" for n in range(3, 12))
TABLE_IDS: tuple[str, ...] = tuple(f"tab{n:02d}" for n in range(3, 17) if n != 15)
# Experiments of the drivers that measure (part of) a paper experiment under another name: the
# paper figures, tables and claims read them too.
EXPERIMENT_ALIASES: dict[str, tuple[str, ...]] = {
    "one_op": ("gda_one_op", "gda_rtt", "proxy_one_op"),
    "ordering": ("gda_one_op",),
    "proxy_msgrate": ("proxy_msg_rate", "proxy_one_op"),
    "gpu_msgrate": ("gda_msg_rate",),
}


def experiment_names(name: str) -> list[str]:
    """A paper experiment and the driver experiments that measure it."""
    return [name, *EXPERIMENT_ALIASES.get(name, ())]
