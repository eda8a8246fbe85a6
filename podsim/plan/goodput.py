"""How much of a long training run's wall time makes progress when hosts fail: the cluster
model's failure and restart figures, in closed form for one job.

A job on H hosts, each failing as the cluster simulation's host process does
(`podsim.cluster.failures.FailureProcess`: exponential, mean time between failures `mtbf_s`),
is interrupted at rate r = H / mtbf_s of wall time. As the cluster simulation accounts an
interrupted run (`podsim.cluster.accounting.settle_run`: the work since the last checkpoint is
lost, checkpoints every `checkpoint_interval_s` = T of run time; `restart_overhead_s` and the OCS
reconfiguration, R in all, are paid before it runs again, on spare hosts: the job does not wait
for the repair, and a failure during R starts R again), the share of wall time kept is the
cluster report's renewal closed form (`podsim.cluster.breakdown.checkpoint_goodput`, one formula
for both):

    goodput = r T e^(-rR) q / (1 - q),  q = e^(-rT)

(about 1 - r (T/2 + R) when rT and rR are small; Young 1974, Daly 2006). Each interruption costs
(1 - goodput) / r of wall time: the work since the last checkpoint, the restart, and the runs a
failure cut short before their first checkpoint.

tests/test_plan_search.py checks it against the cluster simulation of one job.
Checkpoint writes are free, as in the cluster simulation. The defaults are the cluster's own
(`ClusterConfig`: a checkpoint every hour, 300 s to restart; the generation's OCS
reconfiguration time) and, for the hosts, the one published interruption rate of a large
training run the project knows: Llama 3 405B's pre-training saw 419 unexpected interruptions in
a 54-day snapshot on 16,384 H100 GPUs, 8 per host (Dubey et al., "The Llama 3 Herd of Models",
arXiv:2407.21783, §3.3.4, Table 5), i.e. one per host every 2,048 x 54 d / 419 = 264 days. Those
are GPU hosts; no TPU figure is published (the v4 paper gives availability, not failure rates,
hardware.md av.1-av.8), so it is an assumption, said in the output and replaced by `--mtbf` or
`--host-availability` with `--mttr`.
"""

from __future__ import annotations

from dataclasses import dataclass

from podsim.cluster.breakdown import checkpoint_goodput
from podsim.cluster.config import ClusterConfig
from podsim.cluster.failures import FailureProcess, FailureSpec
from podsim.errors import PodsimError
from podsim.topology import Generation

LLAMA3_HOSTS = 16_384 // 8
LLAMA3_DAYS = 54
LLAMA3_UNEXPECTED = 419
DEFAULT_HOST_MTBF_S = LLAMA3_HOSTS * LLAMA3_DAYS * 86400 / LLAMA3_UNEXPECTED
MIN_GOODPUT = 0.01
"""Below this share of its wall time kept, a run is refused as never finishing (it would take over
100 times its failure-free time)."""
DEFAULT_SOURCE = ("assumption: one failure per host every 264 days, the rate of Llama 3's pre-training "
                  "(419 unexpected interruptions in 54 days on 2,048 GPU hosts; arXiv:2407.21783 §3.3.4, Table 5)")


@dataclass(frozen=True)
class Goodput:
    """The failure figures of a run and the fraction of its wall time that makes progress."""

    hosts: int
    host_mtbf_s: float
    interruptions_per_day: float
    lost_per_interruption_s: float
    goodput: float
    checkpoint_interval_s: float
    restart_s: float
    reconfigure_s: float
    source: str

    def as_dict(self) -> dict:
        return dict(vars(self))


def cluster_defaults() -> tuple[float, float]:
    """The cluster simulation's checkpoint interval and restart overhead (ClusterConfig's defaults)."""
    f = ClusterConfig.model_fields
    return float(f["checkpoint_interval_s"].default), float(f["restart_overhead_s"].default)


def host_process(spec: FailureSpec | None) -> tuple[FailureProcess, str]:
    """The host failure process asked for, or the default (DEFAULT_HOST_MTBF_S, see the module docstring)."""
    if spec is None:
        return FailureProcess(mtbf_s=DEFAULT_HOST_MTBF_S), DEFAULT_SOURCE
    return spec.process(), "as given"


def training_goodput(gen: Generation, chips: int, spec: FailureSpec | None = None,
                     checkpoint_interval_s: float | None = None, restart_s: float | None = None) -> Goodput:
    """The goodput of one job on `chips` chips of `gen` (see the module docstring)."""
    interval_d, restart_d = cluster_defaults()
    interval = interval_d if checkpoint_interval_s is None else checkpoint_interval_s
    restart = restart_d if restart_s is None else restart_s
    if not interval > 0 or restart < 0:
        raise PodsimError(f"checkpoint interval {interval} s must be > 0 and restart overhead {restart} s >= 0")
    per_host = gen.chips_per_host.require(f"{gen.id} chips per host")
    hosts = max(1, -(-chips // int(per_host)))
    proc, source = host_process(spec)
    reconf = float(gen.ocs.reconfigure_time.si or 0.0) if gen.has_ocs else 0.0
    rate = hosts / proc.mtbf_s
    goodput = checkpoint_goodput(hosts, proc.mtbf_s, interval, restart + reconf)
    if goodput < MIN_GOODPUT:
        raise PodsimError(f"{hosts:,} hosts failing every {proc.mtbf_s / 3600:.3g} h each interrupt the job every "
                          f"{1 / rate / 60:.3g} min, against a checkpoint every {interval / 60:.3g} min and "
                          f"{(restart + reconf) / 60:.3g} min to restart: it keeps {goodput:.2%} of its time and never "
                          "finishes; checkpoint more often or give a longer MTBF")
    lost = (1.0 - goodput) / rate
    return Goodput(hosts, proc.mtbf_s, rate * 86400, lost, goodput, interval, restart, reconf, source)
