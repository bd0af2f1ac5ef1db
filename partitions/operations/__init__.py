"""The controller leader's operator: replica moves, controller learners, decommissioning and balancing,
carried out across the cluster through peer calls."""
