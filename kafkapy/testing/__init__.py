"""Test support shared by integration, compat and fault tests: broker nodes as subprocesses."""

from kafkapy.testing.node import KafkaNode, NodeError, TansuNode, compat_target, node_class_for_target

__all__ = ["KafkaNode", "NodeError", "TansuNode", "compat_target", "node_class_for_target"]
