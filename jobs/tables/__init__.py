"""What steps and commands share about the lake's tables, beyond reading and writing rows: a generation's lifecycle
(`lifecycle`), snapshot documents rebuilt from rows (`snapshot_docs`), a generation's plan file (`export`), the load
measurements the plan step weighs partitions by (`plan_loads`), the key samples the skew step reads (`skew_input`)
and the rows maintenance deletes (`expiry`). No step lives here: the steps are `jobs/steps/`.
"""
