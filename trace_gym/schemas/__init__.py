"""The JSON Schemas trace-gym ships: `task.schema.json` (a row of `trace-gym export`) and
`trajectory.schema.json` (a trajectory record); read them with
`trace_gym.interop.tasks.schema(name)`."""
