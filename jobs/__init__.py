"""The pipeline around the planner: steps, executor kernels, IO, the demo and the `rebalance` CLI."""

import os

# NumPy's OpenBLAS starts a thread per core at import, which then spins: 0.08 s of CPU in every process that imports
# NumPy (this one, the Spark Python workers, GX's and the report's workers inherit the setting), for linear algebra
# this project never calls. One thread unless the environment says otherwise; set before anything imports NumPy.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
