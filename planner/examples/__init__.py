"""Example plug-in assignors, loadable with `--strategy planner.examples.<module>:<Class>`."""
