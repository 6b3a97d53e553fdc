"""Rebalance Planner's domain: Kafka-exact assignors over consumer groups, pure Python + NumPy."""

from planner.assignment import AssignmentResult, assign

__all__ = ["AssignmentResult", "assign"]
