"""Rebalance Planner's domain, pure Python + NumPy: Kafka-exact partitioners, protocol codec and assignors."""

from planner.assignment import AssignmentResult, assign

__all__ = ["AssignmentResult", "assign"]
