"""SPEC T4: the PySpark incident analysis of the cluster's JSON logs (`rocketrio analyze`).

`schema` builds the read schema from the log-event catalogue (`actors/observe/events/`),
`incidents` is the job (DataFrame operations; runs in local mode or under `spark-submit`),
`report` renders its summary as self-contained HTML and as the plain-text stdout summary.
"""
