"""The security room's defaults a node's options name: a leaf (``raftlog_node/options.py`` imports it)."""

# Kafka's delegation.token.max.lifetime.ms: a delegation token is never renewed past this after its issue
DELEGATION_TOKEN_MAX_LIFETIME_MS_DEFAULT = 7 * 86_400_000
# Kafka's delegation.token.expiry.time.ms: a delegation token expires this long after its issue or its last
# renewal (never past its max lifetime)
DELEGATION_TOKEN_EXPIRY_TIME_MS_DEFAULT = 86_400_000
DELEGATION_TOKEN_MS_MIN = 60_000  # the least either option may be: a minute
DELEGATION_TOKEN_MS_MAX = 10 * 366 * 86_400_000  # ten years: further off is a mistake, not a plan
