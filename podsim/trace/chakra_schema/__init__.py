"""Chakra execution-trace schemas and their protobuf modules: the current one (chakra_et.proto,
compiled into chakra_et_pb2.py) and the 2023 one (chakra_legacy.proto, chakra_legacy_pb2.py)."""
