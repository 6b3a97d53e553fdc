"""Applying approved plans in consumer groups: the plan file format, member matching, a kafka-python assignor.

Imports only kafka-python and the standard library, so consumer applications can use it without the pipeline.
"""

from jobs.apply.plan_file import FORMAT, Plan, load_plan, parse_plan, write_plan
from jobs.apply.planned_assignor import PlannedAssignor
from planner.errors import PlanError

__all__ = ["FORMAT", "Plan", "PlanError", "PlannedAssignor", "load_plan", "parse_plan", "write_plan"]
