"""The parallelism planner (`tilefx.plan`, the `tilefx-plan` command): which
pipeline split, replication, accumulation, schedule, optimizer-state location
and available memory proportion to use on N IPUs, costed by the machine
model from one trace (docs/planning.md)."""

from tilefx.planner.candidate import Candidate
from tilefx.planner.search import plan, table

__all__ = ["Candidate", "plan", "table"]
