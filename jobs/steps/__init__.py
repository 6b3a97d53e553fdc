"""The pipeline's steps and nothing else: each `run(ctx, ...)` reads and writes the lake for one run id and returns a
`jobs.context.StepResult`; `jobs.pipeline.STEPS` is how they run."""
