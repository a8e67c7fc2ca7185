"""The broker's queue assignment: QUERY_ASSIGNMENT and the message request modes."""
