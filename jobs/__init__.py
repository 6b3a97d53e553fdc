"""The pipeline around the planner: steps, executor kernels, IO, the demo and the `rebalance` CLI."""
