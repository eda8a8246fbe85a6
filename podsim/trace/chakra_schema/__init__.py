"""Chakra execution-trace schema (subset) and its compiled protobuf module; see chakra_et.proto."""
