"""gicomm doctor: what this host should reach, what it reaches, and why it is below.

- ``floors``: the floor table (config/floors.yaml) and the same-run floor of every latency record
  (the tidy tables' ``floor``, ``floor_ns`` and ``overhead_ns``);
- ``expected``: the calibrated model's expectation for each transport and metric, with a range;
- ``host`` and ``checks``: read-only checks of the host (sysfs, procfs, nvidia-smi, records), each
  with its status and evidence;
- ``verdict``: the verdict table, causes only from checks that ran and found something;
- ``render``: the table in the terminal and as a report page; ``cli``: ``python -m gicomm.doctor``.
"""
