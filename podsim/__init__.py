"""podsim: a simulator of TPU-style accelerator pod networks.

Topology (torus + OCS + DCN), slice placement, step-time engine, cluster simulation and
capacity planning. See README.md for a tour and DESIGN.md for the architecture.
"""

__version__ = "0.1.0"
