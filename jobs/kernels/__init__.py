"""Executor kernels: what runs inside Spark tasks (`mapInArrow`).

They import only `planner`, `schemas`, NumPy, pandas and pyarrow, never the lake, Kafka, Airflow or `jobs` IO, so a
Spark worker needs nothing of this project but the shipped code and those packages (a test checks the rule).
"""
