"""Calls between nodes: the peer protocol, its codec and client, the cluster-wide services that
forward a call to the node that must serve it, and leadership claims gossiped between nodes."""
