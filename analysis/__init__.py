"""Reserved for the PySpark incident-analysis job of SPEC T4 (not built yet: see the README's
feature table). It will read the JSON logs whose event names are in `actors/events.py`."""
