"""Calibrated discrete-event performance model of the GPU-NIC submission path.

Modules: ``events`` (heap) and ``cache`` (context cache) and ``engine`` (the numba event loop),
``topology`` (arrays in, result out), ``parameters`` (dataclasses), ``paper`` (the paper's numbers
used), ``calibrate`` (paper or records -> parameters), ``scenarios`` (the paper's experiments),
``predict`` (sweeps for a platform), ``validate`` (predicted vs paper) and ``blind`` (predicted vs
published tables it was never fitted to). See docs/model.md.
"""
