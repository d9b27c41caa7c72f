"""Operating a pipeline: `reset` (reprocessing history), `status` and `graph`, and the ACLs a
job needs.

May import: anything but `framework.cli`.
"""
