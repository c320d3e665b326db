"""Kafka's share-group membership core (KIP-932), sans-I/O. Work in progress."""
