"""The pipeline's steps: each `run(ctx, ...)` reads and writes the lake for one run id."""
