"""ACL 2.0 authentication and authorization: users, ACLs, request rights and the gate."""
