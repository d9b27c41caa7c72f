"""The `logwheel run` process: its lifetime (the runner), joining the group, one membership
of it and its loop, the task manager and tasks, the committer's numbered steps, watermark
channels, holds, injectors, the meter, and one process per computation under a supervisor.

May import: `framework.state`, `framework.kafka`, `framework.core`, `framework.serde`.
"""
