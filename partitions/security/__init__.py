"""Security: ACLs and their decision, users' SCRAM credentials, API tokens, failed-login limits (pure)."""
