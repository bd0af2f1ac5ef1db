"""The controller's replicated metadata and its pure logic: topics, nodes, ACL and token records,
controller voters, placement, balancing, replica moves and decommissioning."""
